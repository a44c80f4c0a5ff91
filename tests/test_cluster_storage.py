"""Staging and the warehouse on the storage of a cluster, end to end: a real HDFS (MiniDFSCluster;
the extractor writes through WebHDFS, Spark reads and writes hdfs://) and S3 (moto's server; boto3
writes the staging, Spark reads it and keeps the warehouse through s3a with the pinned hadoop-aws).
The Hive format's cases run in the test session's Spark; the DAGs' case runs the loader as a user
runs it, its Spark jobs through spark-submit."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loader.config import StagingConfig, load_config
from loader.staging.stores import Store, open_store
from tests.conftest import (
    HdfsCluster,
    MariaDB,
    dags_test,
    delta,
    iceberg_files,
    loader_dag_env,
    moto_server,
    quiet,
    run_state,
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


# The Hive format on each store here, in the test session's Spark (the storage is the subject);
# Iceberg (the default format) on each store, end to end through Spark jobs with the same checks,
# is in the DAG tests: tests/test_spark_cluster.py on HDFS, the keyed S3 test below.
@pytest.mark.parametrize("where", ["hdfs", "s3"])
def test_staging_and_a_hive_format_warehouse_on_cluster_storage_equal_the_source(
    spark: Any,
    mariadb: MariaDB,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    from loader.warehouse.checksum import compare_sums, source_sums
    from loader.warehouse.initial_load import run_initial_load

    schema = f"cs_{where}_hive"
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {schema}",
        f"CREATE DATABASE {schema}",
        f"CREATE TABLE {schema}.t (id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(12,2), d DATETIME(6))",
        f"INSERT INTO {schema}.t SELECT seq, CONCAT('v', seq), seq / 3, '2026-01-02 03:04:05.678901'"
        f" FROM {schema}.seq_1_to_40",
    )
    staging, warehouse, warehouse_files = _storage(where, request, tmp_path.name)
    warehouse += '\nformat = "hive"'
    toml = mariadb.config_file(tmp_path, schema, f"{schema}.*", warehouse=warehouse, staging=staging)
    monkeypatch.setenv("LOADER_TEST_PASSWORD", mariadb.password)
    cfg = load_config(toml, env={})
    warehouse_storage_of(spark, cfg)

    run_initial_load(spark, cfg, progress=quiet)
    (copied,) = _versions(warehouse_files, schema)
    mariadb.execute(
        f"UPDATE {schema}.t SET v = 'changed', n = -n WHERE id % 4 = 0",
        f"DELETE FROM {schema}.t WHERE id BETWEEN 10 AND 14",
        f"INSERT INTO {schema}.t VALUES (100, 'new «ü»', 1.5, '2026-11-24 00:00:00.000001')",
    )
    delta(spark, cfg)

    # The changes went through the cluster's storage, and the table lives there: the merge wrote
    # a new version of its one partition and, with no retention, deleted the copy's.
    store = open_store(cfg.staging)
    staged = [k for k in store.list(schema) if k.endswith((".csv", ".csv.gz"))]
    assert staged, store.list("")
    (merged,) = _versions(warehouse_files, schema)
    assert merged != copied
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loader.toml"]  # nothing on local disk

    (checked,) = compare_sums(spark, cfg, source_sums(cfg, progress=quiet))
    assert (checked.table, checked.warehouse_table, checked.source_rows, checked.warehouse_rows) == (
        f"{schema}.t",
        f"{schema}_wh.{schema}__t",
        36,
        36,
    )
    assert checked.equal, checked


@pytest.fixture(scope="module")
def s3_with_keys() -> Iterator[tuple[str, str, str, str]]:
    """An S3 server that checks keys (moto with IAM enforced) and a bucket only one user's keys
    reach: ``(endpoint, bucket, access key id, secret key)``."""
    import boto3

    # The first three requests (the user, its policy and its keys) need no keys; then every
    # request must be signed by a known user.
    with moto_server({"INITIAL_NO_AUTH_ACTION_COUNT": "3"}) as url:
        anyone = {"endpoint_url": url, "region_name": "us-east-1"}
        iam = boto3.client("iam", aws_access_key_id="x", aws_secret_access_key="x", **anyone)
        iam.create_user(UserName="loader")
        allow = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="loader", PolicyName="all", PolicyDocument=json.dumps(allow))
        key = iam.create_access_key(UserName="loader")["AccessKey"]
        s3 = boto3.client(
            "s3", aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"], **anyone
        )
        s3.create_bucket(Bucket="keyed")
        yield url, "keyed", key["AccessKeyId"], key["SecretAccessKey"]


def test_the_dags_use_the_airflow_connections_keys_for_s3_in_boto3_and_spark(
    mariadb: MariaDB, s3_with_keys: tuple[str, str, str, str], airflow_home: Path, tmp_path: Path
) -> None:
    import boto3

    endpoint, bucket, key_id, secret = s3_with_keys
    mariadb.execute(
        "DROP DATABASE IF EXISTS sk",
        "CREATE DATABASE sk",
        "CREATE TABLE sk.t (id INT PRIMARY KEY, v VARCHAR(20))",
        "CREATE TABLE sk.u (a VARCHAR(8), b INT, n DECIMAL(8,2), PRIMARY KEY (a, b))",
        "INSERT INTO sk.t SELECT seq, CONCAT('v', seq) FROM sk.seq_1_to_300",
        "INSERT INTO sk.u SELECT CONCAT('k', seq % 10), seq, seq / 4 FROM sk.seq_1_to_100",
    )
    config = tmp_path / "loader.toml"
    config.write_text(
        f"""[source]
name = "sk"
airflow_conn_id = "loader_source"
[tables]
include = ["sk.*"]
[staging]
uri = "s3://{bucket}/staging"
s3_endpoint_url = "{endpoint}"
aws_conn_id = "loader_s3"
[warehouse]
database = "sk_wh"
dir = "s3://{bucket}/warehouse"
s3_endpoint_url = "{endpoint}"
aws_conn_id = "loader_s3"
metastore_dir = "{tmp_path / "metastore"}"
partition_rows = 100
buckets = 2
[load]
parallelism = 2
[spark]
conf = {{ "spark.sql.shuffle.partitions" = "2" }}
"""
    )
    env = loader_dag_env(
        airflow_home,
        config,
        mariadb,
        extra={
            "AIRFLOW_CONN_LOADER_S3": json.dumps({"conn_type": "aws", "login": key_id, "password": secret}),
            # The usual chain's keys are not this server's: only the connection's can work.
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        },
    )
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
    )

    def keys(prefix: str) -> list[str]:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [o["Key"].removeprefix(prefix) for page in pages for o in page.get("Contents", [])]

    loaded = dags_test(env, "loader_initial_load", "2026-04-01T00:00:00+00:00")
    assert run_state(loaded) == "success", loaded[-3000:]
    data, commits = iceberg_files(keys("warehouse/"), "sk_wh", "sk__t")
    assert data and commits, keys("")
    mariadb.execute(
        "UPDATE sk.t SET v = CONCAT(v, '!') WHERE id % 7 = 0",
        "DELETE FROM sk.u WHERE b % 5 = 0",
        "INSERT INTO sk.t VALUES (1000, 'new')",
    )
    delta = dags_test(env, "loader_continuous_delta", "2026-04-02T00:00:00+00:00", {"checksum": True})
    assert run_state(delta) == "success", delta[-3000:]
    assert re.search(r"checksum at \S+: 2 tables, 2 equal", delta), delta[-3000:]
    # The changes went through S3 and the Iceberg table lives there: the merge committed a
    # snapshot (a metadata file) and kept the loaded files (merge-on-read: the changed rows'
    # deletes and new rows are new files beside them); only the embedded catalog is local.
    assert [k for k in keys("staging/") if k.endswith((".csv", ".csv.gz"))], keys("")
    merged_data, merged_commits = iceberg_files(keys("warehouse/"), "sk_wh", "sk__t")
    assert data < merged_data and commits < merged_commits
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loader.toml", "metastore"]
    # The secret key reached boto3 and Spark without being printed (spark-submit's command line
    # and Spark's logs are in the output).
    assert "spark-submit" in delta
    assert secret not in loaded + delta
