"""AWS keys named by Airflow connections: resolved by a launcher, handed to its job in the
environment, and given to s3a per bucket."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loader.core.config import load_config
from loader.staging.aws import KEYS_ENV, AwsKeys, connection_keys, keys_env
from loader.warehouse.session import s3a_keys_conf, spark_conf


def _config(tmp_path: Path, staging_endpoint: str = "") -> Path:
    path = tmp_path / "loader.toml"
    path.write_text(
        f"""[staging]
uri = "s3://landing/staging"
aws_conn_id = "landing_keys"
s3_endpoint_url = "{staging_endpoint}"
[warehouse]
dir = "s3://lake/wh"
aws_conn_id = "lake_keys"
metastore_dir = "{tmp_path / "metastore"}"
"""
    )
    return path


def test_a_launcher_hands_the_connections_keys_to_its_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE_KEYS",
        json.dumps(
            {
                "conn_type": "aws",
                "login": "AKIALAKE",
                "password": "lake-secret",
                "extra": {"aws_session_token": "tok", "region_name": "eu-west-1"},
            }
        ),
    )
    env = keys_env(["lake_keys", "", "lake_keys"])
    # The job's side: no Airflow to ask, the keys come from the environment it was given.
    monkeypatch.delenv("AIRFLOW_CONN_LAKE_KEYS")
    monkeypatch.setenv(KEYS_ENV, env[KEYS_ENV])
    keys = connection_keys("lake_keys")
    assert keys == AwsKeys("AKIALAKE", "lake-secret", "tok", "eu-west-1")
    assert "lake-secret" not in repr(keys)
    assert keys_env([]) == {}


def test_s3a_gets_each_buckets_keys_and_only_in_the_drivers_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed = {
        "landing_keys": {
            "access_key": "AKIALAND",
            "secret_key": "land-secret",
            "endpoint_url": "http://minio:9000",
        },
        "lake_keys": {"access_key": "AKIALAKE", "secret_key": "lake-secret", "session_token": "tok"},
    }
    monkeypatch.setenv(KEYS_ENV, json.dumps(handed))
    cfg = load_config(_config(tmp_path), env={})
    conf = s3a_keys_conf(cfg)
    assert conf["spark.hadoop.fs.s3a.bucket.landing.access.key"] == "AKIALAND"
    assert conf["spark.hadoop.fs.s3a.bucket.landing.secret.key"] == "land-secret"
    # The connection's endpoint serves where the config names none, as it does for boto3.
    assert conf["spark.hadoop.fs.s3a.bucket.landing.endpoint"] == "http://minio:9000"
    assert conf["spark.hadoop.fs.s3a.bucket.lake.access.key"] == "AKIALAKE"
    assert conf["spark.hadoop.fs.s3a.bucket.lake.session.token"] == "tok"
    assert "spark.hadoop.fs.s3a.bucket.lake.endpoint" not in conf
    # The settings spark-submit gets on its command line carry no key.
    assert not any(s in value for value in spark_conf(cfg).values() for s in ("land-secret", "lake-secret"))


def test_the_configs_endpoint_wins_over_the_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed = {"landing_keys": {"endpoint_url": "http://elsewhere:9000"}, "lake_keys": {}}
    monkeypatch.setenv(KEYS_ENV, json.dumps(handed))
    cfg = load_config(_config(tmp_path, staging_endpoint="http://ceph:7480"), env={})
    # No keys in the connections: the buckets stay with the usual chain.
    assert s3a_keys_conf(cfg) == {}
    assert spark_conf(cfg)["spark.hadoop.fs.s3a.bucket.landing.endpoint"] == "http://ceph:7480"


def test_spark_hides_every_secret_the_loader_gives_it_in_its_ui_and_event_logs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The catalog's secret goes into the session's settings (never on the command line), under a
    name Spark's redaction pattern hides: a JDBC catalog's password and a REST catalog's OAuth2
    credential, which Spark's own default pattern would show."""
    import re

    from loader.warehouse.session import iceberg_secret_conf

    monkeypatch.setenv("CATALOG_SECRET", "client:s3cret")
    for kind, uri in (("jdbc", "jdbc:mysql://catalog/iceberg"), ("rest", "http://catalog:8181")):
        cfg = load_config(
            None,
            env={
                "LOADER__WAREHOUSE__ICEBERG_CATALOG": kind,
                "LOADER__WAREHOUSE__ICEBERG_CATALOG_URI": uri,
                "LOADER__WAREHOUSE__ICEBERG_CATALOG_PASSWORD_ENV": "CATALOG_SECRET",
            },
        )
        pattern = spark_conf(cfg)["spark.redaction.regex"]
        assert not any("s3cret" in value for value in spark_conf(cfg).values())
        [(name, value)] = iceberg_secret_conf(cfg.warehouse).items()
        assert value == "client:s3cret" and re.search(pattern, name), name
    assert re.search("(?i)secret|password|token|access[.]key", name) is None  # Spark's default: shown
