"""The MySQL → Spark type map, and staged values cast to their warehouse types by real Spark."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from loader.staging import csvformat
from loader.warehouse import types
from tests.conftest import read_staged_by


@pytest.mark.parametrize(
    ("column_type", "short", "spark"),
    [
        ("tinyint(1)", "tinyint", "tinyint"),
        ("tinyint(3) unsigned", "tinyint unsigned", "smallint"),
        ("int(10) unsigned zerofill", "int unsigned", "bigint"),
        ("bigint(20) unsigned", "bigint unsigned", "decimal(20,0)"),
        ("decimal(12,2)", "decimal(12,2)", "decimal(12,2)"),
        ("decimal(65,30)", "decimal(65,30)", "string"),
        ("double", "double", "double"),
        ("float", "float", "float"),
        ("datetime(6)", "datetime(6)", "timestamp_ntz"),
        ("timestamp", "timestamp", "timestamp"),
        ("time(3)", "time(3)", "string"),
        ("year(4)", "year", "smallint"),
        ("bit(64)", "bit(64)", "decimal(20,0)"),
        ("bit(5)", "bit(5)", "bigint"),
        ("enum('a','b,c')", "enum", "string"),
        ("set('x','y')", "set", "string"),
        ("longtext", "text", "string"),
        ("mediumblob", "blob", "binary"),
        ("binary(16)", "binary(16)", "binary"),
        ("point", "geometry", "binary"),
        ("json", "json", "string"),
    ],
)
def test_column_types_map_to_warehouse_types(column_type: str, short: str, spark: str) -> None:
    assert types.normalize(column_type) == short
    assert types.spark_type(short) == spark


def test_unknown_types_are_refused() -> None:
    with pytest.raises(types.TypeMapError, match="'hyperloglog'"):
        types.spark_type("hyperloglog")


CASES: list[tuple[str, Any, Any]] = [
    ("tinyint", -128, -128),
    ("tinyint unsigned", 255, 255),
    ("int unsigned", 4294967295, 4294967295),
    ("bigint", -(2**63), -(2**63)),
    ("bigint unsigned", 2**64 - 1, Decimal(2**64 - 1)),
    ("decimal(38,10)", Decimal("-9999999999999999999999999999.9999999999"), None),
    ("decimal(65,30)", Decimal("1." + "0" * 29 + "1"), "1." + "0" * 29 + "1"),
    ("double", 1.7976931348623157e308, 1.7976931348623157e308),
    ("year", 2155, 2155),
    ("bit(64)", 2**64 - 1, Decimal(2**64 - 1)),
    ("date", "2024-02-29", dt.date(2024, 2, 29)),
    ("date", "0000-00-00", None),
    ("datetime(6)", "9999-12-31 23:59:59.999999", dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
    ("datetime", "0000-00-00 00:00:00", None),
    ("timestamp(6)", "2038-01-19 03:14:07.999999", "2038-01-19T03:14:07.999999Z"),
    ("time(6)", "-838:59:59.000000", "-838:59:59.000000"),
    ("varchar", "", ""),
    ("blob", b"\x00\xff", b"\x00\xff"),
    ("json", '{"a": [1]}', '{"a": [1]}'),
]


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("reader", ["spark", "here"])
def test_staged_values_cast_exactly(spark: Any, tmp_path: Path, reader: str) -> None:
    columns = [f"c{i}" for i in range(len(CASES))]
    path = tmp_path / "part-00000.csv"
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(csvformat.header_line(columns))
        f.write(csvformat.row_line("I", 1, 0, "2024-01-01 00:00:00.000000", tuple(v for _, v, _ in CASES)))
        f.write(csvformat.row_line("I", 1, 1, "2024-01-01 00:00:00.000000", (None,) * len(CASES)))
    read_staged_by(spark, reader, path, columns).createOrReplaceTempView("typed_in")
    select = ", ".join(
        f"{types.cast_sql(f'`{c}`', t)} AS `{c}`" for c, (t, _, _) in zip(columns, CASES, strict=True)
    )
    rows = spark.sql(f"SELECT {select} FROM typed_in ORDER BY CAST(_loader_row_id AS INT)").collect()
    values, nulls = rows
    for (mysql_type, written, expected), got in zip(CASES, values, strict=True):
        if mysql_type == "decimal(38,10)":
            expected = written
        if mysql_type.startswith("timestamp"):
            got = got.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if got else None
        if isinstance(got, bytearray):
            got = bytes(got)
        assert got == expected, mysql_type
    assert all(v is None for v in nulls)
    schema = {f.name: f.dataType.simpleString() for f in spark.table("typed_in").schema.fields}
    assert schema["c0"] == "string"  # staged: strings until cast


@pytest.mark.parametrize(
    ("old", "new", "widens"),
    [
        ("int", "bigint", True),
        ("float", "double", True),
        ("decimal(8,2)", "decimal(12,2)", True),
        ("string", "string", True),
        ("decimal(8,2)", "decimal(12,4)", False),  # Iceberg keeps a decimal's scale
        ("int", "decimal(12,0)", False),
        ("bigint", "int", False),
        ("date", "timestamp_ntz", False),
    ],
)
def test_iceberg_widens_a_column_only_as_its_type_promotions_allow(old: str, new: str, widens: bool) -> None:
    assert types.iceberg_widens(old, new) is widens


@pytest.mark.parametrize(
    ("old", "new", "hive", "iceberg"),
    [
        ("int", "bigint", True, True),
        ("tinyint", "int", True, True),  # Iceberg stores both as int
        ("smallint unsigned", "int unsigned", True, True),
        ("decimal(10,2)", "decimal(14,2)", True, True),
        ("decimal(10,2)", "decimal(14,4)", True, False),  # Parquet's reader scales, Iceberg keeps a scale
        ("int unsigned", "bigint unsigned", True, False),  # bigint to decimal(20,0)
        ("float", "double", True, True),
        ("datetime(6)", "varchar(40)", False, False),  # MySQL rewrites the values
    ],
)
def test_a_type_change_is_carried_when_the_tables_format_can_follow_it(
    old: str, new: str, hive: bool, iceberg: bool
) -> None:
    assert (types.type_change_problem(old, new, "hive") is None) is hive
    problem = types.type_change_problem(old, new, "iceberg")
    assert (problem is None) is iceberg
    if problem and hive:
        assert "which the warehouse cannot follow in place" in problem
