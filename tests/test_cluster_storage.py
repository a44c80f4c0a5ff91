"""Staging and the warehouse on the storage of a cluster, end to end: a real HDFS (MiniDFSCluster;
the extractor writes through WebHDFS, Spark reads and writes hdfs://) and S3 (moto's server; boto3
writes the staging, Spark reads it and keeps the warehouse through s3a with the pinned hadoop-aws).
They run in the test session's Spark; the DAGs on S3 through an Airflow connection's keys, their
Spark jobs on a cluster, are in tests/test_spark_cluster.py."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from loader.core.config import StagingConfig, load_config
from loader.staging.stores import Store, open_store
from tests.conftest import (
    HdfsCluster,
    MariaDB,
    delta,
    iceberg_catalog_of,
    iceberg_files,
    quiet,
    warehouse_storage_of,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _storage(where: str, request: pytest.FixtureRequest, folder: str) -> tuple[str, str, Store]:
    """The [staging] and [warehouse] lines for that storage, and a store on the warehouse's folder."""
    if where == "hdfs":
        hdfs: HdfsCluster = request.getfixturevalue("hdfs_cluster")
        staging = f'uri = "{hdfs.uri}/{folder}/staging"\nwebhdfs_url = "{hdfs.webhdfs_url}"'
        warehouse = StagingConfig(uri=f"{hdfs.uri}/{folder}/warehouse", webhdfs_url=hdfs.webhdfs_url)
        lines = f'dir = "{warehouse.uri}"'
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = request.getfixturevalue("s3_bucket")
        staging = f'uri = "s3://{bucket}/{folder}/staging"\ns3_endpoint_url = "{endpoint}"'
        warehouse = StagingConfig(uri=f"s3://{bucket}/{folder}/warehouse", s3_endpoint_url=endpoint)
        lines = f'dir = "{warehouse.uri}"\ns3_endpoint_url = "{endpoint}"'
    # The embedded catalog stays on local disk; the tables' files do not.
    lines += '\nmetastore_dir = "metastore"\nretention_hours = 0'
    return staging, lines, open_store(warehouse)


def _versions(store: Store, schema: str) -> set[str]:
    """The version folders holding the Hive-format warehouse table's files."""
    prefix = f"tables/{schema}_wh.db/{schema}__t/_versions/"
    return {k[len(prefix) :].split("/", 1)[0] for k in store.list(prefix.rstrip("/"))}


# The Hive format on each store here, in the test session's Spark (the storage is the subject),
# and Iceberg (the default format) on HDFS; Iceberg on S3, end to end through Spark jobs on a
# cluster with the same checks, is tests/test_spark_cluster.py.
@pytest.mark.parametrize(("where", "table_format"), [("hdfs", "hive"), ("s3", "hive"), ("hdfs", "iceberg")])
def test_staging_and_the_warehouse_on_cluster_storage_equal_the_source(
    spark: Any,
    mariadb: MariaDB,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    table_format: str,
) -> None:
    from loader.warehouse.checksum import compare_sums, source_sums
    from loader.warehouse.initial_load import run_initial_load

    schema = f"cs_{where}_{table_format}"
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {schema}",
        f"CREATE DATABASE {schema}",
        f"CREATE TABLE {schema}.t (id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(12,2), d DATETIME(6))",
        f"INSERT INTO {schema}.t SELECT seq, CONCAT('v', seq), seq / 3, '2026-01-02 03:04:05.678901'"
        f" FROM {schema}.seq_1_to_40",
    )
    staging, warehouse, warehouse_files = _storage(where, request, tmp_path.name)
    warehouse += f'\nformat = "{table_format}"'
    toml = mariadb.config_file(tmp_path, schema, f"{schema}.*", warehouse=warehouse, staging=staging)
    monkeypatch.setenv("LOADER_TEST_PASSWORD", mariadb.password)
    cfg = load_config(toml, env={})
    warehouse_storage_of(spark, cfg)
    hive = table_format == "hive"

    def files() -> tuple[set[str], set[str]]:
        """The Hive-format table's version folders, or the Iceberg table's data and metadata files."""
        if hive:
            return _versions(warehouse_files, schema), set()
        return iceberg_files(warehouse_files.list("iceberg"), f"{schema}_wh", f"{schema}__t")

    with contextlib.nullcontext() if hive else iceberg_catalog_of(spark, cfg):
        run_initial_load(spark, cfg, progress=quiet)
        copied, copy_commits = files()
        assert copied and (hive or copy_commits), warehouse_files.list("")
        mariadb.execute(
            f"UPDATE {schema}.t SET v = 'changed', n = -n WHERE id % 4 = 0",
            f"DELETE FROM {schema}.t WHERE id BETWEEN 10 AND 14",
            f"INSERT INTO {schema}.t VALUES (100, 'new «ü»', 1.5, '2026-11-24 00:00:00.000001')",
        )
        delta(spark, cfg)
        merged, merge_commits = files()
        (checked,) = compare_sums(spark, cfg, source_sums(cfg.source, cfg.tables, progress=quiet))

    # The changes went through the cluster's storage, and the table lives there.
    store = open_store(cfg.staging)
    staged = [k for k in store.list(schema) if k.endswith((".csv", ".csv.gz"))]
    assert staged, store.list("")
    if hive:
        # The merge wrote a new version of its one partition and, with no retention, deleted the
        # copy's; nothing is on local disk.
        assert len(copied) == len(merged) == 1 and merged != copied
        assert sorted(p.name for p in tmp_path.iterdir()) == ["loader.toml"]
    else:
        # The merge committed a snapshot (a metadata file) and kept the loaded files (merge-on-read:
        # the changed rows' deletes and new rows are new files beside them); only the embedded
        # catalog is on local disk.
        assert copied < merged and copy_commits < merge_commits
        assert sorted(p.name for p in tmp_path.iterdir()) == ["loader.toml", "metastore"]

    assert (checked.table, checked.warehouse_table, checked.source_rows, checked.warehouse_rows) == (
        f"{schema}.t",
        f"{'' if hive else 'iceberg.'}{schema}_wh.{schema}__t",
        36,
        36,
    )
    assert checked.equal, checked
