"""The steps of a run, for every caller: the ``loader`` command, the Airflow tasks and the Spark jobs.

A delta run is: plan the interval (snapshot the server's end position), extract it into staging,
materialise every extracted interval in order with the Spark job (which moves the checkpoint).
Each step is safe to run again: planning with the same run id returns the same interval,
extracting an interval writes the same files, materialising is idempotent. Each step notes its
failure on the interval in the ledger, whoever called it, so ``loader status`` shows it.

Spark jobs are started through a ``Launcher``: the command line's runs spark-submit itself, the
Airflow operator's runs it through ``SparkSubmitOperator``; both get the job from
``warehouse.submit.build_spark_job`` and hand its outcome to ``run_spark_job``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any, TypeVar, cast

from loader.binlog.history import SourceHistory
from loader.core import crashpoints
from loader.core.config import Config, WarehouseConfig, arrow_engine_problem
from loader.core.errors import (
    ConfigError,
    LagError,
    LoaderError,
    LoadError,
    SparkJobError,
    TransientError,
)
from loader.core.naming import warehouse_tables
from loader.core.positions import Position
from loader.core.results import (
    ExtractSummary,
    FailedStep,
    IntervalRecord,
    LastCheck,
    LastLoad,
    LoadSummary,
    Maintenance,
    Materialized,
    MergedInterval,
    PlannedInterval,
    Rollback,
    RunOnce,
    StartedLoad,
    Status,
    TableMapping,
    TableResult,
    from_dict,
)
from loader.core.tables import TableSelector
from loader.extract import scratch
from loader.extract.interval import run_extract
from loader.source.connection import base_tables, check_binlog_settings, connect, credentials
from loader.staging.aws import keys_env
from loader.staging.manifest import Manifest
from loader.state import lease
from loader.state.ledger import Ledger
from loader.state.records import (
    ABANDONED,
    EXTRACTED,
    MATERIALISED,
    PLANNED,
    Interval,
    Load,
    awaiting_copy,
    gaps,
    last_changes,
    last_error,
    now_text,
    record_fields,
    table_rows,
    waits_on_failure,
)
from loader.warehouse import initial_load
from loader.warehouse.checks import ChecksumReport, TableChecksum, TableComparison
from loader.warehouse.checksum_sql import DEFAULT_RANGE_ROWS
from loader.warehouse.materialize import apply_unchanged
from loader.warehouse.rollback import check_interval
from loader.warehouse.session import JobSize, s3_connections
from loader.warehouse.submit import SOURCE_JOBS, SparkJob, build_spark_job, error_outcome, read_outcome

Progress = Callable[[str], None]
# Starts a Spark job and waits for it; returns None when the process ended well, else what went
# wrong with it (the job's own error, if any, is read from its outcome file afterwards).
Launcher = Callable[[SparkJob], str | None]
MAX_DECODE_WORKERS = 8
# Jobs that change the warehouse and the ledger: the launcher holds the source's lease while
# they run (the job joins it), so a job that dies does not leave it held. The maintenance job
# takes the leases of each table's sources itself, table by table.
LEASED_JOBS = frozenset({"materialize", "rollback"})
# The checksum job's option to apply the extracted intervals first (its launcher holds the lease).
MATERIALIZE_FIRST = "--materialize"
# The maintenance job's option to maintain the tables of every source of the deployment.
EVERY_SOURCE = "--every-source"


# --- delta run ------------------------------------------------------------------------------


F = TypeVar("F", bound=Callable[..., Any])


def source_lease(cfg: Config, what: str) -> contextlib.AbstractContextManager[object]:
    """The source's lease for a step that changes the ledger or the warehouse (``loader.state.lease``)."""
    return lease.of_source(cfg, what)


@contextlib.contextmanager
def source_leases(cfgs: Iterable[Config], what: str) -> Iterator[None]:
    """The leases of several sources (the sources writing to one warehouse table), all or none:
    taken in name order, those taken released when one is busy.

    Raises:
        LeaseError: one of them is held by another run (it names the source and the holder).
    """
    with contextlib.ExitStack() as held:
        for cfg in sorted(cfgs, key=lambda c: c.source.name):
            held.enter_context(source_lease(cfg, what))
        yield


def leased(what: str) -> Callable[[F], F]:
    """Run the step (its first argument is the config) holding the source's lease."""

    def wrap(step: F) -> F:
        @functools.wraps(step)
        def run(cfg: Config, *args: Any, **kwargs: Any) -> Any:
            with crashpoints.step(step.__name__.replace("_", "-"), cfg.source.name), source_lease(cfg, what):
                return step(cfg, *args, **kwargs)

        return cast(F, run)

    return wrap


def plan(
    cfg: Config,
    start: Position | None = None,
    end: Position | None = None,
    max_changes: int | None = None,
    run_id: str | None = None,
    dry_run: bool = False,
    start_lognum: int | None = None,
    start_logpos: int | None = None,
    allow_gap: bool = False,
) -> PlannedInterval:
    """Snapshot the server's end position (or take ``end``) and record the interval to extract.

    A backfill gives ``start`` or ``start_lognum`` + ``start_logpos`` (the file's base name is the
    server's): the interval replays from there to the end. A start past where the log has been
    read is refused unless ``allow_gap`` (then the gap is recorded). A dry run records nothing.
    """
    ledger = Ledger.of(cfg)
    if (start_lognum is None) != (start_logpos is None):
        raise ConfigError("a backfill needs both start_lognum and start_logpos")
    creds = credentials(cfg.source)
    conn = connect(creds)
    try:
        check_binlog_settings(conn)
        source = SourceHistory.of(conn, cfg.source, creds)
        now = source.current()
        if start_lognum is not None and start_logpos is not None:
            start = Position.from_lognum(now.file.rsplit(".", 1)[0], start_lognum, start_logpos)
        _check_order(start, end)
        end = end or now
        # A dry run records nothing, so it needs no lease (and runs beside a busy pipeline).
        held = contextlib.nullcontext() if dry_run else source_lease(cfg, "loader plan")
        with crashpoints.step("plan", cfg.source.name), held:
            interval = ledger.plan(
                end,
                start=start,
                max_changes=max_changes,
                run_id=run_id,
                allow_gap=allow_gap,
                source=source,
                dry_run=dry_run,
                follow=cfg.source.failover == "follow",
            )
    finally:
        conn.close()
    if interval is None:
        return PlannedInterval(None, str(end), str(end), dry_run, 0)
    span = _span(interval.start, interval.end)
    interval_id = None if dry_run else interval.id
    return PlannedInterval(
        interval_id,
        str(interval.start),
        str(interval.end),
        dry_run,
        span,
        str(interval.skipped_from) if interval.skipped_from else None,
    )


def _check_order(start: Position | None, end: Position | None) -> None:
    if start is not None and end is not None and start > end:
        raise ConfigError(
            f"the interval asked for ends at {end}, before its start {start}: an interval cannot run "
            "backwards; give an end after the start"
        )


def _span(begin: Position, end: Position) -> int | None:
    """Bytes of binlog between two positions of one file (None across files: sizes unknown here)."""
    return max(0, end.pos - begin.pos) if begin.file == end.file else None


def decode_workers(requested: int | None = None) -> int:
    """Decoding processes for an extract: as asked, else one per core (up to 8), whichever the
    transport (a server's stream is read once and its ranges decoded in parallel)."""
    if requested:
        return requested
    return min(MAX_DECODE_WORKERS, os.cpu_count() or 1)


@leased("loader extract")
def extract(
    cfg: Config,
    interval_id: str | None = None,
    *,
    start: Position | None = None,
    end: Position | None = None,
    max_changes: int | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    allow_gap: bool = False,
) -> ExtractSummary | None:
    """Extract a planned interval again (same boundaries, same files), or plan the next one and
    extract it; None when there is nothing new. A failure is noted on the interval."""
    _check_order(start, end)
    return run_extract(
        cfg, start, end, max_changes, progress, interval_id, decode_workers(workers), allow_gap
    )


def materialize(cfg: Config, launch: Launcher) -> Materialized:
    """Apply every extracted interval to the warehouse tables (the Spark job moves the checkpoint);
    the intervals it applied, as the ledger recorded them, and its tables."""
    waiting = [i.id for i in Ledger.of(cfg).intervals() if i.state == EXTRACTED]
    tables = from_dict(list[TableResult], run_spark_job(cfg, "materialize", [], launch))
    merged = [Ledger.of(cfg).get(i) for i in waiting]
    return Materialized(
        [
            MergedInterval(i.id, str(i.start), str(i.effective_end), i.changes)
            for i in merged
            if i is not None and i.state == MATERIALISED
        ],
        tables,
    )


def rollback(cfg: Config, launch: Launcher, interval_id: str) -> Rollback:
    """Return the warehouse tables and the checkpoint to the state after a materialised interval
    (the Spark job ``warehouse.rollback``); the later intervals are applied again."""
    check_interval(cfg, interval_id)  # before starting Spark for nothing
    return from_dict(Rollback, run_spark_job(cfg, "rollback", ["--to-interval", interval_id], launch))


def maintain(cfg: Config, launch: Launcher, every_source: bool = False) -> Maintenance:
    """Compact the Iceberg tables the source writes to (``every_source``: every source of its
    deployment) and expire their old snapshots (the Spark job ``warehouse.maintenance``), each
    table while none of the sources writing to it runs a step; Hive-format tables have nothing to
    do, and no job starts. A table a busy source writes to is skipped (``Maintenance.skipped``)."""
    if cfg.warehouse.format != "iceberg":
        return Maintenance(cfg.warehouse.format, [], 0.0)
    extra = [EVERY_SOURCE] if every_source else []
    return from_dict(Maintenance, run_spark_job(cfg, "maintain", extra, launch))


@leased("loader run-once")
def run_once(
    cfg: Config,
    launch: Launcher,
    start: Position | None = None,
    max_changes: int | None = None,
    start_lognum: int | None = None,
    start_logpos: int | None = None,
    progress: Progress | None = None,
    allow_gap: bool = False,
    end: Position | None = None,
) -> RunOnce:
    """One delta run without Airflow: plan (up to ``end``, by default the server's position),
    extract, materialise."""
    started = time.monotonic()
    planned = plan(
        cfg,
        start,
        end,
        max_changes,
        start_lognum=start_lognum,
        start_logpos=start_logpos,
        allow_gap=allow_gap,
    )
    extracted = None
    if planned.interval is not None:
        extracted = extract(cfg, planned.interval, progress=progress)
    done = materialize(cfg, launch)
    return RunOnce(planned, extracted, done.tables, time.monotonic() - started, done.intervals)


def materialize_size(warehouse: WarehouseConfig, ledger: Ledger, intervals: list[Interval]) -> JobSize | None:
    """What a materialise job goes through: the pending ``intervals``' change rows and the rows
    last recorded for the Iceberg tables they change (``ledger.table_rows``); None when one of
    these is not known (Hive tables, records of older loaders)."""
    if warehouse.format != "iceberg":
        return None
    pending = [i for i in intervals if i.state == EXTRACTED]
    if any(i.changes is None or i.layouts is None for i in pending):
        return None
    known = table_rows(intervals, ledger.loads())
    touched = {(schema, table) for i in pending for schema, table, _ in i.layouts or []}
    if not touched <= known.keys():
        return None
    return JobSize(sum(i.changes or 0 for i in pending), sum(known[name] for name in touched))


def initial_load_size(cfg: Config, ledger: Ledger) -> JobSize | None:
    """A first load the arrow engine copies is a job that is mostly its start: the rows are read,
    cast and written in Python, the JVM only creates and commits the tables. Sized as nothing, it
    runs on the quick compiler. Other loads are not sized: a re-load may be Spark's to copy (a
    soft_delete or history table loaded again) and applies the intervals merged meanwhile."""
    if cfg.load.engine != "arrow" or arrow_engine_problem(cfg.warehouse) or cfg.tables.routes:
        return None
    return JobSize(0, 0) if ledger.checkpoint() is None else None


def changed_tables(cfg: Config, interval_id: str | None) -> list[tuple[str, str]]:
    """The source tables an interval changed (what a run publishes as updated)."""
    if interval_id is None:
        return []
    ledger = Ledger.of(cfg)
    interval = ledger.get(interval_id)
    if interval is None or interval.manifest is None:
        return []
    manifest = Manifest.from_json(ledger.store.get(interval.manifest) or b"", interval.manifest)
    return sorted((t.schema, t.table) for t in manifest.tables)


# --- Spark jobs -----------------------------------------------------------------------------


def run_spark_job(cfg: Config, name: str, extra: list[str], launch: Launcher) -> object:
    """Run a Spark job with ``launch`` and return its summary.

    A materialisation with no extracted interval to apply, or whose intervals changed no selected
    table, starts no job (``materialize.apply_unchanged``) and returns no tables.

    Raises:
        SparkJobError: the job's own error (its class and whether it is transient), or that it
            ended without finishing. A materialisation that died without a word is noted on
            the first interval waiting for it (the job notes its own errors itself).
    """
    source = credentials(cfg.source) if name in SOURCE_JOBS else None
    held = source_lease(cfg, f"the {name} job") if name in LEASED_JOBS else contextlib.nullcontext()
    with crashpoints.step(name, cfg.source.name), held, scratch.folder("job") as tmp:
        size = None
        if name == "materialize":
            ledger = Ledger.of(cfg)
            intervals = ledger.intervals()
            if not any(i.state == EXTRACTED for i in intervals):
                return []  # nothing waits to be applied: a quiet source's runs start no Spark job
            with materialize_failures_noted(cfg):
                if apply_unchanged(ledger, intervals):
                    return []  # nothing to merge: no Spark job either
            size = materialize_size(cfg.warehouse, ledger, intervals)
        elif name == "initial-load":
            size = initial_load_size(cfg, Ledger.of(cfg))
        job = build_spark_job(
            cfg,
            name,
            extra,
            result_path=os.path.join(tmp, "outcome.json"),
            python=sys.executable,
            environ=os.environ,
            source=source,
            size=size,
        )
        # The keys of the Airflow connections the job's S3 storage names: only the launcher
        # can look them up.
        job.env.update(keys_env(conn_id for _, conn_id, _ in s3_connections(cfg.staging, cfg.warehouse)))
        token = lease.token_held(cfg.source.name)
        if token:  # the job joins this run's lease
            job.env[lease.LEASE_ENV] = token
        failure = launch(job)
        try:
            return read_outcome(job, failure)
        except SparkJobError as exc:
            applying = name == "materialize" or MATERIALIZE_FIRST in extra
            if not applying or exc.error_class:  # the job said what failed, and noted it
                raise
            noted = note_materialize_error(cfg, str(exc))  # no outcome: the job noted nothing
            if noted is None:
                raise
            raise SparkJobError(
                f"interval {noted}: {exc}; the checkpoint stays before it and its merges are applied "
                "once: run the materialisation again (clear the task, or loader materialize)",
                exc.job,
            ) from None


def note_materialize_error(cfg: Config, error: str) -> str | None:
    """Note a failed materialisation on the first interval waiting for it; that interval's id."""
    ledger = Ledger.of(cfg)
    waiting = [i for i in ledger.intervals() if i.state == EXTRACTED]
    if not waiting:
        return None
    ledger.record_error(waiting[0].id, f"materialize: {error}")
    return waiting[0].id


@contextlib.contextmanager
def materialize_failures_noted(cfg: Config) -> Iterator[None]:
    """A failure of a materialisation (the job's, or the launcher's no-job apply) is noted on the
    first interval waiting for it; the intervals a success applies lose their earlier errors
    where they are marked materialised (``record_materialised``)."""
    try:
        yield
    except Exception as exc:  # Spark's own errors too, in the one line the job reports
        note_materialize_error(cfg, error_outcome(exc)[1])
        raise


# --- initial load ---------------------------------------------------------------------------


def initial_load_arguments(tables: list[str] | None = None, parallelism: int | None = None) -> list[str]:
    """The initial-load job's arguments for a subset of tables and a number of key ranges."""
    extra = ["--tables", ",".join(tables)] if tables else []
    return extra + (["--parallelism", str(parallelism)] if parallelism else [])


def run_initial_load(
    cfg: Config, launch: Launcher, tables: list[str] | None = None, parallelism: int | None = None
) -> LoadSummary:
    """Record P0, copy the tables and set the checkpoint, in one Spark job."""
    summary = run_spark_job(cfg, "initial-load", initial_load_arguments(tables, parallelism), launch)
    return from_dict(LoadSummary, summary)


def start_load(
    cfg: Config, tables: list[str] | None, progress: Progress, from_now: bool = False
) -> StartedLoad:
    """Check the source and the tables, record P0 before any row is read (the copies follow);
    ``from_now``: start the deltas at P0 with no copy (``initial_load.start_load``)."""
    load = initial_load.start_load(cfg, tables, progress=progress, from_now=from_now)
    return StartedLoad(load.id, str(load.p0), load.tables, load.from_now)


def copy_arguments(started: StartedLoad, parallelism: int | None) -> list[list[str]]:
    """One initial-load job's arguments per table of a started load (none for a start from now)."""
    return [
        ["--load-id", started.load_id, *initial_load_arguments([table], parallelism)]
        for table in ([] if started.from_now else started.tables)
    ]


def finish_load(cfg: Config, load_id: str) -> Load:
    """Every table copied: the checkpoint goes to P0 (first load); the load is complete."""
    return initial_load.finish_load(cfg, load_id)


# --- checks ---------------------------------------------------------------------------------


def verify(cfg: Config, launch: Launcher, rows: int = 3, as_of: str | None = None) -> list[TableComparison]:
    """Every selected table next to its warehouse table (the Spark job reads both whole);
    ``as_of``: the warehouse tables as they were right after that interval (Iceberg tables)."""
    extra = ["--rows", str(rows)]
    if as_of is not None:
        check_interval(cfg, as_of, "compare --as-of")  # before starting Spark for nothing
        extra += ["--as-of", as_of]
    summary = run_spark_job(cfg, "compare", extra, launch)
    compared = from_dict(list[TableComparison], summary)
    if as_of is None:  # the warehouse of the past next to the source of now checks nothing
        Ledger.of(cfg).record_check(LastCheck.of("compare", now_text(), compared))
    return compared


def checksum(
    cfg: Config,
    launch: Launcher,
    tables: list[str] | None = None,
    range_rows: int = DEFAULT_RANGE_ROWS,
    progress: Progress = print,
) -> ChecksumReport:
    """Compare every selected table (or the named ones) with the source at one position.

    The source's sums are taken in one consistent snapshot at position P. When the warehouse is
    behind P, the changes up to P are planned and extracted here, and the one Spark job applies
    them (as a materialisation would) before it sums the same key ranges: one JVM start, not
    two. The source's lease is held from the extraction to the end of the sums, so no other run
    moves the warehouse while it is summed.

    Raises:
        LoadError: nothing has been loaded yet.
        TransientError: another run moved the checkpoint past P meanwhile.
    """
    from loader.warehouse.checksum import source_sums

    ledger = Ledger.of(cfg)
    if ledger.checkpoint() is None:
        raise LoadError("nothing has been loaded yet: run `loader initial-load` before a checksum")
    sums = source_sums(cfg.source, cfg.tables, tables, range_rows, progress)
    at = Position.parse(sums.position)
    caught_up = None
    apply_first = False  # the job applies extracted intervals before it sums
    with contextlib.ExitStack() as held:
        if _checkpoint_position(ledger) < at:
            held.enter_context(source_lease(cfg, "loader checksum"))  # the job joins it
            caught_up = _extract_up_to(cfg, at, progress)
            with materialize_failures_noted(cfg):
                apply_first = not apply_unchanged(ledger, ledger.intervals())
        if not apply_first:  # else the job checks once it has applied them
            require_checkpoint_at(cfg, sums.position)
        with scratch.folder("checksum") as tmp:
            path = os.path.join(tmp, "source-sums.json")
            with open(path, "w", encoding="utf-8") as out:
                json.dump(asdict(sums), out)
            extra = [MATERIALIZE_FIRST] if apply_first else []
            compared = run_spark_job(cfg, "checksum", [*extra, "--sums", path], launch)
    report = ChecksumReport(sums.position, from_dict(list[TableChecksum], compared), caught_up)
    ledger.record_check(LastCheck.of("checksum", now_text(), report.tables, sums.position))
    return report


def _checkpoint_position(ledger: Ledger) -> Position:
    return ledger.checkpoint().position  # type: ignore[union-attr]


def _extract_up_to(cfg: Config, at: Position, progress: Progress) -> str | None:
    """Plan and extract the intervals up to ``at`` (one left planned from before, then one up to
    ``at``); returns the last one, None when the log was read there already."""
    last = None
    for _ in range(3):
        planned = plan(cfg, end=at)
        if planned.interval is None:
            break
        extract(cfg, planned.interval, progress=progress)
        last = planned.interval
    return last


def require_checkpoint_at(cfg: Config, position: str) -> None:
    """The checksum's warehouse side sums the tables at the source's snapshot: the checkpoint
    must be there.

    Raises:
        TransientError: another run moved it (or left it behind) meanwhile.
    """
    checkpoint = _checkpoint_position(Ledger.of(cfg))
    if checkpoint != Position.parse(position):
        raise TransientError(
            f"the checksum's snapshot of the source is at {position} but the checkpoint is at {checkpoint}: "
            "another run moved it meanwhile; run the checksum again"
        )


def tables(cfg: Config) -> list[TableMapping]:
    """The source tables the config selects and the warehouse table each lands in.

    Raises:
        ConfigError: two selected tables would share a warehouse table (``naming``).
    """
    selector = TableSelector(cfg.tables.include, cfg.tables.exclude)
    conn = connect(credentials(cfg.source))
    try:
        found = [(s, t) for s, t, _ in base_tables(conn) if selector(s, t)]
    finally:
        conn.close()
    names = warehouse_tables(found, cfg.tables.route)
    ledger = Ledger.of(cfg)
    loaded_at = ledger.loaded_at()
    awaiting = ledger.awaiting_copy()
    changed = last_changes(ledger.intervals())
    return [
        TableMapping(
            s,
            t,
            names[(s, t)],
            str(p0) if (p0 := loaded_at.get((s, t))) else None,
            cfg.tables.route(s, t) is not None,
            cfg.tables.mode_of(s, t),
            load.id if (load := awaiting.get((s, t))) else None,
            last.id if (last := changed.get((s, t))) else None,
            _utc_text(last.last_commit_ts) if last and last.last_commit_ts else None,
        )
        for s, t in found
    ]


def _record(interval: Interval) -> IntervalRecord:
    return IntervalRecord(
        interval.id,
        interval.state,
        str(interval.start),
        str(interval.effective_end),
        interval.changes,
        interval.error if interval.state != MATERIALISED else None,
        interval.abandoned_reason,
        interval.abandoned_at,
        str(interval.skipped_from) if interval.skipped_from else None,
        interval.run_id,
        interval.followed_from,
        interval.server,
    )


def intervals(cfg: Config, last: int | None = None) -> tuple[list[IntervalRecord], int]:
    """The ledger's intervals (the ``last`` ones), oldest first, and how many there are."""
    recorded = Ledger.of(cfg).intervals()
    return [_record(i) for i in recorded[-last if last else 0 :]], len(recorded)


@leased("loader interval abandon")
def abandon(cfg: Config, interval_id: str, reason: str, rerun_ok: bool = False) -> list[IntervalRecord]:
    """Abandon an interval not yet materialised and the ones after it (``Ledger.abandon``).
    ``rerun_ok``: an interval abandoned already for this reason is no error (a rerun of the task
    that did it); nothing more is abandoned then."""
    ledger = Ledger.of(cfg)
    done = ledger.get(interval_id)
    if rerun_ok and done is not None and done.state == ABANDONED and done.abandoned_reason == reason.strip():
        return []
    return [_record(i) for i in ledger.abandon(interval_id, reason)]


def next_start(cfg: Config) -> Position:
    """Where the next delta run starts reading."""
    return Ledger.of(cfg).next_start()


@dataclass(frozen=True)
class Lag:
    """How far the checkpoint is behind the source's position."""

    seconds: float  # the source's clock minus the oldest unapplied change's commit time; 0: none
    bytes: int  # of binlog from the checkpoint to the source's position
    oldest: str | None  # that change's commit time (ISO 8601, UTC)


def _lag(source: SourceHistory, at: Position, now: Position) -> Lag:
    """The lag of a checkpoint ``at`` on the source whose position is ``now`` (``at <= now``).

    The oldest change not in the warehouse is the first transaction after the checkpoint,
    whichever tables it changes: which ones is only known by decoding it, and a transaction of
    tables not selected is applied as soon as the next interval passes it.
    """
    if at == now:
        return Lag(0.0, 0, None)
    behind = source.bytes_between(at, now)
    first = source.first_commit_after(at)
    if first is None:  # only the log's keeping (a rotation) since the checkpoint
        return Lag(0.0, behind, None)
    seconds = max(0.0, round((source.now_us() - first) / 1_000_000, 1))
    return Lag(seconds, behind, _utc_text(first))


def _utc_text(micros: int) -> str:
    return dt.datetime.fromtimestamp(micros / 1_000_000, dt.UTC).isoformat()


def check_lag(cfg: Config, known: Status | None = None) -> Status:
    """The status (``known``, or asked now), once its lag is checked against ``[source]
    alert_lag_seconds`` (0: no check).

    Raises:
        LagError: the source is behind by more, or the lag cannot be told while a threshold is set.
    """
    result = known or status(cfg)
    most = cfg.source.alert_lag_seconds
    name = cfg.source.name
    if not most:
        return result
    if result.lag_seconds is None or result.lag_bytes is None:
        why = (
            "it has no checkpoint yet: run the initial load"
            if result.checkpoint is None
            else result.history_problem or f"the source cannot be reached: {result.source_error}"
        )
        raise LagError(
            f"source {name}: how far the warehouse is behind cannot be told, so alert_lag_seconds "
            f"({most:,} s) cannot be checked: {why}"
        )
    if result.lag_seconds <= most:
        return result
    checkpoint = (result.checkpoint or {}).get("position")
    raise LagError(
        f"source {name} is {result.lag_seconds:,.0f} s behind (checkpoint {checkpoint}, the source at "
        f"{result.source_position}), more than alert_lag_seconds ({most:,} s): "
        f"the oldest change not in the warehouse committed at {result.oldest_unapplied_at}, "
        f"{result.lag_bytes:,} bytes of binlog ago; {result.backlog()}. If the delta runs fail, their task logs "
        "and loader status say why; if they succeed and the lag still grows, changes arrive faster "
        "than the runs apply them: run them more often ([source] schedule) or give the materialise "
        "job more cores ([spark] master)"
    )


def status(cfg: Config) -> Status:
    """Where the source is, what is loaded, how far behind, and what failed last."""
    ledger = Ledger.of(cfg)
    position = source_error = history_problem = server = None
    lag: Lag | None = None
    checkpoint = ledger.checkpoint()
    try:
        creds = credentials(cfg.source)
        conn = connect(creds)
        try:
            source = SourceHistory.of(conn, cfg.source, creds)
            now = source.current()
            position, server = str(now), source.server
            if checkpoint is not None:
                at = checkpoint.position
                history_problem = source.problem(at, checkpoint.mark(), "the checkpoint")
                if history_problem is None and at <= now:
                    lag = _lag(source, at, now)
        finally:
            conn.close()
    except LoaderError as exc:
        source_error = str(exc)
    last_change = None
    if checkpoint is not None and checkpoint.commit_ts:
        last_change = _utc_text(checkpoint.commit_ts)
    counts = {PLANNED: 0, EXTRACTED: 0, MATERIALISED: 0, "failed": 0, ABANDONED: 0}
    backlog = backlog_changes = 0
    intervals, loads = ledger.intervals(), ledger.loads()  # read once: each is a file per record
    for interval in intervals:
        if waits_on_failure(interval.state, interval.error):
            counts["failed"] += 1
        else:
            counts[interval.state] = counts.get(interval.state, 0) + 1
        if interval.state in (PLANNED, EXTRACTED):
            backlog += 1
        if interval.state == EXTRACTED:
            backlog_changes += interval.changes or 0
    last = last_error(intervals)
    switches = [i for i in intervals if i.followed_from and i.state != ABANDONED]
    return Status(
        source=cfg.source.name,
        source_position=position,
        source_error=source_error,
        source_server=server,
        history_problem=history_problem,
        followed=f"interval {switches[-1].id} continues on {switches[-1].server} from {switches[-1].start}; "
        f"the log was left at {switches[-1].followed_from}"
        if switches
        else None,
        checkpoint=record_fields(checkpoint) if checkpoint else None,
        lag_seconds=lag.seconds if lag else None,
        lag_bytes=lag.bytes if lag else None,
        oldest_unapplied_at=lag.oldest if lag else None,
        backlog_intervals=backlog,
        backlog_changes=backlog_changes,
        last_change_at=last_change,
        intervals=counts,
        last_error=FailedStep(last.id, last.error or "", last.error_at) if last else None,
        last_load=LastLoad(
            loads[-1].id,
            "started from now" if loads[-1].from_now else loads[-1].state,
            str(loads[-1].p0),
            len(loads[-1].tables),
        )
        if loads
        else None,
        gaps=[{"interval": i, "from": a, "to": b} for i, a, b in gaps(intervals)],
        lease=lease.holder(ledger.store, cfg.source.name),
        awaiting_copy=sorted(f"{schema}.{table}" for schema, table in awaiting_copy(loads)),
        last_check=ledger.last_check(),
    )
