"""The copy without Spark (``[load] engine = "arrow"``) gives the tables Spark's copy gives: the
same Iceberg schema, partition spec and properties, and the same value in every column of every
row, for every type of the type map; Spark then merges changes into them as into its own."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from loader.core.config import Config
from loader.core.errors import LoadError
from loader.core.naming import INVALID_DATES_COLUMN as INVALID
from loader.state.ledger import Ledger
from loader.warehouse.compare import compare_tables
from loader.warehouse.initial_load import run_initial_load
from loader.warehouse.tables import quote_identifier, table_name
from tests.conftest import MariaDB, assert_equal_to_source, delta, iceberg_table
from tests.warehouse.test_initial_load import ALL_TYPES, ALL_TYPES_ROWS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Beside the type map's table: the values at the edges of what Spark and Arrow read alike, and
# a key that is not an integer (its table is partitioned by hash buckets, not key ranges).
EDGES = """CREATE TABLE ac.edges (
    id INT PRIMARY KEY, si SMALLINT, su SMALLINT UNSIGNED, mi MEDIUMINT, mu MEDIUMINT UNSIGNED,
    iu INT UNSIGNED, f FLOAT, db DOUBLE, d DATE, dtm DATETIME, ts TIMESTAMP(6) NULL,
    dp DECIMAL(38,10), y YEAR, vc VARCHAR(10)
)"""
EDGES_ROWS = [
    "(1, -32768, 65535, -8388608, 16777215, 4294967295, 3.1415927, 0.30000000000000004, '2024-02-30',"
    " '2023-02-29 12:00:00', '2038-01-19 03:14:07.999999',"
    " -9999999999999999999999999999.9999999999, 1901, 'NULL')",
    "(2, 0, 0, 0, 0, 0, 1e-45, 5e-324, '0000-01-01', '2024-00-15 00:00:00', '1970-01-01 00:00:01.000001',"
    " 0.0000000001, 0, '')",
    "(3, 1, 1, 1, 1, 1, -3.4028235e38, -1.7976931348623157e308, '9999-12-31', '0000-01-01 00:00:00',"
    " '0000-00-00 00:00:00', 1, 2155, '\\\\N')",
    "(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '2024-12-00', '1000-01-01 00:00:00', NULL, NULL, NULL, NULL)",
]
WORDS = "CREATE TABLE ac.words (w VARCHAR(20) PRIMARY KEY, n INT, d DATE)"
WORDS_ROWS = ["('a', 1, '2024-01-01')", "('b', NULL, '0000-00-00')", "('c', 3, NULL)"]
# A key of two columns (ranges cut at key values; a column named as the copy names the key's
# columns in its query), and a table with no rows.
PAIRS = "CREATE TABLE ac.pairs (a VARCHAR(5), b INT, k0 DOUBLE, PRIMARY KEY (a, b))"
PAIRS_ROWS = [f"('k{i % 3}', {i}, {i / 7})" for i in range(12)]
EMPTY = "CREATE TABLE ac.empty (id BIGINT PRIMARY KEY, v VARCHAR(5))"


def _config(mariadb: MariaDB, tmp_path: Path, spark_config: Config, database: str, engine: str) -> Config:
    base = mariadb.config(tmp_path / database, tables={"include": '["ac.*"]'})
    # Each mode's own columns: a soft_delete table's, a history table's.
    modes = {"ac.edges": "soft_delete", "ac.words": "history"}
    return dataclasses.replace(
        base,
        tables=dataclasses.replace(base.tables, modes=modes),
        warehouse=dataclasses.replace(spark_config.warehouse, database=database, partition_rows=2, buckets=4),
        load=dataclasses.replace(base.load, engine=engine, parallelism=2),
    )


def _iceberg_layout(cfg: Config, table: str) -> dict[str, Any]:
    """What a reader of the table's metadata sees of its layout: schema, spec, sort order,
    properties, location (the table's own name aside)."""
    loaded = iceberg_table(cfg, "ac", table)
    metadata = loaded.metadata
    return {
        "schema": json.loads(loaded.schema().model_dump_json()),
        "spec": json.loads(loaded.spec().model_dump_json()),
        "sort_order": json.loads(loaded.sort_order().model_dump_json()),
        "format_version": metadata.format_version,
        "properties": dict(metadata.properties),
        "location": loaded.location().replace(f"/{cfg.warehouse.database}/", "/<db>/"),
        "snapshots": len(metadata.snapshots),  # a re-load keeps the table's history
        "summary": {
            k: v
            for k, v in (metadata.current_snapshot().summary.additional_properties or {}).items()
            if k.startswith("loader.") and k != "loader.load"
        },
    }


def _rows_as_json(spark: Any, name: str) -> list[str]:
    """Every row of a table as JSON text, but what names its load (the text keeps -0.0's sign,
    every digit of a float and a map's entries)."""
    frame = spark.table(name).drop("_loaded_at", "_interval", "_commit_ts", "_valid_from")
    return sorted(r[0] for r in frame.selectExpr("to_json(struct(*))").collect())


def test_the_arrow_copy_gives_the_tables_spark_copy_gives(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS ac",
        "CREATE DATABASE ac",
        ALL_TYPES.replace("il.", "ac."),
        EDGES,
        WORDS,
        PAIRS,
        EMPTY,
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
        *(f"INSERT INTO ac.types VALUES {r}" for r in ALL_TYPES_ROWS),
        *(f"INSERT INTO ac.edges VALUES {r}" for r in EDGES_ROWS),
        *(f"INSERT INTO ac.words VALUES {r}" for r in WORDS_ROWS),
        *(f"INSERT INTO ac.pairs VALUES {r}" for r in PAIRS_ROWS),
    )
    by_spark = _config(mariadb, tmp_path, spark_config, "ac_spark", "spark")
    by_arrow = _config(mariadb, tmp_path, spark_config, "ac_arrow", "arrow")
    said: list[str] = []
    loads = {
        "spark": run_initial_load(spark, by_spark, progress=lambda _: None),
        "arrow": run_initial_load(spark, by_arrow, progress=said.append),
    }
    copied = {engine: {t.table: t.rows for t in s.tables} for engine, s in loads.items()}
    assert (
        copied["arrow"]
        == copied["spark"]
        == {
            "ac.edges": 4,
            "ac.empty": 0,
            "ac.pairs": 12,
            "ac.types": 3,
            "ac.words": 3,
        }
    )
    assert loads["arrow"].p0 == loads["spark"].p0  # the same rows' seqno
    assert not [line for line in said if "copied by Spark" in line], said
    for table in ("types", "edges", "words", "pairs", "empty"):
        assert _iceberg_layout(by_arrow, table) == _iceberg_layout(by_spark, table), table
        arrow_rows = _rows_as_json(spark, table_name(by_arrow, "ac", table))
        spark_rows = _rows_as_json(spark, table_name(by_spark, "ac", table))
        for mine, theirs in zip(arrow_rows, spark_rows, strict=True):
            assert json.loads(mine) == json.loads(theirs), table
            assert mine == theirs, table
    # A re-load of mirror tables, one with a column added: the table replaced, as Spark replaces it.
    mariadb.execute(
        "ALTER TABLE ac.pairs ADD COLUMN z VARCHAR(3) AFTER b",
        "UPDATE ac.pairs SET k0 = -k0, z = a WHERE b % 2 = 0",
        "DELETE FROM ac.types WHERE id = 2",
    )
    for cfg in (by_spark, by_arrow):
        run_initial_load(spark, cfg, only=["ac.pairs", "ac.types"], progress=said.append)
    assert not [line for line in said if "copied by Spark" in line], said
    for table in ("types", "pairs"):
        assert _iceberg_layout(by_arrow, table) == _iceberg_layout(by_spark, table), table
        mine, theirs = (_rows_as_json(spark, table_name(c, "ac", table)) for c in (by_arrow, by_spark))
        assert mine == theirs, table
    # Each row names the copy that wrote it: the load, its start.
    (load,) = [ld for ld in Ledger.of(by_arrow).loads() if ld.id == loads["arrow"].load_id]
    named = spark.sql(
        f"SELECT DISTINCT _interval, _commit_ts, _op FROM {table_name(by_arrow, 'ac', 'words')}"
    )
    assert [tuple(r) for r in named.collect()] == [(load.id, dt.datetime.fromisoformat(load.started_at), "r")]
    # Invalid dates: NULL, their text kept, as Spark's copy keeps it.
    (edge,) = spark.table(table_name(by_arrow, "ac", "edges")).where("id = 1").select("d", INVALID).collect()
    assert tuple(edge) == (None, {"d": "2024-02-30", "dtm": "2023-02-29 12:00:00"})


# Names as MySQL allows them, in table names, key columns (so in the partition field's name: the
# key's truncate transform for one integer column, a bucket for a composite key) and others.
ODD = " .`'\"%+=/\\"
NAMED = {
    # one integer key column: truncate partitions
    "t.1 %+=/\\`'\"é": [
        (f"k ey{ODD}注", "INT", True),
        *((f"c{c}{i}", "VARCHAR(12)" if i % 2 else "INT", False) for i, c in enumerate(ODD)),
        ("注文", "VARCHAR(10)", False),
        ("Crème Brûlée", "DOUBLE", False),
        ("select", "INT", False),
        ("order", "DATE", False),
        ("c" * 64, "INT", False),
    ],
    # a composite key: bucket partitions of its first column
    "order": [(f"a/b=c+d% é{ODD}", "VARCHAR(20)", True), ("from", "INT", True), ("v w", "INT", False)],
    # 64 characters each: the table's name, the key's, and so the partition field's 70
    "n" * 64: [("k" * 64, "BIGINT", True), ("v" * 64, "VARCHAR(5)", False)],
}


def _named_rows(table: str, ids: range) -> list[str]:
    columns = NAMED[table]
    values = {
        "INT": lambda i: str(i),
        "BIGINT": lambda i: str(i * 10**12),
        "DOUBLE": lambda i: f"{i / 3}",
        "DATE": lambda i: f"'2024-01-{i % 28 + 1:02d}'",
        "VARCHAR(5)": lambda i: f"'v{i % 99}'",
        "VARCHAR(10)": lambda i: f"'注{i}'",
        "VARCHAR(12)": lambda i: f"'%+=/{i}'",
        "VARCHAR(20)": lambda i: f"'k{i % 5} é%+/'",
    }
    return [f"({', '.join(values[t](i) for _, t, _ in columns)})" for i in ids]


def test_the_arrow_copy_loads_every_name_spark_copy_loads(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    def create(table: str) -> str:
        columns = ", ".join(f"{quote_identifier(n)} {t}" for n, t, _ in NAMED[table])
        key = ", ".join(quote_identifier(n) for n, _, k in NAMED[table] if k)
        return f"CREATE TABLE ac.{quote_identifier(table)} ({columns}, PRIMARY KEY ({key}))"

    def insert(table: str, ids: range) -> str:
        return f"INSERT INTO ac.{quote_identifier(table)} VALUES {', '.join(_named_rows(table, ids))}"

    mariadb.execute(
        "DROP DATABASE IF EXISTS ac",
        "CREATE DATABASE ac",
        *(create(t) for t in NAMED),
        *(insert(t, range(1, 9)) for t in NAMED),
    )
    by_spark = _config(mariadb, tmp_path, spark_config, "ac_names_spark", "spark")
    by_arrow = _config(mariadb, tmp_path, spark_config, "ac_names_arrow", "arrow")
    said: list[str] = []
    for cfg in (by_spark, by_arrow):
        run_initial_load(spark, cfg, progress=said.append)
    assert not [line for line in said if "copied by Spark" in line], said

    def same_tables() -> None:
        for table in NAMED:
            assert _iceberg_layout(by_arrow, table) == _iceberg_layout(by_spark, table), table
            mine, theirs = (_rows_as_json(spark, table_name(c, "ac", table)) for c in (by_arrow, by_spark))
            assert len(mine) == len(theirs) > 0, table
            assert mine == theirs, table

    same_tables()
    # Re-loaded, the tables replaced by both engines alike.
    mariadb.execute(*(insert(t, range(9, 13)) for t in NAMED))
    for cfg in (by_spark, by_arrow):
        run_initial_load(spark, cfg, progress=said.append)
    same_tables()
    # Then changes merge into the arrow engine's tables, and the tables equal the source's.
    for table in NAMED:
        first = quote_identifier(NAMED[table][0][0])
        mariadb.execute(
            f"DELETE FROM ac.{quote_identifier(table)} WHERE {first} = (SELECT MIN({first}) FROM "
            f"(SELECT {first} FROM ac.{quote_identifier(table)}) AS k)",
            insert(table, range(20, 23)),
        )
    mariadb.execute(
        f"UPDATE ac.{quote_identifier('order')} SET `v w` = -`v w` WHERE `from` % 2 = 0",
        f"UPDATE ac.{quote_identifier('n' * 64)} SET {quote_identifier('v' * 64)} = 'new'",
    )
    delta(spark, by_arrow)
    compared = compare_tables(spark, by_arrow)
    assert sorted(c.table for c in compared) == sorted(f"ac.{t}" for t in NAMED)
    for c in compared:
        assert c.equal, f"{c.table}: source {c.source_sample}, warehouse {c.warehouse_sample}"
    assert_equal_to_source(spark, by_arrow)


def test_spark_merges_changes_into_a_table_the_arrow_copy_made_and_a_re_load_replaces_it(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS ac",
        "CREATE DATABASE ac",
        "CREATE TABLE ac.items (id BIGINT PRIMARY KEY, v VARCHAR(20), at DATETIME(3))",
        *(
            f"INSERT INTO ac.items VALUES ({i}, 'v{i}', '2024-05-0{i % 9 + 1} 10:00:00.{i:03d}')"
            for i in range(1, 41)
        ),
    )
    cfg = _config(mariadb, tmp_path, spark_config, "ac_merged", "arrow")
    said: list[str] = []
    run_initial_load(spark, cfg, progress=said.append)
    assert "ac.items: 2/2 key ranges copied (40 rows)" in said
    mariadb.execute(
        "UPDATE ac.items SET v = 'changed' WHERE id % 3 = 0",
        "DELETE FROM ac.items WHERE id % 7 = 0",
        "INSERT INTO ac.items VALUES (100, 'new', NULL)",
    )
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    # A re-load replaces the table (its history stays); a history table loaded again keeps what
    # it knew of the rows the copy lacks: Spark's copy does that, and says so.
    said.clear()
    run_initial_load(spark, cfg, only=["ac.items"], progress=said.append)
    assert not [line for line in said if "copied by Spark" in line], said
    assert_equal_to_source(spark, cfg)
    history = dataclasses.replace(cfg, tables=dataclasses.replace(cfg.tables, modes={"ac.items": "history"}))
    run_initial_load(spark, history, only=["ac.items"], progress=said.append)  # from mirror: arrow's
    assert not [line for line in said if "copied by Spark" in line], said
    run_initial_load(spark, history, only=["ac.items"], progress=said.append)
    assert "ac.items: copied by Spark: a history table loaded again keeps what it knew" in " ".join(said)


def test_each_key_ranges_rows_of_a_partition_go_into_files_of_the_target_size(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loader.source import rows as source_rows
    from loader.warehouse import arrow_copy

    mariadb.execute(
        "DROP DATABASE IF EXISTS ac",
        "CREATE DATABASE ac",
        "CREATE TABLE ac.items (id INT PRIMARY KEY, v VARCHAR(50))",
        "INSERT INTO ac.items SELECT seq, REPEAT('v', seq % 50) FROM ac.seq_1_to_3000",
    )
    # Rows arrive in batches of ~4 KB: several in each of the three key ranges.
    monkeypatch.setattr(source_rows, "READ_BYTES", 4096)
    monkeypatch.setattr(
        arrow_copy, "row_batches", functools.partial(source_rows.row_batches, batch_bytes=4096)
    )

    def files(database: str, target: int) -> list[int]:
        monkeypatch.setattr(arrow_copy, "TARGET_FILE_BYTES", target)
        cfg = _config(mariadb, tmp_path, spark_config, database, "arrow")
        cfg = dataclasses.replace(
            cfg,
            load=dataclasses.replace(cfg.load, parallelism=3),
            warehouse=dataclasses.replace(cfg.warehouse, partition_rows=2000),
        )
        run_initial_load(spark, cfg, progress=lambda _: None)
        assert_equal_to_source(spark, cfg)
        found: dict[str, int] = {}
        for task in iceberg_table(cfg, "ac", "items").scan().plan_files():
            found[str(task.file.partition)] = found.get(str(task.file.partition), 0) + 1
        return sorted(found.values())

    # Ranges 1-1000, 1001-2000, 2001-3000; partitions 0-1999 and 2000-3999: a file for each
    # range's rows of each partition, whatever the batches.
    assert files("ac_whole", arrow_copy.TARGET_FILE_BYTES) == [2, 2]
    # A file is closed once it holds the target size: here after each batch.
    assert min(files("ac_small", 1)) > 5


def test_a_copy_that_fails_says_which_table_and_range_and_leaves_no_table(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS ac",
        "CREATE DATABASE ac",
        "CREATE TABLE ac.items (id INT PRIMARY KEY, v VARCHAR(20))",
        "INSERT INTO ac.items SELECT seq, CONCAT('v', seq) FROM ac.seq_1_to_100",
        "CREATE TABLE ac.others (id INT PRIMARY KEY)",
        "INSERT INTO ac.others SELECT seq FROM ac.seq_1_to_10",
    )
    cfg = _config(mariadb, tmp_path, spark_config, "ac_failed", "arrow")
    assert cfg.load.tables_at_once == 2  # the default: both tables copied at once

    def table_goes_away(line: str) -> None:  # once the ranges are planned, before they are read
        if "ac.items: copying ~" in line:
            mariadb.execute("RENAME TABLE ac.items TO ac.elsewhere")

    with pytest.raises(LoadError) as failed:
        run_initial_load(spark, cfg, progress=table_goes_away)
    message = str(failed.value)
    # The range in the key's terms: one of the four, such as "`id` >= 26 AND NOT `id` >= 51".
    pattern = r"ac\.items: the copy of key range (1=1|.*`id` >= \d+).* failed: .*doesn't exist"
    assert re.match(pattern, message), message
    assert "run the load again once the cause is mended" in message
    assert not spark.catalog.tableExists(table_name(cfg, "ac", "items"))
    assert Ledger.of(cfg).checkpoint() is None
    # The other table's copy ran to its end and is recorded.
    (load,) = Ledger.of(cfg).loads()
    assert load.state != "complete" and load.rows == {"ac.others": 10}
    # Mended, the load runs again and copies the table.
    mariadb.execute("RENAME TABLE ac.elsewhere TO ac.items")
    run_initial_load(spark, cfg, progress=lambda _: None)
    assert_equal_to_source(spark, cfg)
