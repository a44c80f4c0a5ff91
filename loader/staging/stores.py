"""Where staging files live, behind one small interface chosen by the URI's scheme.

- ``file://`` (or a plain path): a local directory; every write lands in a temporary file
  that is renamed into place, so a reader never sees half a file.
- ``s3://bucket/prefix``: S3 or any S3-compatible store (``staging.s3_endpoint_url``) through
  boto3; large files go up in parts; an object appears whole or not at all.
- ``hdfs://namenode:8020/path``: HDFS through its WebHDFS REST API (``staging.webhdfs_url``)
  with the HdfsCLI client; files are written beside their name and renamed into place.

``create`` refuses to overwrite (the ledger relies on it to claim things once); ``put``
replaces. Keys are ``/``-separated paths below the store's root.
"""

from __future__ import annotations

import contextlib
import glob
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from loader.core import crashpoints
from loader.core.config import StagingConfig
from loader.core.errors import ConfigError, StoreError, TransientError
from loader.staging import layout
from loader.staging.aws import connection_keys


class Store(Protocol):
    """A place for staging files and manifests."""

    uri: str

    def put(self, key: str, data: bytes) -> None:
        """Write ``data`` at ``key``, replacing what is there, atomically."""
        ...

    def put_file(self, key: str, path: Path) -> None:
        """Upload a local file to ``key``, replacing what is there, atomically; the local file
        may be consumed (moved) by the upload."""
        ...

    def create(self, key: str, data: bytes) -> bool:
        """Write ``data`` at ``key`` only if nothing is there; False when something was."""
        ...

    def get(self, key: str) -> bytes | None:
        """The bytes at ``key``, or None."""
        ...

    def list(self, prefix: str) -> list[str]:
        """Every key below ``prefix``, sorted."""
        ...

    def delete(self, key: str) -> None:
        """Remove ``key`` if it exists."""
        ...

    def spark_uri(self, key: str) -> str:
        """How Spark names ``key``."""
        ...


# A temporary file this old is no live write's.
STALE_TEMP_SECONDS = 3600


def open_store(cfg: StagingConfig) -> Store:
    """The store of a staging URI (marking its writes as crash points when a test asks)."""
    store = _open(cfg)
    return CrashPoints(store) if crashpoints.enabled() else store


def _open(cfg: StagingConfig) -> Store:
    scheme = cfg.scheme
    if scheme == "file":
        return LocalStore(cfg.uri)
    if scheme == "s3":
        return S3Store(
            cfg.uri, cfg.s3_endpoint_url or None, cfg.aws_conn_id or None, cfg.s3_sse, cfg.s3_sse_kms_key
        )
    if scheme == "hdfs":
        return HdfsStore(cfg.uri, cfg.webhdfs_url)
    raise ConfigError(f"staging URI scheme {scheme!r} is not supported; accepted: file, s3, hdfs")


class CrashPoints:
    """A store whose every change is a crash point before and after it (``crashpoints``), named
    for the change and what the key holds: ``before put ledger interval``."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.uri = store.uri

    @contextlib.contextmanager
    def _marked(self, change: str, key: str) -> Iterator[None]:
        what = f"{change} {layout.kind(key)}"
        crashpoints.reached(f"before {what}")
        yield
        crashpoints.reached(f"after {what}")

    def put(self, key: str, data: bytes) -> None:
        with self._marked("put", key):
            self._store.put(key, data)

    def put_file(self, key: str, path: Path) -> None:
        with self._marked("put", key):
            self._store.put_file(key, path)

    def create(self, key: str, data: bytes) -> bool:
        with self._marked("create", key):
            return self._store.create(key, data)

    def get(self, key: str) -> bytes | None:
        return self._store.get(key)

    def list(self, prefix: str) -> list[str]:
        return self._store.list(prefix)

    def delete(self, key: str) -> None:
        with self._marked("delete", key):
            self._store.delete(key)

    def spark_uri(self, key: str) -> str:
        return self._store.spark_uri(key)


def _clean_key(key: str) -> str:
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise StoreError(f"staging key {key!r} is not a clean relative path")
    return key


@contextlib.contextmanager
def _naming(path: Path) -> Iterator[None]:
    """A failed file operation names the store's file (a write that finds the disk full does not)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.strerror:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


class LocalStore:
    """A directory on a local (or mounted) file system."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.root = Path(uri[len("file://") :] if uri.startswith("file://") else uri)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / _clean_key(key)

    @contextlib.contextmanager
    def _temp_beside(self, path: Path) -> Iterator[Path]:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A write killed before its rename left its temporary file; the next write of the name
        # removes it (once it is old enough not to be another live write's).
        stale = time.time() - STALE_TEMP_SECONDS
        for left in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
            with contextlib.suppress(OSError):
                if left.stat().st_mtime < stale:
                    left.unlink()
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp = Path(name)
        try:
            yield tmp
        finally:
            tmp.unlink(missing_ok=True)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        with _naming(path), self._temp_beside(path) as tmp:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)

    def put_file(self, key: str, path: Path) -> None:
        """Move a local file into place (a copy when it lives on another file system)."""
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(path, target)
            return
        except OSError:
            pass  # another device: copy it
        with _naming(target), self._temp_beside(target) as tmp:
            with open(path, "rb") as src, open(tmp, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(tmp, target)

    def create(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        with _naming(path), self._temp_beside(path) as tmp:
            tmp.write_bytes(data)
            try:
                os.link(tmp, path)  # fails if the name exists: create-once without a race
            except FileExistsError:
                return False
        return True

    def get(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def list(self, prefix: str) -> list[str]:
        base = self.root / prefix if prefix else self.root
        if not base.exists():
            return []
        return sorted(
            str(p.relative_to(self.root))
            for p in base.rglob("*")
            if p.is_file() and not p.name.startswith(".")
        )

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def spark_uri(self, key: str) -> str:
        # Not Path.as_uri(): Spark takes a file path's characters literally, so a %-escaped
        # space or %XX in a staged name would name another file.
        return "file://" + str(self._path(key).resolve())


class S3Store:
    """An S3 bucket and prefix; credentials from an Airflow AWS connection or the standard chain."""

    MULTIPART_THRESHOLD = 64 * 1024 * 1024

    def __init__(
        self,
        uri: str,
        endpoint_url: str | None = None,
        aws_conn_id: str | None = None,
        sse: str = "",
        kms_key: str = "",
    ) -> None:
        parsed = urlparse(uri)
        if not parsed.netloc:
            raise ConfigError(f"staging URI {uri!r} has no bucket (s3://bucket/prefix)")
        self.uri = uri
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        self._client = _s3_client(endpoint_url, aws_conn_id)
        # Every object written carries it ([staging] s3_sse); S3 keeps it with the object.
        self._encryption = {"ServerSideEncryption": sse} if sse else {}
        if kms_key:
            self._encryption["SSEKMSKeyId"] = kms_key

    def _key(self, key: str) -> str:
        key = _clean_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(*args, **kwargs)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "503", "500"):
                raise TransientError(f"S3 {what} s3://{self.bucket}: {code}") from None
            raise
        except BotoCoreError as exc:
            raise TransientError(f"S3 {what} s3://{self.bucket}: {exc}") from None

    def put(self, key: str, data: bytes) -> None:
        self._call(
            "put",
            self._client.put_object,
            Bucket=self.bucket,
            Key=self._key(key),
            Body=data,
            **self._encryption,
        )

    def put_file(self, key: str, path: Path) -> None:
        from boto3.s3.transfer import TransferConfig

        config = TransferConfig(
            multipart_threshold=self.MULTIPART_THRESHOLD, multipart_chunksize=self.MULTIPART_THRESHOLD
        )
        self._call(
            "upload",
            self._client.upload_file,
            str(path),
            self.bucket,
            self._key(key),
            ExtraArgs=self._encryption or None,
            Config=config,
        )

    def create(self, key: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        try:
            self._call(
                "create",
                self._client.put_object,
                Bucket=self.bucket,
                Key=self._key(key),
                Body=data,
                IfNoneMatch="*",
                **self._encryption,
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in (
                "PreconditionFailed",
                "ConditionalRequestConflict",
            ):
                return False
            raise StoreError(f"S3 create s3://{self.bucket}/{self._key(key)}: {exc}") from None
        return True

    def get(self, key: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            obj = self._call("get", self._client.get_object, Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise StoreError(f"S3 get s3://{self.bucket}/{self._key(key)}: {exc}") from None
        return bytes(obj["Body"].read())

    def list(self, prefix: str) -> list[str]:
        full = self._key(prefix) if prefix else self.prefix
        strip = len(self.prefix) + 1 if self.prefix else 0
        keys: list[str] = []
        paginator = self._client.get_paginator("list_objects_v2")
        for page in self._call(
            "list", paginator.paginate, Bucket=self.bucket, Prefix=full + "/" if full else ""
        ):
            keys.extend(obj["Key"][strip:] for obj in page.get("Contents", []))
        return sorted(keys)

    def delete(self, key: str) -> None:
        self._call("delete", self._client.delete_object, Bucket=self.bucket, Key=self._key(key))

    def spark_uri(self, key: str) -> str:
        # Spark reads S3 through Hadoop's S3A connector (the hadoop-aws jar on the Spark side).
        return f"s3a://{self.bucket}/{self._key(key)}"


def _s3_client(endpoint_url: str | None, aws_conn_id: str | None) -> Any:
    """A boto3 S3 client: the keys of an Airflow AWS connection when one is named
    (``aws.connection_keys``), else the standard AWS credential chain."""
    import boto3

    if not aws_conn_id:
        return boto3.client("s3", endpoint_url=endpoint_url)
    keys = connection_keys(aws_conn_id)
    return boto3.client(
        "s3",
        endpoint_url=endpoint_url or keys.endpoint_url or None,
        region_name=keys.region or None,
        aws_access_key_id=keys.access_key or None,
        aws_secret_access_key=keys.secret_key or None,
        aws_session_token=keys.session_token or None,
    )


class HdfsStore:
    """An HDFS directory through WebHDFS."""

    def __init__(self, uri: str, webhdfs_url: str, user: str | None = None) -> None:
        if not webhdfs_url:
            raise ConfigError(
                "staging.webhdfs_url (http://namenode:9870) is required for an hdfs:// staging URI"
            )
        from hdfs import InsecureClient

        parsed = urlparse(uri)
        self.uri = uri
        self.root = parsed.path.rstrip("/") or "/"
        self._client = InsecureClient(webhdfs_url, user=user or os.environ.get("HADOOP_USER_NAME"))

    def _path(self, key: str) -> str:
        return f"{self.root}/{_clean_key(key)}"

    def _write_then_rename(self, key: str, data: Any) -> None:
        path = self._path(key)
        tmp = f"{path.rsplit('/', 1)[0]}/.{path.rsplit('/', 1)[1]}.{uuid.uuid4().hex}.tmp"
        self._client.write(tmp, data=data, overwrite=True)
        self._client.delete(path)
        self._client.rename(tmp, path)

    def put(self, key: str, data: bytes) -> None:
        self._write_then_rename(key, data)

    def put_file(self, key: str, path: Path) -> None:
        with open(path, "rb") as f:
            self._write_then_rename(key, f)

    def create(self, key: str, data: bytes) -> bool:
        from hdfs.util import HdfsError

        try:
            self._client.write(self._path(key), data=data, overwrite=False)
        except HdfsError as exc:
            if "exists" in str(exc).lower():
                return False
            raise StoreError(f"HDFS create {self._path(key)}: {exc}") from None
        return True

    def get(self, key: str) -> bytes | None:
        from hdfs.util import HdfsError

        try:
            with self._client.read(self._path(key)) as reader:
                return bytes(reader.read())
        except HdfsError as exc:
            if "not found" in str(exc).lower() or "does not exist" in str(exc).lower():
                return None
            raise StoreError(f"HDFS read {self._path(key)}: {exc}") from None

    def list(self, prefix: str) -> list[str]:
        base = f"{self.root}/{prefix}" if prefix else self.root
        if self._client.status(base, strict=False) is None:
            return []
        out: list[str] = []
        for dirpath, _dirs, files in self._client.walk(base):
            rel = dirpath[len(self.root) + 1 :]
            out.extend(f"{rel}/{f}" if rel else f for f in files if not f.startswith("."))
        return sorted(out)

    def delete(self, key: str) -> None:
        self._client.delete(self._path(key))

    def spark_uri(self, key: str) -> str:
        parsed = urlparse(self.uri)
        return f"hdfs://{parsed.netloc}{self._path(key)}"
