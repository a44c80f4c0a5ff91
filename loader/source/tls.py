"""TLS to the source: MySQL's five client modes, the context each needs, and what a connection got.

The modes are those of MySQL's own clients (``--ssl-mode``), Debezium's ``database.ssl.mode``
and Airflow's MySQL provider (``ssl_mode``):

- ``disabled``: plain text;
- ``preferred``: TLS when the server offers it, plain text otherwise, the certificate unchecked;
- ``required``: TLS or nothing (the login is never sent in plain text), the certificate unchecked;
- ``verify_ca``: ``required``, and the server's certificate signed by ``ca`` (else the system's CAs);
- ``verify_identity``: ``verify_ca``, and the certificate made out to the host connected to.

A client certificate (``cert`` and ``key``) is offered in every mode but ``disabled``, for accounts
created ``REQUIRE X509`` (or ``SUBJECT``/``ISSUER``).
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loader.core.config import TLS_MODES, TLS_VERIFYING, SourceConfig
from loader.core.errors import ConfigError


@dataclass(frozen=True)
class Tls:
    """A source's TLS settings (see the module's docstring); paths are absolute or as given."""

    mode: str = SourceConfig.tls  # the config's default
    ca: str = ""
    cert: str = ""
    key: str = ""

    @property
    def verifies(self) -> bool:
        """Whether the server's certificate is checked."""
        return self.mode in TLS_VERIFYING


def of_config(cfg: SourceConfig) -> Tls:
    """The settings of ``[source]`` (``tls``, ``tls_ca``, ``tls_cert``, ``tls_key``)."""
    return Tls(cfg.tls, cfg.tls_ca, cfg.tls_cert, cfg.tls_key)


def of_airflow_extra(extra: Mapping[str, Any], base: Tls, conn_id: str) -> Tls:
    """``base`` with what an Airflow connection's extras say, read as Airflow's MySQL provider
    reads them: ``ssl_mode`` (mysqlclient's names, ``VERIFY_CA`` and so on, any case) and ``ssl``
    (a dict, or its JSON, with ``ca``, ``cert``, ``key``), or mysql-connector's flat ``ssl_ca``,
    ``ssl_cert``, ``ssl_key`` and ``ssl_disabled``. What the extras leave out, ``base`` keeps,
    but for what their mode does not use (a CA without verifying, files with TLS disabled): the
    result passes the config's checks, as the jobs read it again from their environment.

    Raises:
        ConfigError: naming the connection, for an ``ssl_mode`` or ``ssl`` it cannot read.
    """
    nested = extra.get("ssl") or {}
    if isinstance(nested, str):
        try:
            nested = json.loads(nested)
        except ValueError:
            nested = None
    if not isinstance(nested, Mapping):
        raise ConfigError(
            f"Airflow connection {conn_id!r}: its extra 'ssl' must be an object with ca, cert and key"
        )
    mode = str(extra.get("ssl_mode") or base.mode).lower()
    if str(extra.get("ssl_disabled", "")).lower() in ("true", "1"):
        mode = "disabled"
    if mode not in TLS_MODES:
        raise ConfigError(
            f"Airflow connection {conn_id!r}: its extra ssl_mode = {extra.get('ssl_mode')!r} is not accepted; "
            f"accepted values: {', '.join(m.upper() for m in TLS_MODES)}"
        )
    ca = str(nested.get("ca") or extra.get("ssl_ca") or base.ca) if mode in TLS_VERIFYING else ""
    cert, key = (
        (
            str(nested.get("cert") or extra.get("ssl_cert") or base.cert),
            str(nested.get("key") or extra.get("ssl_key") or base.key),
        )
        if mode != "disabled"
        else ("", "")
    )
    return Tls(mode, ca, cert, key)


def connect_options(tls: Tls) -> dict[str, Any]:
    """pymysql's connection arguments for ``tls``: a context given makes pymysql insist on TLS
    before it sends the login; none makes it offer TLS and go on in plain text when the server
    has none (``preferred``: ``loader.source.connection`` gives it ``context(tls)`` to offer).

    Raises:
        ConfigError: a certificate or key file that cannot be read, named with its setting.
    """
    if tls.mode == "disabled":
        return {"ssl_disabled": True}
    if tls.mode == "preferred":
        return {}
    return {"ssl": context(tls)}


@functools.lru_cache(maxsize=16)
def context(tls: Tls) -> ssl.SSLContext:
    """The TLS context of ``tls``, built once per process (reading CA files costs milliseconds,
    more than the rest of a connection to a near server).

    Raises:
        ConfigError: a certificate or key file that cannot be read, named with its setting.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    # The certificates MySQL and MariaDB generate for themselves lack extensions that the strict
    # X.509 checks want (Python 3.13 turns those on); the signature and the names are still checked.
    ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT
    ctx.check_hostname = tls.mode == "verify_identity"
    if tls.verifies:
        ctx.verify_mode = ssl.CERT_REQUIRED
        if tls.ca:
            _readable(tls.ca, "tls_ca")
            try:
                ctx.load_verify_locations(cafile=tls.ca)
            except ssl.SSLError as exc:
                raise ConfigError(
                    f"source.tls_ca {tls.ca}: no CA certificate in PEM could be read ({exc})"
                ) from None
        else:
            ctx.load_default_certs()
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if tls.cert:
        _readable(tls.cert, "tls_cert")
        if tls.key:
            _readable(tls.key, "tls_key")
        try:
            ctx.load_cert_chain(tls.cert, keyfile=tls.key or None)
        except ssl.SSLError as exc:
            raise ConfigError(
                f"source.tls_cert {tls.cert} and tls_key {tls.key or '(in the same file)'}: not a certificate "
                f"and its private key in PEM ({exc})"
            ) from None
    return ctx


def _readable(path: str, setting: str) -> None:
    if not Path(path).is_file():
        raise ConfigError(f"source.{setting} {path} is not a readable file")


@dataclass(frozen=True)
class Got:
    """What a connection got: the TLS version and cipher (None for plain text), and whether the
    server's certificate and its host name were checked."""

    version: str | None
    cipher: str | None
    certificate_verified: bool
    host_verified: bool

    def text(self) -> str:
        """One line for ``loader check``."""
        if not self.version:
            return "plain text (no TLS)"
        checked = (
            "certificate and host name verified"
            if self.host_verified
            else "certificate verified, host name not checked"
            if self.certificate_verified
            else "certificate NOT verified"
        )
        return f"{self.version} {self.cipher}, {checked}"


def got(conn: Any, tls: Tls) -> Got:
    """What the pymysql connection ``conn``, opened with ``tls``, got."""
    sock = getattr(conn, "_sock", None)
    if not isinstance(sock, ssl.SSLSocket):
        return Got(None, None, False, False)
    cipher = sock.cipher()
    return Got(sock.version(), cipher[0] if cipher else None, tls.verifies, tls.mode == "verify_identity")


def warning(tls: Tls, connected: Got, where: str) -> str | None:
    """What ``loader check`` warns of: a connection whose server was not verified."""
    if not connected.version:
        return (
            f"{where} is read in plain text ([source] tls = {tls.mode!r}): the password and every row cross "
            "the network readable; turn TLS on at the server and set tls = 'verify_identity' with tls_ca"
        )
    if not connected.certificate_verified:
        return (
            f"{where}'s certificate is not verified ([source] tls = {tls.mode!r}): anything between the "
            "loader and the server can read it all; set tls = 'verify_identity' and tls_ca to the CA that "
            "signed the server's certificate"
        )
    return None


# Connector/J's sslMode for each mode; ``preferred`` follows what the server offered.
JDBC_SSL_MODES = {
    "disabled": "disable",
    "required": "trust",
    "verify_ca": "verify-ca",
    "verify_identity": "verify-full",
}


def jdbc_properties(tls: Tls, offered: bool) -> dict[str, str]:
    """MariaDB Connector/J's connection properties for ``tls`` (Spark's copy): its ``sslMode``
    (``preferred`` takes TLS when the server ``offered`` it to the job's own connection), the CA
    certificates inline (``serverSslCert``: executors on other machines need no file), a client
    certificate as a PKCS12 keystore file (``keystore``).

    Raises:
        ConfigError: a certificate or key file that cannot be read, named with its setting.
    """
    mode = JDBC_SSL_MODES.get(tls.mode) or ("trust" if offered else "disable")
    properties = {"sslMode": mode}
    if tls.verifies and tls.ca:
        _readable(tls.ca, "tls_ca")
        properties["serverSslCert"] = Path(tls.ca).read_text(encoding="ascii")
    if tls.cert and mode != "disable":
        path, password = keystore(tls)
        properties.update(keyStore=path, keyStorePassword=password, keyStoreType="PKCS12")
    return properties


@functools.lru_cache(maxsize=4)
def keystore(tls: Tls) -> tuple[str, str]:
    """``tls``'s client certificate and key as a PKCS12 file (Connector/J reads no PEM key) in a
    folder only this user can read, removed when the process ends; its path and password."""
    import atexit
    import secrets
    import shutil
    import tempfile

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    _readable(tls.cert, "tls_cert")
    pem = Path(tls.cert).read_bytes()
    key_pem = Path(tls.key).read_bytes() if tls.key else pem
    _readable(tls.key or tls.cert, "tls_key")
    try:
        chain = x509.load_pem_x509_certificates(pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except ValueError as exc:
        raise ConfigError(
            f"source.tls_cert {tls.cert} and tls_key {tls.key or '(in the same file)'}: not a certificate and "
            f"its unencrypted private key in PEM ({exc})"
        ) from None
    password = secrets.token_urlsafe(24)
    data = pkcs12.serialize_key_and_certificates(
        b"loader",
        key,
        chain[0],
        chain[1:] or None,
        serialization.BestAvailableEncryption(password.encode("ascii")),
    )
    folder = tempfile.mkdtemp(prefix="loader-tls-")  # mode 0700
    atexit.register(shutil.rmtree, folder, True)
    path = Path(folder, "client.p12")
    path.write_bytes(data)
    return str(path), password
