"""Source changes at the edges, on the private MariaDB and a local Spark: each is carried exactly
(the warehouse ends equal to the source) or stops the run with the table, the position, the
statement and the remedy, leaving the checkpoint where it was."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from loader.config import Config
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
