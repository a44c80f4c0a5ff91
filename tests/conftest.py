"""Session-scoped fixtures for the real parts: a private MariaDB, a local Spark, an S3 endpoint.

Each starts once per test session on its own free loopback port and temporary folder, and is
stopped and removed at the end. Tests that use them are marked ``integration``.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime as dt
import gzip
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pymysql
import pytest

from loader.core.config import Config, MaintenanceConfig, WarehouseConfig, load_config
from loader.core.positions import Position
from loader.core.results import Maintenance
from loader.source.connection import current_position
from loader.warehouse.session import QUICK_COMPILER_CODE_CACHE
from tests import airflow_runner

# The time and launches per file and test, printed at the end of every run.
pytest_plugins = ["tests.suite_report"]

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
BINLOG_TESTDATA = SHARED / "testdata" / "binlogs"
MARIADB_SH = ROOT / "infra" / "mariadb" / "mariadb.sh"
MYSQL_SH = ROOT / "infra" / "mysql" / "mysql.sh"
BIN = Path(sys.executable).parent  # the environment's own commands: airflow, loader, spark-submit
PASSWORD = "loader-test"

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# The tests' Spark jobs last seconds on two cores, where the JVM's C2 compiler costs more than it
# gains (bench/delta_cycle: 37 s, 27 s with C1 only); the loader chooses C1 only by itself for
# materialise jobs it knows to be small (README, "A job's start"), the suite for every job.
# spark-submit's JVM reads this. Not for the worker's own session (``spark``), which runs Spark
# work for the whole run: there C2 pays back in wall time alone (test_edges: 208 s with C1 only,
# 179 s with both), but not in CPU (258 s and 265 s), and the suite is bound by its CPU. Spark
# makes new classes for every query, and at the JVM's default thresholds C2 compiled them for
# 46 % of the session's CPU (async-profiler over test_edges). The session's C2 takes only the
# hottest code, at 40 times the thresholds: test_edges 198 s of CPU, 182 s wall.
QUICK_COMPILER_ONLY = "-XX:TieredStopAtLevel=1"
SESSION_COMPILER = [
    "-XX:Tier4InvocationThreshold=200000",
    "-XX:Tier4CompileThreshold=600000",
    "-XX:Tier4BackEdgeThreshold=1600000",
]
os.environ.setdefault("SPARK_SUBMIT_OPTS", f"{QUICK_COMPILER_ONLY} {QUICK_COMPILER_CODE_CACHE}")
# py4j logs its shutdown at INFO to streams pytest has closed by then.
logging.getLogger("py4j").setLevel(logging.WARNING)


def pytest_configure(config: pytest.Config) -> None:
    # The seed of the random series, fixed here so that every worker draws from the same one.
    os.environ.setdefault("LOADER_TEST_SEED", dt.datetime.now(dt.UTC).strftime("%Y%m%d"))
    # xdist would order the files by their number of tests instead of pytest_collection_modifyitems'.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_unconfigure(config: pytest.Config) -> None:
    airflow_runner.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files in order of their time, longest first, each file's tests in their order.

    A worker takes the next file when fewer than three of its tests are left, so the longest
    files start first and the many short ones fill both workers' ends: in a simulation of xdist's
    rule over a run's test times, with each file's time off by up to 30%, the workers ended
    within a second of each other (xdist's own order, by number of tests: 59 s apart). The times
    are a recent run's (``tests/file_seconds.json``, written by ``python -m tests.suite_report``);
    a file missing there, or every file when the report is off, counts ``GUESS_SECONDS`` per
    integration test."""
    report = config.pluginmanager.get_plugin("tests.suite_report")
    known = report.file_seconds() if report is not None else {}
    guessed: collections.Counter[str] = collections.Counter()
    for item in items:
        guessed[_file_of(item)] += GUESS_SECONDS if item.get_closest_marker("integration") else 0.01
    seconds = {name: known.get(name, guess) for name, guess in guessed.items()}
    items.sort(key=lambda item: -seconds[_file_of(item)])


# A new integration test's time until tests/file_seconds.json has it.
GUESS_SECONDS = 20.0


def _file_of(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


def pytest_report_header(config: pytest.Config) -> str:
    sample = "all of them (make test-long)" if os.environ.get("LOADER_TEST_LONG") == "1" else "a sample"
    return f"random series: seed {random_seed()} (LOADER_TEST_SEED={random_seed()} repeats its choices), {sample}"


def random_seed() -> int:
    """The seed of the random series (the kill points, the writers' changes): the day's date
    unless LOADER_TEST_SEED gives one, so that each day samples others and a failure's seed can
    be run again."""
    return int(os.environ["LOADER_TEST_SEED"])


def free_port() -> int:
    """A TCP port on loopback that nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _all_threads_stopped(pid: int) -> bool:
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # the thread ended
            continue
        if state not in ("T", "t"):
            return False
    return True


@dataclass(frozen=True)
class MariaDB:
    """The private test server: where it listens and where its binlog files are."""

    host: str
    port: int
    datadir: Path
    password: str
    args: str = ""  # more server options (mariadb.sh's MARIADB_ARGS)
    script: ClassVar[Path] = MARIADB_SH
    args_variable: ClassVar[str] = "MARIADB_ARGS"
    pid_file: ClassVar[str] = "mariadbd.pid"

    @property
    def binlog_dir(self) -> Path:
        return self.datadir / "binlog"

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """The server stopped with SIGSTOP (it accepts connections and answers nothing), then
        let go."""
        pid = int((self.datadir / self.pid_file).read_text())
        os.kill(pid, signal.SIGSTOP)
        try:
            # kill() returns before every thread has stopped; a busy machine can take a while.
            deadline = time.monotonic() + 10
            while not _all_threads_stopped(pid):
                assert time.monotonic() < deadline, f"the server (pid {pid}) did not stop on SIGSTOP"
                time.sleep(0.02)
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        """Shut the server down (its data stays)."""
        subprocess.run([str(self.script), "stop", str(self.datadir)], check=True, capture_output=True)

    def start(self) -> None:
        """Start it again on its port, with its data."""
        env = {**os.environ, "LOADER_SOURCE_PASSWORD": self.password, self.args_variable: self.args}
        subprocess.run(
            [str(self.script), "start", str(self.datadir), str(self.port)],
            check=True,
            env=env,
            capture_output=True,
        )

    def connect(self, user: str = "app", database: str | None = None) -> pymysql.connections.Connection:
        """A connection as ``app`` (all privileges, for writing test data) or ``loader``."""
        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=user,
            password=self.password,
            database=database,
            charset="utf8mb4",
            autocommit=True,
            **self.tls_options(),
        )

    def tls_options(self) -> dict[str, Any]:
        """pymysql's TLS arguments for the test's own connections: plain text (pymysql would
        build a TLS context, ~50 ms, for each connection to offer TLS)."""
        return {"ssl_disabled": True}

    def execute(self, *sql: str) -> Position:
        """Run statements as ``app``, one after the other; the binlog position after them."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                for stmt in sql:
                    cur.execute(stmt)
            return current_position(conn)
        finally:
            conn.close()

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """The rows of one query."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            conn.close()

    def config_file(
        self, tmp: Path, name: str, include: str, warehouse: str = "", more: str = "", staging: str = ""
    ) -> Path:
        """``tmp/loader.toml`` for this server's tables ``include`` (a pattern), as the ``loader``
        user, staging and warehouse (database ``<name>_wh``) under ``tmp``; ``warehouse`` adds
        lines to that section (its ``dir`` replaces the one under ``tmp``), ``staging`` replaces
        that section's, ``more`` adds sections."""
        path = tmp / "loader.toml"
        wh_dir = "" if re.search(r"^dir\s*=", warehouse, re.M) else f'dir = "{tmp / "warehouse"}"'
        path.write_text(
            f"""[source]
name = "{name}"
host = "{self.host}"
port = {self.port}
user = "loader"
password_env = "LOADER_TEST_PASSWORD"
[tables]
include = ["{include}"]
[staging]
{staging or f'uri = "{tmp / "staging"}"'}
[warehouse]
database = "{name}_wh"
{wh_dir}
{warehouse}
{more}"""
        )
        return path

    def config(self, tmp: Path, **sections: dict[str, object]) -> Config:
        """A loader config pointing at this server, with staging and warehouse under ``tmp``."""
        env = {
            "LOADER__SOURCE__HOST": self.host,
            "LOADER__SOURCE__PORT": str(self.port),
            "LOADER__SOURCE__USER": "loader",
            "LOADER__SOURCE__PASSWORD_ENV": "LOADER_TEST_PASSWORD",
            "LOADER__STAGING__URI": str(tmp / "staging"),
            "LOADER__WAREHOUSE__DIR": str(tmp / "warehouse"),
        }
        for section, fields in sections.items():
            for key, value in fields.items():
                env[f"LOADER__{section.upper()}__{key.upper()}"] = str(value)
        os.environ["LOADER_TEST_PASSWORD"] = self.password
        return load_config(None, env=env)


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDB]:
    """A private MariaDB with binlog on (ROW, FULL image, FULL metadata) on a free port."""
    yield from _private_mariadb(tmp_path_factory, "mariadb")


@pytest.fixture(scope="session")
def disposable_mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDB]:
    """A second private MariaDB, for the tests that purge its binlog (or stop it): what they do
    to their server would break the other tests' positions."""
    yield from _private_mariadb(tmp_path_factory, "disposable-mariadb")


Server = TypeVar("Server", bound=MariaDB)


@contextlib.contextmanager
def private_server(
    kind: type[Server], tmp_path_factory: pytest.TempPathFactory, name: str, args: str = ""
) -> Iterator[Server]:
    """One more private server of ``kind`` (``args``: more server options), started; stopped on
    the way out."""
    if kind is MariaDB and not (shutil.which("mariadbd") or Path("/usr/sbin/mariadbd").exists()):
        pytest.fail("mariadbd is not installed: run `make test`, which installs it (infra/install-deps.sh)")
    db = kind("127.0.0.1", free_port(), tmp_path_factory.mktemp(name), PASSWORD, args)
    db.start()
    try:
        yield db
    finally:
        subprocess.run([str(db.script), "stop", str(db.datadir)], check=False, capture_output=True)


def mariadb_server(
    tmp_path_factory: pytest.TempPathFactory, name: str, args: str = ""
) -> contextlib.AbstractContextManager[MariaDB]:
    """One more private MariaDB (``private_server``)."""
    return private_server(MariaDB, tmp_path_factory, name, args)


class MySQL(MariaDB):
    """A private MySQL (the version infra/mysql/install.sh unpacked), used as ``MariaDB`` is."""

    script = MYSQL_SH
    args_variable = "MYSQL_ARGS"
    pid_file = "mysqld.pid"

    def as_root(self, sql: str) -> None:
        """Statements as the server's root (accounts and grants), through its socket."""
        subprocess.run(
            [str(MYSQL_SH), "client", str(self.datadir), "-e", sql], check=True, capture_output=True
        )


@pytest.fixture(scope="session")
def mysql(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MySQL]:
    """A private MySQL with binlog on (ROW, FULL image, FULL metadata, GTIDs) on a free port."""
    with private_server(MySQL, tmp_path_factory, "mysql") as db:
        yield db


class TlsMariaDB(MariaDB):
    """A private MariaDB with the suite's certificates (``tests.certificates``) that refuses
    plain text (``require_secure_transport``): the test's own writes go over TLS too."""

    def tls_options(self) -> dict[str, Any]:
        from loader.source.tls import Tls, context

        return {"ssl": context(Tls("required"))}


@pytest.fixture(scope="session")
def tls_certificates(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A CA, a server certificate for 127.0.0.1 and a client certificate it signed, and another
    CA (``tests.certificates.Certificates``)."""
    from tests.certificates import make_certificates

    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="session")
def tls_mariadb(tmp_path_factory: pytest.TempPathFactory, tls_certificates: Any) -> Iterator[TlsMariaDB]:
    """A private MariaDB with TLS, its certificate from ``tls_certificates``, refusing plain text."""
    certs = tls_certificates
    args = (
        f"--ssl-ca={certs.ca} --ssl-cert={certs.server_cert} --ssl-key={certs.server_key} "
        "--require-secure-transport=ON"
    )
    with private_server(TlsMariaDB, tmp_path_factory, "tls-mariadb", args) as db:
        yield db


@pytest.fixture
def replicated_mysql(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MySQL, MySQL]]:
    """A MySQL primary and its replica (server_id 2, GTID auto-positioning, its own binlog file
    numbers: the replicated transactions from its third file on), both private and running."""
    with (
        private_server(MySQL, tmp_path_factory, "mysql-primary") as primary,
        private_server(MySQL, tmp_path_factory, "mysql-replica", "--server-id=2") as replica,
    ):
        replica.as_root(
            "RESET BINARY LOGS AND GTIDS; FLUSH BINARY LOGS; FLUSH BINARY LOGS; "
            f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='{primary.host}', SOURCE_PORT={primary.port}, "
            f"SOURCE_USER='loader', SOURCE_PASSWORD='{primary.password}', SOURCE_AUTO_POSITION=1, "
            "GET_SOURCE_PUBLIC_KEY=1; START REPLICA"
        )
        yield primary, replica


def mysql_caught_up(primary: MySQL, replica: MySQL, timeout: int = 60) -> None:
    """Wait until the MySQL replica has applied every GTID the primary has executed."""
    [(executed,)] = primary.rows("SELECT @@gtid_executed")
    [(waited,)] = replica.rows(f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{executed}', {timeout})")
    assert waited == 0, (
        f"the replica did not reach {executed} within {timeout} s: {replica.rows('SHOW REPLICA STATUS')}"
    )


def _private_mariadb(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[MariaDB]:
    with mariadb_server(tmp_path_factory, name) as db:
        yield db


@pytest.fixture
def replicated_mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MariaDB, MariaDB]]:
    """A primary and its replica (server_id 2, GTID replication, the replicated changes in its
    own binlog from its third file on), both private and running; the replica's binlog holds
    only what it replicated."""
    with (
        mariadb_server(tmp_path_factory, "primary") as primary,
        mariadb_server(tmp_path_factory, "replica", "--server-id=2") as replica,
    ):
        replica.execute(
            "RESET MASTER",
            # Its own file numbers, as a replica built apart from its primary has: the same
            # transactions lie at other positions than on the primary.
            "FLUSH BINARY LOGS",
            "FLUSH BINARY LOGS",
            f"CHANGE MASTER TO MASTER_HOST='{primary.host}', MASTER_PORT={primary.port}, MASTER_USER='loader',"
            f" MASTER_PASSWORD='{primary.password}', MASTER_USE_GTID=slave_pos",
            "START SLAVE",
        )
        yield primary, replica


def caught_up(primary: MariaDB, replica: MariaDB, timeout: int = 60) -> None:
    """Wait until the replica has applied everything the primary has written."""
    [(gtid,)] = primary.rows("SELECT @@gtid_binlog_pos")
    [(waited,)] = replica.rows(f"SELECT MASTER_GTID_WAIT('{gtid}', {timeout})")
    assert waited == 0, (
        f"the replica did not reach {gtid} within {timeout} s: {replica.rows('SHOW SLAVE STATUS')}"
    )


# The warehouse table formats; a module runs its tests on each with
# ``pytest.mark.parametrize("table_format", TABLE_FORMATS)`` (the matrix).
TABLE_FORMATS = ("hive", "iceberg")


@pytest.fixture
def table_format() -> str:
    """The warehouse table format of a test outside the matrix: the default."""
    return WarehouseConfig().format


@pytest.fixture
def spark_config(session_config: Config, table_format: str) -> Config:
    """The session's Spark config with the test's table format."""
    return dataclasses.replace(
        session_config, warehouse=dataclasses.replace(session_config.warehouse, format=table_format)
    )


@pytest.fixture(scope="session")
def session_config(tmp_path_factory: pytest.TempPathFactory) -> Config:
    """A config whose warehouse and Derby metastore live in a temporary folder."""
    tmp = tmp_path_factory.mktemp("spark")
    return load_config(
        None,
        env={
            "LOADER__WAREHOUSE__DIR": str(tmp / "warehouse"),
            "LOADER__WAREHOUSE__DATABASE": "test_wh",
            "LOADER__SPARK__MASTER": "local[2]",
            "LOADER__SPARK__CONF": '{ "spark.sql.shuffle.partitions" = "2", "spark.default.parallelism" = "2" }',
        },
    )


@pytest.fixture(scope="session")
def spark(session_config: Config) -> Iterator[object]:
    """One local Spark session (local[2], UI off) for the whole test session, with the Iceberg
    catalog beside the Hive one (its extensions can only be set when a session starts)."""
    from loader.warehouse.session import build_session

    both = dataclasses.replace(
        session_config, warehouse=dataclasses.replace(session_config.warehouse, format="iceberg")
    )
    jobs = os.environ.get("SPARK_SUBMIT_OPTS", "")
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
        [o for o in jobs.split() if o != QUICK_COMPILER_ONLY] + SESSION_COMPILER
    )
    try:
        session = build_session(both, app_name="loader-tests")  # its JVM starts here
    finally:
        os.environ["SPARK_SUBMIT_OPTS"] = jobs
    try:
        yield session
    finally:
        session.stop()


@dataclass(frozen=True)
class HdfsCluster:
    """A running MiniDFSCluster: ``hdfs://`` for Spark, WebHDFS for the extractor's writes."""

    uri: str
    webhdfs_url: str


@contextlib.contextmanager
def infra_service(
    script: str, folder: Path, timeout: float, env: dict[str, str] | None = None
) -> Iterator[dict[str, str]]:
    """Start one of infra/'s services in `folder` (`SCRIPT start DIR`) and stop it on leaving;
    yields the NAME=VALUE lines it prints (its addresses)."""
    path = ROOT / "infra" / script
    started = subprocess.run(
        [str(path), "start", str(folder)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHON": sys.executable, **(env or {})},
    )
    if started.returncode != 0:
        raise RuntimeError(f"{script} start failed: {started.stderr.strip()}")
    try:
        yield dict(line.split("=", 1) for line in started.stdout.split())
    finally:
        subprocess.run([str(path), "stop", str(folder)], timeout=60, check=False)


@pytest.fixture(scope="session")
def hdfs_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HdfsCluster]:
    """A real HDFS (namenode + datanode, WebHDFS on) on free loopback ports, for the session."""
    with infra_service("hdfs/minidfs.sh", tmp_path_factory.mktemp("minidfs"), 120) as found:
        yield HdfsCluster(found["HDFS_URI"], found["WEBHDFS_URL"])


@dataclass(frozen=True)
class SparkCluster:
    """A running Spark standalone master and its workers."""

    master: str  # spark://127.0.0.1:PORT
    ui: str  # the master's status page; /json/ lists workers and applications
    folder: Path  # logs/ and work/N/<app>/<executor>/ of worker N

    def status(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.ui}/json/", timeout=10) as reply:
            return json.load(reply)  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A Spark standalone cluster on loopback, for the session: a master and two workers of one
    core each (infra/spark/standalone.sh), from the Spark pyspark installed.

    Its JVMs, and the executors its workers start (they inherit the workers' environment),
    compile with the quick compiler only, as the suite's launched drivers do: a test's executor
    lives for seconds, and the optimising compiler doubled its CPU (173 s against 94 s for
    test_spark_cluster's eight executors)."""
    folder = tmp_path_factory.mktemp("spark-cluster")
    workers = {
        "WORKERS": "2",
        "WORKER_MEMORY": "1g",
        "JAVA_TOOL_OPTIONS": f"{QUICK_COMPILER_ONLY} {QUICK_COMPILER_CODE_CACHE}",
    }
    with infra_service("spark/standalone.sh", folder, 180, workers) as found:
        yield SparkCluster(found["SPARK_MASTER"], found["SPARK_MASTER_UI"], folder)


@pytest.fixture(scope="session")
def hive_metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Hive metastore service (infra/hive/metastore.sh) for the session; its thrift:// URI."""
    with infra_service("hive/metastore.sh", tmp_path_factory.mktemp("metastore"), 120) as found:
        yield found["METASTORE_URI"]


@contextlib.contextmanager
def moto_server(env: dict[str, str] | None = None) -> Iterator[str]:
    """moto's S3 (and IAM) server over real HTTP on a free loopback port; yields its endpoint URL."""
    port = free_port()
    moto = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=1)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start on {url}") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server for the session (any keys accepted); returns its endpoint URL."""
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    )
    with moto_server() as url:
        yield url


@pytest.fixture
def s3_bucket(s3_endpoint: str, request: pytest.FixtureRequest) -> str:
    """A fresh, empty bucket on the S3 endpoint; returns its name."""
    import boto3

    name = ("t-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()))[:63].strip("-")
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.create_bucket(Bucket=name)
    return name


# --- a schema loaded into the warehouse, in process (the edge and checksum tests) ------------

Loaded = Callable[[str, list[str], list[str]], Config]


def read_staged_by(spark: Any, reader: str, path: Path, columns: list[str]) -> Any:
    """A staging file as a merge reads it: by Spark's CSV reader (``"spark"``), or parsed by the
    loader itself and handed to Spark (``"here"``, a small table's changes), gzipped as
    ``[staging] gzip`` stages them."""
    from loader.staging import csvformat

    if reader == "spark":
        return csvformat.read_staged(spark, [path.as_uri()], columns)
    parsed = csvformat.parse_staged(gzip.compress(path.read_bytes()), len(columns), str(path))
    return csvformat.staged_frame(spark, parsed, columns)


def quiet(_: str) -> None:
    """A progress callback that prints nothing."""


def schema_config(mariadb: MariaDB, tmp_path: Path, spark_config: Config, schema: str) -> Config:
    """Tables ``<schema>.*`` into the warehouse database ``<schema>_wh``."""
    base = mariadb.config(tmp_path, tables={"include": f'["{schema}.*"]'})
    return dataclasses.replace(
        base,
        warehouse=dataclasses.replace(
            spark_config.warehouse, database=f"{schema}_wh", partition_rows=10, buckets=4
        ),
    )


def fresh_schema(mariadb: MariaDB, schema: str, *tables: str) -> None:
    """Drop ``schema`` and create it again with ``tables`` (``name (columns…)``)."""
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {schema}",
        f"CREATE DATABASE {schema}",
        *(f"CREATE TABLE {schema}.{t}" for t in tables),
    )


@pytest.fixture
def source(request: pytest.FixtureRequest) -> MariaDB:
    """The source server: the session's MariaDB, or the flavour a test names where the flavour
    matters (``@pytest.mark.parametrize("source", ["mariadb", "mysql"], indirect=True)``)."""
    server: MariaDB = request.getfixturevalue(getattr(request, "param", "mariadb"))
    return server


@pytest.fixture
def loaded(source: MariaDB, tmp_path: Path, spark_config: Config, spark: Any) -> Loaded:
    """``loaded(schema, tables, rows)``: a fresh ``schema`` with ``tables`` and ``rows`` (SQL) on
    the ``source`` server, loaded into the warehouse; its config."""
    from loader.warehouse.initial_load import run_initial_load

    def load(schema: str, tables: list[str], rows: list[str]) -> Config:
        fresh_schema(source, schema, *tables)
        source.execute(*rows)
        cfg = schema_config(source, tmp_path, spark_config, schema)
        run_initial_load(spark, cfg, progress=quiet)
        return cfg

    return load


def run_loader(
    mariadb: MariaDB, toml: Path, *args: str, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """``loader *args --config toml`` as a user runs it; ``env`` sets (or with None unsets) variables."""
    merged = {**os.environ, "LOADER_TEST_PASSWORD": mariadb.password, **(env or {})}
    environ = {k: v for k, v in merged.items() if v is not None}
    command = [str(Path(sys.executable).with_name("loader")), *args, "--config", str(toml)]
    return subprocess.run(command, capture_output=True, text=True, env=environ, timeout=120)


def delta(spark: Any, cfg: Config) -> None:
    """One delta run in process: extract what is new, materialise it."""
    from loader.extract.interval import run_extract
    from loader.warehouse.materialize import run_materialize

    run_extract(cfg, progress=quiet)
    run_materialize(spark, cfg)


def warehouse_storage_of(spark: Any, cfg: Config) -> None:
    """The in-process session reads and writes ``cfg``'s staging and warehouse as a job on ``cfg``
    does: the s3a settings of their S3 endpoints (with the environment's keys) in its Hadoop
    settings, and a Hive-format warehouse database in ``[warehouse] dir`` (under ``tables/``, a
    job's ``spark.sql.warehouse.dir``) instead of the session's own folder."""
    from loader.warehouse.session import s3a_endpoint_conf
    from loader.warehouse.tables import quote_identifier

    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for uri, endpoint in (
        (cfg.staging.uri, cfg.staging.s3_endpoint_url),
        (cfg.warehouse.dir, cfg.warehouse.s3_endpoint_url),
    ):
        if uri.startswith("s3://") and endpoint:
            bucket = f"fs.s3a.bucket.{uri.split('/')[2]}"
            for key, value in s3a_endpoint_conf(uri, endpoint).items():
                hadoop.set(key.removeprefix("spark.hadoop."), value)
            hadoop.set(f"{bucket}.access.key", os.environ["AWS_ACCESS_KEY_ID"])
            hadoop.set(f"{bucket}.secret.key", os.environ["AWS_SECRET_ACCESS_KEY"])
    if cfg.warehouse.format == "hive":
        database = cfg.warehouse.database
        location = f"{cfg.warehouse.spark_dir()}/tables/{database}.db"
        # The embedded metastore makes the folder with its own copy of the Hadoop settings, taken
        # when the session started; it gets the file system made here (Hadoop keeps one per bucket).
        folder = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(location)
        folder.getFileSystem(hadoop).mkdirs(folder)
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(database)} LOCATION '{location}'")


@contextlib.contextmanager
def iceberg_catalog_of(spark: Any, cfg: Config) -> Iterator[None]:
    """The in-process session's Iceberg catalog is, within the block, the one ``cfg`` names (a
    JDBC database, the Hive metastore), with the settings a job on ``cfg`` gets; then its own
    again. Spark reads a catalog's settings when it first uses it; resetting the session's
    catalogs makes it read them again."""
    from loader.warehouse.session import iceberg_conf, iceberg_secret_conf
    from loader.warehouse.tables import ICEBERG_CATALOG

    prefix = f"spark.sql.catalog.{ICEBERG_CATALOG}"
    catalogs = spark._jsparkSession.sessionState().catalogManager()

    def use(settings: dict[str, str]) -> None:
        for key in [k for k in spark.conf.getAll if k.startswith(prefix)]:
            spark.conf.unset(key)
        for key, value in settings.items():
            spark.conf.set(key, value)
        catalogs.reset()

    own = {k: v for k, v in spark.conf.getAll.items() if k.startswith(prefix)}
    wanted = {**iceberg_conf(cfg.warehouse), **iceberg_secret_conf(cfg.warehouse)}
    if cfg.warehouse.catalog == "derby":  # the embedded catalog's file goes there, as build_session does
        Path(cfg.warehouse.metastore_dir).mkdir(parents=True, exist_ok=True)
    use({k: v for k, v in wanted.items() if k.startswith(prefix)})
    try:
        yield
    finally:
        use(own)


def derby_table_rows(spark: Any, cfg: Config, table: str, columns: list[str]) -> list[list[Any]]:
    """``columns`` of every row of the Hive-format warehouse table ``table`` of a job's config
    ``cfg``, sorted, as a reader of its embedded (Derby) metastore sees them: each partition's
    location from the metastore's own tables, then the Parquet files there, read in the worker's
    JVM (the test session's catalog is another one). No job may hold that metastore meanwhile;
    it is shut down after, for the next job to open."""
    jvm = spark.sparkContext._jvm
    url = f"jdbc:derby:{Path(cfg.warehouse.metastore_dir) / 'metastore_db'}"
    connection = jvm.java.sql.DriverManager.getConnection(url)
    try:
        query = connection.prepareStatement(
            "SELECT s.LOCATION FROM PARTITIONS p JOIN SDS s ON p.SD_ID = s.SD_ID "
            "JOIN TBLS t ON p.TBL_ID = t.TBL_ID JOIN DBS d ON t.DB_ID = d.DB_ID "
            "WHERE d.NAME = ? AND t.TBL_NAME = ?"
        )
        query.setString(1, cfg.warehouse.database)
        query.setString(2, table)
        found = query.executeQuery()
        locations = []
        while found.next():
            locations.append(found.getString(1))
    finally:
        connection.close()
        try:
            jvm.java.sql.DriverManager.getConnection(f"{url};shutdown=true")
        except Exception as shut:  # Derby reports a clean shutdown as SQLState 08006
            if "08006" not in str(shut):
                raise
    if not locations:
        return []
    rows = spark.read.parquet(*locations).select(*columns).orderBy(*columns).collect()
    return [list(r) for r in rows]


def metastore_table_parameters(spark: Any, uri: str, database: str, table: str) -> dict[str, str]:
    """A table's parameters as the Hive metastore service at ``uri`` holds them (what other
    engines on the metastore read), through Hive's own client in the worker's JVM."""
    jvm = spark.sparkContext._jvm
    conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
    conf.set("hive.metastore.uris", uri)
    client = jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(conf)
    try:
        return dict(client.getTable(database, table).getParameters())
    finally:
        client.close()


def iceberg_table(cfg: Config, schema: str, table: str) -> Any:
    """The warehouse table of the source table ``schema.table`` in the embedded Iceberg catalog,
    loaded by pyiceberg: another engine's reading, without a Spark job's JVM start."""
    from pyiceberg.catalog.sql import SqlCatalog

    from loader.warehouse.session import ICEBERG_SQLITE

    catalog = SqlCatalog(
        "iceberg",
        uri=f"sqlite:///{Path(cfg.warehouse.metastore_dir) / ICEBERG_SQLITE}",
        warehouse=f"{cfg.warehouse.spark_dir()}/iceberg",
    )
    return catalog.load_table(f"{cfg.warehouse.database}.{cfg.tables.warehouse_name(schema, table)}")


def iceberg_rows(cfg: Config, schema: str, table: str, columns: list[str]) -> list[list[Any]]:
    """``columns`` of every row of the warehouse table of ``schema.table`` (``iceberg_table``),
    sorted (name the key columns first: rows compare by them before any NULL); timestamps as UTC
    without a zone, as a Spark session in UTC returns them."""

    def plain(value: Any) -> Any:
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            return value.astimezone(dt.UTC).replace(tzinfo=None)
        return value

    scan = iceberg_table(cfg, schema, table).scan(selected_fields=tuple(columns))
    rows = scan.to_arrow().select(columns).to_pylist()
    return sorted([plain(r[c]) for c in columns] for r in rows)


def iceberg_files(keys: list[str], database: str, table: str) -> tuple[set[str], set[str]]:
    """Of a warehouse folder's ``keys``, the Iceberg table's data files and its metadata files
    (one metadata file per commit)."""
    prefix = f"iceberg/{database}/{table}/"
    return (
        {k for k in keys if k.startswith(prefix + "data/") and k.endswith(".parquet")},
        {k for k in keys if k.startswith(prefix + "metadata/") and k.endswith(".metadata.json")},
    )


def iceberg_snapshot_summaries(cfg: Config, schema: str, table: str) -> list[dict[str, str]]:
    """The summary of every snapshot of the warehouse table of ``schema.table``, oldest first
    (as Spark's ``<table>.snapshots`` lists them)."""
    snapshots = iceberg_table(cfg, schema, table).metadata.snapshots
    return [dict(s.summary.additional_properties) if s.summary else {} for s in snapshots]


def assert_equal_to_source(spark: Any, cfg: Config, range_rows: int = 4) -> None:
    """Every selected table has the source's rows, value for value: the checksum of every key
    range (small ranges, so that several are compared) is the source's."""
    from loader.warehouse.checksum import compare_sums, source_sums

    for checked in compare_sums(
        spark, cfg, source_sums(cfg.source, cfg.tables, range_rows=range_rows, progress=quiet)
    ):
        assert checked.equal, (
            f"{checked.table}: {checked.problem or ''} source {checked.source_rows} rows, warehouse "
            f"{checked.warehouse_rows} rows, differing ranges {checked.differing}"
        )


# --- Airflow ------------------------------------------------------------------------------------


def airflow_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of Airflow commands in their own AIRFLOW_HOME with the project's DAGs,
    without the caller's Airflow and loader settings; ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "LOADER_CONFIG", "LOADER__"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    env.update(extra or {})
    return env


def loader_dag_env(
    home: Path, config: Path, mariadb: MariaDB, master: str = "local[2]", extra: dict[str, str] | None = None
) -> dict[str, str]:
    """``airflow_env`` for the loader's DAGs: the config, the source's Airflow connection
    (``loader_source``) and the Spark connection submitting to ``master``; ``extra`` on top."""
    if master.startswith("spark://"):
        host, port = master.rsplit(":", 1)
        spark: dict[str, Any] = {"conn_type": "spark", "host": host, "port": int(port)}
    else:
        spark = {"conn_type": "spark", "host": master}
    return airflow_env(
        home,
        {
            "LOADER_CONFIG": str(config),
            "AIRFLOW_CONN_LOADER_SOURCE": f"mysql://loader:{mariadb.password}@{mariadb.host}:{mariadb.port}",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(spark),
            **(extra or {}),
        },
    )


AIRFLOW_DB = "airflow.db"  # Airflow's default SQLite database, in AIRFLOW_HOME


@pytest.fixture(scope="session")
def migrated_airflow_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated Airflow database (SQLite), made once per worker (``airflow db migrate`` ~6 s)."""
    home = tmp_path_factory.mktemp("airflow-migrated")
    done = subprocess.run(
        [str(BIN / "airflow"), "db", "migrate"], env=airflow_env(home), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return home / AIRFLOW_DB


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory, migrated_airflow_db: Path) -> Path:
    """An AIRFLOW_HOME for one test module: a copy of the migrated database, and the airflow.cfg
    Airflow writes there at its first command (the migrated home's names its own folders)."""
    home = tmp_path_factory.mktemp("airflow")
    shutil.copyfile(migrated_airflow_db, home / AIRFLOW_DB)
    return home


def dags_test(env: dict[str, str], dag_id: str, logical_date: str, conf: dict[str, Any] | None = None) -> str:
    """``airflow dags test`` (``dag.test()``): one run in a process of its own (forked from the
    worker's Airflow runner, tests/airflow_runner.py); returns its whole output."""
    command = ["dags", "test", dag_id, logical_date]
    if conf:
        command += ["--conf", json.dumps(conf)]
    done = airflow_runner.airflow(command, env)
    return done.stdout + done.stderr


def run_state(output: str) -> str:
    """The state ``dags_test``'s run finished in."""
    line = next((x for x in output.splitlines() if "DagRun Finished" in x), "")
    return line.split("state=", 1)[1].split(",", 1)[0] if "state=" in line else "unknown"


def maintain(
    spark: Any, *cfgs: Config, maintenance: MaintenanceConfig | None = None, only: str | None = None
) -> Maintenance:
    """Maintenance in process over the tables of these sources (the first one's settings), each
    table under the leases of the sources writing to it, as the maintenance job runs it."""
    from loader.app.spark_jobs import maintain_sources

    first = cfgs[0]
    settings = dataclasses.replace(first, maintenance=maintenance or first.maintenance)
    return maintain_sources(spark, settings, {c.source.name: c for c in cfgs}, only)


def as_an_older_loader_left_it(spark: Any, database: str, table: str, columns_ddl: str) -> None:
    """Give the Hive-format table ``database.table`` the data columns ``columns_ddl`` in the
    catalog, as a loader before today's columns made it."""
    jvm = spark.sparkContext._jvm
    spark._jsparkSession.sharedState().externalCatalog().alterTableDataSchema(
        database, table, jvm.org.apache.spark.sql.types.StructType.fromDDL(columns_ddl)
    )
    spark.catalog.refreshTable(f"{database}.{table}")
