"""Staging on the storage of a cluster, end to end: a real HDFS (MiniDFSCluster, written through
WebHDFS, read by Spark as hdfs://) and S3 (moto's server, written by boto3, read by Spark through
s3a with the pinned hadoop-aws). The loader runs as a user runs it: its commands, Spark jobs
through spark-submit."""

from __future__ import annotations

from pathlib import Path

import pytest

from loader.config import load_config
from loader.staging.stores import open_store
from tests.conftest import HdfsCluster, MariaDB, run_loader

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _staging(where: str, request: pytest.FixtureRequest, folder: str) -> str:
    if where == "hdfs":
        hdfs: HdfsCluster = request.getfixturevalue("hdfs_cluster")
        return f'uri = "{hdfs.uri}/{folder}/staging"\nwebhdfs_url = "{hdfs.webhdfs_url}"'
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("s3_bucket")
    return f'uri = "s3://{bucket}/{folder}"\ns3_endpoint_url = "{endpoint}"'


@pytest.mark.parametrize("where", ["hdfs", "s3"])
def test_changes_staged_on_cluster_storage_reach_the_warehouse(
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
    toml = mariadb.config_file(
        tmp_path, schema, f"{schema}.*", staging=_staging(where, request, tmp_path.name)
    )

    loaded = run_loader(mariadb, toml, "initial-load")
    assert loaded.returncode == 0, loaded.stderr
    mariadb.execute(
        f"UPDATE {schema}.t SET v = 'changed', n = -n WHERE id % 4 = 0",
        f"DELETE FROM {schema}.t WHERE id BETWEEN 10 AND 14",
        f"INSERT INTO {schema}.t VALUES (100, 'new «ü»', 1.5, '2026-11-24 00:00:00.000001')",
    )
    ran = run_loader(mariadb, toml, "run-once")
    assert ran.returncode == 0, ran.stderr

    # The changes went through the cluster's storage, not a local folder.
    store = open_store(load_config(toml, env={}).staging)
    staged = [k for k in store.list(schema) if k.endswith(".csv") or k.endswith(".csv.gz")]
    assert staged, store.list("")
    assert not (tmp_path / "staging").exists()

    checked = run_loader(mariadb, toml, "checksum")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (line,) = [x for x in checked.stdout.splitlines() if x.startswith(f"{schema}.t → ")]
    assert line.startswith(f"{schema}.t → {schema}_wh.{schema}__t: source 36 rows, warehouse 36 rows,")
    assert line.endswith(", equal"), checked.stdout
