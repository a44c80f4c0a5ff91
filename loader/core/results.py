"""What each step of a run returns, as typed records.

The ``loader`` command prints them (``--output json`` is ``to_dict``), the Airflow tasks pass them
between tasks as XCom (``to_dict`` / ``from_dict``: plain JSON, so no Airflow deserialisation
allow-list is needed), and the Spark jobs hand them back to the side that started them.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from loader.core import modes
from loader.core.errors import HISTORY_REMEDY

T = TypeVar("T")


def to_dict(result: Any) -> Any:
    """A result (or a list of them) as JSON-ready data."""
    if isinstance(result, list):
        return [to_dict(r) for r in result]
    return dataclasses.asdict(result)


def from_dict(cls: type[T], data: Any) -> T:
    """The result of type ``cls`` that ``to_dict`` turned into ``data``."""
    return typing.cast(T, _build(cls, data))


def _build(kind: Any, data: Any) -> Any:
    if data is None:
        return None
    origin = typing.get_origin(kind)
    if origin is list:
        (item,) = typing.get_args(kind)
        return [_build(item, d) for d in data]
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(kind) if a is not type(None)]
        return _build(inner[0], data) if len(inner) == 1 else data
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        return kind(
            **{
                f.name: _build(hints[f.name], data[f.name])
                for f in dataclasses.fields(kind)
                if f.name in data
            }
        )
    return data


@dataclass
class PlannedInterval:
    """The interval a run will extract; ``interval`` is None when there is nothing new, or on a
    dry run (which records nothing)."""

    interval: str | None
    start: str
    end: str
    dry_run: bool = False
    bytes: int | None = None  # of binlog, when start and end are in one file
    skipped_from: str | None = None  # a gap the operator allowed: [skipped_from, start) is skipped


@dataclass
class IntervalRecord:
    """One interval of the ledger, as on-call sees it (``loader intervals``)."""

    id: str
    state: str
    start: str
    end: str  # where it ends (a bounded interval's stop, else its planned end)
    changes: int | None = None
    error: str | None = None  # its last failure, when it is not materialised
    abandoned_reason: str | None = None
    abandoned_at: str | None = None
    skipped_from: str | None = None
    run_id: str | None = None
    followed_from: str | None = None  # it continued on another server: where the log was left
    server: str | None = None  # the server it was planned on

    @staticmethod
    def text(records: list[IntervalRecord], total: int) -> str:
        """One interval per line, newest last, with what failed or why it was abandoned."""
        shown = f"the last {len(records)} of {total}" if len(records) < total else f"{total}"
        lines = [f"{shown} intervals"]
        for r in records:
            changes = f", {r.changes:,} changes" if r.changes is not None else ""
            lines.append(f"  {r.id}  {r.state:<12}  [{r.start}, {r.end}){changes}")
            if r.skipped_from:
                lines.append(f"      gap allowed: [{r.skipped_from}, {r.start}) skipped")
            if r.followed_from:
                lines.append(
                    f"      followed {r.server} from {r.start}; the log was left at {r.followed_from}"
                )
            if r.abandoned_reason:
                lines.append(f"      abandoned at {r.abandoned_at}: {r.abandoned_reason}")
            elif r.error:
                lines.append(f"      failed: {r.error}")
        return "\n".join(lines)


@dataclass
class ExtractedTable:
    table: str
    ops: dict[str, int]
    files: int
    bytes: int


@dataclass
class ExtractSummary:
    """One interval extracted into staging."""

    interval: str
    start: str
    end: str
    transactions: int
    changes: int
    seconds: float
    tables: list[ExtractedTable]
    manifest: str


@dataclass
class TableResult:
    """One warehouse table after a materialisation."""

    table: str
    inserted: int
    updated: int
    deleted: int
    partitions: int
    seconds: float
    # The rows the table's data files hold after it (an Iceberg snapshot's total-records, which
    # counts a changed row's old version until compaction); None where not counted (Hive tables).
    data_file_rows: int | None = None
    # When its merge began (seconds since the epoch): with ``seconds``, how the merges of tables
    # merged at once overlapped.
    started: float = 0.0

    def plus(self, other: TableResult) -> TableResult:
        """This table's result and a later run's on it, together."""
        return TableResult(
            self.table,
            self.inserted + other.inserted,
            self.updated + other.updated,
            self.deleted + other.deleted,
            self.partitions + other.partitions,
            self.seconds + other.seconds,
            other.data_file_rows if other.data_file_rows is not None else self.data_file_rows,
            min(self.started, other.started)
            if self.started and other.started
            else self.started or other.started,
        )


@dataclass
class TableRollback:
    """Where a rollback took one warehouse table."""

    table: str
    was: str  # what its state was after ("interval 00000007", "load …")
    now: str  # and is now ("interval 00000005", "empty", or the same: unchanged)


@dataclass
class Rollback:
    """A rollback of the warehouse tables and the checkpoint to the state after one interval."""

    interval: str
    checkpoint: str
    tables: list[TableRollback]
    reapply: list[str]  # the intervals the next materialise applies again

    def text(self) -> str:
        moved = [t for t in self.tables if t.was != t.now]
        lines = [
            f"rollback: {len(moved)} of {len(self.tables)} tables returned to the state after interval "
            f"{self.interval}; checkpoint {self.checkpoint}"
        ]
        lines += [f"  {t.table:<40} {t.was} → {t.now}" for t in moved]
        if self.reapply:
            lines.append(
                f"  intervals {', '.join(self.reapply)} are applied again by the next materialise "
                "(re-extract one first with loader extract --interval ID, or abandon them to read "
                "the log again)"
            )
        return "\n".join(lines)


@dataclass
class TableMaintenance:
    """What maintenance did to one Iceberg table: counts before and after, or why it was skipped."""

    table: str
    rewritten_files: int
    data_files: list[int]  # [before, after]
    delete_files: list[int]
    snapshots: list[int]
    seconds: float
    sources: list[str] = field(default_factory=list)  # whose rows it holds (whose leases were held)
    skipped: str = ""  # why it was not maintained (one of its sources was busy)

    @classmethod
    def skipped_for(cls, table: str, sources: list[str], why: str) -> TableMaintenance:
        return cls(table, 0, [0, 0], [0, 0], [0, 0], 0.0, sources, why)

    def text(self) -> str:
        if self.skipped:
            return f"  {self.table:<40} skipped: {self.skipped}"
        return (
            f"  {self.table:<40} rewrote {self.rewritten_files} files; data files {self.data_files[0]} → "
            f"{self.data_files[1]}, delete files {self.delete_files[0]} → {self.delete_files[1]}, "
            f"snapshots {self.snapshots[0]} → {self.snapshots[1]}"
        )


@dataclass
class Maintenance:
    """One maintenance run over the warehouse tables of a deployment's sources (or of one)."""

    format: str
    tables: list[TableMaintenance]
    seconds: float

    @property
    def skipped(self) -> list[TableMaintenance]:
        return [t for t in self.tables if t.skipped]

    def text(self) -> str:
        if self.format != "iceberg":
            return (
                f"maintain: the warehouse is in {self.format} format: nothing to do (superseded "
                "partition versions are deleted after warehouse.retention_hours)"
            )
        done = len(self.tables) - len(self.skipped)
        lines = [f"maintain: {done} Iceberg tables in {self.seconds:.1f} s"]
        lines += [t.text() for t in self.tables]
        if self.skipped:
            lines.append(self.verdict())
        return "\n".join(lines)

    def verdict(self) -> str:
        """What to do about the tables skipped ("" when none was)."""
        if not self.skipped:
            return ""
        names = ", ".join(t.table for t in self.skipped)
        return (
            f"maintain: {len(self.skipped)} tables skipped while a source writing to them was busy "
            f"({names}): a table is maintained only while none of its sources merges; run "
            "maintenance again when they are done (the maintenance DAG's retries do)"
        )


@dataclass
class MergedInterval:
    """An interval a materialisation applied, as the ledger records it: from its start to where
    its extraction ended (a cut one, ``--max-changes``, before its planned end)."""

    interval: str
    start: str
    end: str
    changes: int | None


@dataclass
class Materialized:
    """A materialisation: the intervals it applied (oldest first: a failed run's too) and its tables."""

    intervals: list[MergedInterval]
    tables: list[TableResult]

    def interval_lines(self, skip: str | None = None, earlier: bool = False) -> list[str]:
        """A line per interval applied but ``skip`` (a run's own, which its first line shows);
        ``earlier``: the others were extracted by earlier runs (a run that failed after its
        extraction)."""
        return [
            f"  {'also ' if earlier else ''}materialised interval {i.interval} [{i.start}, {i.end})"
            + (f", {i.changes:,} changes" if i.changes is not None else "")
            + (" (extracted by an earlier run)" if earlier else "")
            for i in self.intervals
            if i.interval != skip
        ]

    def text(self, seconds: float) -> str:
        """As ``loader materialize`` prints it."""
        if not self.intervals:
            return "materialize: no extracted intervals to apply"
        count = len(self.intervals)
        return "\n".join(
            [
                f"materialize: {count} interval{'' if count == 1 else 's'}, {len(self.tables)} tables in "
                f"{seconds:.1f} s",
                *self.interval_lines(),
                *table_lines(self.tables),
            ]
        )


def table_lines(tables: list[TableResult]) -> list[str]:
    """A line per table a materialisation merged."""
    return [
        f"  {r.table:<30} inserted={r.inserted:,} updated={r.updated:,} deleted={r.deleted:,} "
        f"partitions={r.partitions} seconds={r.seconds:.1f}"
        for r in tables
    ]


@dataclass
class RunOnce:
    """One delta run: planned, extracted (None when nothing new), materialised (every interval
    waiting: an earlier run's that did not finish too)."""

    planned: PlannedInterval
    extracted: ExtractSummary | None
    materialized: list[TableResult]
    seconds: float
    merged: list[MergedInterval] = field(default_factory=list)

    def text(self) -> str:
        """As ``loader run-once`` prints it: the interval as its extraction cut it (what the
        ledger records), every other interval it materialised, the tables."""
        planned, extracted = self.planned, self.extracted
        start, end = (extracted.start, extracted.end) if extracted else (planned.start, planned.end)
        lines = [
            f"run-once: interval {planned.interval or '(nothing new)'} [{start}, {end}), "
            f"{extracted.changes if extracted else 0:,} changes extracted; {len(self.materialized)} tables "
            f"materialised in {self.seconds:.1f} s",
            *Materialized(self.merged, self.materialized).interval_lines(planned.interval, earlier=True),
            *table_lines(self.materialized),
        ]
        if planned.skipped_from:
            lines.insert(1, f"  gap allowed: [{planned.skipped_from}, {planned.start}) skipped for good")
        return "\n".join(lines)


@dataclass
class TableLoadResult:
    table: str
    rows: int
    seconds: float
    ranges: int


@dataclass
class LoadSummary:
    """An initial load (or a re-load of some tables)."""

    load_id: str
    p0: str
    tables: list[TableLoadResult]
    seconds: float
    first: bool  # the first load (it set the checkpoint), not a re-load of some tables


@dataclass
class StartedLoad:
    """An initial load with P0 recorded, before its tables are copied (the DAG's first task)."""

    load_id: str
    p0: str
    tables: list[str]
    from_now: bool = False  # started from now: no copy, each table waits for its re-load


@dataclass
class TableMapping:
    """A selected source table, the warehouse table it lands in, and where it was last loaded."""

    schema: str
    table: str
    warehouse_table: str  # without the database (``TablesConfig.warehouse_name``)
    loaded_at: str | None  # the P0 of its latest copy, None if never copied
    shared: bool = False  # routed into a table other sources share (``tables.routes``)
    mode: str = modes.MIRROR  # what its warehouse table keeps (``tables.mode``, ``loader.core.modes``)
    # The load that has not copied it yet (a re-load under way or failed, or a start from now):
    # its changes are staged, not merged, until that copy.
    awaiting_load: str | None = None
    # The last materialised interval with changes to it, and that interval's last commit (UTC):
    # its last applied change committed then or before.
    last_interval: str | None = None
    last_change_by: str | None = None

    @staticmethod
    def text(mappings: list[TableMapping], database: str) -> str:
        """The mapping for people, one table per line; names quoted as MySQL quotes them."""
        lines = [f"{len(mappings)} selected tables -> warehouse database {database}"]
        for m in mappings:
            source = ".".join("`" + n.replace("`", "``") + "`" for n in (m.schema, m.table))
            loaded = f"loaded at {m.loaded_at}" if m.loaded_at else "not loaded yet"
            if m.awaiting_load:
                copy = f"copy by {m.awaiting_load} pending: its changes wait for it"
                loaded = f"{loaded}; {copy}" if m.loaded_at else f"{loaded}: {copy}"
            shared = "shared by its routes, " if m.shared else ""
            if m.last_interval:
                by = f", committed by {m.last_change_by}" if m.last_change_by else ""
                loaded += f"; last changed by interval {m.last_interval}{by}"
            lines.append(f"  {source} -> {m.warehouse_table} ({m.mode}, {shared}{loaded})")
        return "\n".join(lines)


class Checked(Protocol):
    """A table a check compared (``warehouse.checks``): which, whether equal, why not compared."""

    table: str
    equal: bool
    not_loaded: str | None


@dataclass
class LastCheck:
    """The last comparison of the warehouse with the source: ``loader checksum`` (row counts and
    checksums per key range at one position) or ``loader compare`` (whole tables; not one of the
    warehouse as of a past interval)."""

    kind: str  # "checksum" or "compare"
    at: str  # when it ended (UTC)
    tables: int  # compared (those awaiting their copy are not)
    differing: list[str]  # the source tables that differ
    position: str | None = None  # the source position a checksum compared at

    @classmethod
    def of(
        cls,
        kind: str,
        at: str,
        compared: Sequence[Checked],
        position: str | None = None,
    ) -> LastCheck:
        """The verdict of a check's tables; those awaiting their copy were not compared."""
        checked = [t for t in compared if not t.not_loaded]
        return cls(kind, at, len(checked), [t.table for t in checked if not t.equal], position)

    def text(self) -> str:
        """One line for people: what was compared, where, and the verdict."""
        where = f" at {self.position}" if self.position else ""
        if not self.differing:
            verdict = f"{self.tables} tables, every one equal"
        else:
            verdict = f"{len(self.differing)} of {self.tables} tables DIFFER: {', '.join(self.differing)}"
        return f"{self.kind}{where} ({self.at}): {verdict}"


@dataclass
class FailedStep:
    interval: str
    error: str
    at: str | None


@dataclass
class LastLoad:
    id: str
    state: str
    p0: str
    tables: int


@dataclass
class DagState:
    """What Airflow knows of a source's delta DAG (``dag_state``)."""

    dag_id: str
    paused: bool
    active_runs: int  # queued or running
    next_run_at: str | None  # when the scheduler creates the next run (UTC); None: none is due
    schedule: str | None  # Airflow's summary of the schedule ("*/15 * * * *", "None")

    @property
    def runs_to_come(self) -> bool:
        """Whether a run will apply what waits: one is under way, or the scheduler has one due."""
        return not self.paused and (self.active_runs > 0 or self.next_run_at is not None)

    def text(self) -> str:
        """``<dag>: paused`` or what runs and when the next is due."""
        if self.paused:
            return f"{self.dag_id}: PAUSED (no run starts until it is unpaused)"
        if self.active_runs:
            return f"{self.dag_id}: a run under way" + (
                f", the next due {self.next_run_at}" if self.next_run_at else ""
            )
        if self.next_run_at:
            return f"{self.dag_id}: next run due {self.next_run_at}"
        return f"{self.dag_id}: no run due (schedule {self.schedule or 'none'}: runs only when triggered)"


@dataclass
class Status:
    """Where the source is, what is loaded, how far behind, and what failed last."""

    source: str
    source_position: str | None
    checkpoint: dict[str, Any] | None
    lag_seconds: float | None
    intervals: dict[str, int]
    last_error: FailedStep | None
    last_load: LastLoad | None
    last_change_at: str | None = None  # the commit time of the last change applied
    # How far behind the source: ``lag_seconds`` is the source's clock minus the commit time of
    # the oldest change not in the warehouse (``oldest_unapplied_at``), 0 when caught up.
    lag_bytes: int | None = None  # of binlog between the checkpoint and the source's position
    oldest_unapplied_at: str | None = None
    backlog_intervals: int = 0  # planned or extracted, not merged yet
    backlog_changes: int = 0  # the changes those intervals extracted
    source_error: str | None = None
    gaps: list[dict[str, str]] = field(default_factory=list)  # interval, skipped from, to
    lease: str | None = None  # who runs a step on the source now
    source_server: str | None = None  # the server answering now (``history.SourceHistory.server``)
    history_problem: str | None = None  # why it no longer holds the checkpoint's history
    followed: str | None = None  # the last switch to another server that held the history
    awaiting_copy: list[str] = field(default_factory=list)  # tables a load has not copied yet
    last_check: LastCheck | None = None  # the last checksum or compare against the source
    delta_dag: DagState | None = None  # where Airflow is known (``dag_state``)

    def lag_line(self, backlog: bool = True) -> str:
        """``lag: …``: how far behind the source, and (``backlog``) what waits to be merged."""
        if self.lag_seconds is None or self.lag_bytes is None:
            why = "no checkpoint yet" if self.checkpoint is None else "the source cannot tell"
            line = f"lag: unknown ({why})"
        elif self.lag_bytes == 0:
            line = "lag: caught up (0 s, 0 bytes behind the source" + (
                f"; last applied change committed at {self.last_change_at})" if self.last_change_at else ")"
            )
        else:
            line = (
                f"lag: {self.lag_seconds:,.0f} s and {self.lag_bytes:,} bytes of binlog behind the source"
                + (
                    f" (oldest change not in the warehouse committed at {self.oldest_unapplied_at})"
                    if self.oldest_unapplied_at
                    else " (no change since the checkpoint)"
                )
            )
        if backlog and self.backlog_intervals:
            line += f"; backlog: {self.backlog()}"
        return line

    def backlog(self) -> str:
        """The intervals not merged yet, and the changes they hold."""
        if not self.backlog_intervals:
            return "no interval waits to be merged"
        plural = "s" if self.backlog_intervals != 1 else ""
        return f"{self.backlog_intervals} interval{plural} not merged ({self.backlog_changes:,} changes extracted)"

    def text(self) -> str:
        """The status for people."""
        cp = self.checkpoint
        where = self.source_position or "unreachable: " + (self.source_error or "")
        lines = [
            f"source {self.source}: at {where}" + (f" ({self.source_server})" if self.source_server else ""),
            f"checkpoint: {cp['position'] + ' (' + cp['interval'] + ')' if cp else 'none (run the initial load)'}",
            self.lag_line(),
            "intervals: " + ", ".join(f"{n} {state}" for state, n in self.intervals.items()),
        ]
        if cp and cp.get("gtid") is not None:
            lines.append(
                f"history: GTID {cp['gtid'] or '(empty)'} at the checkpoint, written by {cp.get('server')}"
                + (f" (history {cp['epoch']})" if cp.get("epoch") else "")
            )
        if self.followed:
            lines.append(f"followed: {self.followed}")
        if self.history_problem:
            lines.append(f"STOPPED: {self.history_problem}. Runs refuse to read on. {HISTORY_REMEDY}")
        lines.append(f"running now: {self.lease}" if self.lease else "running now: nothing")
        if self.delta_dag:
            lines.append(f"delta DAG: {self.delta_dag.text()}")
            if self.lag_bytes and not self.delta_dag.runs_to_come:
                lines.append(
                    f"NO RUN TO COME: {self.lag_bytes:,} bytes of binlog wait and no run will apply them"
                )
        if self.last_error:
            e = self.last_error
            lines.append(f"last error: interval {e.interval} at {e.at}: {e.error}")
        for gap in self.gaps:
            lines.append(
                f"gap allowed by the operator: [{gap['from']}, {gap['to']}) skipped before interval "
                f"{gap['interval']} (its changes are not in the warehouse)"
            )
        if self.last_load:
            load = self.last_load
            lines.append(f"last initial load: {load.id} ({load.state}, {load.tables} tables, P0 {load.p0})")
        if self.last_check:
            lines.append(f"last check: {self.last_check.text()}")
        if self.awaiting_copy:
            names = ", ".join(self.awaiting_copy[:5]) + (" …" if len(self.awaiting_copy) > 5 else "")
            lines.append(
                f"awaiting their copy: {len(self.awaiting_copy)} tables ({names}): their changes are staged, "
                "not merged, until a load copies them (loader tables says which load)"
            )
        return "\n".join(lines)
