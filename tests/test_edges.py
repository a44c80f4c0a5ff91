"""Source changes at the edges, on the private MariaDB and a local Spark: each is carried exactly
(the warehouse ends equal to the source) or stops the run with the table, the position, the
statement and the remedy, leaving the checkpoint where it was."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from loader import steps
from loader.config import Config
from loader.errors import ExtractError, MaterializeError
from loader.extract import run_extract
from loader.ledger import Ledger
from loader.warehouse.compare import compare_tables
from loader.warehouse.initial_load import run_initial_load
from loader.warehouse.materialize import run_materialize
from tests.conftest import MariaDB

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _quiet(_: str) -> None:
    pass


def _config(mariadb: MariaDB, tmp_path: Path, spark_config: Config, schema: str) -> Config:
    """Tables ``<schema>.*`` into the warehouse database ``<schema>_wh``."""
    base = mariadb.config(tmp_path, tables={"include": f'["{schema}.*"]'})
    return dataclasses.replace(
        base,
        warehouse=dataclasses.replace(
            spark_config.warehouse, database=f"{schema}_wh", partition_rows=10, buckets=4
        ),
    )


def _fresh_schema(mariadb: MariaDB, schema: str, *tables: str) -> None:
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {schema}",
        f"CREATE DATABASE {schema}",
        *(f"CREATE TABLE {schema}.{t}" for t in tables),
    )


def _delta(spark: Any, cfg: Config) -> None:
    """One delta run in process: extract what is new, materialise it."""
    run_extract(cfg, progress=_quiet)
    run_materialize(spark, cfg)


def assert_equal_to_source(spark: Any, cfg: Config) -> None:
    """Every selected table has the source's rows, value for value."""
    for table in compare_tables(spark, cfg):
        assert table.equal, (
            f"{table.table}: {table.source_rows} rows in the source, {table.warehouse_rows} in the "
            f"warehouse; source {table.source_sample} warehouse {table.warehouse_sample}"
        )


def test_a_year_column_does_not_shift_the_signedness_of_the_integers_after_it(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    _fresh_schema(
        mariadb,
        "edge_year",
        "t (id INT PRIMARY KEY, yr YEAR, qty INT UNSIGNED, d INT, tiny TINYINT UNSIGNED, s SMALLINT)",
    )
    mariadb.execute("INSERT INTO edge_year.t VALUES (1, 2024, 1, 1, 1, 1)")
    cfg = _config(mariadb, tmp_path, spark_config, "edge_year")
    run_initial_load(spark, cfg, progress=_quiet)
    mariadb.execute(
        "INSERT INTO edge_year.t VALUES (2, 1999, 4294967295, -5, 255, -1), (3, 2155, 0, 2147483647, 128, 0)",
        "UPDATE edge_year.t SET d = -2147483648, tiny = 254 WHERE id = 1",
    )
    _delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    # The table stays readable and exact through the next interval too.
    mariadb.execute("UPDATE edge_year.t SET qty = qty - 1, d = d + 1 WHERE id = 2")
    _delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    assert Ledger.of(cfg).checkpoint().position == Ledger.of(cfg).intervals()[-1].end  # type: ignore[union-attr]


def _warehouse_types(spark: Any, cfg: Config, table: str) -> dict[str, str]:
    schema = spark.table(f"{cfg.warehouse.database}.{table}").schema
    return {f.name: f.dataType.simpleString() for f in schema.fields}


def test_a_widened_column_is_carried_and_a_changed_one_stops_until_the_table_is_reloaded(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    _fresh_schema(
        mariadb,
        "edge_type",
        "t (id INT PRIMARY KEY, a INT, b DATETIME(6), c DECIMAL(10,2))",
        "u (id INT PRIMARY KEY, v INT)",
    )
    mariadb.execute(
        "INSERT INTO edge_type.t VALUES (1, -1, '2024-01-01 10:00:00.5', 1.25), (2, 2, NULL, NULL)",
        "INSERT INTO edge_type.u VALUES (1, 1)",
    )
    cfg = _config(mariadb, tmp_path, spark_config, "edge_type")
    run_initial_load(spark, cfg, progress=_quiet)

    # Widening keeps every value: carried, and the warehouse column widens in place.
    mariadb.execute(
        "UPDATE edge_type.t SET a = 7 WHERE id = 2",
        "ALTER TABLE edge_type.t MODIFY a BIGINT, MODIFY c DECIMAL(14,4)",
        "INSERT INTO edge_type.t VALUES (3, 1099511627776, '2024-02-29 00:00:00', 12345678.1234)",
    )
    _delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    assert _warehouse_types(spark, cfg, "edge_type__t")["a"] == "bigint"
    assert _warehouse_types(spark, cfg, "edge_type__t")["c"] == "decimal(14,4)"

    # A type change that rewrites values stops extract at the statement, with the remedy.
    ledger = Ledger.of(cfg)
    checkpoint = ledger.checkpoint()
    mariadb.execute(
        "UPDATE edge_type.t SET a = a + 1 WHERE id = 1",
        "ALTER TABLE edge_type.t MODIFY b VARCHAR(40)",
        "INSERT INTO edge_type.t VALUES (4, 4, 'not a date', 4)",
        "INSERT INTO edge_type.u VALUES (2, 2)",
    )
    with pytest.raises(ExtractError) as stopped:
        steps.extract(cfg, progress=_quiet)
    message = str(stopped.value)
    assert "edge_type.t changed in a way the loader cannot carry" in message
    assert "column b changed type from datetime(6) to varchar" in message
    assert "statement: ALTER TABLE edge_type.t MODIFY b VARCHAR(40)" in message
    assert message.endswith("re-load the table: loader initial-load --tables edge_type.t")
    assert re.match(r"mysql-bin\.\d+:\d+: ", message), message  # where in the binlog
    assert ledger.checkpoint() == checkpoint
    failed = steps.status(cfg).last_error
    assert failed is not None and "column b changed type" in failed.error

    # The remedy is one step; the other table's changes of the stopped interval still arrive.
    run_initial_load(spark, cfg, only=["edge_type.t"], progress=_quiet)
    _delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    assert _warehouse_types(spark, cfg, "edge_type__t")["b"] == "string"
    assert steps.status(cfg).intervals["failed"] == 0

    # Changed where extract sees no earlier layout (all of the table's rows come after the ALTER):
    # materialise refuses to write values of another type, and the same remedy works.
    mariadb.execute(
        "ALTER TABLE edge_type.t MODIFY a VARCHAR(30)",
        "UPDATE edge_type.t SET a = CONCAT('x', a) WHERE id = 3",
        "INSERT INTO edge_type.u VALUES (3, 3)",
    )
    checkpoint = ledger.checkpoint()
    run_extract(cfg, progress=_quiet)
    with pytest.raises(
        MaterializeError, match=r"column a is bigint in the warehouse but the staged changes have string"
    ):
        run_materialize(spark, cfg)
    assert ledger.checkpoint() == checkpoint
    run_initial_load(spark, cfg, only=["edge_type.t"], progress=_quiet)
    _delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
