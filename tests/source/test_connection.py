"""The private MariaDB: binlog settings, positions, and the demo workload against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pymysql
import pytest

from loader.core.errors import SourceError
from loader.core.positions import Position
from loader.source import connection as source
from loader.source.tls import Tls
from tests.conftest import MariaDB

pytestmark = pytest.mark.integration
LOADER = str(Path(sys.executable).with_name("loader"))


def creds(db: MariaDB, user: str = "loader") -> source.Credentials:
    return source.Credentials(db.host, db.port, user, db.password)


def test_private_server_has_row_binlog_with_full_images_and_metadata(mariadb: MariaDB) -> None:
    assert mariadb.port != 3306
    conn = source.connect(creds(mariadb))
    try:
        settings = source.check_binlog_settings(conn)
    finally:
        conn.close()
    assert settings["binlog_format"] == "ROW"
    assert settings["binlog_row_image"] == "FULL"
    assert settings["binlog_row_metadata"] == "FULL"
    assert (mariadb.binlog_dir / "mysql-bin.index").exists()


def test_position_advances_with_each_committed_write(mariadb: MariaDB) -> None:
    app = mariadb.connect()
    try:
        with app.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS t_pos")
            cur.execute("CREATE TABLE IF NOT EXISTS t_pos.t (id INT PRIMARY KEY, v VARCHAR(10))")
            before = source.current_position(app)
            cur.execute("REPLACE INTO t_pos.t VALUES (1, 'x')")
            after = source.current_position(app)
    finally:
        app.close()
    assert after > before
    binlog = mariadb.binlog_dir / after.file
    assert binlog.stat().st_size == after.pos


def test_statement_format_is_refused_with_a_clear_error(mariadb: MariaDB) -> None:
    app = mariadb.connect()
    try:
        with app.cursor() as cur:
            cur.execute("SET GLOBAL binlog_format = 'STATEMENT'")
        conn = source.connect(creds(mariadb))
        try:
            with pytest.raises(SourceError, match=r"binlog_format = STATEMENT \(needs ROW\)"):
                source.check_binlog_settings(conn)
        finally:
            conn.close()
    finally:
        with app.cursor() as cur:
            cur.execute("SET GLOBAL binlog_format = 'ROW'")
        app.close()


def test_wrong_password_is_a_terminal_error(mariadb: MariaDB) -> None:
    with pytest.raises(SourceError, match="refused the login"):
        source.connect(source.Credentials(mariadb.host, mariadb.port, "loader", "wrong"))


def test_demo_writes_changes_and_reports_their_binlog_range(mariadb: MariaDB, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "LOADER_SOURCE_PASSWORD": mariadb.password,
        "LOADER__SOURCE__PORT": str(mariadb.port),
        # The example verifies the demo's server; this one is verified against its own CA.
        "LOADER__SOURCE__TLS_CA": str(mariadb.datadir / "tls" / "ca.pem"),
        "LOADER__STAGING__URI": str(tmp_path / "staging"),
    }
    example = Path(__file__).resolve().parents[2] / "loader.example.toml"
    lines_before = _count(mariadb, "SELECT COUNT(*) FROM demo.order_lines")
    out = subprocess.run(
        [LOADER, "demo", "--config", str(example), "--output", "json", "--rows", "8"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    start, end = Position.parse(summary["start"]), Position.parse(summary["end"])
    assert start < end
    assert summary["inserts"] == 8 + 2 * 3 + 4
    assert summary["deletes"] == 3
    # The demo reads its range back through the binlog reader: every change, nothing rolled back.
    assert summary["decoded"] == {
        "demo.customers": {"I": 8, "U": 2, "D": 2},
        "demo.order_lines": {"I": 6, "U": 1, "D": 1},
        "demo.events": {"I": 4},
    }

    conn = mariadb.connect(database="demo")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM customers WHERE email = 'rolled.back@example.com'")
            assert cur.fetchone()[0] == 0
            cur.execute("SELECT COUNT(*) FROM order_lines")
            assert cur.fetchone()[0] - lines_before == 2 * 3 - 1
            assert source.current_position(conn) == end
    finally:
        conn.close()


def _count(db: MariaDB, sql: str) -> int:
    """A count, 0 when the table does not exist yet (other tests may run the demo first)."""
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(sql)
            except Exception:
                return 0
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def test_connections_take_tls_from_one_context_built_once_as_pymysql_would_build_it(
    mariadb: MariaDB,
) -> None:
    # Each setting's context is built once, not once per connection; the default insists on TLS,
    # preferred offers it (pymysql's way without options), both over this server's TLS.
    for settings, insists in ((Tls(), True), (Tls("preferred"), False)):
        with_settings = source.Credentials(
            mariadb.host, mariadb.port, "loader", mariadb.password, tls=settings
        )
        first, second = source.connect(with_settings), source.connect(with_settings)
        try:
            assert first._secure and first._ssl_required == insists and first.ctx is second.ctx
            # pymysql's context in every setting but the CA certificates, which it never reads.
            theirs = pymysql.connections.Connection._create_ssl_ctx(first, {})
            for attr in (
                "protocol",
                "verify_mode",
                "check_hostname",
                "options",
                "verify_flags",
                "minimum_version",
            ):
                assert getattr(first.ctx, attr) == getattr(theirs, attr), attr
            assert first.ctx.cert_store_stats()["x509_ca"] == 0
        finally:
            first.close()
            second.close()


def test_a_schema_reader_connects_only_when_a_tables_schema_is_asked_for(mariadb: MariaDB) -> None:
    # Each range a process decodes has one; a binlog with full metadata rarely needs it.
    from loader.binlog.reader import source_schema

    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS src9", "CREATE TABLE IF NOT EXISTS src9.t (id INT PRIMARY KEY)"
    )
    wrong = source.Credentials(mariadb.host, mariadb.port, "loader", "not-the-password")
    with source_schema(wrong) as schema:  # nothing asked: no connection, no refusal
        pass
    with source_schema(wrong) as schema, pytest.raises(SourceError, match="refused the login"):
        schema.get("src9", "t")
    with source_schema(creds(mariadb)) as schema:
        table = schema.get("src9", "t")
        assert table is not None and table.primary_key == ("id",)
