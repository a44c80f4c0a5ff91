"""The checksum per key range: the source's SQL and the warehouse's Spark SQL agree on every type,
and a difference is reported as the key range it is in, on the private MariaDB and a local Spark."""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import pytest

from loader.core import doubles
from loader.core.config import Config
from loader.warehouse import checksum_sql
from loader.warehouse.checksum import compare_sums, source_dialect, source_sums
from loader.warehouse.tables import table_name
from tests.conftest import TABLE_FORMATS, Loaded, MariaDB, assert_equal_to_source, delta, fresh_schema, quiet

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _doubles() -> list[float]:
    rng = random.Random(7)
    edges = [0.1, 1e20, 1e-7, 1e15, 1e16, 1e14, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308]
    edges += [123456789012345.67, 1.2345678901234567e-15, 0.30000000000000004, 2e23, 1 / 3, 100000.0]
    drawn = [rng.uniform(-1, 1) * 10 ** rng.randint(-320, 300) for _ in range(3000)]
    drawn += [struct.unpack("<d", rng.randbytes(8))[0] for _ in range(1000)]
    return [v for v in edges + [-v for v in edges] + drawn if v == v and abs(v) != float("inf")]


@pytest.mark.parametrize("flavour", ["mariadb", "mysql"])
def test_the_text_of_a_double_is_the_servers_text(flavour: str, request: pytest.FixtureRequest) -> None:
    """The warehouse side's text of every double is the server's, in the dialect the source side
    chooses for the server: MariaDB's CAST text, MySQL's JSON text (its CAST text drops digits)."""
    server: MariaDB = request.getfixturevalue(flavour)
    values = _doubles()
    server.execute(
        "DROP DATABASE IF EXISTS ck_double",
        "CREATE DATABASE ck_double",
        "CREATE TABLE ck_double.t (id INT PRIMARY KEY, d DOUBLE, f FLOAT)",
    )
    conn = server.connect()
    try:
        dialect = source_dialect(conn)
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO ck_double.t VALUES (%s, %s, %s)",
                [(i, v, v if abs(v) < 3e38 else None) for i, v in enumerate(values)],
            )
            conn.commit()
            cur.execute(
                f"SELECT id, f, {checksum_sql.mysql_text('d', 'double', dialect)}, "
                f"{checksum_sql.mysql_text('f', 'float', dialect)} FROM ck_double.t ORDER BY id"
            )
            rows = cur.fetchall()
    finally:
        conn.close()
    text = {"server": doubles.server_text, "json": doubles.mysql_json_text}[dialect.doubles]
    assert dialect == (
        checksum_sql.Dialect() if flavour == "mariadb" else checksum_sql.Dialect("sha256", "json")
    )
    assert len(rows) == len(values)
    for (i, f, d_text, f_text), value in zip(rows, values, strict=True):
        assert d_text == text(value), (i, value)
        if f is not None:  # the FLOAT column holds the nearest single: its exact value as a double
            single = struct.unpack("<f", struct.pack("<f", value))[0]
            assert f_text == text(single), (i, value, single)


EVERY_TYPE = (
    "t (name VARCHAR(20) COLLATE utf8mb4_general_ci, n INT, "
    "ti TINYINT, su SMALLINT UNSIGNED, mi MEDIUMINT, bu BIGINT UNSIGNED, "
    "de DECIMAL(12,2), dw DECIMAL(50,10), fl FLOAT, db DOUBLE, b5 BIT(5), b64 BIT(64), yr YEAR, "
    "da DATE, dt DATETIME(3), ts TIMESTAMP(6) NULL, tm TIME(2), ch CHAR(3), tx TEXT, "
    "en ENUM('x','y'), st SET('p','q'), js JSON, bi BINARY(4), vb VARBINARY(8), bl BLOB, "
    "ge GEOMETRY, PRIMARY KEY (name, n))"
)


def _row(name: str, n: int) -> str:
    k = n * 7919 % 1000
    return (
        f"('{name}', {n}, {k % 256 - 128}, {k * 65}, {-k * 8000}, {18446744073709551615 - k}, "
        f"{k}.{k % 100:02d}, 1234567890123456789012345678901234567890.{k:010d}, {k / 7}, {-k / 3e-300}, "
        f"b'{k % 32:05b}', {k}, {1901 + k % 250}, '2024-{1 + k % 12:02d}-{1 + k % 28:02d}', "
        f"'1999-12-31 23:59:{k % 60:02d}.{k:03d}', '2030-01-19 03:14:{k % 60:02d}.{k:06d}', "
        f"'-{k % 838}:{k % 60:02d}:01.5', 'a{k % 10}', REPEAT('é{name}', {1 + k % 5}), '{'xy'[k % 2]}', "
        f"'{'p,q' if k % 3 else 'q'}', '{{\"k\": {k}}}', X'{k:04x}', X'{k:06x}00', X'00ff{k:04x}', "
        f"ST_GeomFromText('POINT({k} -{k})'))"
    )


# One change per column that a lossy path would miss: a last digit, an ulp, a microsecond, a
# trailing space or zero byte.
TAMPER = {
    "ti": "IF(ti > 0, ti - 1, ti + 1)",
    "su": "IF(su > 0, su - 1, su + 1)",
    "mi": "IF(mi > 0, mi - 1, mi + 1)",
    "bu": "bu - 1",
    "de": "IF(de > 0, de - 0.01, 1)",
    "dw": "dw + 0.0000000001",
    "fl": "COALESCE(fl + 0.001, 1)",
    "db": "COALESCE(db * 1.0000000000000004, 1)",
    "b5": "b5 ^ 1",
    "b64": "b64 ^ 1",
    "yr": "IF(yr < 2155, yr + 1, yr - 1)",
    "da": "COALESCE(da + INTERVAL 1 DAY, '2000-01-01')",
    "dt": "COALESCE(dt + INTERVAL 1000 MICROSECOND, '2000-01-01')",
    "ts": "ts + INTERVAL 1 MICROSECOND",
    "tm": "ADDTIME(tm, '00:00:00.01')",
    "ch": "CONCAT(ch, 'x')",
    "tx": "CONCAT(COALESCE(tx, ''), ' ')",
    "en": "IF(en = 'x', 'y', 'x')",
    "st": "IF(st = 'q', 'p', 'q')",
    "js": "'{\"k\": -1}'",
    "bi": "X'ffffffff'",
    "vb": "CONCAT(vb, X'00')",
    "bl": "CONCAT(COALESCE(bl, ''), X'00')",
    "ge": "ST_GeomFromText('POINT(1 1)')",
}


@pytest.mark.parametrize("table_format", TABLE_FORMATS)
def test_every_type_checks_equal_and_each_changed_value_is_reported_as_its_key_range(
    mariadb: MariaDB, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    names = ["a", "B", "c", "é", "Z", "ß", "aa", "Ab"]
    keys = [(name, n) for name in names for n in (1, 2, 3)]
    rows = [_row(name, n) for name, n in keys]
    cfg = loaded("ck_types", [EVERY_TYPE], [f"INSERT INTO ck_types.t VALUES {', '.join(rows)}"])
    mariadb.execute(
        f"INSERT INTO ck_types.t VALUES {_row('nulls', 1)}",
        "UPDATE ck_types.t SET ti = NULL, de = NULL, fl = NULL, db = NULL, da = NULL, tx = NULL, "
        "bl = NULL, js = NULL, ge = NULL WHERE name = 'nulls'",
        "UPDATE ck_types.t SET db = db * 3, tx = CONCAT(tx, '😀'), dt = NULL WHERE n = 2",
        "DELETE FROM ck_types.t WHERE name = 'c' AND n = 3",
        "INSERT INTO ck_types.t VALUES " + _row("c", 3),
    )
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)  # every value of every type: both sides the same text

    sums = source_sums(cfg.source, cfg.tables, range_rows=3, progress=quiet)
    (table,) = sums.tables
    assert table.rows == 25 and len(table.bounds) >= 8
    # The range bounds are in byte order of the text ('B' < 'Z' < 'a' < 'é'), on both sides.
    firsts = [bound[0] for bound in table.shown_bounds]
    assert firsts == sorted(firsts, key=lambda s: s.encode())

    # Change the source behind the binlog's back: one column in each row, and the 'nulls' row gone.
    assert len(TAMPER) == len(keys)
    mariadb.execute(
        "SET sql_log_bin = 0",
        *(
            f"UPDATE ck_types.t SET {column} = {change} WHERE name = '{name}' AND n = {n}"
            for (column, change), (name, n) in zip(TAMPER.items(), keys, strict=True)
        ),
        "DELETE FROM ck_types.t WHERE name = 'nulls'",
        "SET sql_log_bin = 1",
    )
    (checked,) = compare_sums(spark, cfg, source_sums(cfg.source, cfg.tables, range_rows=1, progress=quiet))
    assert not checked.equal and checked.problem is None
    assert (checked.source_rows, checked.warehouse_rows, checked.key) == (24, 25, ["name", "n"])
    differing = {(r.up_to[0], int(r.up_to[1])): r for r in checked.differing if r.up_to}
    missed = [column for column, key in zip(TAMPER, keys, strict=True) if key not in differing]
    assert missed == [], f"changes to {missed} went unnoticed"
    # One source row per range: each changed row is a range of its own; the lost row shows as one
    # more row in the warehouse than in the source in the range that holds its key.
    assert len(checked.differing) == len(keys)
    assert sum(r.warehouse_rows - r.source_rows for r in checked.differing) == 1
    (extra,) = [r for r in checked.differing if r.warehouse_rows > r.source_rows]
    assert extra.after is None or extra.after[0].encode() < b"nulls"
    assert extra.up_to is None or extra.up_to[0].encode() > b"nulls"


@pytest.mark.parametrize("table_format", TABLE_FORMATS)
def test_what_the_warehouse_lacks_is_a_difference_not_a_match(
    mariadb: MariaDB, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    cfg = loaded(
        "ck_lost",
        ["t (id INT PRIMARY KEY, d DATE, v VARCHAR(10))", "u (id INT PRIMARY KEY)"],
        ["INSERT INTO ck_lost.t VALUES (1, '2024-01-01', 'x')", "INSERT INTO ck_lost.u VALUES (1)"],
    )
    # Rows the binlog never carried (the warehouse cannot know): the checksum finds their ranges.
    mariadb.execute("INSERT INTO ck_lost.t VALUES (2, '0000-00-00', 'y'), (3, '2024-02-01', 'z')")
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    mariadb.execute(
        "SET sql_log_bin = 0",
        "UPDATE ck_lost.t SET d = '2024-02-00' WHERE id = 2",
        "UPDATE ck_lost.t SET v = 'zz' WHERE id = 3",
        "SET sql_log_bin = 1",
    )
    checked = {
        c.table: c
        for c in compare_sums(spark, cfg, source_sums(cfg.source, cfg.tables, range_rows=1, progress=quiet))
    }
    assert checked["ck_lost.u"].equal
    lost = checked["ck_lost.t"]
    assert not lost.equal
    assert [(r.after, r.up_to, r.source_rows, r.warehouse_rows) for r in lost.differing] == [
        (["1"], ["2"], 1, 1),
        (["2"], ["3"], 1, 1),
    ]
    # A table the warehouse does not have, and a column it does not have, are named.
    spark.sql(f"DROP TABLE {table_name(cfg, 'ck_lost', 'u')}")
    mariadb.execute("SET sql_log_bin = 0", "ALTER TABLE ck_lost.t ADD COLUMN w INT", "SET sql_log_bin = 1")
    checked = {
        c.table: c for c in compare_sums(spark, cfg, source_sums(cfg.source, cfg.tables, progress=quiet))
    }
    assert checked["ck_lost.u"].problem == "the warehouse has no such table"
    assert checked["ck_lost.t"].problem == "the warehouse table has no column w"


def test_a_checkpoint_past_the_sources_snapshot_stops_the_check_before_any_spark_job(
    mariadb: MariaDB, tmp_path: Path
) -> None:
    from loader.app import steps
    from loader.core.errors import TransientError
    from loader.core.positions import Position
    from loader.state.ledger import Ledger
    from loader.state.records import Checkpoint

    fresh_schema(mariadb, "ck_past", "t (id INT PRIMARY KEY)")
    mariadb.execute("INSERT INTO ck_past.t VALUES (1)")
    cfg = mariadb.config(tmp_path, tables={"include": '["ck_past.*"]'})
    now = mariadb.execute()
    # Another run read further than the source's snapshot meanwhile (as a later one would).
    ahead = Position(now.file, now.pos + 1000)
    Ledger.of(cfg).set_checkpoint(Checkpoint(ahead, "test"))

    def launch(job: Any) -> str | None:
        raise AssertionError(f"no Spark job when the warehouse cannot be at the snapshot: {job}")

    with pytest.raises(TransientError) as stopped:
        steps.checksum(cfg, launch, progress=quiet)
    assert f"but the checkpoint is at {ahead}: another run moved it meanwhile; run the checksum again" in str(
        stopped.value
    )
