"""SQL access to the source server: connecting, its binlog position and its binlog settings."""

from __future__ import annotations

import json
import os
import re
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

from loader.core.config import SourceConfig
from loader.core.driver import pymysql
from loader.core.errors import SourceError, TransientError
from loader.core.positions import Position
from loader.source import tls
from loader.source.tls import Tls


@dataclass(frozen=True)
class Credentials:
    """How to reach the source; built from the config or an Airflow connection."""

    host: str
    port: int
    user: str
    password: str
    connect_timeout: int = 10  # seconds, the handshake included
    read_timeout: int = 60  # seconds to wait for any answer once connected
    unset_password_env: str = ""  # the variable that should hold the password, when it is unset
    name: str = "source"  # the source's name in the deployment
    tls: Tls = field(default_factory=Tls)

    def __repr__(self) -> str:  # never print the password
        return f"Credentials(host={self.host!r}, port={self.port}, user={self.user!r})"

    @property
    def where(self) -> str:
        """The source as errors name it: ``source NAME (host:port)``."""
        return f"source {self.name} ({self.host}:{self.port})"


def credentials(cfg: SourceConfig) -> Credentials:
    """Resolve the source's credentials: an Airflow connection when one is named, else the config.

    An Airflow connection's TLS extras (``tls.of_airflow_extra``) take the place of the config's.
    """
    if cfg.airflow_conn_id:
        from airflow.sdk import BaseHook  # heavy import, only when asked for

        conn = BaseHook.get_connection(cfg.airflow_conn_id)
        return Credentials(
            conn.host or cfg.host,
            int(conn.port or cfg.port),
            conn.login or cfg.user,
            conn.password or "",
            cfg.connect_timeout_seconds,
            cfg.read_timeout_seconds,
            name=cfg.name,
            tls=tls.of_airflow_extra(conn.extra_dejson or {}, tls.of_config(cfg), cfg.airflow_conn_id),
        )
    unset = cfg.password_env if cfg.password_env and cfg.password_env not in os.environ else ""
    return Credentials(
        cfg.host,
        cfg.port,
        cfg.user,
        cfg.password(),
        cfg.connect_timeout_seconds,
        cfg.read_timeout_seconds,
        unset,
        cfg.name,
        tls.of_config(cfg),
    )


class _Connection(pymysql.connections.Connection):
    """pymysql's connection with the TLS context of the source's settings, built once per
    process (``tls.context``).

    Offering TLS without options (``preferred``), pymysql builds a context for every connection,
    loading the system's CA certificates (20-50 ms, more than the rest of a connection to a near
    server) that a context checking nothing never reads; ``connect`` gives it the settings' own.
    """

    def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
        if isinstance(sslp, ssl.SSLContext):
            return sslp
        return tls.context(Tls("preferred"))  # replaced by the connection's own before it connects


# The server refused the login (access denied, no such database), or any connection in plain
# text (MySQL's ER_SECURE_TRANSPORT_REQUIRED; MariaDB answers that as a refused login).
LOGIN_REFUSED = (1044, 1045, 1049)
PLAIN_TEXT_REFUSED = (3159,)
# The client's errors for a server that cannot be reached, went away or stopped answering.
LOST_CONNECTION = (2003, 2006, 2013)
# pymysql's error when the settings insist on TLS and the server's greeting offers none.
CR_SSL_CONNECTION_ERROR = 2026


def connect(creds: Credentials, database: str | None = None, **extra: Any) -> pymysql.connections.Connection:
    """Open a SQL connection with the source's TLS settings (``loader.source.tls``); a refused
    or timed-out connection is a TransientError.

    Every wait for the server is bounded: ``creds.connect_timeout`` for the connection and its
    handshake (pymysql's own connect timeout stops at the TCP connect, and a frozen server
    accepts those), then ``creds.read_timeout`` (or ``read_timeout`` in ``extra``) for each answer.

    Raises:
        SourceError: the login refused, or TLS the settings ask for not had (no TLS offered, a
            certificate not verified): nothing was read, and the password was not sent in plain text.
        ConfigError: a TLS file of the settings that cannot be read.
    """
    read_timeout = extra.pop("read_timeout", creds.read_timeout)
    options = tls.connect_options(creds.tls)
    conn = _Connection(
        host=creds.host,
        port=creds.port,
        user=creds.user,
        password=creds.password,
        database=database,
        charset="utf8mb4",
        connect_timeout=creds.connect_timeout,
        read_timeout=creds.connect_timeout,
        write_timeout=creds.connect_timeout,
        autocommit=True,
        defer_connect=True,
        **options,
        **extra,
    )
    if creds.tls.mode == "preferred":
        conn.ctx = tls.context(creds.tls)
    try:
        conn.connect()
    except pymysql.err.OperationalError as exc:
        raise _connect_error(creds, exc, secure=conn._secure) from None
    # pymysql takes one read timeout for a connection's life; past the handshake, the longer one.
    conn._read_timeout = conn._write_timeout = read_timeout
    return conn


def _connect_error(creds: Credentials, exc: pymysql.err.OperationalError, secure: bool) -> Exception:
    """What a failed connection to the source tells its user: the source, what failed, what to set
    (``secure``: whether the login went over TLS)."""
    code = exc.args[0] if exc.args else 0
    said = exc.args[-1] if exc.args else str(exc)
    where, mode = creds.where, creds.tls.mode
    if code in LOGIN_REFUSED:
        if creds.unset_password_env:
            hint = f" (the password variable {creds.unset_password_env} is not set)"
        elif not secure:  # MariaDB answers a plain-text login it requires TLS for as a wrong password
            hint = (
                f" (it went in plain text, [source] tls = {mode!r}: a server with require_secure_transport, "
                "or an account created REQUIRE SSL, refuses that; set tls = 'verify_identity' with tls_ca)"
            )
        elif not creds.tls.cert:
            hint = " (an account created REQUIRE X509 also needs [source] tls_cert and tls_key)"
        else:
            hint = ""
        return SourceError(f"{where} refused the login of {creds.user}: {said}{hint}")
    if code in PLAIN_TEXT_REFUSED:
        return SourceError(
            f"{where} refuses connections without TLS ([source] tls = {mode!r}): {said}; "
            "set tls = 'verify_identity' with tls_ca (or 'required')"
        )
    if code == CR_SSL_CONNECTION_ERROR:
        return SourceError(
            f"{where} offers no TLS in its greeting and [source] tls = {mode!r} requires it: nothing was "
            "sent. Turn TLS on at the server (ssl_cert and ssl_key), or, on a network you trust, set "
            "tls = 'preferred'"
        )
    cause = getattr(exc, "original_exception", None)
    if isinstance(cause, ssl.SSLCertVerificationError):
        if cause.verify_code in NAME_MISMATCH:
            return SourceError(
                f"{where}: the server's certificate is not made out to {creds.host} ({cause.verify_message}; "
                f"[source] tls = {mode!r}): connect by a name the certificate holds, or set tls = 'verify_ca'"
            )
        against = creds.tls.ca or "the system's CA certificates"
        return SourceError(
            f"{where}: the server's certificate was not verified against {against} ({cause.verify_message}; "
            f"[source] tls = {mode!r}): set tls_ca to the CA certificate that signed the server's"
        )
    if isinstance(cause, ssl.SSLError) and not isinstance(cause, ssl.SSLEOFError | ssl.SSLZeroReturnError):
        return SourceError(
            f"{where}: the TLS handshake failed ({cause.reason or cause}; [source] tls = {mode!r}); "
            "a server that wants a client certificate needs tls_cert and tls_key"
        )
    return TransientError(f"cannot connect to {where} within {creds.connect_timeout} s: {said}")


# OpenSSL's verify codes for a certificate made out to other names, or other addresses, than
# the host connected to (X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH).
NAME_MISMATCH = (62, 64)


def current_position(conn: pymysql.connections.Connection) -> Position:
    """The server's current binlog position (end of the last written event)."""
    return binlog_status(conn)[0]


def binlog_status(conn: pymysql.connections.Connection) -> tuple[Position, str | None]:
    """The server's current binlog position and, from the same answer, MySQL's executed GTID set
    (None from MariaDB, which does not report it there).

    MySQL 8.4+ only knows ``SHOW BINARY LOG STATUS``; MariaDB and older MySQL only
    ``SHOW MASTER STATUS``.
    """
    with conn.cursor() as cur:
        for stmt in ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
            try:
                cur.execute(stmt)
            except pymysql.err.ProgrammingError:
                continue
            row = cur.fetchone()
            if not row:
                raise SourceError("the source has no binary log: start it with log_bin enabled")
            return Position(str(row[0]), int(row[1])), str(row[4]) if len(row) > 4 else None
    raise SourceError("the source answers neither SHOW BINARY LOG STATUS nor SHOW MASTER STATUS")


# performance_schema.log_status refused: no BACKUP_ADMIN (1227), no access to the table (1142),
# or no such table (before MySQL 8.0.17: 1146).
LOG_STATUS_REFUSED = (1227, 1142, 1146)
SETTLE_READS, SETTLE_SECONDS = 5, 0.02


def mysql_status(conn: pymysql.connections.Connection) -> tuple[Position, str]:
    """MySQL's current binlog position and its executed GTID set there.

    SHOW BINARY LOG STATUS answers the binlog's end before the transactions written up to it have
    all added their GTIDs (MySQL adds them in the commit stage, after the write), so on a busy
    server its set may lack the last ones. ``performance_schema.log_status`` reads both with
    commits held for the moment (it needs BACKUP_ADMIN, MySQL 8.0.17 and later); without it the
    status is read again until the position and the set repeat (or ``SETTLE_READS`` times).
    """
    with conn.cursor() as cur:
        try:
            cur.execute("SELECT LOCAL FROM performance_schema.log_status")
            row = cur.fetchone()
        except pymysql.err.MySQLError as exc:
            if not exc.args or exc.args[0] not in LOG_STATUS_REFUSED:
                raise
            row = None
    local = json.loads(row[0]) if row and row[0] else {}
    if local.get("binary_log_file"):
        at = Position(str(local["binary_log_file"]), int(local["binary_log_position"]))
        return at, "".join(str(local.get("gtid_executed") or "").split())
    at, executed = binlog_status(conn)
    for _ in range(SETTLE_READS):
        time.sleep(SETTLE_SECONDS)
        again, now = binlog_status(conn)
        if (again, now) == (at, executed):
            break
        at, executed = again, now
    return at, executed or ""


# SHOW BINLOG EVENTS refusing an offset: not where an event starts, past the file, or no file.
ER_BINLOG_EVENTS = 1220


def binary_logs(conn: pymysql.connections.Connection) -> dict[str, int]:
    """The server's binlog files and their sizes in bytes, oldest first."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return {str(row[0]): int(row[1]) for row in cur.fetchall()}


def start_problem(conn: pymysql.connections.Connection, start: Position, end: Position) -> str | None:
    """Why the server's binlog cannot be read from ``start`` up to ``end``, or None.

    ``start`` must be in a file the server still has, at most at its end, and where an event
    starts: the server itself tells (``SHOW BINLOG EVENTS`` reads the event there and refuses an
    offset inside one), so a mistyped position is refused before anything is recorded.
    """
    if start > end:
        return f"{start} lies past the server's current position {end}"
    logs = binary_logs(conn)
    size = logs.get(start.file)
    if size is None:
        names = list(logs)
        if not names:
            return f"the server lists no binlog files, so {start.file} is not there"
        same_base = start.file.rsplit(".", 1)[0] == names[0].rsplit(".", 1)[0]
        if same_base and start.lognum < Position(names[0], 4).lognum:
            return (
                f"binlog file {start.file} is no longer on the server (purged: its oldest file is {names[0]})"
            )
        return f"binlog file {start.file} is not on the server (its files are {names[0]} to {names[-1]})"
    if start.pos < 4 or start.pos > size:
        return f"{start} lies outside {start.file}, whose events run from 4 to {size}"
    if start.pos < size:
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW BINLOG EVENTS IN %s FROM %s LIMIT 1", (start.file, start.pos))
                cur.fetchall()
        except pymysql.err.MySQLError as exc:
            if not exc.args or exc.args[0] != ER_BINLOG_EVENTS:
                raise
            return (
                f"{start} is not where an event starts in {start.file} "
                f"(SHOW BINLOG EVENTS IN '{start.file}' lists where events start)"
            )
    return None


REQUIRED_SETTINGS = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL"}


def check_binlog_settings(conn: pymysql.connections.Connection) -> dict[str, str]:
    """Verify the server writes a binlog the loader can read; returns the settings it read.

    Raises:
        SourceError: naming each setting that is wrong, its value and the value needed.
    """
    with conn.cursor() as cur:
        cur.execute(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN "
            "('log_bin','binlog_format','binlog_row_image','binlog_row_metadata','server_id',"
            "'server_uuid','binlog_checksum','version')"
        )
        found = {str(k): str(v) for k, v in cur.fetchall()}
    wrong = [
        f"{name} = {found.get(name, '<unset>')} (needs {want})"
        for name, want in REQUIRED_SETTINGS.items()
        if found.get(name, "").upper() != want
    ]
    if wrong:
        raise SourceError(
            "the source's binlog cannot be loaded: " + "; ".join(wrong) + " (see infra/mariadb/binlog.cnf)"
        )
    return found


# The privileges a MySQL account may lack and still load, and what is lost without each.
MYSQL_OPTIONAL_PRIVILEGES = {
    "RELOAD": "loader checksum cannot start its snapshot (MySQL's global read lock, held for a moment)",
    "BACKUP_ADMIN": "the binlog position and its GTID set are read from SHOW BINARY LOG STATUS (until "
    "it repeats), not together from performance_schema.log_status: on a busy server the set can miss "
    "a transaction still committing, and a run then stops as if the log had changed",
}


def privilege_warnings(conn: pymysql.connections.Connection, version: str) -> list[str]:
    """On MySQL (``version``, as ``check_binlog_settings`` read it), a warning for each privilege
    of ``MYSQL_OPTIONAL_PRIVILEGES`` that the account's grants lack (``SHOW GRANTS``: one given
    through a role shows as missing); none on MariaDB."""
    if "mariadb" in version.lower():
        return []
    with conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER()")
        (account,) = cur.fetchone()
        cur.execute("SHOW GRANTS")
        granted: set[str] = set()
        for (grant,) in cur.fetchall():
            head = re.match(r"GRANT (.+?) ON \*\.\* TO ", str(grant))
            if head:
                granted.update(p.strip().upper() for p in head.group(1).split(","))
    if "ALL PRIVILEGES" in granted:
        return []
    user, _, host = str(account).rpartition("@")
    return [
        f"'{user}'@'{host}' has no {name}: {lost}; GRANT {name} ON *.* TO '{user}'@'{host}'"
        for name, lost in MYSQL_OPTIONAL_PRIVILEGES.items()
        if name not in granted
    ]


def base_tables(conn: pymysql.connections.Connection) -> list[tuple[str, str, int]]:
    """Every base table outside the server's own schemas: (schema, table, estimated rows), sorted."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME, COALESCE(TABLE_ROWS, 0) FROM information_schema.TABLES"
            " WHERE TABLE_TYPE = 'BASE TABLE'"
            " AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')"
            " ORDER BY TABLE_SCHEMA, TABLE_NAME"
        )
        return [(str(s), str(t), int(n)) for s, t, n in cur.fetchall()]
