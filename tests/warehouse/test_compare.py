"""`loader compare` and `loader checksum` compare values, not the texts each side writes them in:
equal tables are equal whatever the type, the key's collation or the row order, and a value
changed in the warehouse is found and named (its key and column), on the private MariaDB and a
local Spark."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest

from loader.core.config import Config
from loader.warehouse.checks import RowDifference, TableComparison, comparison_text
from loader.warehouse.checksum import compare_sums, source_sums
from loader.warehouse.compare import comparable, compare_tables
from loader.warehouse.tables import table_name
from tests.conftest import Loaded, MariaDB, assert_equal_to_source, delta, quiet


@pytest.mark.parametrize(
    ("mysql_type", "source", "warehouse"),
    [
        ("bit(64)", b"\x00\x00\x00\x00\x00\x00\x00\x01", decimal.Decimal(1)),
        ("bit(13)", b"\x1f\xff", 8191),
        ("bigint unsigned", decimal.Decimal(18446744073709551615), decimal.Decimal("18446744073709551615")),
        ("float", 3.3999999521443642e38, 3.3999999521443642e38),
        ("time(6)", -dt.timedelta(hours=838, minutes=59, seconds=59), "-838:59:59.000000"),
        ("time", dt.timedelta(hours=1), "01:00:00"),
        ("time(3)", -dt.timedelta(milliseconds=1), "-00:00:00.001"),
        ("decimal(65,30)", decimal.Decimal("1E-30"), "0.000000000000000000000000000001"),
        ("decimal(12,2)", decimal.Decimal("12.5"), decimal.Decimal("12.50")),
        ("datetime(6)", dt.datetime(2024, 1, 1, 10), "2024-01-01 10:00:00"),
        ("datetime(3)", "0000-00-00 00:00:00.000", "0000-00-00 00:00:00.000"),
        ("timestamp(6)", dt.datetime(1970, 1, 1, 0, 0, 1, 1), "1970-01-01 00:00:01.000001"),
        ("date", "0000-01-01", "0000-01-01"),
        ("date", dt.date(2024, 2, 29), "2024-02-29"),
        ("varbinary", b"\x00\xff", bytearray(b"\x00\xff")),
        ("year", 2155, 2155),
    ],
)
def test_a_value_is_equal_to_itself_in_either_sides_notation(
    mysql_type: str, source: Any, warehouse: Any
) -> None:
    assert comparable(source, mysql_type) == comparable(warehouse, mysql_type)


@pytest.mark.parametrize(
    ("mysql_type", "source", "warehouse"),
    [
        ("decimal(65,30)", decimal.Decimal("1.5"), "1.5000000000000000000000000000001"),  # past the scale
        ("time(6)", dt.timedelta(seconds=1), "-00:00:01.000000"),
        ("time(2)", dt.timedelta(microseconds=500000), "00:00:00.500001"),
        ("datetime(6)", dt.datetime(2024, 1, 1, 10), "2024-01-01 10:00:00.000001"),
        ("float", -3.4028234663852886e38, -3.402820018375656e38),
        ("bit(64)", b"\xff" * 8, decimal.Decimal(18446744073709551614)),
        ("varchar", "a", "a "),
        ("blob", b"x", bytearray(b"x\x00")),
    ],
)
def test_values_that_differ_stay_different(mysql_type: str, source: Any, warehouse: Any) -> None:
    assert comparable(source, mysql_type) != comparable(warehouse, mysql_type)


def test_what_compare_prints_names_the_differing_keys_and_columns_and_cuts_long_values() -> None:
    long_text = "é" * 40_000
    table = TableComparison(
        table="s.t",
        warehouse_table="wh.s__t",
        source_rows=3,
        warehouse_rows=2,
        equal=False,
        columns=["id", "body", "n"],
        source_sample=[[1, long_text, 1]],
        warehouse_sample=[[1, long_text + "x", 1]],
        key=["id"],
        differing_rows=3,
        differences=[
            RowDifference([1], ["body"], [long_text], [long_text + "x"]),
            RowDifference([2], ["id", "body", "n"], [2, "two", None], None),
        ],
    )
    equal = TableComparison("s.u", "wh.s__u", 1, 1, True, ["k", "v"], [["a", "x" * 100]], [["a", "x" * 100]])
    lines = comparison_text([table, equal]).splitlines()
    assert lines[0] == "s.t → wh.s__t: source 3 rows, warehouse 2 rows, DIFFERENT: 3 rows differ"
    assert lines[1] == (
        f"  key id=1: body: source {'é' * 30!r}… (40,000 characters), warehouse {'é' * 30!r}… (40,001 characters)"
    )
    assert lines[2] == "  key id=2: only in the source: id=2, body='two', n=None"
    assert lines[3] == "  … and 1 more row"
    assert lines[4] == "s.u → wh.s__u: source 1 rows, warehouse 1 rows, equal"
    assert lines[5] == f"  source    k='a', v={'x' * 30!r}… (100 characters)"
    assert lines[-1].startswith("compare: 1 of 2 tables differ from the source: s.t. Re-load them with")
    assert max(len(line) for line in lines) < 300


# Every type, each at its edges: BIT of several widths, FLOAT and DOUBLE extremes, TIME and
# DATETIME of several precisions, DECIMAL(65,30), zero and invalid dates, binary, JSON, ENUM/SET,
# unicode in several character sets.
TYPES = (
    "t (id INT PRIMARY KEY, b1 BIT(1), b7 BIT(7), b8 BIT(8), b13 BIT(13), b63 BIT(63), b64 BIT(64), "
    "f FLOAT, db DOUBLE, tm0 TIME, tm3 TIME(3), tm6 TIME(6), da DATE, dt0 DATETIME, dt1 DATETIME(1), "
    "dt6 DATETIME(6), ts0 TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL, d65 DECIMAL(65,30), d38 DECIMAL(38,10), "
    "d0 DECIMAL(10,0), bu BIGINT UNSIGNED, yr YEAR, bi BINARY(4), vb VARBINARY(8), bl BLOB, js JSON, "
    "en ENUM('x','y z'), st SET('p','q'), tx TEXT, u VARCHAR(20), lt VARCHAR(20) CHARACTER SET latin1, "
    "ge GEOMETRY)"
)
COLUMNS = [c.split()[0] for c in TYPES.split("(", 1)[1].split(", ")]
EDGES = [
    "(1, 1, 127, 255, 8191, 9223372036854775807, 18446744073709551615, 3.4e38, 1.7976931348623157e308,"
    " '-838:59:59', '838:59:59.999', '-838:59:59.000000', '9999-12-31', '9999-12-31 23:59:59',"
    " '1000-01-01 00:00:00.1', '2024-02-29 23:59:59.999999', '2038-01-19 03:14:07',"
    " '1970-01-01 00:00:01.000001', 0.000000000000000000000000000001,"
    " 9999999999999999999999999999.9999999999, 0, 18446744073709551615, 2155, x'00000000', x'',"
    " REPEAT('long ', 4000), '{\"f\": 0.0000001, \"g\": 1e15}', 'y z', 'p,q', REPEAT('é😀', 3000),"
    " 'Привет 😀', 'café', ST_GeomFromText('POINT(1 2)'))",
    "(2, 0, 0, 0, 0, 0, 0, 1e-45, 5e-324, '00:00:00', '-00:00:00.001', '00:00:00.5', '0000-00-00',"
    " '0000-00-00 00:00:00', '2024-00-15 00:00:00.0', '2024-02-30 12:00:00.000001', '0000-00-00 00:00:00',"
    " NULL, -99999999999999999999999999999999999.999999999999999999999999999999, -0.0000000001,"
    " -9999999999, 0, 0, x'ff', x'00', '', '[]', 'x', '', '', '', '', NULL)",
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(4, 1, 1, 1, 1, 1, 1, -3.4028235e38, -0.0, '12:00:00', '00:00:00.000', '00:00:00.000001', '0000-01-01',"
    " '0000-01-01 00:00:00', '2024-12-00 10:00:00.9', '1000-01-01 00:00:00.000000', '1970-01-01 00:00:01',"
    " '2038-01-19 03:14:07.999999', 1.5, 1, 1, 1, 1901, 'ab', 'ab', x'00ff', '{}', 'x', 'q',"
    " 'a\\ttab\\nline', '注文', 'ÿ', ST_GeomFromText('LINESTRING(0 0, 1 1)'))",
]


def _row(k: int) -> str:
    """An ordinary row whose values the warehouse changes below (``TAMPER``) never meet."""
    return (
        f"({k}, 0, {k}, {k}, {k}, {k}, {k}, {k + 0.5}, {k / 3}, '{k}:00:00', '{k}:00:00.500',"
        f" '{k}:00:00.000001', '2024-01-{k % 28 + 1:02d}', '2024-01-01 10:00:{k % 60:02d}',"
        f" '2024-01-01 10:00:00.{k % 9}', '2024-01-01 10:00:00.{k:06d}', '2024-01-01 10:00:{k % 60:02d}',"
        f" '2024-01-01 10:00:00.{k:06d}', {k}.5, {k}.25, {k}, {18446744073709551615 - k}, {1901 + k},"
        f" x'{k:08x}', x'{k:04x}', REPEAT('b', {k}), '{{\"k\": {k}}}', 'x', 'p', 'text {k}', 'ü {k}',"
        f" 'é {k}', ST_GeomFromText('POINT({k} {k})'))"
    )


# A change of each column (in the warehouse's Spark SQL), each in a row of its own.
TAMPER = {
    "b1": "1 - b1",
    "b7": "b7 + 1",
    "b8": "b8 + 1",
    "b13": "b13 + 1",
    "b63": "b63 + 1",
    "b64": "b64 + 1",
    "f": "CAST(f + 1 AS FLOAT)",
    "db": "db + 1e-10",
    "tm0": "CONCAT('-', tm0)",
    "tm3": "CONCAT('-', tm3)",
    "tm6": "CONCAT('-', tm6)",
    "da": "date_add(da, 1)",
    "dt0": "dt0 + make_dt_interval(0, 0, 0, 1)",
    "dt1": "dt1 + make_dt_interval(0, 0, 0, 0.1)",
    "dt6": "dt6 + make_dt_interval(0, 0, 0, 0.000001)",
    "ts0": "ts0 + make_dt_interval(0, 0, 0, 1)",
    "ts6": "ts6 + make_dt_interval(0, 0, 0, 0.000001)",
    "d65": "CONCAT(d65, '1')",  # one digit past the scale: the value differs, its text is longer
    "d38": "CAST(d38 - 1 AS DECIMAL(38,10))",
    "d0": "d0 + 1",
    "bu": "bu - 1",
    "yr": "yr + 1",
    "bi": "concat(bi, X'00')",
    "vb": "concat(vb, X'00')",
    "bl": "concat(bl, X'00')",
    "js": "CONCAT(js, ' ')",
    "en": "'y z'",
    "st": "'p,q'",
    "tx": "CONCAT(tx, ' ')",
    "u": "CONCAT(u, ' ')",
    "lt": "CONCAT(lt, ' ')",
    "ge": "concat(ge, X'00')",
}

# Keys of several collations and types: each side orders them its own way.
WORDS = ["a", "B", "é", "Z", "ß", "_x", "aa", "Ab", "ö", "~", "0", "a b"]
KEYED = [
    "w_ci (w VARCHAR(10) COLLATE utf8mb4_general_ci PRIMARY KEY, n INT)",
    "w_uca (w VARCHAR(10) COLLATE utf8mb4_unicode_ci, n INT, PRIMARY KEY (w, n))",
    "w_latin (w VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_swedish_ci PRIMARY KEY, n INT)",
    "w_bin (w VARBINARY(10) PRIMARY KEY, n INT)",
    "w_dec (w DECIMAL(65,30) PRIMARY KEY, n INT)",
    "w_time (w DATETIME(6) PRIMARY KEY, n INT)",
]


def _keyed_rows() -> list[str]:
    words = ", ".join(f"('{w}', {i})" for i, w in enumerate(WORDS))
    return [
        f"INSERT INTO cmp.w_ci VALUES {words}",
        f"INSERT INTO cmp.w_uca VALUES {words}, ('a', 100), ('B', -1)",
        f"INSERT INTO cmp.w_latin VALUES {words}",
        "INSERT INTO cmp.w_bin VALUES (x'00', 0), (x'ff', 1), ('a', 2), ('B', 3), (x'0000', 4), ('', 5)",
        "INSERT INTO cmp.w_dec VALUES (-1, 0), (0.000000000000000000000000000001, 1), (10, 2), (9, 3),"
        " (-0.5, 4)",
        "INSERT INTO cmp.w_time VALUES ('2024-01-01 00:00:00', 0), ('2023-12-31 23:59:59.999999', 1),"
        " ('2024-01-01 00:00:00.000001', 2)",
    ]


def _differences(compared: Any) -> set[tuple[tuple[Any, ...], str]]:
    return {(tuple(d.key), column) for d in compared.differences for column in d.columns}


@pytest.mark.integration
@pytest.mark.slow
def test_equal_tables_of_every_type_and_collation_are_equal_and_each_changed_value_is_named(
    mariadb: MariaDB, spark: Any, loaded: Loaded
) -> None:
    tampered = {column: 1000 + i for i, column in enumerate(TAMPER)}
    cfg: Config = loaded(
        "cmp",
        [TYPES, *KEYED],
        [
            "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
            f"INSERT INTO cmp.t VALUES {', '.join(EDGES)}",
            f"INSERT INTO cmp.t VALUES {', '.join(_row(k) for k in tampered.values())}",
            *_keyed_rows(),
        ],
    )
    assert sorted(TAMPER) == sorted(COLUMNS[1:])
    # The same values again through the binlog (the merge's path), and changes.
    mariadb.execute(
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
        *(
            f"INSERT INTO cmp.t SELECT {100 + i}, {', '.join(COLUMNS[1:])} FROM cmp.t WHERE id = {i}"
            for i in range(1, 5)
        ),
        "UPDATE cmp.t SET f = -f, db = db / 7, tm6 = '-00:00:00.5', dt6 = '0000-00-00 00:00:00' WHERE id = 1",
        "UPDATE cmp.w_ci SET n = n + 10 WHERE w IN ('é', 'ß')",
        "INSERT INTO cmp.w_uca VALUES ('ö', 7), ('é', -3)",
        "DELETE FROM cmp.w_bin WHERE w = x'ff'",
    )
    delta(spark, cfg)
    compared = {c.table: c for c in compare_tables(spark, cfg, sample=100)}
    assert sorted(compared) == sorted(f"cmp.{t.split()[0]}" for t in [TYPES, *KEYED])
    for table, c in compared.items():
        assert c.equal and c.differences == [] and c.differing_rows == 0, (table, c.differences)
        assert c.source_rows == c.warehouse_rows > 0, table
    assert_equal_to_source(spark, cfg)

    # One value changed in the warehouse per column, each in a row of its own; a row lost, one
    # changed, one added in the keyed tables.
    name = table_name(cfg, "cmp", "t")
    sets = ", ".join(f"{c} = CASE WHEN id = {k} THEN {TAMPER[c]} ELSE {c} END" for c, k in tampered.items())
    spark.sql(f"UPDATE {name} SET {sets} WHERE id >= 1000")
    spark.sql(f"DELETE FROM {table_name(cfg, 'cmp', 'w_uca')} WHERE w = 'ß'")
    spark.sql(f"UPDATE {table_name(cfg, 'cmp', 'w_ci')} SET n = -n WHERE w = 'Z'")
    spark.sql(f"UPDATE {table_name(cfg, 'cmp', 'w_dec')} SET n = 99 WHERE n = 1")
    compared = {c.table: c for c in compare_tables(spark, cfg, sample=100)}
    changed = compared["cmp.t"]
    found = _differences(changed)
    missed = [c for c, k in tampered.items() if ((k,), c) not in found]
    assert missed == [], f"changes to {missed} went unnoticed"
    assert not changed.equal and changed.differing_rows == len(TAMPER)
    assert found == {((k,), c) for c, k in tampered.items()}  # and nothing else
    assert _differences(compared["cmp.w_ci"]) == {(("Z",), "n")}
    assert _differences(compared["cmp.w_dec"]) == {(("0.000000000000000000000000000001",), "n")}
    (lost,) = compared["cmp.w_uca"].differences
    assert (lost.key, lost.source is not None, lost.warehouse) == (["ß", 4], True, None)
    for table in ("cmp.w_latin", "cmp.w_bin", "cmp.w_time"):
        assert compared[table].equal, compared[table].differences
    # The checksum finds each changed row as its key range.
    checked = {
        c.table: c
        for c in compare_sums(spark, cfg, source_sums(cfg.source, cfg.tables, range_rows=1, progress=quiet))
    }
    differing = {int(r.up_to[0]) for r in checked["cmp.t"].differing if r.up_to}
    assert differing == set(tampered.values())
    assert not checked["cmp.w_ci"].equal and not checked["cmp.w_uca"].equal
    assert checked["cmp.w_latin"].equal and checked["cmp.w_bin"].equal
