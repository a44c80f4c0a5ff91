"""Initial load: copy the selected tables into their warehouse tables without locking the source.

Why this is correct without locks (DESIGN.md section 4): P0, the server's binlog position, is
recorded in the ledger before any row is read. Rows are then read while writes go on, each
written with ``_seqno = seqno(P0)``, which every change after P0 exceeds. The delta that follows
replays from P0, so a row the copy read before or after a later change ends up as that change
left it (the merge rule makes the replay safe).

Each table is read in primary-key ranges, ``load.parallelism`` at a time. By default
(``load.engine = "arrow"``) a new Iceberg table is copied by ``arrow_copy``: the rows read,
cast and written in this process, the table created with them in one commit. Otherwise Spark
reads the ranges over JDBC in its executors, streaming (``load.fetch_size`` rows per round trip),
and writes the table: an Iceberg table replaced in one snapshot, a Hive-format table's base to a
new version folder whose partitions are then swapped in as materialisation does. Values are read
as the text the binlog reader stages (``types.source_select_sql``) and cast with the same type
map.

A first load copies every selected table and sets the checkpoint to P0. A re-load of some tables
while deltas keep running copies them at their own P0 and leaves the checkpoint alone. Until a
table's copy is recorded, merges pass it over (its changes stay staged): a merge beside the copy
would be lost to it. Once the copy committed, under the source's lease, its changes past P0 in the
intervals materialised meanwhile are applied to it, then the copy is recorded; later merges apply
only changes past P0 to it (the older ones are in the copy).

A source whose binlog keeps less than a whole load takes (``--from-now``) starts the deltas at the
server's current position with no copy; each table is then filled by its own re-load, the deltas
running meanwhile.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loader.binlog.history import SourceHistory
from loader.binlog.schema import InformationSchema
from loader.core import modes
from loader.core.config import Config, LoadConfig, TablesConfig, arrow_engine_problem
from loader.core.errors import LoadError, SourceError, TransientError
from loader.core.naming import INVALID_DATES_COLUMN, reserved_column_problem, warehouse_tables
from loader.core.results import LoadSummary, TableLoadResult
from loader.core.tables import TableSelector, key_columns
from loader.source import tls
from loader.source.connection import Credentials, base_tables, check_binlog_settings, connect, credentials
from loader.staging.manifest import ColumnSpec
from loader.staging.stores import open_store
from loader.state import lease
from loader.state.ledger import Ledger
from loader.state.records import Load, layout_record
from loader.warehouse import iceberg, resync, types
from loader.warehouse.materialize import at_once, catch_up
from loader.warehouse.submit import java_causes
from loader.warehouse.tables import (
    PART,
    Target,
    ensure_database,
    ensure_table,
    has_integer_key,
    iceberg_partitioning,
    iceberg_properties_sql,
    key_comparison,
    partition_expr,
    publish_version,
    quote_identifier,
    source_column_sql,
    source_filter,
    table_mode,
    table_name,
    table_properties,
)

Progress = Callable[[str], None]
# Seconds a load waits for the source's lease (a merge may hold it for minutes; a copy is dear
# to redo) to record P0 or a table's copy.
LEASE_WAIT = 3600.0


@dataclass(frozen=True)
class SourceTableInfo:
    """What the load needs to know about one source table."""

    schema: str
    table: str
    columns: list[ColumnSpec]
    key: list[str]
    estimated_rows: int

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def sql_name(self) -> str:
        """The table's name in the source's SQL, backquoted."""
        return f"{quote_identifier(self.schema)}.{quote_identifier(self.table)}"


def _sql_literal(conn: Any, value: Any) -> str:
    return str(conn.escape(value))


def selected_tables(
    conn: Any, tables: TablesConfig, only: list[str] | None, table_format: str = ""
) -> list[SourceTableInfo]:
    """The base tables the config selects (or the named subset of them), with columns and keys;
    a table with a column the warehouse's tables (of ``table_format``) cannot have is refused."""
    selector = TableSelector(tables.include, tables.exclude)
    found = [(s, t, n) for s, t, n in base_tables(conn) if selector(s, t)]
    # Two source tables never share a warehouse table.
    warehouse_tables(((s, t) for s, t, _ in found), tables.route)
    if only:
        names = {f"{s}.{t}" for s, t, _ in found}
        unknown = [n for n in only if n not in names]
        if unknown:
            raise LoadError(
                f"tables {unknown} are not among the tables the config selects "
                f"({len(names)} tables: {', '.join(sorted(names)[:10])}{' ...' if len(names) > 10 else ''})"
            )
        found = [f for f in found if f"{f[0]}.{f[1]}" in only]
    described = InformationSchema(conn)
    out = []
    for schema, table, rows in found:
        source = described.get(schema, table)
        if source is None:
            raise LoadError(f"table {schema}.{table} went away while the load was being planned")
        columns = [ColumnSpec(c.name, types.normalize(c.column_type, c.charset)) for c in source.columns]
        for c in columns:
            types.spark_type(c.mysql_type)  # an unknown type stops the load before any copy
        reserved = reserved_column_problem(schema, table, (c.name for c in columns), table_format)
        if reserved:
            raise LoadError(reserved)
        key = key_columns(
            tables.keys, schema, table, source.primary_key, [c.name for c in columns], source.unique_keys
        )
        out.append(SourceTableInfo(schema, table, columns, key, rows))
    return out


def key_ranges(conn: Any, info: SourceTableInfo, count: int, names: list[str] | None = None) -> list[str]:
    """Up to ``count`` WHERE clauses over the key aliases ``k0, k1, ...`` (or the key's ``names``
    in SQL) that split the table.

    Together they cover every key once. A single integer key is cut into equal spans between its
    min and max; any other key at key values found by walking its index in order
    (``ORDER BY key LIMIT 1 OFFSET n``).
    """
    key = [quote_identifier(k) for k in info.key]
    aliases = names or [f"k{i}" for i in range(len(key))]
    source = info.sql_name
    cuts: list[list[str]] = []
    with conn.cursor() as cur:
        if has_integer_key(info.columns, info.key):
            cur.execute(f"SELECT MIN({key[0]}), MAX({key[0]}) FROM {source}")
            low, high = cur.fetchone()
            if low is not None and count > 1:
                step = max(1, -(-(int(high) - int(low) + 1) // count))
                cuts = [[str(v)] for v in range(int(low) + step, int(high) + 1, step)]
        elif count > 1:
            cur.execute(f"SELECT COUNT(*) FROM {source}")
            total = int(cur.fetchone()[0])
            step = -(-total // count) if total else 0
            for n in range(1, count):
                if not step or n * step >= total:
                    break
                cur.execute(
                    f"SELECT {', '.join(key)} FROM {source} ORDER BY {', '.join(key)} LIMIT 1 OFFSET {n * step}"
                )
                row = cur.fetchone()
                if row is not None:
                    cuts.append([_sql_literal(conn, v) for v in row])
    bounds: list[list[str] | None] = [None, *cuts, None]
    out = []
    for low_cut, high_cut in itertools.pairwise(bounds):
        terms = []
        if low_cut is not None:
            terms.append(key_comparison(aliases, low_cut, ">="))
        if high_cut is not None:
            terms.append("NOT " + key_comparison(aliases, high_cut, ">="))
        out.append(" AND ".join(terms) or "1=1")
    return out


def select_sql(info: SourceTableInfo) -> str:
    """The query Spark's JDBC reader wraps: every column as ``types.source_select_sql`` reads it
    (aliased ``c0, c1, ...``), and the key columns as they are (``k0, k1, ...``) for the ranges."""
    source = info.sql_name
    fields = [
        f"{types.source_select_sql(quote_identifier(c.name), c.mysql_type)} AS c{i}"
        for i, c in enumerate(info.columns)
    ]
    fields += [f"{quote_identifier(k)} AS k{i}" for i, k in enumerate(info.key)]
    return f"SELECT {', '.join(fields)} FROM {source}"


# The default JDBC URL's options (MariaDB Connector/J; MySQL Connector/J knows the second).
DEFAULT_JDBC_OPTIONS = "permitMysqlScheme&useServerPrepStmts=true"


def jdbc_url(load: LoadConfig, creds: Credentials) -> str:
    """The JDBC URL of the source; the session reads TIMESTAMP values in UTC.

    The default is a ``jdbc:mysql:`` URL (which MariaDB's driver takes with ``permitMysqlScheme``)
    because Spark picks its MySQL dialect by that prefix; with a ``jdbc:mariadb:`` URL it quotes
    column names with double quotes, which the server reads as strings. ``useServerPrepStmts``
    makes the server send rows in the binary protocol: numbers as bytes rather than text, which
    reads about a third faster (``bench/initial_load.py``).
    """
    base = load.jdbc_url or f"jdbc:mysql://{creds.host}:{creds.port}/?{DEFAULT_JDBC_OPTIONS}"
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}sessionVariables=time_zone='+00:00'"


def jdbc_tls(cfg: Config, creds: Credentials, conn: Any, url: str) -> dict[str, str]:
    """The source's TLS settings as Connector/J's properties (``tls.jdbc_properties``), the same
    TLS the job's own connection ``conn`` got; none when ``[load] jdbc_url`` sets ``sslMode``.

    Raises:
        SourceError: a client certificate with a cluster's executors, which could not read the
            keystore the driver writes.
    """
    if "sslmode=" in url.lower():
        return {}
    if creds.tls.cert and not cfg.spark.master.startswith("local"):
        raise SourceError(
            f"{creds.where}: Spark's copy on {cfg.spark.master} cannot present [source] tls_cert: the "
            "executors' driver (Connector/J) reads a client certificate from a keystore file on their own "
            "machine. Load with a local master, or set [load] jdbc_url with keyStore options naming a "
            "keystore every executor has"
        )
    return tls.jdbc_properties(creds.tls, offered=tls.got(conn, creds.tls).version is not None)


def copy_table(
    spark: Any,
    cfg: Config,
    creds: Credentials,
    conn: Any,
    info: SourceTableInfo,
    load: Load,
    progress: Progress,
    readers: threading.Semaphore | None = None,
) -> TableLoadResult:
    """Copy one table into a new version of its warehouse table and swap it in (``readers``:
    taken by each key range the job's Python process reads, shared by the tables copied at once)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    started = time.monotonic()
    if cfg.load.engine == "arrow":
        from loader.warehouse import arrow_copy

        why = arrow_copy.unsupported(spark, cfg, info.schema, info.table)
        if why is None:
            # A table there already must be this source's own, in a mode it may leave.
            ensure_table(
                spark, Target.of(cfg), info.schema, info.table, info.columns, key=info.key, replace=True
            )
            ranges = key_ranges(conn, info, cfg.load.parallelism, [quote_identifier(k) for k in info.key])
            progress(f"{info.qualified}: copying ~{info.estimated_rows:,} rows in {len(ranges)} key ranges")
            rows = arrow_copy.copy_table(spark, cfg, creds, info, ranges, load, progress, readers)
            return _copied(info, rows, started, len(ranges), progress)
        if arrow_engine_problem(cfg.warehouse) is None:  # else said once for the load
            progress(f"{info.qualified}: copied by Spark: {why}")
    name = table_name(cfg, info.schema, info.table)
    own_rows = source_filter(cfg.source.name, cfg.tables, info.schema, info.table)
    mode = cfg.tables.mode_of(info.schema, info.table)
    # A soft_delete or history table loaded again keeps what it knew (resync); read as it was,
    # before the load changes its columns.
    old = None
    if (
        mode != modes.MIRROR
        and spark.catalog.tableExists(name)
        and table_mode(table_properties(spark, name)) == mode
    ):
        old = spark.table(name).where(own_rows) if own_rows else spark.table(name)
    url = jdbc_url(cfg.load, creds)
    secured = jdbc_tls(cfg, creds, conn, url)  # refused settings stop before the table changes
    ensure_table(spark, Target.of(cfg), info.schema, info.table, info.columns, key=info.key, replace=True)
    ranges = key_ranges(conn, info, cfg.load.parallelism)
    frame = spark.read.jdbc(
        url,
        f"({select_sql(info)}) AS loader_copy",
        predicates=ranges,
        properties={
            "user": creds.user,
            "password": creds.password,
            "driver": cfg.load.jdbc_driver,
            "fetchsize": str(cfg.load.fetch_size),
            **secured,
        },
    )
    p0_seqno = load.seqno
    select = [
        f"{types.load_cast_sql(f'c{i}', c.mysql_type)} AS {quote_identifier(c.name)}"
        for i, c in enumerate(info.columns)
    ]
    part = partition_expr(info.columns, info.key, *cfg.warehouse.partitioning(info.schema, info.table))
    dates = [(f"c{i}", c.name, c.mysql_type) for i, c in enumerate(info.columns)]
    iceberg_table = cfg.warehouse.format == "iceberg"
    # The loader's own columns in the order a table made by materialise has them (META_DDL, the
    # mode's): a table created by the copy (Iceberg's CREATE … AS SELECT) gets the frame's order.
    typed = frame.selectExpr(
        *select, f"{types.invalid_dates_sql(dates)} AS {INVALID_DATES_COLUMN}"
    ).selectExpr(
        *([source_column_sql(cfg.source.name)] if own_rows else []),
        *(quote_identifier(c.name) for c in info.columns),
        *resync.select_items(resync.copied_change_values(p0_seqno, load.started_at, load.id)),
        f"current_timestamp() AS {modes.LOADED_AT}",
        INVALID_DATES_COLUMN,
        *resync.copied_mode_columns(mode, p0_seqno, load.started_at),
        *([] if iceberg_table else [f"{part} AS {PART}"]),
    )
    observation = Observation(f"copy {info.qualified}")
    watcher = _ProgressWatcher(spark, info, len(ranges), progress)
    watcher.start()
    try:
        observed = typed.observe(observation, F.count(F.lit(1)).alias("rows"))
        if old is not None:
            observed = resync.resynced(
                spark, observed, old, mode, info.key, p0_seqno, load.id, load.started_at, part
            )
        summary = {iceberg.SOURCE: cfg.source.name, iceberg.LOAD: load.id}
        # An integer key's ranges are spans of the key the table is partitioned by (truncate);
        # rows joined with the table's old ones (resync) come out of the join's shuffle instead.
        as_read = old is None and has_integer_key(info.columns, info.key)
        if own_rows:  # a shared table: the source's rows replaced, the other sources' kept
            iceberg.overwrite_rows(spark, name, observed, own_rows, summary, as_read)
        elif iceberg_table:
            iceberg.replace_table(
                spark,
                name,
                observed,
                iceberg_partitioning(
                    info.columns, info.key, *cfg.warehouse.partitioning(info.schema, info.table)
                ),
                iceberg_properties_sql(
                    cfg.source.name, cfg.warehouse, new=not spark.catalog.tableExists(name), mode=mode
                ),
                summary,
                as_read,
            )
        else:
            publish_version(spark, Target.of(cfg), info.schema, info.table, observed, load.id, None)
    except Exception as exc:
        failed = source_failure(exc)
        if failed is None:
            raise
        said, lost = failed
        if lost:
            raise TransientError(
                f"{creds.where}: Spark's copy of {info.qualified} for initial load {load.id} (P0 {load.p0}) "
                f"lost its connection: {said}. Nothing of the table was committed; the load's next run "
                "copies it again"
            ) from exc
        raise LoadError(
            f"{creds.where}: Spark's copy of {info.qualified} for initial load {load.id} (P0 {load.p0}) "
            f"failed: {said}. Nothing of the table was committed; run the load again once the cause is mended"
        ) from exc
    finally:
        watcher.stop()
    return _copied(info, int(observation.get["rows"]), started, len(ranges), progress)


def source_failure(exc: BaseException) -> tuple[str, bool] | None:
    """The source's error inside a failed Spark action (the JDBC driver's, ``java.sql``): its
    message and whether it lost the connection (SQLSTATE class 08); None for any other failure."""
    for java in java_causes(getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)):
        name = str(java.getClass().getName())
        if name.startswith("java.sql."):
            said = (str(java.getMessage() or "").strip().splitlines() or [name])[0]
            return said, str(java.getSQLState() or "").startswith("08")
    return None


def _copied(
    info: SourceTableInfo, rows: int, started: float, ranges: int, progress: Progress
) -> TableLoadResult:
    seconds = time.monotonic() - started
    progress(f"{info.qualified}: {rows:,} rows in {seconds:.1f} s ({rows / max(seconds, 1e-9):,.0f} rows/s)")
    return TableLoadResult(info.qualified, rows, seconds, ranges)


class _ProgressWatcher:
    """Reports a table's copy as its key ranges finish (Spark tasks), every few seconds."""

    def __init__(
        self, spark: Any, info: SourceTableInfo, ranges: int, progress: Progress, every: float = 5.0
    ) -> None:
        self._spark = spark
        self._info = info
        self._ranges = ranges
        self._progress = progress
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._group = f"loader-load-{uuid.uuid4().hex[:8]}"

    def start(self) -> None:
        self._spark.sparkContext.setJobGroup(self._group, f"initial load of {self._info.qualified}")
        self._progress(
            f"{self._info.qualified}: copying ~{self._info.estimated_rows:,} rows in {self._ranges} key ranges"
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._spark.sparkContext.setJobGroup("", "")

    def _run(self) -> None:
        tracker = self._spark.sparkContext.statusTracker()
        last = -1
        while not self._stop.wait(self._every):
            done = 0
            for job in tracker.getJobIdsForGroup(self._group):
                info = tracker.getJobInfo(job)
                for stage in info.stageIds if info else []:
                    stage_info = tracker.getStageInfo(stage)
                    if stage_info is not None:
                        done = max(done, stage_info.numCompletedTasks)
            if done != last:
                last = done
                share = done / self._ranges if self._ranges else 1.0
                self._progress(
                    f"{self._info.qualified}: {done}/{self._ranges} key ranges copied "
                    f"(~{int(share * self._info.estimated_rows):,} of ~{self._info.estimated_rows:,} rows)"
                )


def start_load(
    cfg: Config, only: list[str] | None = None, progress: Progress = print, from_now: bool = False
) -> Load:
    """Check the source and the tables, then record P0 (before any row is read) in the ledger.

    Recorded under the source's lease: a merge that began before it would not know the tables
    are being copied, and could commit after their copies.

    ``from_now``: the source's first start, at its current position, copying nothing: the
    checkpoint is P0 at once and every table waits for its own re-load (``Ledger.awaiting_copy``).
    """
    ledger = Ledger.of(cfg)
    creds = credentials(cfg.source)
    conn = connect(creds)
    try:
        with lease.of_source(cfg, "the start of an initial load", LEASE_WAIT, progress):
            load = _record_p0(cfg, ledger, conn, creds, only, from_now, progress)
    finally:
        conn.close()
    if from_now:
        progress(
            f"{load.id}: started from now at {load.p0}; the deltas run from there. {len(load.tables)} "
            "tables wait for their copy: loader initial-load --tables SCHEMA.TABLE,... copies them "
            "while the deltas run (loader tables shows which are loaded)"
        )
    else:
        progress(f"initial load {load.id}: P0 = {load.p0}, {len(load.tables)} tables")
    return load


def _record_p0(
    cfg: Config,
    ledger: Ledger,
    conn: Any,
    creds: Credentials,
    only: list[str] | None,
    from_now: bool,
    progress: Progress,
) -> Load:
    check_binlog_settings(conn)
    checkpoint = ledger.checkpoint()
    first = checkpoint is None
    if from_now and not first:
        raise LoadError(
            f"source {cfg.source.name} has a checkpoint already ({checkpoint.position if checkpoint else ''}): "
            "a start from now is for a source never loaded. Copy tables while the deltas run with "
            "loader initial-load --tables SCHEMA.TABLE,..."
        )
    if first and only:
        raise LoadError(
            f"source {cfg.source.name} has not been loaded yet: the first initial load copies every "
            "selected table (run it without a table list, or start from now: loader initial-load "
            "--from-now, then copy the tables one by one)"
        )
    tables = selected_tables(conn, cfg.tables, only, cfg.warehouse.format)
    if not tables:
        raise LoadError(
            f"the config selects no tables of source {cfg.source.name} ({list(cfg.tables.include)})"
        )
    source = SourceHistory.of(conn, cfg.source, creds)
    p0 = source.current()
    mark = source.mark(p0)
    epoch = ledger.epoch()
    if checkpoint is not None:
        problem = source.problem(checkpoint.position, checkpoint.mark(), "the checkpoint")
        if problem and only:
            raise LoadError(
                f"{problem}. A re-load of some tables cannot join this history to the one loaded "
                "so far: re-load every table (loader initial-load without a table list)"
            )
        if problem:  # this load starts the next history: it supersedes everything before
            epoch += 1
            progress(f"initial load: {problem}; this load of every table starts a new history")
    now = dt.datetime.now(dt.UTC)
    load = Load(
        id=f"load-{now:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:6]}",  # sorts as started, to the microsecond
        p0=p0,
        tables=[t.qualified for t in tables],
        state="complete" if from_now else "started",
        started_at=now.strftime("%Y-%m-%d %H:%M:%S.%f"),
        finished_at=now.strftime("%Y-%m-%d %H:%M:%S.%f") if from_now else "",
        first=first,
        names=[[t.schema, t.table] for t in tables],
        layouts=[],
        every_table=not only,
        server=mark.server,
        p0_gtid=mark.gtid,
        p0_txn=mark.txn,
        epoch=epoch,
        from_now=from_now,
    )
    ledger.save_load(load)
    if from_now:  # the deltas start here: the checkpoint holds P0's commit time, as a load's would
        ledger.supersede(load, int(now.timestamp() * 1_000_000))
    return load


def copy_tables(
    spark: Any, cfg: Config, load_id: str, only: list[str] | None = None, progress: Progress = print
) -> list[TableLoadResult]:
    """Copy the load's tables (or some of them), ``[load] tables_at_once`` at a time, recording
    each one's rows in the ledger as it is copied; a table that fails lets the others finish,
    then its error is raised (the first in the tables' order).

    The deltas may run meanwhile: their merges pass a table over while its copy is pending
    (``Ledger.awaiting_copy``), and once the copy committed, under the source's lease, the changes
    past P0 of the intervals materialised since are applied to it (``catch_up``) and the copy is
    recorded, from when on the merges take the table again.
    """
    ledger = Ledger.of(cfg)
    store = open_store(cfg.staging)
    load = _find_load(ledger, load_id)
    if load.from_now:
        raise LoadError(
            f"{load_id} started source {cfg.source.name} from now without copying: copy its tables "
            "with loader initial-load --tables SCHEMA.TABLE,..."
        )
    names = [t for t in load.tables if not only or t in only]
    creds = credentials(cfg.source)
    conn = connect(creds)
    try:
        tables = selected_tables(conn, cfg.tables, names, cfg.warehouse.format)
    finally:
        conn.close()
    ensure_database(spark, cfg.warehouse)
    problem = arrow_engine_problem(cfg.warehouse)
    if cfg.load.engine == "arrow" and problem:
        progress(f"initial load {load_id}: the tables are copied by Spark: {problem}")
    # Tables copied at once read ``parallelism`` key ranges together, as one table does: one
    # table's start and commit overlap another's reading, and the memory stays that of one.
    readers = threading.BoundedSemaphore(cfg.load.parallelism)
    # The lease is the process's (re-entrant, released by whoever took it first): the tables'
    # bookkeeping takes it one table at a time.
    recording = threading.Lock()

    def copy(info: SourceTableInfo, session: Any) -> TableLoadResult:
        own = connect(creds)
        try:
            result = copy_table(session, cfg, creds, own, info, load, progress, readers)
        finally:
            own.close()
        with recording, lease.of_source(cfg, f"the copy of {info.qualified}", LEASE_WAIT, progress):
            caught = catch_up(session, cfg, store, ledger, load, info.schema, info.table)
            if caught:
                progress(f"{info.qualified}: {caught} intervals merged meanwhile applied to the copy")
            # Other copies of the same load may have been recorded meanwhile.
            now = _find_load(ledger, load_id)
            now.rows[info.qualified] = result.rows
            now.layouts = [
                *(r for r in now.layouts or [] if (r[0], r[1]) != (info.schema, info.table)),
                layout_record(info.schema, info.table, info.columns),
            ]
            ledger.save_load(now)
        return result

    return at_once(spark, cfg.load.tables_at_once, [functools.partial(copy, info) for info in tables])


def finish_load(cfg: Config, load_id: str) -> Load:
    """Once every table is copied: the checkpoint goes to P0 (first load); the load is complete."""
    ledger = Ledger.of(cfg)
    load = _find_load(ledger, load_id)
    if load.from_now:  # complete when started: its tables are copied by their re-loads
        return load
    missing = [t for t in load.tables if t not in load.rows]
    if missing:
        raise LoadError(
            f"initial load {load_id}: tables {missing} are not copied yet; copy them before finishing"
        )
    # The first load, or a re-load of every table past the checkpoint, sets the checkpoint to P0
    # (before the load is marked complete, so a rerun after a crash does it again).
    started = dt.datetime.strptime(load.started_at, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=dt.UTC)
    ledger.supersede(load, int(started.timestamp() * 1_000_000))
    load.state = "complete"
    load.finished_at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    ledger.save_load(load)
    return load


def _find_load(ledger: Ledger, load_id: str) -> Load:
    for load in ledger.loads():
        if load.id == load_id:
            return load
    raise LoadError(f"source {ledger.source} has no initial load {load_id}")


def run_initial_load(
    spark: Any, cfg: Config, only: list[str] | None = None, progress: Progress = print
) -> LoadSummary:
    """Record P0, copy the tables, then set the checkpoint (first load) or leave it (re-load)."""
    started = time.monotonic()
    load = start_load(cfg, only, progress)
    results = copy_tables(spark, cfg, load.id, progress=progress)
    finish_load(cfg, load.id)
    return LoadSummary(load.id, str(load.p0), results, time.monotonic() - started, first=load.first)
