"""Iceberg tables listed in a catalog server instead of the embedded SQLite file: Iceberg's JDBC
catalog on a real MariaDB database, and Iceberg's Hive catalog on the Hive metastore service.
Each runs the loader as a user does (initial load, a delta run, a checksum) and ends with the
warehouse equal to the source."""

from __future__ import annotations

from pathlib import Path

import pytest

from loader.warehouse.session import ICEBERG_SQLITE
from tests.conftest import MariaDB, run_loader, spark_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _load_change_and_check(mariadb: MariaDB, toml: Path, schema: str) -> None:
    """Initial load, changes, one delta run: the checksum finds both tables equal to the source,
    and the merge is an Iceberg snapshot carrying its interval."""
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {schema}",
        f"CREATE DATABASE {schema}",
        f"CREATE TABLE {schema}.a (id INT PRIMARY KEY, v VARCHAR(20))",
        f"CREATE TABLE {schema}.b (id BIGINT PRIMARY KEY, n DECIMAL(10,2))",
        f"INSERT INTO {schema}.a SELECT seq, CONCAT('a', seq) FROM {schema}.seq_1_to_40",
        f"INSERT INTO {schema}.b SELECT seq, seq / 4 FROM {schema}.seq_1_to_20",
    )
    loaded = run_loader(mariadb, toml, "initial-load")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    mariadb.execute(
        f"UPDATE {schema}.a SET v = 'changed' WHERE id % 5 = 0",
        f"DELETE FROM {schema}.a WHERE id > 35",
        f"INSERT INTO {schema}.b VALUES (100, 1.25)",
    )
    ran = run_loader(mariadb, toml, "run-once")
    assert ran.returncode == 0, ran.stdout + ran.stderr

    checked = run_loader(mariadb, toml, "checksum")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    lines = [x for x in checked.stdout.splitlines() if x.startswith(f"{schema}.")]
    assert len(lines) == 2 and all(x.endswith(", equal") for x in lines), checked.stdout
    assert any(
        x.startswith(f"{schema}.a → iceberg.{schema}_wh.{schema}__a: source 35 rows,") for x in lines
    ), lines
    merged = spark_rows(
        toml,
        f"SELECT summary['loader.interval'] FROM iceberg.{schema}_wh.{schema}__a.snapshots "
        "WHERE summary['loader.interval'] IS NOT NULL",
    )
    assert len(merged) == 1, merged


def test_a_jdbc_catalog_on_a_mariadb_database_lists_the_tables(
    mariadb: MariaDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mariadb.execute("DROP DATABASE IF EXISTS icecat", "CREATE DATABASE icecat")
    # The password reaches the job through the variable the config names, not the config file.
    monkeypatch.setenv("ICECAT_PASSWORD", mariadb.password)
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
    _load_change_and_check(mariadb, toml, "icj")

    listed = mariadb.rows("SELECT table_namespace, table_name FROM icecat.iceberg_tables ORDER BY 2")
    assert listed == [("icj_wh", "icj__a"), ("icj_wh", "icj__b")]
    assert not list(tmp_path.rglob(ICEBERG_SQLITE))  # the embedded catalog was not used

    # Without the password the job stops before any step, naming the catalog and what to check.
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


def test_the_hive_metastore_lists_the_tables_through_icebergs_hive_catalog(
    mariadb: MariaDB, hive_metastore: str, tmp_path: Path
) -> None:
    toml = mariadb.config_file(
        tmp_path,
        "ich",
        "ich.*",
        warehouse=f'format = "iceberg"\ncatalog = "hive"\nmetastore_uri = "{hive_metastore}"',
    )
    _load_change_and_check(mariadb, toml, "ich")

    # The metastore holds the table as a pointer to its current Iceberg metadata (what other
    # engines on the metastore read), as Spark's own catalog finds it there.
    held = dict(spark_rows(toml, "SHOW TBLPROPERTIES spark_catalog.ich_wh.ich__a"))
    location = held["metadata_location"]
    assert location.startswith(f"file:{tmp_path}/warehouse/iceberg/ich_wh.db/ich__a/metadata/"), held
    assert '"loader.interval":"0000000001"' in held["current-snapshot-summary"], held
    assert not list(tmp_path.rglob(ICEBERG_SQLITE))
