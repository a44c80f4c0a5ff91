"""The one typed configuration: a TOML file plus environment overrides, validated once.

The file comes from ``--config`` or ``LOADER_CONFIG``. Any field can be overridden from the
environment as ``LOADER__<SECTION>__<FIELD>`` (for example ``LOADER__SOURCE__PORT=3307``);
the value is read as a TOML value when it parses as one (numbers, booleans, lists), otherwise
as a plain string. Relative local paths are resolved against the config file's folder, so a
config works from any current directory.

A file with a ``[sources]`` section is a deployment of several sources: every ``*.toml`` in its
``dir`` is one source (``[source]``, ``[tables]``, ``[load]`` and the warehouse ``database``),
named by its ``source.name`` or else its file name, sharing the deployment file's other
settings (its own ``[source]``, ``[tables]`` and ``[load]`` are the sources' defaults). One
source is chosen with ``--source`` or ``LOADER_SOURCE``; a broken source file stops that source
only. Overrides from the environment apply to the chosen source (to every source when all are
read).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from loader.core import naming
from loader.core.errors import ConfigError
from loader.core.modes import MIRROR, MODES

ENV_FILE = "LOADER_CONFIG"
ENV_SOURCE = "LOADER_SOURCE"
ENV_PREFIX = "LOADER__"
# The deployment file's section naming the folder of source files, and what a source file holds.
SOURCES_SECTION = "sources"
SOURCE_SECTIONS = ("source", "tables", "load", "warehouse")
SOURCE_WAREHOUSE_FIELDS = ("database",)

TRANSPORTS = ("server", "files")
SCHEMA_CHANGES = ("evolve", "stop")
FAILOVER = ("follow", "stop")
DECODERS = ("native", "python")
TLS_MODES = ("disabled", "preferred", "required", "verify_ca", "verify_identity")
TLS_VERIFYING = ("verify_ca", "verify_identity")  # the modes that check the server's certificate
CATALOGS = ("derby", "hive")
# "": the Iceberg catalog follows `catalog` (the embedded SQLite file, or the Hive metastore).
ICEBERG_CATALOGS = ("", "jdbc", "rest")
TABLE_FORMATS = ("hive", "iceberg")
LOAD_ENGINES = ("arrow", "spark")
# What staging.uri and warehouse.dir may name.
STORAGE_SCHEMES = ("file", "s3", "hdfs")
# S3's server-side encryption of staging objects ("": the bucket's default).
S3_SSE = ("", "AES256", "aws:kms")
# Where make setup puts the pinned jars Spark runs with (infra/jars/fetch.sh).
DEFAULT_JARS = Path(__file__).resolve().parents[2] / ".cache" / "jars" / "spark"


@dataclass(frozen=True)
class SourceConfig:
    """Where the binlog comes from."""

    name: str = "demo"
    transport: str = "server"
    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "loader"
    password_env: str = "LOADER_SOURCE_PASSWORD"
    airflow_conn_id: str = ""
    binlog_dir: str = ""
    server_id: int = 5401
    # How long to wait for the server: to connect (the handshake included), and for any answer
    # after that (a query's first row, the next binlog packet). A frozen server fails the step
    # as transient after them, instead of hanging it.
    connect_timeout_seconds: int = 10
    read_timeout_seconds: int = 60
    # TLS to the server (``loader.source.tls``), as MySQL's clients name the modes: "disabled",
    # "preferred", "required" (the default: never the login in plain text), "verify_ca" or
    # "verify_identity"; tls_ca the CA certificates (PEM) the server's certificate is checked
    # against (else the system's), tls_cert and tls_key a client certificate and its key, for
    # accounts that require one.
    tls: str = "required"
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    # A run holds the source's lease while a step changes the ledger or the warehouse; renewed
    # while it works, it expires this long after a killed run stopped renewing it.
    lease_seconds: int = 120
    # Another server behind the address whose GTID history holds everything read so far (a
    # promoted replica): "follow" continues on it from the matching position, "stop" refuses.
    failover: str = "follow"
    # How row images become staging rows: "native" (the compiled module, loader._native) or
    # "python" (the reference decoder, slower; the same bytes).
    decoder: str = "native"
    # The delta DAG's schedule: minutes, a cron expression or "none" (triggered runs only);
    # empty: $LOADER_DELTA_SCHEDULE, else every 15 minutes.
    schedule: str = ""
    # Seconds behind the source (``loader status``'s lag) past which the delta DAG's last task
    # fails, so that Airflow's failure notifications fire even while every run succeeds; 0: none.
    alert_lag_seconds: int = 0

    def password(self) -> str:
        """The password from the environment variable named by ``password_env`` ('' if unset)."""
        return os.environ.get(self.password_env, "") if self.password_env else ""


@dataclass(frozen=True)
class TablesConfig:
    """Which tables are loaded, and key columns for tables that have no primary key."""

    include: tuple[str, ...] = ("*.*",)
    exclude: tuple[str, ...] = ()
    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # "evolve": carry the schema changes the warehouse can follow, stop at the others;
    # "stop": stop at every schema change of a selected table (for teams that review them).
    schema_changes: str = "evolve"
    # Shards: source tables ("schema.table", * and ? as wildcards; the first match wins) merged
    # into one warehouse table ("schema.table") that other sources route into too, each source's
    # rows told apart by the column _source (the source's name), the first of the table's key.
    routes: Mapping[str, str] = field(default_factory=dict)
    # What a warehouse table keeps of its source table's changes (``loader.core.modes``): "mirror"
    # (the rows as they are), "soft_delete" (deleted rows kept, marked) or "history" (every
    # version); ``modes`` overrides it per table ("schema.table", * and ?; the first match wins).
    mode: str = MIRROR
    modes: Mapping[str, str] = field(default_factory=dict)

    def mode_of(self, schema: str, table: str) -> str:
        """The warehouse mode of the source table ``schema.table``."""
        name = f"{schema}.{table}"
        return next((m for p, m in self.modes.items() if fnmatchcase(name, p)), self.mode)

    def route(self, schema: str, table: str) -> tuple[str, str] | None:
        """The shared table ``(schema, table)`` a source table is routed into; None if it is not."""
        name = f"{schema}.{table}"
        target = next((t for p, t in self.routes.items() if fnmatchcase(name, p)), None)
        if target is None:
            return None
        shared_schema, shared_table = target.split(".", 1)
        return shared_schema, shared_table

    def shared_tables(self) -> frozenset[str]:
        """The warehouse names of the shared tables the routes go into."""
        return frozenset(naming.warehouse_table(*target.split(".", 1)) for target in self.routes.values())

    def warehouse_name(self, schema: str, table: str) -> str:
        """The source table's warehouse table name: its route's shared table's, else its own
        (``naming.warehouse_table``: ``<schema>__<table>`` for ordinary names)."""
        return naming.warehouse_table(*(self.route(schema, table) or (schema, table)))


@dataclass(frozen=True)
class StagingConfig:
    """Where the CSV change files and manifests go."""

    uri: str = "staging"
    gzip: bool = False
    part_bytes: int = 128 * 1024 * 1024
    s3_endpoint_url: str = ""
    aws_conn_id: str = ""
    webhdfs_url: str = ""
    # Server-side encryption of every object written to S3 staging, by boto3 and by Spark's s3a
    # alike: "" (the bucket's default), "AES256" (S3's keys) or "aws:kms" (KMS, with
    # s3_sse_kms_key a key id or ARN; empty: the account's aws/s3 key).
    s3_sse: str = ""
    s3_sse_kms_key: str = ""

    @property
    def scheme(self) -> str:
        """``file``, ``s3`` or ``hdfs``."""
        return self.uri.split("://", 1)[0] if "://" in self.uri else "file"


@dataclass(frozen=True)
class WarehouseConfig:
    """The Spark catalog the warehouse tables live in."""

    database: str = "warehouse"
    # "iceberg": Iceberg tables, merged with MERGE INTO (merge-on-read), one snapshot per
    # interval; "hive": partitioned Parquet tables in the Spark (Hive) catalog, the touched
    # partitions rewritten and swapped in.
    format: str = "iceberg"
    # Iceberg tables created from now on: 3 (deletion vectors) or 2 (position delete files; for
    # readers without version 3, such as Athena).
    iceberg_format_version: int = 3
    catalog: str = "derby"
    metastore_uri: str = ""
    # Where the Iceberg tables are listed: "" follows catalog (the embedded SQLite file, or the
    # Hive metastore at metastore_uri); "jdbc": a database at iceberg_catalog_uri
    # (jdbc:mariadb://host:3306/iceberg, or another database with its driver among the jars);
    # "rest": a REST catalog at iceberg_catalog_uri (Polaris, Nessie, Glue), its other settings
    # as [spark.conf] spark.sql.catalog.iceberg.* keys.
    iceberg_catalog: str = ""
    iceberg_catalog_uri: str = ""
    iceberg_catalog_user: str = ""
    # The variable holding the JDBC catalog's password, or the REST catalog's OAuth2 credential
    # (client_id:client_secret); read by the Spark job, never put on a command line.
    iceberg_catalog_password_env: str = "LOADER_ICEBERG_CATALOG_PASSWORD"
    # Where the tables' files go: a local path, file://, hdfs://namenode:8020/path or
    # s3://bucket/prefix (read and written by Spark through s3a).
    dir: str = "warehouse"
    # The embedded Derby catalog's folder, always local; empty: <dir>/metastore for a local dir.
    metastore_dir: str = ""
    # An S3-compatible endpoint for an s3:// dir (MinIO, Ceph); empty for AWS.
    s3_endpoint_url: str = ""
    # An Airflow AWS connection whose keys Spark uses for an s3:// dir; empty: the AWS chain.
    aws_conn_id: str = ""
    # Integer primary keys: this many consecutive key values per partition.
    partition_rows: int = 1_000_000
    # Other keys: this many hash buckets.
    buckets: int = 16
    # Superseded partition versions are deleted after this many hours.
    retention_hours: int = 24
    # Partitions pointed at their new versions per catalog call (one metastore transaction each).
    swap_batch: int = 1000
    # Per table ("schema.table", * and ? as wildcards; the first match wins), instead of the two
    # above: e.g. smaller ranges for a table whose changes crowd its newest keys.
    partition_rows_by_table: Mapping[str, int] = field(default_factory=dict)
    buckets_by_table: Mapping[str, int] = field(default_factory=dict)

    @property
    def scheme(self) -> str:
        """``file``, ``hdfs`` or ``s3``."""
        return self.dir.split("://", 1)[0] if "://" in self.dir else "file"

    def spark_dir(self) -> str:
        """The warehouse folder as Spark names it (``s3://`` is read through ``s3a://``)."""
        if self.scheme == "file":
            return Path(self.dir.removeprefix("file://")).as_uri()
        return "s3a://" + self.dir[len("s3://") :] if self.scheme == "s3" else self.dir.rstrip("/")

    def partitioning(self, schema: str, table: str) -> tuple[int, int]:
        """``(partition_rows, buckets)`` for one table."""
        name = f"{schema}.{table}"
        rows = next((n for p, n in self.partition_rows_by_table.items() if fnmatchcase(name, p)), None)
        buckets = next((n for p, n in self.buckets_by_table.items() if fnmatchcase(name, p)), None)
        return rows or self.partition_rows, buckets or self.buckets


@dataclass(frozen=True)
class LoadConfig:
    """How the initial load copies the source's tables, in key ranges."""

    # "arrow": the job's Python process reads each table's rows (the native reader), casts them
    # with Arrow as Spark would and writes the Parquet files, which Iceberg's API commits as the
    # new or replaced table (``warehouse.arrow_copy``); for Iceberg tables in a local
    # warehouse.dir (a soft_delete or history table loaded again, a table shared by sources, a
    # Hive-format or remote warehouse: Spark's copy, and the load says so). "spark": Spark reads
    # each table over JDBC in its executors and writes it.
    engine: str = "arrow"

    # A JDBC driver jar besides the pinned ones ([spark] jars has MariaDB's, which reads MySQL
    # servers too); empty for none.
    jdbc_jar: str = ""
    jdbc_driver: str = "org.mariadb.jdbc.Driver"
    # Default: jdbc:mysql://<source.host>:<source.port>/?permitMysqlScheme&useServerPrepStmts=true
    # (Spark's MySQL dialect, the binary protocol)
    jdbc_url: str = ""
    # Key ranges per table, read at once (each a source connection and a Spark task).
    parallelism: int = 4
    # Tables a load's job copies at once: one table's start and commit run while another's
    # rows are read (the arrow engine reads ``parallelism`` key ranges at once in all).
    tables_at_once: int = 2
    # Rows per round trip; the reader streams, so memory does not grow with the table.
    fetch_size: int = 10_000


def arrow_engine_problem(wh: WarehouseConfig) -> str | None:
    """Why ``[load] engine = "arrow"`` leaves every copy into this warehouse to Spark; None when
    it copies new tables into it."""
    if wh.format != "iceberg":
        return f"the warehouse tables are {wh.format}-format (this engine writes Iceberg tables)"
    if wh.scheme != "file":
        return f"the warehouse is not on local disk ({wh.dir}; this engine writes local files)"
    return None


@dataclass(frozen=True)
class SparkConfig:
    """How Spark jobs are started."""

    master: str = "local[2]"
    conf: Mapping[str, str] = field(default_factory=dict)
    # The jars every job runs with: a folder (each *.jar in it) or jar files, comma-separated.
    # Empty: the folder make setup fills with the pinned set (infra/jars), .cache/jars/spark
    # beside the loader package, when there is one; an installed package without the checkout
    # runs without them until a job needs them (S3 storage, a JDBC read), which then says so.
    jars: str = ""
    # A materialise job on a local master over at most this many pending change rows, into
    # Iceberg tables of at most this many rows together (as last recorded), runs its driver with
    # the JVM's quick compiler only: such a job is mostly its start (a larger one keeps both
    # compilers, at ten times the JVM's compile thresholds). -1: never.
    quick_compiler_changes: int = 500_000
    quick_compiler_table_rows: int = 10_000_000
    # A materialise job merges up to this many tables of an interval at once, each in a Spark
    # session of its own in the one application: one table's fixed costs (planning, reading its
    # metadata, the commit) run while another's tasks use the cores. 1: one after another.
    merge_tables_at_once: int = 2
    # The Airflow pool the DAGs' Spark jobs take a slot of: one pool shared by every source of a
    # deployment bounds the jobs running at once (create it: airflow pools set NAME SLOTS DESC;
    # a task of a pool that does not exist is never scheduled). default_pool always exists.
    airflow_pool: str = "default_pool"


@dataclass(frozen=True)
class MaintenanceConfig:
    """Upkeep of Iceberg tables (the ``loader_maintenance`` DAG, ``loader maintain``)."""

    # When the maintenance DAG runs: a cron expression or preset ("@daily"), or "none" for
    # triggered runs only.
    schedule: str = "@daily"
    # Data files with deletes, and groups of at least this many small files, are rewritten.
    min_input_files: int = 5
    # Snapshots older than this are expired (with the files only they use): how far back
    # ``loader rollback`` and ``compare --as-of`` reach.
    expire_after_hours: int = 168
    # The newest snapshots kept whatever their age.
    retain_last: int = 10


@dataclass(frozen=True)
class Config:
    """The whole configuration, as validated at start."""

    source: SourceConfig = field(default_factory=SourceConfig)
    tables: TablesConfig = field(default_factory=TablesConfig)
    staging: StagingConfig = field(default_factory=StagingConfig)
    warehouse: WarehouseConfig = field(default_factory=WarehouseConfig)
    load: LoadConfig = field(default_factory=LoadConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    maintenance: MaintenanceConfig = field(default_factory=MaintenanceConfig)
    path: str = ""
    # The source's own file, when ``path`` is a deployment of several sources.
    source_file: str = ""


_SECTIONS: dict[str, type] = {
    "source": SourceConfig,
    "tables": TablesConfig,
    "staging": StagingConfig,
    "warehouse": WarehouseConfig,
    "load": LoadConfig,
    "spark": SparkConfig,
    "maintenance": MaintenanceConfig,
}


def load_config(
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    source: str | None = None,
) -> Config:
    """Read, override and validate the configuration of one source.

    Args:
        path: the TOML file; defaults to ``$LOADER_CONFIG``; no file means all defaults.
        env: the environment to read overrides from (defaults to ``os.environ``).
        source: the source to take from a deployment of several (default ``$LOADER_SOURCE``);
            for a single-source file, its name if given.

    Raises:
        ConfigError: naming the file, the field and the accepted values; or the sources a
            deployment offers when none (or an unknown one) is chosen.
    """
    env = os.environ if env is None else env
    chosen = str(path) if path else env.get(ENV_FILE, "")
    wanted = source or env.get(ENV_SOURCE) or None
    raw, base = _read(chosen)
    if SOURCES_SECTION not in raw:
        _apply_env(raw, env)
        cfg = _build(raw, base, chosen)
        if wanted is not None and wanted != cfg.source.name:
            raise ConfigError(
                f"{chosen or 'defaults'}: its one source is {cfg.source.name!r}, not {wanted!r} "
                f"(--source or {ENV_SOURCE})"
            )
        return cfg
    files = _source_files(raw, base, chosen, env)
    offered = ", ".join(sorted(files)) or "(none)"
    if wanted is None:
        raise ConfigError(
            f"{chosen} is a deployment of sources {offered}: choose one with --source NAME (or {ENV_SOURCE})"
        )
    if wanted not in files:
        raise ConfigError(f"{chosen}: no source {wanted!r} in its sources folder; its sources: {offered}")
    return _source_config(raw, base, chosen, wanted, files, env)


@dataclass(frozen=True)
class Deployment:
    """Every source of a config file: the ones that load, and each broken one's error."""

    path: str
    sources: Mapping[str, Config]
    broken: Mapping[str, str]  # a broken source's file -> its error
    many: bool = True  # a deployment (``[sources]``), not a single-source file

    def shared_settings(self) -> Config:
        """The settings every source shares (staging, warehouse, Spark, maintenance), as the first
        source that loads holds them.

        Raises:
            ConfigError: no source loads (each broken one's error).
        """
        if not self.sources:
            errors = "; ".join(self.broken.values()) or "its sources folder has no source file"
            raise ConfigError(f"{self.path}: no source of the deployment loads: {errors}")
        return next(iter(self.sources.values()))


def load_deployment(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Deployment:
    """Every source of the configuration: one for a single-source file, each source file's for
    a deployment (a broken one is in ``broken``, its error naming its file and field: it stops
    only itself).

    Raises:
        ConfigError: the file itself, or a deployment's shared settings, are broken.
    """
    env = os.environ if env is None else env
    chosen = str(path) if path else env.get(ENV_FILE, "")
    raw, base = _read(chosen)
    if SOURCES_SECTION not in raw:
        _apply_env(raw, env)
        cfg = _build(raw, base, chosen)
        return Deployment(chosen, {cfg.source.name: cfg}, {}, many=False)
    files = _source_files(raw, base, chosen, env)
    sources: dict[str, Config] = {}
    broken: dict[str, str] = {}
    for name in sorted(files):
        try:
            sources[name] = _source_config(raw, base, chosen, name, files, env)
        except ConfigError as exc:
            broken.update((str(file), str(exc)) for file, _ in files[name])
    return Deployment(chosen, sources, dict(sorted(broken.items())))


def _read(chosen: str) -> tuple[dict[str, Any], Path]:
    """A config file's TOML (nothing for no file) and the folder its relative paths start from."""
    if not chosen:
        return {}, Path.cwd()
    p = Path(chosen)
    return _toml(p), p.resolve().parent


def _toml(p: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {p} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {p} is not valid TOML: {exc}") from None


# A source file and its TOML (None: it does not read; building it says why).
SourceFile = tuple[Path, "dict[str, Any] | None"]


def _source_files(
    raw: Mapping[str, Any], base: Path, where: str, env: Mapping[str, str]
) -> dict[str, list[SourceFile]]:
    """A deployment's source files, read, by source name (``source.name``, else the file's stem;
    an unreadable file by its stem), once its shared settings are found valid.

    Raises:
        ConfigError: the ``[sources]`` section or the shared settings are broken.
    """
    section = raw[SOURCES_SECTION]
    if not isinstance(section, Mapping) or set(section) != {"dir"} or not isinstance(section["dir"], str):
        raise ConfigError(
            f"{where}: [{SOURCES_SECTION}] makes the file a deployment of several sources and takes one field, "
            'dir = "<folder of source files>" (one source\'s own settings go in [source])'
        )
    if f"{ENV_PREFIX}SOURCE__NAME" in env:
        raise ConfigError(
            f"{ENV_PREFIX}SOURCE__NAME cannot rename the sources of the deployment {where}: "
            f"choose one with --source (or {ENV_SOURCE})"
        )
    # The shared settings are checked on their own, so that their errors name this file (the
    # sources' defaults are checked in each source, where a source file may complete them).
    own_sections = {SOURCES_SECTION, "source", "tables", "load"}
    shared = {k: dict(v) if isinstance(v, Mapping) else v for k, v in raw.items() if k not in own_sections}
    _apply_env(shared, env)
    _build(shared, base, where)
    folder = base / section["dir"]
    if not folder.is_dir():
        raise ConfigError(f"{where}: sources.dir {folder} is not a folder")
    named: dict[str, list[SourceFile]] = {}
    for file in sorted(folder.glob("*.toml")):
        try:
            own: dict[str, Any] | None = _toml(file)
        except ConfigError:
            own = None
        named.setdefault(_name_of(own or {}, file), []).append((file, own))
    return named


def _source_config(
    raw: Mapping[str, Any],
    base: Path,
    where: str,
    name: str,
    files: Mapping[str, list[SourceFile]],
    env: Mapping[str, str],
) -> Config:
    """The source ``name`` of a deployment: the deployment's settings with its file's over them."""
    if len(files[name]) > 1:
        raise ConfigError(
            f"source name {name!r} is taken by {' and '.join(str(f) for f, _ in files[name])}: each source "
            "needs its own name (source.name, or the file name)"
        )
    ((file, read),) = files[name]
    origin = str(file)
    own = read if read is not None else _toml(file)  # a file that does not read raises here
    unknown = set(own) - set(SOURCE_SECTIONS)
    if unknown:
        raise ConfigError(
            f"{origin}: section [{sorted(unknown)[0]}] is shared by every source: set it in {where}; "
            f"a source file holds {', '.join(f'[{s}]' for s in SOURCE_SECTIONS)}"
        )
    merged: dict[str, Any] = {k: dict(v) if isinstance(v, Mapping) else v for k, v in raw.items()}
    del merged[SOURCES_SECTION]
    for section, values in own.items():
        if not isinstance(values, Mapping):
            raise ConfigError(f"{origin}: [{section}] must be a table of fields")
        if section == "warehouse" and set(values) - set(SOURCE_WAREHOUSE_FIELDS):
            field_name = sorted(set(values) - set(SOURCE_WAREHOUSE_FIELDS))[0]
            raise ConfigError(
                f"{origin}: warehouse.{field_name} is shared by every source: set it in {where}; a "
                f"source file may set warehouse.{', warehouse.'.join(SOURCE_WAREHOUSE_FIELDS)}"
            )
        merged.setdefault(section, {}).update(values)
    merged.setdefault("source", {})["name"] = name
    _apply_env(merged, env)
    return dataclasses.replace(_build(merged, base, origin), path=where, source_file=origin)


def _name_of(own: Mapping[str, Any], file: Path) -> str:
    source = own.get("source", {})
    name = source.get("name", file.stem) if isinstance(source, Mapping) else file.stem
    return str(name)


def _apply_env(raw: dict[str, Any], env: Mapping[str, str]) -> None:
    for name, text in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        parts = name[len(ENV_PREFIX) :].lower().split("__")
        if len(parts) != 2:
            raise ConfigError(f"environment override {name} must look like LOADER__SECTION__FIELD")
        section, key = parts
        raw.setdefault(section, {})[key] = _parse_env_value(text)


def _parse_env_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _build(raw: Mapping[str, Any], base: Path, where: str) -> Config:
    origin = where or "defaults"
    unknown = set(raw) - set(_SECTIONS)
    if unknown:
        raise ConfigError(
            f"{origin}: unknown section [{sorted(unknown)[0]}]; accepted sections: {', '.join(_SECTIONS)}"
        )
    sections = {name: _section(cls, raw.get(name, {}), name, origin) for name, cls in _SECTIONS.items()}
    cfg = Config(**sections, path=where)
    return _validate(cfg, base, origin)


def _section(cls: type, values: Any, name: str, origin: str) -> Any:
    if not isinstance(values, Mapping):
        raise ConfigError(f"{origin}: [{name}] must be a table of fields")
    hints = typing.get_type_hints(cls)
    accepted = [f.name for f in dataclasses.fields(cls)]
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in hints:
            raise ConfigError(f"{origin}: unknown field {name}.{key}; accepted fields: {', '.join(accepted)}")
        kwargs[key] = _coerce(value, hints[key], f"{name}.{key}", origin)
    return cls(**kwargs)


def _coerce(value: Any, hint: Any, fq: str, origin: str) -> Any:
    bad = ConfigError(f"{origin}: {fq} must be {_describe(hint)}, got {value!r}")
    origin_type = typing.get_origin(hint)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise bad
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise bad
    if hint is str:
        if isinstance(value, str):
            return value
        raise bad
    if origin_type is tuple:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise bad
    if origin_type in (Mapping, dict):
        if not isinstance(value, Mapping):
            raise bad
        _, vt = typing.get_args(hint)
        out: dict[str, Any] = {}
        for k, v in value.items():
            if typing.get_origin(vt) is tuple or vt is int:
                out[str(k)] = _coerce(v, vt, f"{fq}.{k}", origin)
            else:
                out[str(k)] = v if isinstance(v, str) else _stringify(v)
        return out
    raise bad  # pragma: no cover - a field type this module does not know


def _stringify(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _describe(hint: Any) -> str:
    if hint is bool:
        return "true or false"
    if hint is int:
        return "an integer"
    if hint is str:
        return "a string"
    if typing.get_origin(hint) is tuple:
        return "a list of strings"
    return "a table"


def _one_of(value: str, accepted: tuple[str, ...], fq: str, origin: str) -> None:
    if value not in accepted:
        shown = ", ".join(a or "''" for a in accepted)
        raise ConfigError(f"{origin}: {fq} = {value!r} is not accepted; accepted values: {shown}")


def _validate(cfg: Config, base: Path, origin: str) -> Config:
    src, stg, wh = cfg.source, cfg.staging, cfg.warehouse
    _one_of(src.transport, TRANSPORTS, "source.transport", origin)
    _one_of(src.failover, FAILOVER, "source.failover", origin)
    _one_of(src.decoder, DECODERS, "source.decoder", origin)
    _one_of(src.tls, TLS_MODES, "source.tls", origin)
    if src.tls_ca and src.tls not in TLS_VERIFYING:
        raise ConfigError(
            f"{origin}: source.tls_ca is set but source.tls = {src.tls!r} does not check the server's "
            "certificate: set tls = 'verify_identity' (or 'verify_ca'), or remove tls_ca"
        )
    if src.tls == "disabled" and (src.tls_cert or src.tls_key):
        raise ConfigError(f"{origin}: source.tls_cert and tls_key need TLS; source.tls = 'disabled'")
    if src.tls_key and not src.tls_cert:
        raise ConfigError(f"{origin}: source.tls_key is set without source.tls_cert (its certificate)")
    _one_of(cfg.tables.schema_changes, SCHEMA_CHANGES, "tables.schema_changes", origin)
    _one_of(cfg.tables.mode, MODES, "tables.mode", origin)
    for pattern, mode in cfg.tables.modes.items():
        _one_of(mode, MODES, f"tables.modes[{pattern!r}]", origin)
    if src.transport == "files" and not src.binlog_dir:
        raise ConfigError(f"{origin}: source.binlog_dir is required when source.transport = 'files'")
    if not 1 <= src.port <= 65535:
        raise ConfigError(f"{origin}: source.port must be between 1 and 65535, got {src.port}")
    if not 1 <= src.server_id < 2**32:
        raise ConfigError(f"{origin}: source.server_id must be between 1 and 4294967295, got {src.server_id}")
    if min(src.connect_timeout_seconds, src.read_timeout_seconds, src.lease_seconds) < 1:
        raise ConfigError(
            f"{origin}: source.connect_timeout_seconds, read_timeout_seconds and lease_seconds must be >= 1"
        )
    if src.alert_lag_seconds < 0:
        raise ConfigError(
            f"{origin}: source.alert_lag_seconds must be >= 0 (0: no alert), got {src.alert_lag_seconds}"
        )
    schedule = src.schedule.strip()
    if schedule and not (
        schedule.isdigit()
        or schedule.lower() == "none"
        or schedule.startswith("@")
        or len(schedule.split()) in (5, 6)
    ):
        raise ConfigError(
            f'{origin}: source.schedule = {src.schedule!r} is not accepted; accepted values: minutes ("15"), '
            'a cron expression ("*/5 * * * *"), a preset ("@hourly") or "none"'
        )
    if not src.name or "/" in src.name or src.name.startswith("."):
        raise ConfigError(f"{origin}: source.name {src.name!r} must be a non-empty name without '/'")
    _one_of(stg.scheme, STORAGE_SCHEMES, "staging.uri scheme", origin)
    _one_of(stg.s3_sse, S3_SSE, "staging.s3_sse", origin)
    if stg.s3_sse and stg.scheme != "s3":
        raise ConfigError(
            f"{origin}: staging.s3_sse = {stg.s3_sse!r} needs an s3:// staging.uri, got {stg.uri!r}"
        )
    if stg.s3_sse_kms_key and stg.s3_sse != "aws:kms":
        raise ConfigError(
            f"{origin}: staging.s3_sse_kms_key is set but staging.s3_sse = {stg.s3_sse!r}, not 'aws:kms'"
        )
    if stg.scheme == "hdfs" and not stg.webhdfs_url:
        raise ConfigError(
            f"{origin}: staging.webhdfs_url (http://namenode:9870) is required for an hdfs:// staging.uri"
        )
    if stg.part_bytes < 1024 * 1024:
        raise ConfigError(f"{origin}: staging.part_bytes must be at least 1048576, got {stg.part_bytes}")
    _one_of(wh.catalog, CATALOGS, "warehouse.catalog", origin)
    _one_of(wh.format, TABLE_FORMATS, "warehouse.format", origin)
    _one_of(wh.iceberg_catalog, ICEBERG_CATALOGS, "warehouse.iceberg_catalog", origin)
    wanted_uri = {"jdbc": ("jdbc:",), "rest": ("http://", "https://")}.get(wh.iceberg_catalog, ())
    if wanted_uri and not wh.iceberg_catalog_uri.startswith(wanted_uri):
        raise ConfigError(
            f"{origin}: warehouse.iceberg_catalog_uri must start with {' or '.join(wanted_uri)} when "
            f"iceberg_catalog = {wh.iceberg_catalog!r}, got {wh.iceberg_catalog_uri!r}"
        )
    if wh.catalog == "hive" and not wh.metastore_uri:
        raise ConfigError(
            f"{origin}: warehouse.metastore_uri (thrift://host:9083) is required when catalog = 'hive'"
        )
    _one_of(wh.scheme, STORAGE_SCHEMES, "warehouse.dir scheme", origin)
    if wh.scheme != "file" and wh.catalog == "derby" and not wh.metastore_dir:
        raise ConfigError(
            f"{origin}: warehouse.dir {wh.dir} is not local: the embedded Derby catalog needs a local "
            "warehouse.metastore_dir (or catalog = 'hive' with a metastore_uri)"
        )
    per_table = (*wh.partition_rows_by_table.values(), *wh.buckets_by_table.values())
    if (
        wh.partition_rows < 1
        or wh.buckets < 1
        or wh.swap_batch < 1
        or wh.retention_hours < 0
        or min(per_table, default=1) < 1
    ):
        raise ConfigError(
            f"{origin}: warehouse.partition_rows, buckets and swap_batch must be >= 1, retention_hours >= 0"
        )
    if wh.iceberg_format_version not in (2, 3):
        raise ConfigError(
            f"{origin}: warehouse.iceberg_format_version = {wh.iceberg_format_version!r} is not accepted; "
            "accepted values: 2, 3"
        )
    mt = cfg.maintenance
    if mt.min_input_files < 1 or mt.retain_last < 1 or mt.expire_after_hours < 0 or not mt.schedule.strip():
        raise ConfigError(
            f"{origin}: maintenance.min_input_files and retain_last must be >= 1, expire_after_hours "
            '>= 0, and schedule a cron expression, a preset such as "@daily", or "none"'
        )
    if cfg.spark.merge_tables_at_once < 1:
        raise ConfigError(
            f"{origin}: spark.merge_tables_at_once must be >= 1, got {cfg.spark.merge_tables_at_once}"
        )
    if min(cfg.spark.quick_compiler_changes, cfg.spark.quick_compiler_table_rows) < -1:
        raise ConfigError(
            f"{origin}: spark.quick_compiler_changes and quick_compiler_table_rows must be >= 0 (or -1: never)"
        )
    _one_of(cfg.load.engine, LOAD_ENGINES, "load.engine", origin)
    if cfg.load.parallelism < 1 or cfg.load.fetch_size < 1 or cfg.load.tables_at_once < 1:
        raise ConfigError(f"{origin}: load.parallelism, load.fetch_size and load.tables_at_once must be >= 1")
    if not wh.database.replace("_", "").isalnum():
        raise ConfigError(f"{origin}: warehouse.database {wh.database!r} must be letters, digits and '_'")
    for pattern in (
        *cfg.tables.include,
        *cfg.tables.exclude,
        *cfg.tables.keys,
        *cfg.tables.modes,
        *wh.partition_rows_by_table,
        *wh.buckets_by_table,
    ):
        if "." not in pattern:
            raise ConfigError(
                f"{origin}: table pattern {pattern!r} must look like schema.table (wildcards * and ?)"
            )
    for pattern, target in cfg.tables.routes.items():
        if "." not in pattern:
            raise ConfigError(
                f"{origin}: tables.routes pattern {pattern!r} must look like schema.table (wildcards * and ?)"
            )
        parts = target.split(".")
        if len(parts) != 2 or not naming.is_ordinary(*parts):
            raise ConfigError(
                f"{origin}: tables.routes {pattern!r} = {target!r}: the shared table must be named "
                "schema.table in lower-case letters, digits and single underscores (no wildcard)"
            )
    if cfg.tables.routes and wh.format != "iceberg":
        raise ConfigError(
            f"{origin}: tables.routes need warehouse.format = 'iceberg' (sources share a table through "
            f"Iceberg's concurrent commits); got {wh.format!r}"
        )

    staging_uri = stg.uri
    if stg.scheme == "file":
        local = stg.uri[len("file://") :] if stg.uri.startswith("file://") else stg.uri
        staging_uri = "file://" + str((base / local).resolve())
    binlog_dir = str((base / src.binlog_dir).resolve()) if src.binlog_dir else ""
    tls_ca, tls_cert, tls_key = (
        str((base / value).resolve()) if value else "" for value in (src.tls_ca, src.tls_cert, src.tls_key)
    )
    jars = [str((base / j.strip()).resolve()) for j in cfg.spark.jars.split(",") if j.strip()]
    jdbc_jar = str((base / cfg.load.jdbc_jar).resolve()) if cfg.load.jdbc_jar else ""
    wh_dir = str((base / wh.dir.removeprefix("file://")).resolve()) if wh.scheme == "file" else wh.dir
    metastore_dir = str((base / (wh.metastore_dir or Path(wh_dir, "metastore"))).resolve())
    return dataclasses.replace(
        cfg,
        source=dataclasses.replace(
            src, binlog_dir=binlog_dir, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key
        ),
        staging=dataclasses.replace(stg, uri=staging_uri),
        warehouse=dataclasses.replace(wh, dir=wh_dir, metastore_dir=metastore_dir),
        load=dataclasses.replace(cfg.load, jdbc_jar=jdbc_jar),
        spark=dataclasses.replace(cfg.spark, jars=",".join(jars)),
    )
