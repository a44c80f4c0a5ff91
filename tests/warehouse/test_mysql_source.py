"""A MySQL source through the warehouse stages, in the worker's Spark: an initial load and a delta
of every column type (MySQL's JSON numbers and partial JSON updates among them), then ``compare``
and the checksum equal, and each value changed behind the binlog's back found by the checksum. The
checksum's snapshot starts under MySQL's global read lock; without the privilege to take it, or
when running statements hold it off, it stops with an error that says so."""

from __future__ import annotations

import dataclasses
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from loader.binlog.gtids import GtidSet
from loader.core.config import Config
from loader.core.errors import ExtractError, SourceError, TransientError
from loader.source import connection as source
from loader.source import tls
from loader.source.connection import mysql_status
from loader.warehouse import checksum
from loader.warehouse.checksum import compare_sums, source_sums
from loader.warehouse.compare import compare_tables
from loader.warehouse.initial_load import run_initial_load
from loader.warehouse.tables import table_name
from tests.conftest import (
    MySQL,
    assert_equal_to_source,
    delta,
    fresh_schema,
    iceberg_rows,
    iceberg_table,
    private_server,
    quiet,
    run_loader,
    schema_config,
)
from tests.test_edges import _invalid_dates
from tests.warehouse.test_checksum import EVERY_TYPE, TAMPER, _row

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCHEMA = "my_source"
DOCS = "docs (id INT PRIMARY KEY, doc JSON)"
# Numbers whose text MySQL writes otherwise than the shortest round trip does.
DOC_ROWS = [
    """(1, '{"f": 1e-7, "big": 1e15, "n": [9007199254740992.0, 1.5e-16, 0.1]}')""",
    """(2, JSON_OBJECT('d', CAST('0.0000001' AS DECIMAL(10,7)), 'z', CAST(0 AS DECIMAL(12,10))))""",
    """(3, '[1, 2.5, "ü", {"k": null}]')""",
]


def _engine(cfg: Config, engine: str) -> Config:
    return dataclasses.replace(cfg, load=dataclasses.replace(cfg.load, engine=engine))


@pytest.mark.parametrize("table_format", ["iceberg"])
@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_a_mysql_source_loads_every_type_and_checks_equal(
    mysql: MySQL, tmp_path: Path, spark_config: Config, spark: Any, engine: str
) -> None:
    """Copied by either engine (Spark's is MariaDB Connector/J reading MySQL)."""
    schema = f"{SCHEMA}_{engine}"
    names = ["a", "B", "é", "Z", "ß", "aa", "Ab", "c"]
    keys = [(name, n) for name in names for n in (1, 2, 3)]
    fresh_schema(mysql, schema, EVERY_TYPE, DOCS)
    mysql.execute(
        f"INSERT INTO {schema}.t VALUES {', '.join(_row(name, n) for name, n in keys)}",
        f"INSERT INTO {schema}.docs VALUES {', '.join(DOC_ROWS)}",
    )
    cfg = _engine(schema_config(mysql, tmp_path, spark_config, schema), engine)
    run_initial_load(spark, cfg, progress=quiet)

    mysql.execute(
        f"INSERT INTO {schema}.t VALUES {_row('nulls', 1)}",
        f"UPDATE {schema}.t SET ti = NULL, de = NULL, fl = NULL, db = NULL, da = NULL, tx = NULL, "
        "bl = NULL, js = NULL, ge = NULL WHERE name = 'nulls'",
        f"UPDATE {schema}.t SET db = db * 3, tx = CONCAT(tx, '😀'), dt = NULL WHERE n = 2",
        f"DELETE FROM {schema}.t WHERE name = 'c' AND n = 3",
        f"INSERT INTO {schema}.t VALUES {_row('c', 3)}",
        # Partial updates: the binlog holds only the change, applied to the row's before image.
        "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
        f"UPDATE {schema}.docs SET doc = JSON_SET(doc, '$.f', 2.5e-7, '$.n[0]', 1e-15) WHERE id = 1",
        f"UPDATE {schema}.docs SET doc = JSON_REPLACE(doc, '$.d', CAST('0.0000100' AS DECIMAL(10,7))) WHERE id = 2",
        f"INSERT INTO {schema}.docs VALUES (4, '[1e-7, 1e300, -0.0]')",
    )
    delta(spark, cfg)
    compared = {c.table: c for c in compare_tables(spark, cfg, sample=50)}
    assert sorted(compared) == [f"{schema}.docs", f"{schema}.t"]
    for table, c in compared.items():
        assert c.equal and c.source_rows == c.warehouse_rows > 0, (table, c.differences)
    assert_equal_to_source(spark, cfg)

    # One column of each row changed without the binlog, and one row gone: every change is found.
    mysql.execute(
        "SET sql_log_bin = 0",
        *(
            f"UPDATE {schema}.t SET {column} = {change} WHERE name = '{name}' AND n = {n}"
            for (column, change), (name, n) in zip(TAMPER.items(), keys, strict=True)
        ),
        f"DELETE FROM {schema}.t WHERE name = 'nulls'",
        "SET sql_log_bin = 1",
    )
    checked = {
        c.table: c
        for c in compare_sums(spark, cfg, source_sums(cfg.source, cfg.tables, range_rows=1, progress=quiet))
    }
    table = checked[f"{schema}.t"]
    assert checked[f"{schema}.docs"].equal and not table.equal
    differing = {(r.up_to[0], int(r.up_to[1])) for r in table.differing if r.up_to}
    assert [c for c, key in zip(TAMPER, keys, strict=True) if key not in differing] == []


def test_the_checksum_says_what_mysqls_read_lock_needs(
    mysql: MySQL, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh_schema(mysql, "my_lock", "t (id INT PRIMARY KEY)")
    mysql.execute("INSERT INTO my_lock.t VALUES (1)")
    mysql.as_root(
        f"CREATE USER IF NOT EXISTS 'no_reload'@'127.0.0.1' IDENTIFIED BY '{mysql.password}'; "
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'no_reload'@'127.0.0.1'"
    )
    cfg = mysql.config(tmp_path, tables={"include": '["my_lock.*"]'})
    without = dataclasses.replace(cfg, source=dataclasses.replace(cfg.source, user="no_reload"))
    with pytest.raises(SourceError, match=r"GRANT RELOAD ON \*\.\* TO no_reload"):
        source_sums(without.source, without.tables, progress=quiet)

    # A statement holding a table: the lock is waited for READ_LOCK_WAIT seconds, then refused.
    monkeypatch.setattr(checksum, "READ_LOCK_WAIT", 1)
    holder = mysql.connect()
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.cursor() as cur:
            cur.execute("LOCK TABLES my_lock.t WRITE")
            locked.set()
            release.wait(30)
            cur.execute("UNLOCK TABLES")

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert locked.wait(10)
        with pytest.raises(TransientError, match="held it off for 1 s; nothing was summed"):
            source_sums(cfg.source, cfg.tables, progress=quiet)
    finally:
        release.set()
        thread.join()
        holder.close()
    (sums,) = source_sums(cfg.source, cfg.tables, progress=quiet).tables
    assert sums.rows == 1


# MySQL's own column kinds: a generated invisible primary key, invisible columns (SELECT * leaves
# them out), VECTOR, integers after a YEAR (MySQL counts YEAR in the signedness bits since 8.0.23).
SHAPES = "my_shapes"
SHAPE_TABLES = (
    "inv (id INT PRIMARY KEY, secret VARCHAR(20) INVISIBLE, v INT)",
    "vec (id INT PRIMARY KEY, emb VECTOR(3), note VARCHAR(10))",
    "yearmid (id INT PRIMARY KEY, yr YEAR, qty INT UNSIGNED, d INT, tiny TINYINT UNSIGNED, s SMALLINT)",
    "grow (id INT PRIMARY KEY, a INT, b VARCHAR(10))",
)


@pytest.mark.parametrize("table_format", ["iceberg"])
@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_mysqls_invisible_columns_generated_keys_vectors_and_instant_columns_load_and_check_equal(
    mysql: MySQL, tmp_path: Path, spark_config: Config, spark: Any, engine: str
) -> None:
    shapes = f"{SHAPES}_{engine}"
    fresh_schema(mysql, shapes, *SHAPE_TABLES)
    mysql.as_root(
        f"SET SESSION sql_generate_invisible_primary_key = ON; "
        f"CREATE TABLE {shapes}.gipk (name VARCHAR(20), v INT); "
        f"INSERT INTO {shapes}.gipk VALUES ('x', 1), ('y', 2), ('z', 3)"
    )
    mysql.execute(
        f"INSERT INTO {shapes}.inv (id, secret, v) VALUES (1, 's1', 10), (2, 's2', 20), (3, NULL, 30)",
        f"INSERT INTO {shapes}.vec VALUES (1, STRING_TO_VECTOR('[1.5, -2, 3e10]'), 'a'), (2, NULL, 'b'), "
        "(3, STRING_TO_VECTOR('[0, -0, 1e-30]'), NULL)",
        f"INSERT INTO {shapes}.yearmid VALUES (1, 2024, 4294967295, -5, 255, -32768), (2, NULL, 0, 7, 0, 5)",
        f"INSERT INTO {shapes}.grow VALUES (1, 1, 'b1'), (2, 2, 'b2')",
    )
    cfg = _engine(schema_config(mysql, tmp_path, spark_config, shapes), engine)
    run_initial_load(spark, cfg, progress=quiet)
    columns = {t: [f.name for f in iceberg_table(cfg, shapes, t).schema().fields] for t in ("inv", "gipk")}
    assert "secret" in columns["inv"] and "my_row_id" in columns["gipk"]  # SELECT * leaves them out

    mysql.execute(
        f"UPDATE {shapes}.gipk SET v = v * 10 WHERE name <> 'y'",
        f"DELETE FROM {shapes}.gipk WHERE name = 'y'",
        f"INSERT INTO {shapes}.gipk VALUES ('w', 4)",
        f"UPDATE {shapes}.inv SET secret = 'changed' WHERE id = 1",
        f"INSERT INTO {shapes}.inv (id, secret, v) VALUES (4, 's4', 40)",
        f"ALTER TABLE {shapes}.inv ALTER COLUMN secret SET VISIBLE",  # the rows stay as they were
        f"INSERT INTO {shapes}.inv VALUES (5, 's5', 50)",
        f"UPDATE {shapes}.vec SET emb = STRING_TO_VECTOR('[3, 2, 1]') WHERE id = 2",
        f"UPDATE {shapes}.vec SET emb = NULL, note = 'none' WHERE id = 1",
        f"UPDATE {shapes}.yearmid SET qty = qty DIV 2, d = d - 1, s = s + 1",
        f"INSERT INTO {shapes}.yearmid VALUES (3, 1901, 1, -2147483648, 128, 32767)",
        # Instant: no table copy on the server; a column at the end is carried.
        f"ALTER TABLE {shapes}.grow ADD COLUMN c INT, ALGORITHM=INSTANT",
        f"INSERT INTO {shapes}.grow VALUES (3, 3, 'b3', 33)",
        f"UPDATE {shapes}.grow SET c = id * 100 WHERE id <= 2",
        f"ALTER TABLE {shapes}.grow ADD COLUMN h VARCHAR(5) INVISIBLE, ALGORITHM=INSTANT",
        f"UPDATE {shapes}.grow SET h = 'hid' WHERE id = 3",
    )
    mysql.as_root(
        f"SET SESSION sql_generate_invisible_primary_key = ON; "
        f"CREATE TABLE {shapes}.born (label VARCHAR(10)); "
        f"INSERT INTO {shapes}.born VALUES ('p'), ('q'); DELETE FROM {shapes}.born WHERE label = 'p'"
    )
    delta(spark, cfg)
    compared = {c.table: c for c in compare_tables(spark, cfg, sample=50)}
    assert sorted(compared) == [f"{shapes}.{t}" for t in ("born", "gipk", "grow", "inv", "vec", "yearmid")]
    for table, c in compared.items():
        assert c.equal and c.source_rows == c.warehouse_rows > 0, (table, c.differences)
    assert_equal_to_source(spark, cfg)
    assert iceberg_rows(cfg, shapes, "grow", ["id", "c", "h"]) == [
        [1, 100, None],
        [2, 200, None],
        [3, 33, "hid"],
    ]


@pytest.mark.parametrize("table_format", ["iceberg"])
def test_mysqls_instant_drops_moves_and_renames_stop_where_they_cannot_be_carried_and_a_reload_carries_on(
    mysql: MySQL, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    schema = "my_instant"
    tables = ("dropb", "mid", "ren")
    fresh_schema(mysql, schema, *(f"{t} (id INT PRIMARY KEY, a INT, b VARCHAR(10))" for t in tables))
    mysql.execute(*(f"INSERT INTO {schema}.{t} VALUES (1, 1, 'x')" for t in tables))
    cfg = schema_config(mysql, tmp_path, spark_config, schema)
    run_initial_load(spark, cfg, progress=quiet)
    mysql.execute(
        f"ALTER TABLE {schema}.dropb DROP COLUMN b, ALGORITHM=INSTANT",
        f"INSERT INTO {schema}.dropb VALUES (2, 2)",
        f"ALTER TABLE {schema}.mid ADD COLUMN m INT AFTER a, ALGORITHM=INSTANT",
        f"INSERT INTO {schema}.mid VALUES (2, 2, 22, 'y')",
        f"ALTER TABLE {schema}.ren RENAME COLUMN a TO a2",
        f"INSERT INTO {schema}.ren VALUES (2, 2, 'y')",
    )
    # In log order: a drop and a rename at their statement, a column put between others at its
    # first row; each names the table, the position and the remedy, which lets the next run on.
    said = {
        "dropb": "ALTER TABLE drops column b, which the warehouse table cannot follow",
        "mid": "column b became m (renamed or moved columns cannot be carried)",
        "ren": "ALTER TABLE renames column a to a2, which the warehouse table cannot follow",
    }
    for table, why in said.items():
        with pytest.raises(ExtractError) as stopped:
            delta(spark, cfg)
        message = str(stopped.value)
        assert re.match(rf"mysql-bin\.\d+:\d+: {schema}\.{table}", message) and why in message, message
        assert message.endswith(f"re-load the table: loader initial-load --tables {schema}.{table}"), message
        run_initial_load(spark, cfg, [f"{schema}.{table}"], progress=quiet)
    delta(spark, cfg)  # the interval that stopped, now through
    mysql.execute(
        f"INSERT INTO {schema}.ren VALUES (3, 3, 'z')", f"UPDATE {schema}.mid SET m = 7 WHERE id = 1"
    )
    delta(spark, cfg)
    for c in compare_tables(spark, cfg, sample=10):
        assert c.equal and c.source_rows > 0, (c.table, c.not_loaded, c.differences)
    assert_equal_to_source(spark, cfg)


def test_mysqls_position_comes_with_its_gtid_set_with_or_without_backup_admin(
    mysql: MySQL, tmp_path: Path
) -> None:
    """performance_schema.log_status (BACKUP_ADMIN) reads them together; without it the status
    is read until it repeats. Both answer the position and the set of an idle server, and
    ``loader check`` warns of what is lost without it (and without RELOAD)."""
    mysql.as_root(
        f"CREATE USER IF NOT EXISTS 'no_backup'@'127.0.0.1' IDENTIFIED BY '{mysql.password}'; "
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'no_backup'@'127.0.0.1'"
    )
    at = mysql.execute("CREATE DATABASE IF NOT EXISTS my_status", "DROP DATABASE my_status")
    [(executed,)] = mysql.rows("SELECT @@gtid_executed")
    for user, reads_log_status in (("loader", True), ("no_backup", False)):
        conn = mysql.connect(user)
        try:
            with conn.cursor() as cur:
                allowed = cur.execute("SHOW GRANTS") and any("BACKUP_ADMIN" in g for (g,) in cur.fetchall())
            assert allowed == reads_log_status
            position, gtid_set = mysql_status(conn)
        finally:
            conn.close()
        assert position == at and GtidSet.parse(gtid_set) == GtidSet.parse(str(executed)), user
    toml = mysql.config_file(tmp_path, "my_status", "my_status.*")
    # The server verified against the CA MySQL made for itself: no warning about TLS either.
    verified = {
        "LOADER__SOURCE__TLS": "verify_ca",
        "LOADER__SOURCE__TLS_CA": str(mysql.datadir / "data" / "ca.pem"),
    }
    full = run_loader(mysql, toml, "check", env=verified)
    assert full.returncode == 0 and "WARNING" not in full.stdout, full.stdout + full.stderr
    lacking = run_loader(mysql, toml, "check", env={**verified, "LOADER__SOURCE__USER": "no_backup"})
    warnings = [line for line in lacking.stdout.splitlines() if line.startswith("WARNING")]
    assert lacking.returncode == 0 and [w.split(":")[1].strip() for w in warnings] == [
        "'no_backup'@'127.0.0.1' has no RELOAD",
        "'no_backup'@'127.0.0.1' has no BACKUP_ADMIN",
    ], lacking.stdout
    assert warnings[1].endswith("GRANT BACKUP_ADMIN ON *.* TO 'no_backup'@'127.0.0.1'")


@pytest.mark.parametrize("table_format", ["iceberg"])
@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_a_mysql_without_tls_takes_caching_sha2_passwords_on_every_connection(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, spark_config: Config, spark: Any, engine: str
) -> None:
    """caching_sha2_password (MySQL's default) over plain TCP asks for the password encrypted with
    the server's RSA key until the server has it cached: the loader's SQL connections, the
    replication stream and the checks log in so after each flush; the copy's connections (JDBC
    or the arrow engine's) follow the loader's own login, so the server has it cached by then."""
    with private_server(MySQL, tmp_path_factory, "mysql-plain", "--tls-version=") as plain:
        [(tls,)] = plain.rows("SELECT @@tls_version")
        assert tls == ""
        schema = "my_plain"
        fresh_schema(plain, schema, "t (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(8,2))")
        plain.execute(f"INSERT INTO {schema}.t VALUES (1, 'a', 1.5), (2, 'b', NULL)")
        plain.as_root("FLUSH PRIVILEGES")  # no password cached: every login is the full exchange
        cfg = _engine(schema_config(plain, tmp_path, spark_config, schema), engine)
        cfg = dataclasses.replace(cfg, source=dataclasses.replace(cfg.source, tls="disabled"))
        run_initial_load(spark, cfg, progress=quiet)
        plain.execute(
            f"UPDATE {schema}.t SET v = 'changed' WHERE id = 1", f"INSERT INTO {schema}.t VALUES (3, 'c', 3)"
        )
        plain.as_root("FLUSH PRIVILEGES")
        delta(spark, cfg)
        assert all(c.equal for c in compare_tables(spark, cfg, sample=10))
        assert_equal_to_source(spark, cfg)


@pytest.mark.parametrize("table_format", ["iceberg"])
@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_mysqls_zero_dates_and_tinyint_1_keep_their_values_by_either_engine(
    mysql: MySQL, tmp_path: Path, spark_config: Config, spark: Any, engine: str
) -> None:
    """As on MariaDB (tests/test_edges.py): dates Spark has no value for keep MySQL's text, and
    TINYINT(1) its numbers (Connector/J would read it as a boolean)."""
    schema = f"my_edges_{engine}"
    fresh_schema(
        mysql,
        schema,
        "dates (id INT PRIMARY KEY, d DATE, dt DATETIME(3), ts TIMESTAMP NULL, v INT)",
        "flags (id INT PRIMARY KEY, u TINYINT(1) UNSIGNED, s TINYINT(1), b BOOLEAN)",
    )
    invalid = "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'"
    mysql.execute(
        invalid,
        f"INSERT INTO {schema}.dates VALUES (1, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', 1), "
        "(2, '2024-00-00', '2024-01-00 10:00:00.5', NULL, 2), (3, '2024-02-30', '2024-02-30 23:59:59.999', "
        "'2024-01-01 00:00:00', 3), (4, '2024-05-06', '2024-05-06 07:08:09.010', '2024-05-06 07:08:09', 4)",
        f"INSERT INTO {schema}.flags VALUES (1, 255, -1, 2), (2, 0, 1, 0), (3, 1, -128, -1), (4, NULL, NULL, NULL)",
    )
    cfg = _engine(schema_config(mysql, tmp_path, spark_config, schema), engine)
    run_initial_load(spark, cfg, progress=quiet)
    copied = _invalid_dates(spark, cfg, schema, "dates")
    assert copied[1] == (
        None,
        None,
        None,
        {"d": "0000-00-00", "dt": "0000-00-00 00:00:00.000", "ts": "0000-00-00 00:00:00"},
    )
    assert copied[3][3] == {"d": "2024-02-30", "dt": "2024-02-30 23:59:59.999"} and copied[4][3] is None
    flags = spark.sql(f"SELECT id, u, s, b FROM {table_name(cfg, schema, 'flags')} ORDER BY id").collect()
    assert [tuple(r) for r in flags] == [
        (1, 255, -1, 2),
        (2, 0, 1, 0),
        (3, 1, -128, -1),
        (4, None, None, None),
    ]

    mysql.execute(
        invalid,
        f"INSERT INTO {schema}.dates VALUES (5, '2025-00-01', '0000-00-00 00:00:00', '0000-00-00 00:00:00', 5)",
        f"UPDATE {schema}.dates SET d = '2025-01-01' WHERE id = 1",
        f"UPDATE {schema}.dates SET dt = '2024-04-31 00:00:00' WHERE id = 4",
        f"UPDATE {schema}.flags SET u = 254, s = 127, b = 3 WHERE id = 2",
    )
    delta(spark, cfg)
    changed = _invalid_dates(spark, cfg, schema, "dates")
    assert str(changed[1][0]) == "2025-01-01" and changed[4][3] == {"dt": "2024-04-31 00:00:00.000"}
    assert changed[5][3] == {"d": "2025-00-01", "dt": "0000-00-00 00:00:00.000", "ts": "0000-00-00 00:00:00"}
    assert all(c.equal for c in compare_tables(spark, cfg, sample=10))
    assert_equal_to_source(spark, cfg)


@pytest.mark.parametrize("table_format", ["iceberg"])
def test_a_mysql_source_is_loaded_over_tls_verified_against_its_own_ca(
    mysql: MySQL, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    """MySQL makes its own CA and server certificate (``ca.pem`` in its data folder): with that CA
    the loader verifies the server (``verify_ca``), its SQL connections, the replication stream and
    Spark's copy (Connector/J's verify-ca) alike; the certificate names no host, so
    ``verify_identity`` stops, naming the source and what to set."""
    ca = str(mysql.datadir / "data" / "ca.pem")
    schema = "my_tls"
    fresh_schema(mysql, schema, "t (id INT PRIMARY KEY, v VARCHAR(20))")
    mysql.execute(f"INSERT INTO {schema}.t VALUES (1, 'a'), (2, 'b')")
    base = _engine(schema_config(mysql, tmp_path, spark_config, schema), "spark")

    def verified(mode: str) -> Config:
        return dataclasses.replace(base, source=dataclasses.replace(base.source, tls=mode, tls_ca=ca))

    creds = source.credentials(verified("verify_ca").source)
    conn = source.connect(creds)
    try:
        got = tls.got(conn, creds.tls)
    finally:
        conn.close()
    assert got.version == "TLSv1.3" and got.certificate_verified and not got.host_verified
    with pytest.raises(SourceError) as other_host:
        source.connect(source.credentials(verified("verify_identity").source))
    said = str(other_host.value)
    assert said.startswith(
        f"source {base.source.name} (127.0.0.1:{mysql.port}): the server's certificate is not made out to 127.0.0.1"
    ), said

    cfg = verified("verify_ca")
    run_initial_load(spark, cfg, progress=quiet)
    mysql.execute(
        f"UPDATE {schema}.t SET v = 'changed' WHERE id = 1", f"INSERT INTO {schema}.t VALUES (3, 'c')"
    )
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)


@pytest.mark.parametrize("table_format", ["iceberg"])
@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_a_mysql_that_requires_tls_and_a_client_certificate_is_loaded_with_the_configured_one(
    mysql: MySQL, tmp_path: Path, spark_config: Config, spark: Any, engine: str
) -> None:
    """MySQL with require_secure_transport and the loader's account created REQUIRE X509: every
    connection presents the client certificate MySQL made for itself (its data folder's
    client-cert.pem), Spark's copy through the keystore the job writes for Connector/J."""
    data = mysql.datadir / "data"
    schema = f"my_x509_{engine}"
    fresh_schema(mysql, schema, "t (id INT PRIMARY KEY, v VARCHAR(20))")
    mysql.execute(f"INSERT INTO {schema}.t VALUES (1, 'a'), (2, 'b')")
    base = _engine(schema_config(mysql, tmp_path, spark_config, schema), engine)
    cfg = dataclasses.replace(
        base,
        source=dataclasses.replace(
            base.source,
            tls="verify_ca",
            tls_ca=str(data / "ca.pem"),
            tls_cert=str(data / "client-cert.pem"),
            tls_key=str(data / "client-key.pem"),
        ),
    )
    mysql.as_root("ALTER USER 'loader'@'127.0.0.1' REQUIRE X509; SET GLOBAL require_secure_transport = ON")
    try:
        without = dataclasses.replace(cfg.source, tls_cert="", tls_key="")
        with pytest.raises(SourceError, match="REQUIRE X509 also needs"):
            source.connect(source.credentials(without))
        # An account without a requirement of its own meets the server's (MySQL's error 3159).
        plain = dataclasses.replace(
            cfg.source, user="app", tls="disabled", tls_ca="", tls_cert="", tls_key=""
        )
        with pytest.raises(
            SourceError, match=r"refuses connections without TLS \(\[source\] tls = 'disabled'\)"
        ):
            source.connect(source.credentials(plain))
        run_initial_load(spark, cfg, progress=quiet)
        mysql.as_root(
            f"UPDATE {schema}.t SET v = 'changed' WHERE id = 1; INSERT INTO {schema}.t VALUES (3, 'c')"
        )
        delta(spark, cfg)
    finally:
        mysql.as_root(
            "SET GLOBAL require_secure_transport = OFF; ALTER USER 'loader'@'127.0.0.1' REQUIRE NONE"
        )
    assert_equal_to_source(spark, cfg)
