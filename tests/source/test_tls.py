"""TLS to the source: each of MySQL's five modes against a MariaDB that refuses plain text, and
each way a connection must stop rather than go on unverified or in plain text."""

from __future__ import annotations

import dataclasses
import json
import ssl
from pathlib import Path

import pytest

from loader.core.config import load_config
from loader.core.errors import ConfigError, SourceError
from loader.source import connection as source
from loader.source import tls
from loader.source.tls import Tls
from tests.certificates import Certificates
from tests.conftest import MariaDB, TlsMariaDB, private_server, run_loader
from tests.proxy import proxy

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def certs(tls_certificates: Certificates) -> Certificates:
    return tls_certificates


@pytest.fixture(scope="module")
def tls_db(tls_mariadb: TlsMariaDB) -> TlsMariaDB:
    return tls_mariadb


def creds(db: MariaDB, settings: Tls, host: str | None = None, user: str = "loader") -> source.Credentials:
    return source.Credentials(host or db.host, db.port, user, db.password, 5, 10, name="shop", tls=settings)


def got(db: MariaDB, settings: Tls, host: str | None = None, user: str = "loader") -> tls.Got:
    conn = source.connect(creds(db, settings, host, user))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
        return tls.got(conn, settings)
    finally:
        conn.close()


def test_each_mode_gets_what_it_asks_of_a_server_that_refuses_plain_text(
    tls_db: TlsMariaDB, certs: Certificates
) -> None:
    with pytest.raises(SourceError) as plain:
        got(tls_db, Tls("disabled"))
    said = str(plain.value)
    assert said.startswith(f"source shop (127.0.0.1:{tls_db.port}) refused the login of loader"), said
    assert "it went in plain text, [source] tls = 'disabled'" in said

    for mode in ("preferred", "required"):
        unchecked = got(tls_db, Tls(mode))
        assert unchecked.version and unchecked.version.startswith("TLSv1.")
        assert (unchecked.certificate_verified, unchecked.host_verified) == (False, False)
        assert "NOT verified" in unchecked.text()
    assert got(tls_db, Tls("verify_ca", str(certs.ca))).certificate_verified
    both = got(tls_db, Tls("verify_identity", str(certs.ca)))
    assert (both.certificate_verified, both.host_verified) == (True, True)
    assert "certificate and host name verified" in both.text()


def test_required_stops_before_the_login_at_a_server_without_tls(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with private_server(MariaDB, tmp_path_factory, "plain-mariadb", "--skip-ssl") as plain_db:
        for mode in ("required", "verify_ca", "verify_identity"):
            with pytest.raises(SourceError) as stopped:
                got(plain_db, Tls(mode))
            said = str(stopped.value)
            assert said.startswith(f"source shop (127.0.0.1:{plain_db.port}) offers no TLS"), said
            assert f"tls = {mode!r} requires it: nothing was sent" in said
        plain = got(plain_db, Tls("preferred"))
    assert plain.version is None and plain.text() == "plain text (no TLS)"
    warned = tls.warning(Tls("preferred"), plain, "source shop (x)")
    assert warned and "read in plain text" in warned


def test_a_proxy_that_strips_tls_from_the_servers_greeting_gets_no_login(
    tls_db: TlsMariaDB, certs: Certificates
) -> None:
    with proxy((tls_db.host, tls_db.port), strip_tls=True) as middle:
        for settings in (Tls("required"), Tls("verify_identity", str(certs.ca))):
            with pytest.raises(SourceError) as stopped:
                source.connect(
                    source.Credentials("127.0.0.1", middle.port, "loader", tls_db.password, tls=settings)
                )
            said = str(stopped.value)
            assert said.startswith(
                f"source source (127.0.0.1:{middle.port}) offers no TLS in its greeting"
            ), said
        # preferred goes on in plain text (what MySQL's clients do): this server refuses the login.
        with pytest.raises(SourceError, match="it went in plain text, \\[source\\] tls = 'preferred'"):
            source.connect(
                source.Credentials("127.0.0.1", middle.port, "loader", tls_db.password, tls=Tls("preferred"))
            )


def test_a_certificate_of_another_ca_or_for_another_host_is_refused(
    tls_db: TlsMariaDB, certs: Certificates
) -> None:
    with pytest.raises(SourceError) as other_ca:
        got(tls_db, Tls("verify_ca", str(certs.other_ca)))
    said = str(other_ca.value)
    assert said.startswith(
        f"source shop (127.0.0.1:{tls_db.port}): the server's certificate was not verified"
    )
    assert str(certs.other_ca) in said and "set tls_ca" in said

    # The certificate is made out to 127.0.0.1 only.
    with pytest.raises(SourceError) as other_host:
        got(tls_db, Tls("verify_identity", str(certs.ca)), host="localhost")
    said = str(other_host.value)
    assert said.startswith(
        f"source shop (localhost:{tls_db.port}): the server's certificate is not made out to localhost"
    )
    # verify_ca does not check the name.
    assert got(tls_db, Tls("verify_ca", str(certs.ca)), host="localhost").certificate_verified


def test_an_account_that_requires_a_client_certificate_gets_the_configured_one(
    tls_db: TlsMariaDB, certs: Certificates
) -> None:
    # No privilege: enough to log in and SELECT 1.
    tls_db.execute(
        f"CREATE USER IF NOT EXISTS 'x509'@'127.0.0.1' IDENTIFIED BY '{tls_db.password}' REQUIRE X509"
    )
    verified = Tls("verify_identity", str(certs.ca))
    with pytest.raises(SourceError) as refused:
        got(tls_db, verified, user="x509")
    said = str(refused.value)
    assert said.startswith(f"source shop (127.0.0.1:{tls_db.port}) refused the login of x509: Access denied")
    assert "REQUIRE X509 also needs [source] tls_cert and tls_key" in said
    with_cert = dataclasses.replace(verified, cert=str(certs.client_cert), key=str(certs.client_key))
    assert got(tls_db, with_cert, user="x509").host_verified


def test_check_prints_what_the_connection_got_and_an_extract_reads_the_binlog_verified(
    tls_db: TlsMariaDB, certs: Certificates, tmp_path: Path
) -> None:
    start = tls_db.execute(
        "CREATE DATABASE IF NOT EXISTS tls_shop", "CREATE TABLE tls_shop.t (id INT PRIMARY KEY, v TEXT)"
    )
    tls_db.execute(
        "INSERT INTO tls_shop.t VALUES (1, 'a'), (2, 'b')", "UPDATE tls_shop.t SET v = 'c' WHERE id = 2"
    )

    unverified = tls_db.config_file(tmp_path, "shop", "tls_shop.*", more="")
    checked = run_loader(tls_db, unverified, "check")
    assert checked.returncode == 0, checked.stderr
    assert "tls: TLSv1." in checked.stdout and "certificate NOT verified (tls = required)" in checked.stdout
    assert f"WARNING: source shop (127.0.0.1:{tls_db.port})'s certificate is not verified" in checked.stdout

    toml = unverified.read_text().replace(
        "[tables]", f'tls = "verify_identity"\ntls_ca = "{certs.ca}"\n[tables]', 1
    )
    unverified.write_text(toml)
    checked = run_loader(tls_db, unverified, "check", "--output", "json")
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    assert report["tls"]["mode"] == "verify_identity" and report["tls"]["host_verified"] is True
    assert not any("verified" in w or "plain text" in w for w in report["warnings"])

    # The replication stream, the history's reads and the schema's, all with the same settings.
    extracted = run_loader(tls_db, unverified, "extract", "--from", str(start), "--output", "json")
    assert extracted.returncode == 0, extracted.stderr
    tables = {t["table"]: t["ops"] for t in json.loads(extracted.stdout)["tables"]}
    assert tables == {"tls_shop.t": {"I": 3, "D": 1}}, extracted.stdout  # an update: its before image deleted


def test_tls_settings_are_checked_when_the_config_is_read(tmp_path: Path) -> None:
    def config(**fields: str) -> None:
        load_config(None, env={f"LOADER__SOURCE__{k.upper()}": v for k, v in fields.items()})

    with pytest.raises(
        ConfigError, match=r"source\.tls = 'verify' is not accepted; accepted values: disabled, "
    ):
        config(tls="verify")
    with pytest.raises(
        ConfigError, match=r"source\.tls_ca is set but source\.tls = 'required' does not check"
    ):
        config(tls="required", tls_ca="/ca.pem")
    with pytest.raises(ConfigError, match=r"source\.tls_key is set without source\.tls_cert"):
        config(tls_key="/key.pem")
    missing = source.Credentials("127.0.0.1", 1, "u", "p", tls=Tls("verify_ca", str(tmp_path / "nope.pem")))
    with pytest.raises(ConfigError, match=r"source.tls_ca .*nope.pem is not a readable file"):
        source.connect(missing)


def test_an_airflow_connection_gives_tls_as_airflows_mysql_provider_reads_it() -> None:
    base = Tls("required", "", "", "")
    assert tls.of_airflow_extra({}, base, "db") == base
    nested = {
        "ssl_mode": "VERIFY_IDENTITY",
        "ssl": json.dumps({"ca": "/ca.pem", "cert": "/c.pem", "key": "/k.pem"}),
    }
    assert tls.of_airflow_extra(nested, base, "db") == Tls("verify_identity", "/ca.pem", "/c.pem", "/k.pem")
    flat = {"ssl_ca": "/ca.pem", "ssl_mode": "verify_ca"}
    assert tls.of_airflow_extra(flat, base, "db") == Tls("verify_ca", "/ca.pem")
    assert tls.of_airflow_extra({"ssl_disabled": True}, base, "db").mode == "disabled"
    # Extras that verify less than the config drop what their mode does not use: the jobs read
    # the result again as their config, which would refuse a CA without verifying.
    verifying = Tls("verify_identity", "/ca.pem", "/c.pem", "/k.pem")
    assert tls.of_airflow_extra({"ssl_mode": "REQUIRED"}, verifying, "db") == Tls(
        "required", "", "/c.pem", "/k.pem"
    )
    assert tls.of_airflow_extra({"ssl_mode": "DISABLED"}, verifying, "db") == Tls("disabled")
    with pytest.raises(ConfigError, match="Airflow connection 'db': its extra ssl_mode = 'sometimes'"):
        tls.of_airflow_extra({"ssl_mode": "sometimes"}, base, "db")


def test_the_tls_context_is_built_once_per_setting() -> None:
    assert tls.context(Tls("required")) is tls.context(Tls("required"))
    assert tls.context(Tls("required")).verify_mode == ssl.CERT_NONE
    assert tls.context(Tls("verify_identity")).check_hostname


def test_an_airflow_connections_tls_extras_reach_the_connection(
    tls_db: TlsMariaDB, certs: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source named by an Airflow connection (a MySQL connection as Airflow's provider reads
    it, defined in the environment): its ssl_mode and ssl extras verify the server."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_SHOP_TLS",
        json.dumps(
            {
                "conn_type": "mysql",
                "host": tls_db.host,
                "port": tls_db.port,
                "login": "loader",
                "password": tls_db.password,
                "extra": {"ssl_mode": "VERIFY_IDENTITY", "ssl": {"ca": str(certs.ca)}},
            }
        ),
    )
    cfg = load_config(
        None, env={"LOADER__SOURCE__NAME": "shop", "LOADER__SOURCE__AIRFLOW_CONN_ID": "shop_tls"}
    )
    creds = source.credentials(cfg.source)
    assert creds.tls == Tls("verify_identity", str(certs.ca))
    conn = source.connect(creds)
    try:
        assert tls.got(conn, creds.tls).host_verified
    finally:
        conn.close()
