"""The DAGs against a Spark standalone cluster (a master and two workers on loopback), with staging
and the warehouse on a real HDFS: the initial load, delta runs and their checksum run as
applications of the cluster, in executors on its workers, and the warehouse equals the source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loader.config import StagingConfig
from loader.staging.stores import open_store
from tests.conftest import (
    HdfsCluster,
    MariaDB,
    SparkCluster,
    dags_test,
    iceberg_files,
    loader_dag_env,
    run_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _apps_on_workers(cluster: SparkCluster) -> dict[str, set[str]]:
    """For each finished application of the cluster (by name), the workers its executors ran on."""
    names = {app["id"]: app["name"] for app in cluster.status()["completedapps"]}
    ran: dict[str, set[str]] = {name: set() for name in names.values()}
    for worker in (cluster.folder / "work").iterdir():
        for app in worker.iterdir():
            if app.name in names and any(app.iterdir()):
                ran[names[app.name]].add(worker.name)
    return ran


def test_the_dags_run_on_a_spark_cluster_with_the_warehouse_on_hdfs(
    mariadb: MariaDB,
    hdfs_cluster: HdfsCluster,
    spark_cluster: SparkCluster,
    airflow_home: Path,
    tmp_path: Path,
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS sc",
        "CREATE DATABASE sc",
        "CREATE TABLE sc.orders (id INT PRIMARY KEY, customer VARCHAR(20), total DECIMAL(10,2))",
        "CREATE TABLE sc.lines (order_id INT, line INT, qty SMALLINT, PRIMARY KEY (order_id, line))",
        "INSERT INTO sc.orders SELECT seq, CONCAT('c', seq), seq * 1.5 FROM sc.seq_1_to_200",
        "INSERT INTO sc.lines SELECT seq % 200 + 1, seq % 3, seq % 7 FROM sc.seq_1_to_400",
    )
    root = f"{hdfs_cluster.uri}/{tmp_path.name}"
    config = tmp_path / "loader.toml"
    config.write_text(
        f"""[source]
name = "sc"
airflow_conn_id = "loader_source"
[tables]
include = ["sc.*"]
[staging]
uri = "{root}/staging"
webhdfs_url = "{hdfs_cluster.webhdfs_url}"
[warehouse]
database = "sc_wh"
dir = "{root}/warehouse"
metastore_dir = "{tmp_path / "metastore"}"
partition_rows = 50
buckets = 2
[load]
parallelism = 2
[spark]
master = "{spark_cluster.master}"
conf = {{ "spark.sql.shuffle.partitions" = "2", "spark.executor.memory" = "512m" }}
"""
    )
    # The Spark tasks submit to the master of Airflow's Spark connection.
    env = loader_dag_env(airflow_home, config, mariadb, master=spark_cluster.master)

    loaded = dags_test(env, "loader_initial_load", "2026-03-01T00:00:00+00:00")
    assert run_state(loaded) == "success", loaded[-3000:]
    warehouse = open_store(StagingConfig(uri=f"{root}/warehouse", webhdfs_url=hdfs_cluster.webhdfs_url))
    data, commits = iceberg_files(warehouse.list("iceberg"), "sc_wh", "sc__orders")
    assert data and commits, warehouse.list("")
    mariadb.execute(
        "UPDATE sc.orders SET total = total + 1 WHERE id % 3 = 0",
        "DELETE FROM sc.lines WHERE qty = 0",
        "INSERT INTO sc.orders VALUES (500, 'new', 9.99)",
        "INSERT INTO sc.lines VALUES (500, 1, 5)",
    )
    delta = dags_test(env, "loader_continuous_delta", "2026-03-02T00:00:00+00:00", {"checksum": True})
    assert run_state(delta) == "success", delta[-3000:]
    # The run's checksum compared both tables, source against warehouse, at one snapshot.
    assert re.search(r"checksum at \S+: 2 tables, 2 equal", delta), delta[-3000:]
    # The changes went through HDFS and the Iceberg table lives there: the merge committed a
    # snapshot (a metadata file) and kept the loaded files (merge-on-read: the changed rows'
    # deletes and new rows are new files beside them); only the embedded catalog is local.
    staging = open_store(StagingConfig(uri=f"{root}/staging", webhdfs_url=hdfs_cluster.webhdfs_url))
    assert [k for k in staging.list("sc") if k.endswith((".csv", ".csv.gz"))], staging.list("")
    merged_data, merged_commits = iceberg_files(warehouse.list("iceberg"), "sc_wh", "sc__orders")
    assert data < merged_data and commits < merged_commits
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loader.toml", "metastore"]

    # Each job was an application of the cluster whose executors ran on both workers.
    ran = _apps_on_workers(spark_cluster)
    for job in ("initial-load", "materialize", "checksum"):
        assert ran.get(f"loader-{job}-sc") == {"1", "2"}, ran
