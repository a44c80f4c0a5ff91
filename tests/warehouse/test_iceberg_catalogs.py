"""Iceberg tables listed in a catalog server instead of the embedded SQLite file: Iceberg's JDBC
catalog on a real MariaDB database, and Iceberg's Hive catalog on the Hive metastore service.
Each loads, applies a delta and checks the warehouse equal to the source in the test session's
Spark, its Iceberg catalog switched to the server with the settings a job on the config gets
(``iceberg_catalog_of``); then a Spark process of the config's own on that catalog: a job that
cannot reach it, a session that reads what the metastore holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loader.core.config import Config, load_config
from loader.warehouse.session import ICEBERG_SQLITE
from tests.conftest import MariaDB, delta, iceberg_catalog_of, metastore_table_parameters, quiet, run_loader

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _load_change_and_check(spark: Any, mariadb: MariaDB, cfg: Config, schema: str) -> None:
    """Initial load, changes, one delta run: the checksum finds both tables equal to the source,
    and the merge is an Iceberg snapshot carrying its interval."""
    from loader.warehouse.checksum import compare_sums, source_sums
    from loader.warehouse.initial_load import run_initial_load

    mariadb.execute(
        f"DROP DATABASE IF EXISTS {schema}",
        f"CREATE DATABASE {schema}",
        f"CREATE TABLE {schema}.a (id INT PRIMARY KEY, v VARCHAR(20))",
        f"CREATE TABLE {schema}.b (id BIGINT PRIMARY KEY, n DECIMAL(10,2))",
        f"INSERT INTO {schema}.a SELECT seq, CONCAT('a', seq) FROM {schema}.seq_1_to_40",
        f"INSERT INTO {schema}.b SELECT seq, seq / 4 FROM {schema}.seq_1_to_20",
    )
    with iceberg_catalog_of(spark, cfg):
        run_initial_load(spark, cfg, progress=quiet)
        mariadb.execute(
            f"UPDATE {schema}.a SET v = 'changed' WHERE id % 5 = 0",
            f"DELETE FROM {schema}.a WHERE id > 35",
            f"INSERT INTO {schema}.b VALUES (100, 1.25)",
        )
        delta(spark, cfg)
        checked = compare_sums(spark, cfg, source_sums(cfg.source, cfg.tables, progress=quiet))
        assert [(c.table, c.warehouse_table, c.source_rows, c.equal) for c in checked] == [
            (f"{schema}.a", f"iceberg.{schema}_wh.{schema}__a", 35, True),
            (f"{schema}.b", f"iceberg.{schema}_wh.{schema}__b", 21, True),
        ], checked
        merged = spark.sql(
            f"SELECT summary['loader.interval'] FROM iceberg.{schema}_wh.{schema}__a.snapshots "
            "WHERE summary['loader.interval'] IS NOT NULL"
        ).collect()
    assert len(merged) == 1, merged


def test_a_jdbc_catalog_on_a_mariadb_database_lists_the_tables(
    spark: Any, mariadb: MariaDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mariadb.execute("DROP DATABASE IF EXISTS icecat", "CREATE DATABASE icecat")
    # The password reaches the catalog through the variable the config names, not the config file.
    monkeypatch.setenv("ICECAT_PASSWORD", mariadb.password)
    monkeypatch.setenv("LOADER_TEST_PASSWORD", mariadb.password)
    toml = mariadb.config_file(
        tmp_path,
        "icj",
        "icj.*",
        warehouse=(
            'format = "iceberg"\niceberg_catalog = "jdbc"\n'
            f'iceberg_catalog_uri = "jdbc:mariadb://{mariadb.host}:{mariadb.port}/icecat"\n'
            'iceberg_catalog_user = "app"\niceberg_catalog_password_env = "ICECAT_PASSWORD"'
        ),
    )
    _load_change_and_check(spark, mariadb, load_config(toml), "icj")

    listed = mariadb.rows("SELECT table_namespace, table_name FROM icecat.iceberg_tables ORDER BY 2")
    assert listed == [("icj_wh", "icj__a"), ("icj_wh", "icj__b")]

    # Without the password a job stops before any step, naming the catalog and what to check.
    monkeypatch.delenv("ICECAT_PASSWORD")
    refused = run_loader(mariadb, toml, "checksum")
    assert refused.returncode == 1, refused.stderr[-2000:]
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"loader checksum: error: the checksum job failed: cannot use the JDBC catalog "
        f"jdbc:mariadb://{mariadb.host}:{mariadb.port}/icecat as app ("
    ), last
    assert "Access denied for user 'app'" in last, last
    assert last.endswith("and the password in ICECAT_PASSWORD (not set)"), last
    assert not list(tmp_path.rglob(ICEBERG_SQLITE))  # the job did not fall back to the embedded catalog


def test_the_hive_metastore_lists_the_tables_through_icebergs_hive_catalog(
    spark: Any, mariadb: MariaDB, hive_metastore: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOADER_TEST_PASSWORD", mariadb.password)
    toml = mariadb.config_file(
        tmp_path,
        "ich",
        "ich.*",
        warehouse=f'format = "iceberg"\ncatalog = "hive"\nmetastore_uri = "{hive_metastore}"',
    )
    _load_change_and_check(spark, mariadb, load_config(toml), "ich")

    # The metastore holds the table as a pointer to its current Iceberg metadata (what other
    # engines on the metastore read), as Hive's own client finds it there.
    held = metastore_table_parameters(spark, hive_metastore, "ich_wh", "ich__a")
    location = held["metadata_location"]
    assert location.startswith(f"file:{tmp_path}/warehouse/iceberg/ich_wh.db/ich__a/metadata/"), held
    assert '"loader.interval":"0000000001"' in held["current-snapshot-summary"], held
    assert not list(tmp_path.rglob(ICEBERG_SQLITE))
