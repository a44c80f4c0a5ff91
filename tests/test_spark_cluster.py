"""The DAGs against a Spark standalone cluster (a master and two workers on loopback), with staging
and the warehouse on S3 (moto's server, checking keys) through the keys of an Airflow connection:
the initial load, delta runs and their checksum run as applications of the cluster, in executors
on its workers; the keys reach boto3 (the staging's writes) and Spark (its reads and the Iceberg
table's files) without being printed; and the warehouse equals the source."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import (
    MariaDB,
    SparkCluster,
    dags_test,
    iceberg_files,
    loader_dag_env,
    moto_server,
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


KMS_KEY = "arn:aws:kms:us-east-1:123456789012:key/loader-staging"


def test_the_dags_run_on_a_spark_cluster_with_s3_through_the_airflow_connections_keys(
    mariadb: MariaDB,
    s3_with_keys: tuple[str, str, str, str],
    spark_cluster: SparkCluster,
    airflow_home: Path,
    tmp_path: Path,
) -> None:
    import boto3

    endpoint, bucket, key_id, secret = s3_with_keys
    mariadb.execute(
        "DROP DATABASE IF EXISTS sc",
        "CREATE DATABASE sc",
        "CREATE TABLE sc.orders (id INT PRIMARY KEY, customer VARCHAR(20), total DECIMAL(10,2))",
        "CREATE TABLE sc.lines (order_id INT, line INT, qty SMALLINT, PRIMARY KEY (order_id, line))",
        "INSERT INTO sc.orders SELECT seq, CONCAT('c', seq), seq * 1.5 FROM sc.seq_1_to_200",
        "INSERT INTO sc.lines SELECT seq % 200 + 1, seq % 3, seq % 7 FROM sc.seq_1_to_400",
    )
    config = tmp_path / "loader.toml"
    config.write_text(
        f"""[source]
name = "sc"
airflow_conn_id = "loader_source"
[tables]
include = ["sc.*"]
[staging]
uri = "s3://{bucket}/staging"
s3_endpoint_url = "{endpoint}"
aws_conn_id = "loader_s3"
s3_sse = "aws:kms"
s3_sse_kms_key = "{KMS_KEY}"
[warehouse]
database = "sc_wh"
dir = "s3://{bucket}/warehouse"
s3_endpoint_url = "{endpoint}"
aws_conn_id = "loader_s3"
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
    env = loader_dag_env(
        airflow_home,
        config,
        mariadb,
        master=spark_cluster.master,
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

    loaded = dags_test(env, "loader_initial_load", "2026-03-01T00:00:00+00:00")
    assert run_state(loaded) == "success", loaded[-3000:]
    data, commits = iceberg_files(keys("warehouse/"), "sc_wh", "sc__orders")
    assert data and commits, keys("")
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
    # The changes went through S3 and the Iceberg table lives there: the merge committed a
    # snapshot (a metadata file) and kept the loaded files (merge-on-read: the changed rows'
    # deletes and new rows are new files beside them); only the embedded catalog is local.
    assert [k for k in keys("staging/") if k.endswith((".csv", ".csv.gz"))], keys("")
    merged_data, merged_commits = iceberg_files(keys("warehouse/"), "sc_wh", "sc__orders")
    assert data < merged_data and commits < merged_commits
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loader.toml", "metastore"]
    # Every object carries the staging's encryption: boto3's staging files and ledger, and the
    # warehouse files Spark's executors wrote through s3a (its settings are the bucket's).
    for key in keys(""):
        head = s3.head_object(Bucket=bucket, Key=key)
        assert (head.get("ServerSideEncryption"), head.get("SSEKMSKeyId")) == ("aws:kms", KMS_KEY), key
    # The secret key reached boto3 and Spark without being printed (spark-submit's command line
    # and Spark's logs are in the output).
    assert "spark-submit" in delta
    assert secret not in loaded + delta

    # Each job was an application of the cluster whose executors ran on both workers.
    ran = _apps_on_workers(spark_cluster)
    for job in ("initial-load", "materialize", "checksum"):
        assert ran.get(f"loader-{job}-sc") == {"1", "2"}, ran
