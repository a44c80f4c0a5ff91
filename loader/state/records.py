"""The ledger's records (DESIGN.md section 5) and what is read from them: an interval of one source's
binlog and its states, the checkpoint, an initial load, a rollback's rewind; which tables are
loaded, their layouts, the last error, each table's last change. Pure: ``ledger.Ledger`` reads and
writes them.

States: ``planned`` (boundaries recorded, nothing written yet), ``extracted`` (files and manifest
published), ``materialised`` (in the warehouse; the checkpoint moved past it), and ``abandoned``
(given up by an operator, or superseded by a re-load of every table: it is never materialised, and
the log it covered is planned again).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from loader.binlog.history import Mark
from loader.core.positions import Position, seqno_of
from loader.staging import versioned
from loader.staging.manifest import ColumnSpec

R = TypeVar("R")


PLANNED, EXTRACTED, MATERIALISED, ABANDONED = "planned", "extracted", "materialised", "abandoned"


# Version 2 added the version field itself; version 1 records (no field) read unchanged.
# Version 3 added an interval's ``skipped_from`` (a gap the operator allowed) and
# ``manifest_sha256`` (checked before it is applied) and ``created_tables``; absent is none.
# Version 4 added a load's ``names``: each table as [schema, table], since "schema.table" text
# cannot tell `a.b`.`c` from `a`.`b.c`; absent, the text is split at its first dot.
# Version 5 added ``layouts`` to intervals and loads (each table's columns where the record
# leaves it, so extract sees a change made between intervals); absent is unknown.
# Version 6 added the ``abandoned`` state with an interval's ``abandoned_reason``/``_at``, and a
# load's ``every_table``; absent is none and False.
# Version 7 added the source's identity and GTID state with every position: an interval's
# ``server``, ``start_gtid``, ``end_gtid``, ``extracted_end_gtid``; a load's ``server`` and
# ``p0_gtid``; the checkpoint's ``server`` and ``gtid``. Absent is unknown (never a refusal).
# It also added ``epoch`` to intervals, loads and the checkpoint: which binlog history their
# positions belong to (a re-load of every table from another history starts the next); absent 0.
# Version 8 added an interval's ``table_rows``: the rows of each Iceberg table after its merge
# (a later materialise job's size); absent is none.
# Version 9 added the fingerprint of the last transaction before every recorded position
# (``history.Mark.txn``): an interval's ``start_txn``, ``end_txn``, ``extracted_end_txn``, a
# load's ``p0_txn``, the checkpoint's ``txn``; absent is unknown (the GTID state alone is checked).
# Version 10 added a load's ``from_now``: a start from the source's position with no copy (its
# tables wait for their re-loads); absent is False. From this version on a table counts as loaded
# once its copy is recorded in ``rows``, whether or not the rest of the load is done.
LEDGER_VERSION = 10
UPGRADES: dict[int, versioned.Upgrade] = {
    1: lambda fields: fields,
    2: lambda fields: fields,
    3: lambda fields: fields,
    4: lambda fields: fields,
    5: lambda fields: fields,
    6: lambda fields: fields,
    7: lambda fields: fields,
    8: lambda fields: fields,
    9: lambda fields: fields,
}
ERROR_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # sorts as it happened


def record_fields(record: Any) -> dict[str, Any]:
    """A record's fields as its JSON holds them: positions as their text (``FILE:POS``)."""
    return {
        f.name: str(v) if isinstance(v := getattr(record, f.name), Position) else v
        for f in dataclasses.fields(record)
    }


def record_of(cls: type[R], fields: dict[str, Any]) -> R:
    """A record from the fields its JSON holds: its positions parsed once, here, not at each use.

    Raises:
        ConfigError: a position field is not ``FILE:POS``.
        TypeError: the fields are not the record's.
    """
    for name in _position_fields(typing.cast(type, cls)):
        if isinstance(fields.get(name), str):
            fields[name] = Position.parse(fields[name])
    return cls(**fields)


@functools.cache
def _position_fields(cls: type) -> tuple[str, ...]:
    """The fields of a record class that hold a position (``Position``, or it or None), however
    the annotation is spelled."""
    hints = typing.get_type_hints(cls)
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if hints[f.name] is Position or Position in typing.get_args(hints[f.name])
    )


def now_text() -> str:
    """Now, as the ledger's records write a moment (``ERROR_TIME_FORMAT``, UTC)."""
    return dt.datetime.now(dt.UTC).strftime(ERROR_TIME_FORMAT)


@dataclass
class Interval:
    """One interval ``[start, end)`` of one source."""

    id: str
    start: Position
    end: Position  # the end snapshotted when planned
    max_changes: int | None = None
    state: str = PLANNED
    extracted_end: Position | None = None  # where a bounded interval stopped (a transaction boundary)
    manifest: str | None = None
    manifest_sha256: str | None = None  # of the manifest extract wrote
    changes: int | None = None
    last_commit_ts: int | None = None  # microseconds UTC, of its last change
    run_id: str | None = None  # the Airflow run that planned it, so a rerun finds it again
    error: str | None = None  # the last failure of a step on it (cleared when the step succeeds)
    error_at: str | None = None
    # A backfill that started past where the log had been read (allowed explicitly): the
    # changes in [skipped_from, start) were never extracted.
    skipped_from: Position | None = None
    # Selected tables a CREATE TABLE in the interval made: all their rows follow in the log.
    created_tables: list[str] = field(default_factory=list)
    # [schema, table, [[column, type], ...]] of each table with rows, as the interval ends;
    # None: written before loaders recorded it (unknown).
    layouts: list[list[Any]] | None = None
    abandoned_reason: str | None = None  # why an operator (or a re-load) gave it up
    abandoned_at: str | None = None
    server: str | None = None  # the source server it was planned on (``history.Mark``)
    start_gtid: str | None = None  # the GTID state at its start, at its end, and where it stopped
    end_gtid: str | None = None
    extracted_end_gtid: str | None = None
    epoch: int = 0  # the binlog history its positions belong to
    # Where the log was left on the server read before, when this interval followed another
    # server that holds that history (a failover): "FILE:POS of SERVER (GTID ...)".
    followed_from: str | None = None
    # [schema, table, rows] of each Iceberg table its materialisation merged into: the rows its
    # data files held after the snapshot (how big a later job over them is: ``table_rows``).
    table_rows: list[list[Any]] = field(default_factory=list)
    # The last transaction before its start, its end and where it stopped (``history.Mark.txn``).
    start_txn: str | None = None
    end_txn: str | None = None
    extracted_end_txn: str | None = None

    @property
    def effective_end(self) -> Position:
        """Where the next interval starts."""
        return self.extracted_end or self.end

    @property
    def end_seqno(self) -> int:
        """The seqno of where it ends: every change it holds has a seqno up to this one."""
        end = self.effective_end
        return seqno_of(end.file, end.pos, self.epoch)

    def start_mark(self) -> Mark:
        return Mark(self.server, self.start_gtid, self.start_txn)

    def end_mark(self) -> Mark:
        """The mark at ``effective_end``."""
        if self.extracted_end:
            return Mark(self.server, self.extracted_end_gtid, self.extracted_end_txn)
        return Mark(self.server, self.end_gtid, self.end_txn)

    def to_json(self) -> bytes:
        fields = record_fields(self)
        return versioned.encode(fields, LEDGER_VERSION)


@dataclass
class Checkpoint:
    """The end of the last materialised interval (or the initial load's P0)."""

    position: Position
    interval: str
    commit_ts: int | None = None  # of the last materialised change, microseconds UTC
    server: str | None = None  # the source server and its GTID state at ``position``
    gtid: str | None = None
    epoch: int = 0  # the binlog history ``position`` belongs to
    txn: str | None = None  # the last transaction before ``position`` (``history.Mark.txn``)

    def mark(self) -> Mark:
        return Mark(self.server, self.gtid, self.txn)


@dataclass
class Load:
    """One initial load (or re-load of some tables): P0, recorded before any row is read."""

    id: str
    p0: Position
    tables: list[str]
    state: str = "started"  # started -> complete
    started_at: str = ""
    finished_at: str = ""
    rows: dict[str, int] = field(default_factory=dict)
    first: bool = True  # the source's first load (it sets the checkpoint), not a re-load
    names: list[list[str]] = field(default_factory=list)  # [schema, table] of each of ``tables``
    # [schema, table, [[column, type], ...]] of each table copied; None: unknown (older records).
    layouts: list[list[Any]] | None = None
    every_table: bool = False  # every table the config selected (no table list was given)
    server: str | None = None  # the source server and its GTID state at P0
    p0_gtid: str | None = None
    epoch: int = 0  # the binlog history P0 belongs to: the checkpoint's, or the next one
    p0_txn: str | None = None  # the last transaction before P0 (``history.Mark.txn``)
    # Started from the source's position at P0 without copying: each table waits for a re-load.
    from_now: bool = False

    def table_names(self) -> list[tuple[str, str]]:
        """Each table as (schema, table); records before version 4 have only the text."""
        if self.names:
            return [(schema, table) for schema, table in self.names]
        return [(q.split(".", 1)[0], q.split(".", 1)[1]) for q in self.tables]

    def copied(self) -> list[tuple[str, str]]:
        """The tables whose copy is in the warehouse: each recorded in ``rows`` once committed;
        all of them once the load is complete (a start from now copies none)."""
        if self.from_now:
            return []
        if self.state == "complete":
            return self.table_names()
        return [n for q, n in zip(self.tables, self.table_names(), strict=False) if q in self.rows]

    @property
    def seqno(self) -> int:
        """P0's seqno: the copied rows' ``_seqno``; every change after P0 has a greater one."""
        return seqno_of(self.p0.file, self.p0.pos, self.epoch)

    def to_json(self) -> bytes:
        fields = record_fields(self)
        return versioned.encode(fields, LEDGER_VERSION)


@dataclass
class Rewind:
    """The ledger going back to ``target``: the materialised intervals after it, and the commit
    time the checkpoint gets."""

    target: Interval
    later: list[Interval]
    commit_ts: int | None


def loaded_positions(loads: list[Load], epoch: int) -> dict[tuple[str, str], Position]:
    """Where each table's latest copy in binlog history ``epoch`` was made (its load's P0), by
    (schema, table).

    Changes to a table before its P0 are already in the copy: a re-load makes them stale, so
    extract passes them over (a change the loader stopped at is behind the table then).
    """
    out: dict[tuple[str, str], Position] = {}
    for load in loads:
        if load.epoch == epoch:
            for name in load.copied():
                out[name] = max(load.p0, out.get(name, load.p0))
    return out


def created_before(intervals: list[Interval], interval_id: str) -> set[str]:
    """Tables (``schema.table``) created in the log by the intervals before ``interval_id``."""
    return {t for i in intervals if i.id < interval_id for t in i.created_tables}


def loaded_seqnos(loads: list[Load]) -> dict[tuple[str, str], int]:
    """The seqno of each table's latest copy among ``loads``, whatever its history: its changes up
    to there are in the copy. A table counts from its copy's commit, before the rest of its load."""
    out: dict[tuple[str, str], int] = {}
    for load in loads:
        for name in load.copied():
            out[name] = max(load.seqno, out.get(name, load.seqno))
    return out


def awaiting_copy(loads: list[Load]) -> dict[tuple[str, str], Load]:
    """The tables whose latest load (of ``loads``, oldest first) has not copied them yet, with that
    load: a re-load under way (or failed: run it again), or a start from now waiting for the
    table's first copy.

    Their changes are staged but not merged: a merge beside the copy would be replaced by it (or
    would write onto a table the copy has not made); the copy's catch-up applies them.
    """
    latest: dict[tuple[str, str], Load] = {}
    for load in loads:  # the newest listing a table wins
        for name in load.table_names():
            latest[name] = load
    return {name: load for name, load in latest.items() if name not in load.copied()}


def layout_record(schema: str, table: str, columns: list[ColumnSpec]) -> list[Any]:
    """A table's columns as intervals and loads record them."""
    return [schema, table, [[c.name, c.mysql_type] for c in columns]]


def layouts_before(
    intervals: list[Interval], loads: list[Load], interval_id: str
) -> dict[tuple[str, str], list[ColumnSpec]]:
    """Each table's columns as the intervals before ``interval_id`` and the loads' copies left
    them, whichever came last in the log (a load at its P0, an interval at its end; a load at an
    interval's end copied what the interval staged). Tables whose last record is from a loader
    that did not record columns are left out: unknown, not guessed from an older record.
    """
    # Later histories come later, whatever their positions.
    events: list[tuple[int, Position, int, list[tuple[str, str]], list[list[Any]] | None]] = []
    for i in intervals:
        if i.id < interval_id and i.state != PLANNED:
            events.append((i.epoch, i.effective_end, 0, [], i.layouts))
    for load in loads:
        if load.copied():
            events.append((load.epoch, load.p0, 1, load.copied(), load.layouts))
    known: dict[tuple[str, str], list[ColumnSpec] | None] = {}
    for _, _, is_load, names, recorded in sorted(events, key=lambda e: (e[0], e[1], e[2])):
        known.update(dict.fromkeys(names))  # a load's tables are what it copied, or unknown
        if recorded is None:
            if not is_load:
                known.clear()  # an interval of unknown tables: nothing before it can be trusted
            continue
        for schema, table, columns in recorded:
            known[(schema, table)] = [ColumnSpec(name, kind) for name, kind in columns]
    return {name: columns for name, columns in known.items() if columns is not None}


def waits_on_failure(state: str, error: str | None) -> bool:
    """Whether an interval in ``state`` whose last step failed with ``error`` waits on that
    failure (a materialised or abandoned one waits on nothing)."""
    return bool(error) and state not in (MATERIALISED, ABANDONED)


def gaps(intervals: list[Interval]) -> list[tuple[str, str, str]]:
    """(interval, skipped from, skipped to) of every gap an operator allowed."""
    return [(i.id, str(i.skipped_from), str(i.start)) for i in intervals if i.skipped_from]


def last_error(intervals: list[Interval]) -> Interval | None:
    """The interval whose step failed last (errors are cleared when the step succeeds)."""
    failed = sorted(
        (i for i in intervals if i.error and i.state != ABANDONED), key=lambda i: i.error_at or ""
    )
    return failed[-1] if failed else None


def last_changes(intervals: list[Interval]) -> dict[tuple[str, str], Interval]:
    """The last materialised interval that changed each table, by (schema, table): the one that
    came last in the log among those whose ``layouts`` name it (a table with rows in it)."""
    done = [i for i in intervals if i.state == MATERIALISED and i.layouts]
    out: dict[tuple[str, str], Interval] = {}
    for interval in sorted(done, key=lambda i: (i.epoch, i.effective_end)):
        out.update(((schema, table), interval) for schema, table, _ in interval.layouts or [])
    return out


def table_rows(intervals: list[Interval], loads: list[Load]) -> dict[tuple[str, str], int]:
    """Each table's rows as last recorded, by (schema, table): by the materialised interval or
    the load's copy that came last in the log (ordered as ``layouts_before`` orders them).

    A size for planning, not a count to check against: an Iceberg snapshot's count keeps a
    changed row's old version until compaction, and a table the loader did not count (Hive
    tables after their load, records of older loaders) keeps its older count or has none.
    """
    events: list[tuple[int, Position, int, list[tuple[str, str, int]]]] = []
    for i in intervals:
        if i.state == MATERIALISED and i.table_rows:
            events.append((i.epoch, i.effective_end, 0, [(s, t, int(n)) for s, t, n in i.table_rows]))
    for load in loads:
        if load.copied():
            counted = [
                (schema, table, load.rows[qualified])
                for qualified, (schema, table) in zip(load.tables, load.table_names(), strict=False)
                if qualified in load.rows
            ]
            events.append((load.epoch, load.p0, 1, counted))
    known: dict[tuple[str, str], int] = {}
    for *_, counted in sorted(events, key=lambda e: (e[0], e[1], e[2])):
        known.update(((schema, table), rows) for schema, table, rows in counted)
    return known
