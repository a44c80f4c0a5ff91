"""Staging and the warehouse on the storage of a cluster, end to end: a real HDFS (MiniDFSCluster;
the extractor writes through WebHDFS, Spark reads and writes hdfs://) and S3 (moto's server; boto3
writes the staging, Spark reads it and keeps the warehouse through s3a with the pinned hadoop-aws).
The loader runs as a user runs it: its commands, Spark jobs through spark-submit."""

from __future__ import annotations

from pathlib import Path

import pytest

from loader.config import StagingConfig, load_config
from loader.staging.stores import Store, open_store
from tests.conftest import HdfsCluster, MariaDB, run_loader

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
    """The version folders holding the warehouse table's files."""
    prefix = f"tables/{schema}_wh.db/{schema}__t/_versions/"
    return {k[len(prefix) :].split("/", 1)[0] for k in store.list(prefix.rstrip("/"))}


@pytest.mark.parametrize("where", ["hdfs", "s3"])
def test_staging_and_warehouse_on_cluster_storage_equal_the_source(
    mariadb: MariaDB, tmp_path: Path, request: pytest.FixtureRequest, where: str
) -> None:
    schema = f"cs_{where}"
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {schema}",
        f"CREATE DATABASE {schema}",
        f"CREATE TABLE {schema}.t (id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(12,2), d DATETIME(6))",
        f"INSERT INTO {schema}.t SELECT seq, CONCAT('v', seq), seq / 3, '2026-01-02 03:04:05.678901'"
        f" FROM {schema}.seq_1_to_40",
    )
    staging, warehouse, warehouse_files = _storage(where, request, tmp_path.name)
    toml = mariadb.config_file(tmp_path, schema, f"{schema}.*", warehouse=warehouse, staging=staging)

    loaded = run_loader(mariadb, toml, "initial-load")
    assert loaded.returncode == 0, loaded.stderr
    (copied,) = _versions(warehouse_files, schema)
    mariadb.execute(
        f"UPDATE {schema}.t SET v = 'changed', n = -n WHERE id % 4 = 0",
        f"DELETE FROM {schema}.t WHERE id BETWEEN 10 AND 14",
        f"INSERT INTO {schema}.t VALUES (100, 'new «ü»', 1.5, '2026-11-24 00:00:00.000001')",
    )
    ran = run_loader(mariadb, toml, "run-once")
    assert ran.returncode == 0, ran.stderr

    # The changes went through the cluster's storage, and the table lives there: the merge wrote
    # a new version of its one partition and, with no retention, deleted the copy's.
    store = open_store(load_config(toml, env={}).staging)
    staged = [k for k in store.list(schema) if k.endswith((".csv", ".csv.gz"))]
    assert staged, store.list("")
    (merged,) = _versions(warehouse_files, schema)
    assert merged != copied
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loader.toml", "metastore"]

    checked = run_loader(mariadb, toml, "checksum")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (line,) = [x for x in checked.stdout.splitlines() if x.startswith(f"{schema}.t → ")]
    assert line.startswith(f"{schema}.t → {schema}_wh.{schema}__t: source 36 rows, warehouse 36 rows,")
    assert line.endswith(", equal"), checked.stdout
