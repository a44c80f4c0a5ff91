"""Spark session settings shared by the loader's Spark jobs and the test suite.

One function decides the catalog (embedded Derby or an external Hive metastore), where the
warehouse and Derby's files go, and the settings that keep logs readable, so that a job and
its tests run Spark the same way.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from loader.core.config import DEFAULT_JARS, Config, SparkConfig, StagingConfig, WarehouseConfig
from loader.core.errors import ConfigError
from loader.staging.aws import connection_keys
from loader.warehouse import local_fs
from loader.warehouse.tables import ICEBERG_CATALOG

# The embedded Iceberg catalog's file, in the warehouse's metastore folder.
ICEBERG_SQLITE = "iceberg_catalog.db"

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JAVA_OPTIONS = "spark.driver.extraJavaOptions"
QUIET_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


# The class-data-sharing archive make setup builds (loader.warehouse.class_archive).
ARCHIVE_DIR = DEFAULT_JARS.parent / "class-archive"
# The pinned jars go on the driver's own class path, not only through ``spark.jars``: there the
# archive holds their classes too (Spark loads ``spark.jars`` with a class loader of its own,
# whose classes the JVM reads and verifies from the jars at every start), and a local job's
# executor, the driver itself, copies none of them (73 MiB) into its work folder.
CLASS_PATH = "spark.driver.extraClassPath"
# In the archive's name: an archive dumped for another class path would only be refused.
ARCHIVE_LAYOUT = "cp"


def archive_path() -> Path | None:
    """Where the archive for the installed PySpark and pinned jars is (None without PySpark).

    Keyed by Spark's version, the pinned jars' pom (infra/jars/fetch.sh's stamp), the jar of the
    forkless local file system (``local_fs``) and where the jobs put those jars
    (``ARCHIVE_LAYOUT``): an archive of another class path would only be refused, so a new pin,
    Spark, file system or layout builds a new one.
    """
    # Imported here: importlib.metadata costs every command's start ~15 ms for this one lookup.
    from importlib.metadata import PackageNotFoundError, version

    try:
        spark = version("pyspark")
    except PackageNotFoundError:
        return None
    stamp = DEFAULT_JARS / ".pom.sha256"
    jars = stamp.read_text().strip()[:12] if stamp.is_file() else "nojars"
    return (
        ARCHIVE_DIR / f"spark-{spark}-{'-'.join([jars, *local_fs.built(DEFAULT_JARS)])}-{ARCHIVE_LAYOUT}.jsa"
    )


def archive_java_options() -> list[str]:
    """The driver JVM's options that map the archive, when there is one.

    The JVM warns on stderr when it refuses an archive (a class path changed by the config's
    own ``spark.driver.extraClassPath`` or ``[spark] jars``, another JDK); the job then only
    starts slower, so the warning would be noise above the job's own last line.
    """
    path = archive_path()
    if path is None or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}", "-Xlog:cds*=off"]


# Set by the loader for a local master, whose driver JVM runs the tasks too: G1's concurrent
# threads compete with them for the cores (README, "A job's start", has the measurements).
PARALLEL_GC = "-XX:+UseParallelGC"
_CHOSEN_GC = re.compile(r"-XX:\+Use\w*GC$")


# Where else a driver JVM takes options from: a collector chosen there and the loader's would be
# two, and the JVM stops at its start ("Multiple garbage collectors selected").
_JVM_OPTION_VARIABLES = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS")


def _chosen(configured: list[str], environ: Mapping[str, str]) -> list[str]:
    """The driver JVM's options from the config (``configured``) and from its option variables."""
    return [*configured, *(o for v in _JVM_OPTION_VARIABLES for o in environ.get(v, "").split())]


def collector_options(
    master: str, configured: list[str], environ: Mapping[str, str] = os.environ
) -> list[str]:
    """The driver's garbage collector: the parallel one for a local master, unless one is chosen
    already, in the config's driver Java options (``configured``) or the JVM's option variables
    in ``environ``."""
    if not master.startswith("local") or any(_CHOSEN_GC.match(o) for o in _chosen(configured, environ)):
        return []
    return [PARALLEL_GC]


# The JVM's quick compiler only (C1): for a job that is mostly its start (README, "A job's
# start", has the measurements).
QUICK_COMPILER = "-XX:TieredStopAtLevel=1"
# With the quick compiler only, the JVM reserves 48 MB for compiled code, not the 240 MB of both
# compilers; Spark compiles new classes for every statement, and a job of twenty small merges
# (into tables of hundreds of files) filled it ("CodeCache is full. Compiler has been
# disabled", then "Out of space in CodeCache for adapters", a VirtualMachineError that stopped
# the SparkContext). The space is reserved address space, used as code is compiled.
QUICK_COMPILER_CODE_CACHE = "-XX:ReservedCodeCacheSize=240m"
_CHOSEN_CODE_CACHE = re.compile(r"-XX:ReservedCodeCacheSize=\S+$")
# Both compilers, each compiling a method only after ten times the JVM's count of its calls and
# loops: for a local job too large for the quick compiler alone (README, "A job's start").
FEWER_COMPILATIONS = "-XX:CompileThresholdScaling=10"
_CHOSEN_COMPILER = re.compile(
    r"-XX:([+-]TieredCompilation|TieredStopAtLevel=\d+|CompileThresholdScaling=\S+)$"
)


@dataclass(frozen=True)
class JobSize:
    """What a materialise job goes through: the pending change rows, and the rows of the tables
    they change (together, as last recorded)."""

    changes: int
    table_rows: int


def compiler_options(
    spark: SparkConfig,
    configured: list[str],
    job: JobSize | None,
    environ: Mapping[str, str] = os.environ,
) -> list[str]:
    """The driver's compilers for a local job of a known size (``job``): the quick one only
    (with both compilers' room for compiled code, unless chosen) within ``spark``'s
    ``quick_compiler_changes`` and ``quick_compiler_table_rows``, both past them, compiling fewer
    methods; unless the config's driver Java options (``configured``) or the JVM's option
    variables choose.

    A local driver runs every task, and the compilers compete with them for the cores. The
    optimising compiler (C2) pays back only in CPU-bound work of a minute or more, whose code it
    makes up to twice as fast: change rows are parsed, ranked and shuffled, a table's rows mostly
    scanned. At the JVM's own thresholds the two compiled 31,000 methods in a 45 s merge of ten
    tables, 46 s of compiler threads' time on two cores; the hot methods pass thresholds ten
    times as high within a table's first merge.
    """
    chosen = _chosen(configured, environ)
    if job is None or not spark.master.startswith("local") or any(_CHOSEN_COMPILER.match(o) for o in chosen):
        return []
    if job.changes > spark.quick_compiler_changes or job.table_rows > spark.quick_compiler_table_rows:
        return [FEWER_COMPILATIONS]
    return [QUICK_COMPILER] + (
        [] if any(_CHOSEN_CODE_CACHE.match(o) for o in chosen) else [QUICK_COMPILER_CODE_CACHE]
    )


def runs_quick_compiler_only(spark: SparkSession) -> bool:
    """Whether the driver's JVM compiles with the quick compiler only, whoever chose it (the
    loader, the config, the JVM's option variables); False where the JVM does not say."""
    jvm: Any = spark.sparkContext._jvm
    try:
        bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
            jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
        )
        return str(bean.getVMOption("TieredStopAtLevel").getValue()) == "1"
    except Exception:  # not HotSpot: no such bean or option
        return False


# The settings whose values Spark hides in its UI and event logs: its own default, and a REST
# catalog's OAuth2 credential (spark.sql.catalog.<name>.credential), which that default shows.
REDACTION_REGEX = "(?i)secret|password|token|access[.]key|credential"


def spark_conf(cfg: Config, jdbc: bool = False, job: JobSize | None = None) -> dict[str, str]:
    """Every Spark setting the loader's jobs run with, from the config (``jdbc``: it reads the
    source; ``job``: what it goes through, when its launcher knows)."""
    wh = cfg.warehouse
    # The driver's JVM options: the loader's, then the config's own (spark.driver.extraJavaOptions
    # in [spark] conf adds to them instead of dropping Derby's home).
    java_options = archive_java_options()
    conf = {
        **QUIET_CONF,
        "spark.sql.warehouse.dir": f"{wh.spark_dir()}/tables",
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.session.timeZone": "UTC",
        # Derby's metastore cannot filter partitions on a BIGINT column; fall back to listing
        # them (the materialiser reads only the partitions it touches either way).
        "spark.sql.hive.metastorePartitionPruningFallbackOnException": "true",
        # JDBC reads CHAR(n), ENUM and SET as Spark's CHAR(n), padded with spaces; MySQL strips
        # them (and the binlog has none), so the initial load reads them as plain strings.
        "spark.sql.legacy.charVarcharAsString": "true",
        # The frames the loader caches (a merge's ranked changes) live for one statement or two:
        # compressing them cost 15% of an OLTP interval's merge CPU (dictionary statistics per
        # value, in boxed hash maps) to save memory that spills to disk when short.
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        "spark.redaction.regex": REDACTION_REGEX,
    }
    if cfg.spark.master.startswith("local"):
        # Tasks that prefer a datanode's host (files on HDFS) wait for an executor there, and
        # local mode offers its one executor again only when a task ends: the last such tasks
        # of a stage would wait forever. In one process every task is as local as it gets.
        conf["spark.locality.wait"] = "0s"
    if wh.catalog == "derby":
        # Without these, Derby's metastore_db and derby.log land in the current folder.
        derby_home = Path(wh.metastore_dir)
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={derby_home / 'metastore_db'};create=true"
        )
        java_options.append(f"-Dderby.system.home={derby_home}")
        # A re-load after a column was dropped, moved or changed gives the table new columns;
        # Hive compares column types by position and would refuse (Parquet reads by name).
        # A shared metastore needs the same setting on its server.
        conf["spark.hadoop.hive.metastore.disallow.incompatible.col.type.changes"] = "false"
    else:
        conf["spark.hadoop.hive.metastore.uris"] = wh.metastore_uri
    if wh.format == "iceberg":
        conf.update(iceberg_conf(wh))
    jars = spark_jars(cfg, jdbc)
    pinned = [j for j in jars if Path(j).parent == DEFAULT_JARS]
    if pinned and CLASS_PATH not in cfg.spark.conf:
        conf[CLASS_PATH] = os.pathsep.join(pinned)
        if cfg.spark.master.startswith("local"):  # the driver is the executor: nothing to ship
            jars = [j for j in jars if j not in pinned]
    conf["spark.jars"] = ",".join(jars)
    conf.update(local_fs.file_system_conf(cfg.spark.master, conf.get(CLASS_PATH, "")))
    if cfg.staging.scheme == "s3" and cfg.staging.s3_endpoint_url:
        conf.update(s3a_endpoint_conf(cfg.staging.uri, cfg.staging.s3_endpoint_url))
    conf.update(s3a_encryption_conf(cfg.staging))
    if wh.scheme == "s3" and wh.s3_endpoint_url:
        conf.update(s3a_endpoint_conf(wh.dir, wh.s3_endpoint_url))
    conf.update(cfg.spark.conf)
    configured = cfg.spark.conf.get(JAVA_OPTIONS, "").split()
    defaults = cfg.spark.conf.get("spark.driver.defaultJavaOptions", "").split()  # Spark puts them first
    java_options += collector_options(cfg.spark.master, defaults + configured)
    java_options += compiler_options(cfg.spark, defaults + configured, job)
    java_options += configured
    if java_options:
        conf[JAVA_OPTIONS] = " ".join(java_options)
    return conf


def iceberg_conf(wh: WarehouseConfig) -> dict[str, str]:
    """The Spark catalog of the Iceberg tables (``tables.ICEBERG_CATALOG``).

    The embedded default is Iceberg's JDBC catalog on a SQLite file in the metastore folder: no
    server, several Spark processes at once, and pyiceberg's SQL catalog reads the same file.
    With ``catalog = "hive"`` the tables are in the Hive metastore at ``metastore_uri``;
    ``iceberg_catalog`` names a JDBC database or a REST catalog instead. Its secret is not here
    (``iceberg_secret_conf``): these settings go on spark-submit's command line.
    """
    prefix = f"spark.sql.catalog.{ICEBERG_CATALOG}"
    conf = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.warehouse": f"{wh.spark_dir()}/iceberg",
        # Every statement sees the tables as committed, also by another process (a re-load).
        f"{prefix}.cache-enabled": "false",
    }
    if wh.iceberg_catalog == "rest":
        conf[f"{prefix}.type"] = "rest"
        conf[f"{prefix}.uri"] = wh.iceberg_catalog_uri
    elif wh.iceberg_catalog == "jdbc" or wh.catalog == "derby":
        conf[f"{prefix}.type"] = "jdbc"
        conf[f"{prefix}.uri"] = (
            wh.iceberg_catalog_uri or f"jdbc:sqlite:{Path(wh.metastore_dir) / ICEBERG_SQLITE}"
        )
        conf[f"{prefix}.jdbc.schema-version"] = "V1"  # with views, as pyiceberg writes it too
        if wh.iceberg_catalog_user:
            conf[f"{prefix}.jdbc.user"] = wh.iceberg_catalog_user
    else:
        conf[f"{prefix}.type"] = "hive"
        conf[f"{prefix}.uri"] = wh.metastore_uri
    return conf


def iceberg_catalog_advice(wh: WarehouseConfig) -> tuple[str, str]:
    """The Iceberg catalog the config names, and what to check when it cannot be used."""
    variable = wh.iceberg_catalog_password_env
    unset = "" if not variable or variable in os.environ else " (not set)"
    if wh.iceberg_catalog == "jdbc":
        return (
            f"the JDBC catalog {wh.iceberg_catalog_uri} as {wh.iceberg_catalog_user or 'no user'}",
            "check [warehouse] iceberg_catalog_uri, iceberg_catalog_user and the password in "
            f"{variable}{unset}",
        )
    if wh.iceberg_catalog == "rest":
        return (
            f"the REST catalog {wh.iceberg_catalog_uri}",
            f"check [warehouse] iceberg_catalog_uri, the credential in {variable}{unset} and the "
            f"spark.sql.catalog.{ICEBERG_CATALOG}.* settings",
        )
    if wh.catalog == "hive":
        return f"the Hive metastore {wh.metastore_uri}", "check that it runs and [warehouse] metastore_uri"
    where = Path(wh.metastore_dir) / ICEBERG_SQLITE
    return f"the embedded catalog {where}", "check that [warehouse] metastore_dir is a writable local folder"


def iceberg_secret_conf(wh: WarehouseConfig) -> dict[str, str]:
    """The Iceberg catalog's password (JDBC) or OAuth2 credential (REST), from the variable
    ``iceberg_catalog_password_env`` names, for the session's own settings (Spark redacts it)."""
    secret = os.environ.get(wh.iceberg_catalog_password_env, "") if wh.iceberg_catalog_password_env else ""
    if wh.format != "iceberg" or not wh.iceberg_catalog or not secret:
        return {}
    key = "jdbc.password" if wh.iceberg_catalog == "jdbc" else "credential"
    return {f"spark.sql.catalog.{ICEBERG_CATALOG}.{key}": secret}


def s3a_endpoint_conf(uri: str, endpoint_url: str) -> dict[str, str]:
    """s3a settings that send one bucket's reads to an S3-compatible endpoint (MinIO, Ceph, moto).

    Per bucket, so that other buckets (a warehouse on AWS) keep their own settings; path-style,
    as such endpoints serve one host name for every bucket. Credentials come from s3a's usual
    chain (the AWS_* environment variables, then the machine's role).
    """
    bucket = urlsplit(uri).netloc
    prefix = f"spark.hadoop.fs.s3a.bucket.{bucket}"
    return {
        f"{prefix}.endpoint": endpoint_url,
        f"{prefix}.path.style.access": "true",
        f"{prefix}.connection.ssl.enabled": str(endpoint_url.startswith("https:")).lower(),
    }


# s3a's names for S3's server-side encryption ([staging] s3_sse).
S3A_ENCRYPTION = {"AES256": "SSE-S3", "aws:kms": "SSE-KMS"}


def s3a_encryption_conf(staging: StagingConfig) -> dict[str, str]:
    """s3a settings that encrypt what Spark writes to the staging bucket as boto3's writes are
    (``[staging] s3_sse``). Per bucket, as s3a's settings are: a warehouse in the same bucket gets
    them too."""
    if staging.scheme != "s3" or not staging.s3_sse:
        return {}
    prefix = f"spark.hadoop.fs.s3a.bucket.{urlsplit(staging.uri).netloc}.encryption"
    conf = {f"{prefix}.algorithm": S3A_ENCRYPTION[staging.s3_sse]}
    if staging.s3_sse_kms_key:
        conf[f"{prefix}.key"] = staging.s3_sse_kms_key
    return conf


def s3_connections(staging: StagingConfig, wh: WarehouseConfig) -> list[tuple[str, str, str]]:
    """``(location, Airflow AWS connection, configured endpoint)`` of the staging root and the
    warehouse folder, those in s3:// that name a connection."""
    return [
        (uri, conn_id, endpoint)
        for uri, scheme, conn_id, endpoint in (
            (staging.uri, staging.scheme, staging.aws_conn_id, staging.s3_endpoint_url),
            (wh.dir, wh.scheme, wh.aws_conn_id, wh.s3_endpoint_url),
        )
        if scheme == "s3" and conn_id
    ]


def s3a_keys_conf(cfg: Config) -> dict[str, str]:
    """s3a's per-bucket keys from the Airflow connections of the config's s3:// locations
    (``aws.connection_keys``: as the launcher handed them to the job); a connection without keys
    leaves its bucket to the usual chain, and its ``endpoint_url`` serves where the config sets
    none (as for boto3)."""
    conf: dict[str, str] = {}
    for uri, conn_id, endpoint in s3_connections(cfg.staging, cfg.warehouse):
        keys = connection_keys(conn_id)
        prefix = f"spark.hadoop.fs.s3a.bucket.{urlsplit(uri).netloc}"
        if keys.access_key:
            conf[f"{prefix}.access.key"] = keys.access_key
            conf[f"{prefix}.secret.key"] = keys.secret_key
        if keys.session_token:
            conf[f"{prefix}.session.token"] = keys.session_token
        if keys.endpoint_url and not endpoint:
            conf.update(s3a_endpoint_conf(uri, keys.endpoint_url))
    return conf


def spark_jars(cfg: Config, jdbc: bool = False) -> list[str]:
    """The jar files a job runs with: ``[spark] jars`` (folders listed) and the extra JDBC jar.

    Unset, ``[spark] jars`` is the folder make setup fills, when there is one: a loader
    installed without its checkout materialises local storage with Spark's own jars, and is
    told what to set as soon as a job needs the pinned ones (S3 through s3a, a JDBC read).

    Raises:
        ConfigError: a path that does not exist, or no jar where the job needs them.
    """
    entries = cfg.spark.jars.split(",") if cfg.spark.jars else []
    if not entries and DEFAULT_JARS.is_dir():
        entries = [str(DEFAULT_JARS)]
    jars: list[str] = []
    for entry in [*entries, cfg.load.jdbc_jar]:
        if not entry:
            continue
        path = Path(entry)
        if path.is_dir():
            jars += sorted(str(j) for j in path.glob("*.jar"))
        elif path.is_file():
            jars.append(str(path))
        else:
            raise ConfigError(
                f"the jar {path} does not exist: Spark's jars are fetched once by make setup "
                "(infra/jars/fetch.sh); set [spark] jars to the folder they are in"
            )
    needs = [
        why
        for why, needed in (
            ("S3 storage (s3a)", "s3" in (cfg.staging.scheme, cfg.warehouse.scheme)),
            ("reading the source over JDBC", jdbc),
            ("Iceberg tables", cfg.warehouse.format == "iceberg"),
        )
        if needed
    ]
    if not jars and needs:
        where = cfg.spark.jars or DEFAULT_JARS
        raise ConfigError(
            f"no jar in {where}, and {' and '.join(needs)} needs the pinned ones: they are "
            "fetched once by make setup (infra/jars/fetch.sh); set [spark] jars to the folder "
            "they are in"
        )
    _check_pinned(cfg.spark, cfg.warehouse, jars)
    return jars


def _check_pinned(spark: SparkConfig, wh: WarehouseConfig, jars: list[str]) -> None:
    """Refuse a jar folder that lacks a jar this job needs (one fetched before the pin moved).

    Without it the job would stop deep inside Spark with "No suitable driver" or a class not found.
    """
    if not jars or wh.format != "iceberg":
        return
    wanted = {"iceberg-spark-runtime": "Iceberg tables"}
    if wh.catalog == "derby" and not wh.iceberg_catalog:
        wanted["sqlite-jdbc"] = "the embedded Iceberg catalog (a SQLite file)"
    names = [Path(j).name for j in jars]
    for stem, why in wanted.items():
        if not any(n.startswith(stem) for n in names):
            raise ConfigError(
                f"{why} needs the {stem} jar, and the jars given ({spark.jars or DEFAULT_JARS}) "
                "do not have it: they were fetched before it was pinned. Run make setup "
                "(infra/jars/fetch.sh) again, or set [spark] jars to a folder that has it"
            )


def discard_unfinished_metastore(path: Path) -> None:
    """Remove the embedded Derby metastore at ``path`` if its creation never finished.

    Derby writes ``service.properties`` when it creates a database. A folder without it was
    left by a job killed while it created the metastore (its first start): Derby then neither
    opens it nor creates it again ("Unable to instantiate SessionHiveMetaStoreClient"), so every
    later job would fail the same way. It holds no table yet; this job creates it anew.
    """
    if path.is_dir() and not (path / "service.properties").exists():
        shutil.rmtree(path)
        print(
            f"the embedded metastore {path} was left half-created by a job that was stopped; "
            "it is created again",
            file=sys.stderr,
        )


def build_session(cfg: Config, app_name: str = "loader", jdbc: bool = False) -> SparkSession:
    """Start (or reuse) the Spark session for this config (``jdbc``: the job reads the source)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python functions (the checksum's) run in workers of this interpreter, which has the
    # loader's dependencies, unless spark-submit or the environment chose another.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if cfg.warehouse.catalog == "derby":  # also where the embedded Iceberg catalog is
        Path(cfg.warehouse.metastore_dir).mkdir(parents=True, exist_ok=True)
        discard_unfinished_metastore(Path(cfg.warehouse.metastore_dir) / "metastore_db")
    builder = SparkSession.builder.master(cfg.spark.master).appName(app_name)
    # Keys go into the driver's settings here, never on spark-submit's command line; Spark
    # hands them to the executors and redacts them in its UI and logs.
    for key, value in {
        **spark_conf(cfg, jdbc),
        **s3a_keys_conf(cfg),
        **iceberg_secret_conf(cfg.warehouse),
    }.items():
        builder = builder.config(key, value)
    session = builder.enableHiveSupport().getOrCreate()
    _quiet_expected_warnings(session)
    return session


# Loggers whose warnings the loader causes by design; each would bury the lines a user reads.
# CSVHeaderChecker: the staged files' header names the meta columns, read under positional
# names (a source column may be named like one), so Spark warned once per staged file.
_EXPECTED_WARNINGS = ("org.apache.spark.sql.catalyst.csv.CSVHeaderChecker",)


def _quiet_expected_warnings(spark: SparkSession) -> None:
    """Log only errors from ``_EXPECTED_WARNINGS`` in the driver's JVM (where a local job reads
    its files; a cluster's executors log to their own files)."""
    jvm: Any = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    for name in _EXPECTED_WARNINGS:
        log4j.core.config.Configurator.setLevel(name, log4j.Level.ERROR)
