"""The staging stores: the same behaviour from a local directory, S3 (moto's server over HTTP)
and HDFS (a MiniDFSCluster, written through WebHDFS)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from loader.core.config import StagingConfig
from loader.core.errors import StoreError
from loader.staging.stores import Store, open_store


@pytest.fixture(params=["file", "s3", "hdfs"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "file":
        yield open_store(StagingConfig(uri=str(tmp_path / "staging")))
    elif request.param == "s3":
        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = request.getfixturevalue("s3_bucket")
        yield open_store(StagingConfig(uri=f"s3://{bucket}/stage", s3_endpoint_url=endpoint))
    else:
        hdfs = request.getfixturevalue("hdfs_cluster")
        # One cluster serves the session: each test stages under its own folder.
        yield open_store(StagingConfig(uri=f"{hdfs.uri}/{tmp_path.name}/stage", webhdfs_url=hdfs.webhdfs_url))


@pytest.mark.integration
def test_put_get_list_delete(store: Store) -> None:
    store.put("src/db/t/1/part-00000.csv", b"a,b\n")
    store.put("src/db/t/1/part-00001.csv", b"c\n")
    store.put("src/_intervals/1.json", b"{}")
    assert store.get("src/db/t/1/part-00000.csv") == b"a,b\n"
    assert store.get("src/missing") is None
    assert store.list("src/db") == ["src/db/t/1/part-00000.csv", "src/db/t/1/part-00001.csv"]
    store.put("src/db/t/1/part-00000.csv", b"replaced\n")
    assert store.get("src/db/t/1/part-00000.csv") == b"replaced\n"
    store.delete("src/db/t/1/part-00001.csv")
    assert store.list("src/db") == ["src/db/t/1/part-00000.csv"]
    assert store.list("nothing/here") == []


@pytest.mark.integration
def test_create_is_once_only(store: Store) -> None:
    assert store.create("src/_ledger/claim", b"first") is True
    assert store.create("src/_ledger/claim", b"second") is False
    assert store.get("src/_ledger/claim") == b"first"


@pytest.mark.integration
def test_put_file_uploads_a_large_file(store: Store, tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    data = bytes(range(256)) * (5 * 4096)  # 5 MB
    big.write_bytes(data)
    store.put_file("src/db/t/2/part-00000.csv", big)  # may move the file
    assert store.get("src/db/t/2/part-00000.csv") == data


def test_keys_cannot_escape_the_root(tmp_path: Path) -> None:
    store = open_store(StagingConfig(uri=str(tmp_path / "staging")))
    for bad in ("../x", "a/../../x", "/etc/passwd", "a//b", ""):
        with pytest.raises(StoreError, match="not a clean relative path"):
            store.put(bad, b"")
    assert not (tmp_path / "x").exists()


def test_local_create_has_no_race(tmp_path: Path) -> None:
    store = open_store(StagingConfig(uri=str(tmp_path / "staging")))
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(store.create("k", b"x"))) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1


def test_a_killed_writes_temporary_file_goes_at_the_next_write_of_its_name(tmp_path: Path) -> None:
    import os
    import time

    from loader.staging.stores import STALE_TEMP_SECONDS

    store = open_store(StagingConfig(uri=str(tmp_path / "staging")))
    store.put("src/_ledger/checkpoint.json", b"1")
    folder = tmp_path / "staging" / "src" / "_ledger"
    old, live = folder / ".checkpoint.json.k1ll3d.tmp", folder / ".checkpoint.json.wr1t1ng.tmp"
    other = folder / ".other.json.k1ll3d.tmp"
    for left in (old, live, other):
        left.write_bytes(b"half")
    then = time.time() - STALE_TEMP_SECONDS - 60
    os.utime(old, (then, then))
    os.utime(other, (then, then))
    store.put("src/_ledger/checkpoint.json", b"2")
    # The killed write's file is gone; one that may be a live write's, and another name's, stay.
    assert not old.exists() and live.exists() and other.exists()
    assert store.get("src/_ledger/checkpoint.json") == b"2"
    assert store.list("src") == ["src/_ledger/checkpoint.json"]


def test_spark_uris(tmp_path: Path) -> None:
    local = open_store(StagingConfig(uri=str(tmp_path / "staging")))
    assert local.spark_uri("a/b.csv") == (tmp_path / "staging" / "a" / "b.csv").as_uri()
    hdfs = open_store(StagingConfig(uri="hdfs://nn:8020/stage", webhdfs_url="http://127.0.0.1:1"))
    assert hdfs.spark_uri("a/b.csv") == "hdfs://nn:8020/stage/a/b.csv"


@pytest.mark.integration
def test_s3_credentials_from_an_airflow_connection(
    s3_endpoint: str, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from urllib.parse import quote

    monkeypatch.setenv(
        "AIRFLOW_CONN_STAGING_S3",
        f"aws://testing:testing@/?endpoint_url={quote(s3_endpoint, safe='')}&region_name=us-east-1",
    )
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    store = open_store(StagingConfig(uri=f"s3://{s3_bucket}/p", aws_conn_id="staging_s3"))
    store.put("k", b"v")
    assert store.get("k") == b"v"


@pytest.mark.integration
def test_big_files_go_to_s3_in_parts(
    s3_endpoint: str, s3_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    from loader.staging.stores import S3Store

    monkeypatch.setattr(S3Store, "MULTIPART_THRESHOLD", 5 * 1024 * 1024)  # S3's smallest part
    store = open_store(StagingConfig(uri=f"s3://{s3_bucket}/p", s3_endpoint_url=s3_endpoint))
    data = bytes(range(256)) * (12 * 4096)  # 12 MB: three parts
    big = tmp_path / "big.csv"
    big.write_bytes(data)
    store.put_file("k.csv", big)
    head = boto3.client("s3", endpoint_url=s3_endpoint).head_object(Bucket=s3_bucket, Key="p/k.csv")
    assert head["ETag"].strip('"').endswith("-3")  # the ETag of a multipart upload counts its parts
    assert store.get("k.csv") == data


@pytest.mark.integration
@pytest.mark.parametrize(
    ("sse", "kms_key"), [("AES256", ""), ("aws:kms", "arn:aws:kms:us-east-1:123456789012:key/staging")]
)
def test_every_object_written_to_s3_staging_carries_the_configured_encryption(
    s3_endpoint: str, s3_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sse: str, kms_key: str
) -> None:
    import boto3

    from loader.staging.stores import S3Store

    monkeypatch.setattr(S3Store, "MULTIPART_THRESHOLD", 5 * 1024 * 1024)
    prefix = f"sse-{tmp_path.name}"
    store = open_store(
        StagingConfig(
            uri=f"s3://{s3_bucket}/{prefix}", s3_endpoint_url=s3_endpoint, s3_sse=sse, s3_sse_kms_key=kms_key
        )
    )
    store.put("put.csv", b"a\n")
    assert store.create("created.json", b"{}")
    small, big = tmp_path / "small.csv", tmp_path / "big.csv"
    small.write_bytes(b"b\n")
    big.write_bytes(bytes(range(256)) * (6 * 4096))  # 6 MB: two parts
    store.put_file("small.csv", small)
    store.put_file("big.csv", big)
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    for key in ("put.csv", "created.json", "small.csv", "big.csv"):
        head = s3.head_object(Bucket=s3_bucket, Key=f"{prefix}/{key}")
        assert head.get("ServerSideEncryption") == sse, (key, head)
        assert head.get("SSEKMSKeyId", "") == kms_key, (key, head)
