"""The ledger of one source: its intervals and its checkpoint, its loads and its last check (DESIGN.md
section 5), as records (``records``) in the staging store.

It lives in the staging store beside the data, under ``<source>/_ledger/``, one JSON file per
interval plus the checkpoint, each written atomically. An interval is claimed with a create-once
write, so two runs cannot plan the same interval.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Protocol, TypeVar

from loader.binlog.history import Mark
from loader.core.errors import HISTORY_REMEDY, ConfigError, HistoryError, LedgerError, LoaderError
from loader.core.positions import Position
from loader.core.results import LastCheck
from loader.staging import layout, versioned
from loader.staging.stores import Store, open_store

if TYPE_CHECKING:
    from loader.core.config import Config
from loader.state.records import (
    ABANDONED,
    EXTRACTED,
    LEDGER_VERSION,
    MATERIALISED,
    PLANNED,
    UPGRADES,
    Checkpoint,
    Interval,
    Load,
    Rewind,
    awaiting_copy,
    last_error,
    loaded_positions,
    loaded_seqnos,
    now_text,
    record_fields,
    record_of,
)

R = TypeVar("R")
NOT_FOLLOWED = ' (source.failover = "stop": a server whose GTID history holds what was read is not followed)'


class SourceView(Protocol):
    """What planning asks the source (``history.SourceHistory`` on a live server)."""

    server: str

    def start_problem(self, start: Position, end: Position) -> str | None:
        """Why the server's log cannot be read from ``start`` up to ``end``, or None."""

    def problem(self, at: Position, recorded: Mark, what: str) -> str | None:
        """Why the server no longer holds the history ``recorded`` at ``at``, or None."""

    def gtid_at(self, at: Position) -> str | None:
        """The server's GTID state at ``at``, or None when it cannot tell."""

    def follow(self, recorded: Mark) -> tuple[Position, Mark] | None:
        """Where the server's binlog holds the GTID state and the transaction ``recorded``, and the
        mark there on this server; or None."""


class Ledger:
    """The ledger of ``source`` in ``store``."""

    def __init__(self, store: Store, source: str) -> None:
        self.store = store
        self.source = source
        self.prefix = layout.ledger_prefix(source)

    def _interval_key(self, interval_id: str) -> str:
        return f"{self.prefix}/intervals/{interval_id}.json"

    def _read(self, cls: type[R], key: str, data: bytes) -> R:
        """A record of this ledger, from whichever version of the loader wrote it."""
        fields = versioned.decode(data, f"ledger record {key}", LEDGER_VERSION, UPGRADES, LedgerError)
        try:
            return record_of(cls, fields)
        except ConfigError as exc:
            raise LedgerError(f"ledger record {key}: {exc}: restore it from a backup, or remove it") from None
        except TypeError as exc:
            raise LedgerError(f"ledger record {key} does not hold a {cls.__name__.lower()}: {exc}") from None

    def checkpoint(self) -> Checkpoint | None:
        key = f"{self.prefix}/checkpoint.json"
        data = self.store.get(key)
        return self._read(Checkpoint, key, data) if data else None

    def set_checkpoint(self, checkpoint: Checkpoint) -> None:
        self.store.put(
            f"{self.prefix}/checkpoint.json", versioned.encode(record_fields(checkpoint), LEDGER_VERSION)
        )

    @classmethod
    def of(cls, cfg: Config) -> Ledger:
        """The ledger of the config's source, in its staging store."""
        return cls(open_store(cfg.staging), cfg.source.name)

    def _records(self, cls: type[R], folder: str) -> list[R]:
        """Every record under ``<prefix>/<folder>``, in key order (ids sort as they were made)."""
        out = []
        for key in self.store.list(f"{self.prefix}/{folder}"):
            data = self.store.get(key)
            if data:
                out.append(self._read(cls, key, data))
        return out

    def intervals(self) -> list[Interval]:
        return sorted(self._records(Interval, "intervals"), key=lambda i: i.id)

    def get(self, interval_id: str) -> Interval | None:
        key = self._interval_key(interval_id)
        data = self.store.get(key)
        return self._read(Interval, key, data) if data else None

    def save(self, interval: Interval) -> None:
        self.store.put(self._interval_key(interval.id), interval.to_json())

    def epoch(self) -> int:
        """The binlog history read now (the checkpoint's, or a later one an interval followed);
        positions of others do not compare."""
        return self._epoch(self.intervals())

    def loads(self) -> list[Load]:
        """Every initial load, oldest first."""
        return sorted(self._records(Load, "loads"), key=lambda load: load.id)

    def loaded_at(self, epoch: int | None = None) -> dict[tuple[str, str], Position]:
        """``loaded_positions`` of this ledger's loads in history ``epoch`` (by default the
        checkpoint's)."""
        return loaded_positions(self.loads(), self.epoch() if epoch is None else epoch)

    def loaded_seqnos(self) -> dict[tuple[str, str], int]:
        """``loaded_seqnos`` of this ledger's loads."""
        return loaded_seqnos(self.loads())

    def awaiting_copy(self) -> dict[tuple[str, str], Load]:
        """``awaiting_copy`` of this ledger's loads."""
        return awaiting_copy(self.loads())

    def not_loaded(self) -> dict[tuple[str, str], str]:
        """Why each table awaiting its copy (``awaiting_copy``) is not compared with its source."""
        loads = self.loads()
        loaded = loaded_seqnos(loads)
        return {
            name: (
                f"its re-load {load.id} has not copied it yet (its changes wait for the copy)"
                if name in loaded
                else f"not loaded yet: {load.id} has not copied it (its changes wait for the copy)"
            )
            for name, load in awaiting_copy(loads).items()
        }

    def save_load(self, load: Load) -> None:
        self.store.put(f"{self.prefix}/loads/{load.id}.json", load.to_json())

    def next_start(self) -> Position:
        """Where the next interval starts: a planned one's own start (it is extracted again),
        else where the last one ended, else the checkpoint."""
        return self._next_start(self.intervals())

    def _next_start(self, intervals: list[Interval]) -> Position:
        live = [i for i in intervals if i.state != ABANDONED]
        if live and live[-1].state == PLANNED:
            return live[-1].start
        read_to = self._read_to(intervals)
        if read_to is None:
            raise LedgerError(
                f"source {self.source} has no checkpoint: run the initial load first (or give a start position)"
            )
        return read_to[0]

    def _epoch(self, intervals: list[Interval]) -> int:
        """The binlog history read now: the checkpoint's, or a later one an interval followed."""
        cp = self.checkpoint()
        return max([cp.epoch if cp else 0, *(i.epoch for i in intervals if i.state != ABANDONED)])

    def _read_to(self, intervals: list[Interval]) -> tuple[Position, Mark, str] | None:
        """Where the log of the history read now has been read to (the last interval's end, or the
        checkpoint when it is further: a re-load of every table moves it past the intervals it
        superseded), with the mark recorded there and what the position is; None before
        anything was read."""
        cp = self.checkpoint()
        epoch = self._epoch(intervals)
        live = [i for i in intervals if i.state not in (ABANDONED, PLANNED) and i.epoch == epoch]
        ends = (
            [(live[-1].effective_end, live[-1].end_mark(), f"the end of interval {live[-1].id}")]
            if live
            else []
        )
        at_cp = [(cp.position, cp.mark(), "the checkpoint")] if cp and cp.epoch == epoch else []
        if not ends and not at_cp:
            return None
        return max([*at_cp, *ends], key=lambda e: e[0])  # the checkpoint, when they are one

    def gap_before(self, start: Position, allow_gap: bool = False) -> Position | None:
        """Where the log has been read to, when ``start`` lies past it (changes in between would
        be skipped); None when ``start`` continues or replays the log.

        Raises:
            LedgerError: there is a gap and ``allow_gap`` is not given.
        """
        return self._gap_before(start, self.intervals(), allow_gap)

    def _gap_before(self, start: Position, intervals: list[Interval], allow_gap: bool) -> Position | None:
        if not intervals and self.checkpoint() is None:
            return None  # nothing read yet: there is nothing to skip past
        read_to = self._next_start(intervals)
        if start <= read_to:
            return None
        if not allow_gap:
            raise LedgerError(
                f"the start {start} lies past {read_to}, where source {self.source}'s changes have been "
                f"read to: the changes in between would never reach the warehouse. Start at or before "
                f"{read_to}, or allow the gap explicitly (--allow-gap, or the DAG's allow_gap) to skip "
                "them on purpose; the gap is recorded in the ledger"
            )
        return read_to

    def last_error(self) -> Interval | None:
        """``last_error`` of this ledger's intervals."""
        return last_error(self.intervals())

    def abandon(self, interval_id: str, reason: str) -> list[Interval]:
        """Give up an interval that is not materialised, and every later one (they continue it),
        so the next run plans again from where the log was read before it. Returns them.

        Raises:
            LedgerError: no reason, no such interval, or it is materialised or abandoned already.
        """
        if not reason.strip():
            raise LedgerError("say why the interval is abandoned (--reason): the ledger keeps it")
        intervals = self.intervals()
        target = next((i for i in intervals if i.id == interval_id), None)
        if target is None:
            raise LedgerError(
                f"source {self.source} has no interval {interval_id} (loader intervals lists them)"
            )
        if target.state == MATERIALISED:
            raise LedgerError(
                f"interval {interval_id} is materialised: its changes are in the warehouse, so it cannot be "
                "abandoned (a re-load of the affected tables replaces them)"
            )
        if target.state == ABANDONED:
            raise LedgerError(f"interval {interval_id} was abandoned already: {target.abandoned_reason}")
        return self._abandon(
            [i for i in intervals if i.id >= interval_id and i.state not in (MATERIALISED, ABANDONED)],
            reason.strip(),
            interval_id,
        )

    def _abandon(self, intervals: list[Interval], reason: str, first: str) -> list[Interval]:
        now = now_text()
        for i in intervals:
            i.state = ABANDONED
            i.abandoned_reason = reason if i.id == first else f"{reason} (it follows interval {first})"
            i.abandoned_at = now
            self.save(i)
        return intervals

    def rewind_check(self, interval_id: str) -> Rewind:
        """How the ledger goes back to interval ``interval_id`` (a rollback; a time-travel read
        only checks it).

        Raises:
            LedgerError: no such interval, it is not materialised, or a load after it copied
                tables (their state after the interval is gone).
        """
        intervals = self.intervals()
        target = next((i for i in intervals if i.id == interval_id), None)
        if target is None:
            raise LedgerError(
                f"source {self.source} has no interval {interval_id} (loader intervals lists them)"
            )
        if target.state != MATERIALISED:
            raise LedgerError(
                f"interval {interval_id} is {target.state}: the warehouse can only go back to the state "
                "after a materialised interval (loader intervals lists them)"
            )
        end = target.effective_end
        for load in self.loads():
            p0 = load.p0
            if load.copied() and (load.epoch > target.epoch or (load.epoch == target.epoch and p0 > end)):
                after = [
                    i.id
                    for i in intervals
                    if i.state == MATERIALISED and i.epoch == load.epoch and i.effective_end >= p0
                ]
                earliest = f" (the earliest is {after[0]})" if after else ""
                copied = ", ".join(f"{schema}.{table}" for schema, table in load.copied())
                raise LedgerError(
                    f"the load {load.id} copied {copied} at {load.p0}, after interval "
                    f"{interval_id} ended at {end}: the warehouse's state after that interval is gone. "
                    f"Choose an interval that ends at or after {load.p0}{earliest}"
                )
        done = [i for i in intervals if i.state == MATERIALISED]
        commit_times = [
            i.last_commit_ts for i in done if i.id <= interval_id and i.last_commit_ts is not None
        ]
        return Rewind(target, [i for i in done if i.id > interval_id], max(commit_times, default=None))

    def rewind(self, plan: Rewind) -> None:
        """After a rollback of the warehouse to ``plan.target``: the materialised intervals after
        it are extracted again (the next materialise applies them) and the checkpoint returns to
        its end."""
        for interval in plan.later:  # first: a crash before the checkpoint moves re-applies them anyway
            interval.state = EXTRACTED
            self.save(interval)
        target, end = plan.target, plan.target.end_mark()
        self.set_checkpoint(
            Checkpoint(
                target.effective_end,
                target.id,
                plan.commit_ts,
                end.server,
                end.gtid,
                target.epoch,
                end.txn,
            )
        )

    def supersede(self, load: Load, commit_ts: int) -> list[Interval]:
        """Once the first load, or a re-load of every table at P0 past the checkpoint, has copied
        them all: the checkpoint moves to P0 and the intervals not materialised are abandoned (the
        copies hold their changes, and their log may be gone: why one re-loads everything).
        Returns the intervals abandoned."""
        cp = self.checkpoint()
        p0 = load.p0
        if not (load.first or load.every_table):
            return []
        # A load from another history supersedes whatever the positions say.
        if cp and cp.epoch == load.epoch and cp.position >= p0:
            return []
        waiting = [i for i in self.intervals() if i.state not in (MATERIALISED, ABANDONED)]
        reason = f"superseded by the re-load {load.id} of every table at {p0}"
        # Abandoned first: a crash before the checkpoint moves leaves nothing to replay twice.
        abandoned = self._abandon(waiting, reason, waiting[0].id) if waiting else []
        self.set_checkpoint(
            Checkpoint(load.p0, load.id, commit_ts, load.server, load.p0_gtid, load.epoch, load.p0_txn)
        )
        return abandoned

    def record_error(self, interval_id: str, error: str) -> None:
        """Note a step's failure on an interval (``loader status`` shows it). Best effort: when
        the store itself failed (a full disk), the step's own error is what the caller reports."""
        try:
            interval = self.get(interval_id)
            if interval is not None:
                interval.error = error
                interval.error_at = now_text()
                self.save(interval)
        except (LoaderError, OSError):
            pass

    def record_check(self, check: LastCheck) -> None:
        """Keep the last checksum or compare (``loader status`` and the on-call page show it).
        Best effort, as ``record_error``: the check's own verdict is what its caller reports."""
        with contextlib.suppress(LoaderError, OSError):
            self.store.put(f"{self.prefix}/checks/last.json", versioned.encode(asdict(check), LEDGER_VERSION))

    def last_check(self) -> LastCheck | None:
        key = f"{self.prefix}/checks/last.json"
        data = self.store.get(key)
        return self._read(LastCheck, key, data) if data else None

    def plan(
        self,
        end: Position,
        start: Position | None = None,
        max_changes: int | None = None,
        run_id: str | None = None,
        allow_gap: bool = False,
        source: SourceView | None = None,
        dry_run: bool = False,
        follow: bool = False,
    ) -> Interval | None:
        """The interval to extract next: an unfinished one again, or a new one up to ``end``.

        Args:
            end: the server's current position (the snapshot).
            start: an explicit start (a backfill); by default the end of the last interval, or
                the checkpoint when there is none.
            max_changes: stop the interval at the first transaction boundary past this many
                changes; the rest is left for the next interval.
            run_id: the orchestrator's run; the interval it planned before is returned again
                (a cleared and rerun task gets the same boundaries).
            allow_gap: let ``start`` lie past where the log has been read; the skipped range is
                recorded on the interval.
            source: the server, asked before anything is recorded whether it still holds the
                history read so far and can be read from the start, and for the marks to record.
            dry_run: return the interval that would be planned, recording nothing.
            follow: when the server is another one whose GTID history holds everything read so
                far (a promoted replica), continue on it from the matching position, in the next
                binlog history (``followed_from`` says where the log was left); else refuse it.

        Returns:
            None when there is nothing to extract.

        Raises:
            LedgerError: ``start`` lies past where the log has been read and ``allow_gap`` is
                not given, or the server cannot be read from the start.
            HistoryError: the server no longer holds the history read so far.
        """
        intervals = self.intervals()
        if run_id is not None:
            mine = [i for i in intervals if i.run_id == run_id and i.state != ABANDONED]
            if mine:
                return mine[-1]
        live = [i for i in intervals if i.state != ABANDONED]
        left: list[Interval] = []  # a planned interval whose start went with the old server
        if start is None and live and live[-1].state == PLANNED:
            planned = live[-1]  # a rerun reuses the recorded boundaries
            begin = planned.start
            what = f"interval {planned.id}'s start"
            moved = moved_from(source, begin, planned.start_mark(), what, self.source) if source else None
            if moved and not follow:
                raise HistoryError(
                    f"{moved}. Nothing was planned and the checkpoint stays. {HISTORY_REMEDY}{NOT_FOLLOWED}"
                )
            if moved:
                left, intervals = [planned], [i for i in intervals if i is not planned]
            else:
                problem = source.start_problem(begin, planned.end) if source else None
                if problem:
                    raise LedgerError(
                        f"interval {planned.id} cannot be extracted: {problem}. Abandon it "
                        f"(loader interval abandon {planned.id} --reason '...') to plan again from where "
                        "the log was read before it; if the log there is gone too, re-load every table "
                        "(loader initial-load)"
                    )
                return planned
        skipped_from = followed_from = None
        epoch = self._epoch(intervals)
        read_to = self._read_to(intervals)
        moved = moved_from(source, *read_to, self.source) if source and read_to else None
        followed: Mark | None = None  # the mark at the start on the server followed to
        if moved and source and read_to:
            start, followed = self._followed(source, read_to, moved, start, follow, intervals)
            epoch += 1
            followed_from = f"{read_to[0]} of {read_to[1].server} (GTID {read_to[1].gtid or '(empty)'})"
            problem = source.start_problem(start, max(start, end))
            if problem:
                raise HistoryError(f"{source.server} holds the history read so far, but {problem}")
        elif start is None:
            start = self._next_start(intervals)
            problem = source.start_problem(start, max(start, end)) if source else None
            if problem:
                raise LedgerError(
                    f"source {self.source}'s changes continue at {start}, but {problem}: the changes "
                    "from there on cannot be read. Re-load every table (loader initial-load); delta "
                    "runs then continue from the re-load"
                )
        else:
            problem = source.start_problem(start, end) if source else None
            if problem:
                raise LedgerError(f"cannot start at {start}: {problem}; give a start the server holds")
            skipped_from = self._gap_before(start, intervals, allow_gap)
        if start >= end:
            return None
        number = int(max(i.id for i in [*intervals, *left])) + 1 if intervals or left else 1
        interval = Interval(
            layout.interval_id(number),
            start,
            end,
            max_changes,
            run_id=run_id,
            skipped_from=skipped_from,
            epoch=epoch,
            followed_from=followed_from,
        )
        if source is not None:
            interval.server = source.server
            at_start = followed or (read_to[1] if read_to and read_to[0] == start else None)
            recorded = at_start.gtid if at_start else None
            interval.start_gtid = recorded if recorded is not None else source.gtid_at(start)
            interval.start_txn = at_start.txn if at_start else None
            interval.end_gtid = source.gtid_at(end)
        if dry_run:
            return interval
        if left:
            self._abandon(left, f"its start is not on {interval.server}, the server followed to", left[0].id)
        if not self.store.create(self._interval_key(interval.id), interval.to_json()):
            raise LedgerError(f"interval {interval.id} of {self.source} was planned by another run meanwhile")
        return interval

    def _followed(
        self,
        source: SourceView,
        read_to: tuple[Position, Mark, str],
        moved: str,
        start: Position | None,
        follow: bool,
        intervals: list[Interval],
    ) -> tuple[Position, Mark]:
        """Where to continue on a server that is not the one the log was read from: the position
        where its GTID history reaches what was read, with the same last transaction (a promoted
        replica), and the mark there; when following is allowed and safe.

        Raises:
            HistoryError: following is off, the server does not hold that history, a backfill
                start was given (its position would be the old server's), or a re-load of some
                tables lies past where the log was read (its P0 names the old server's log).
        """
        refused = f"{moved}. Nothing was planned and the checkpoint stays"
        if not follow:
            raise HistoryError(f"{refused}. {HISTORY_REMEDY}{NOT_FOLLOWED}")
        if start is not None:
            raise HistoryError(
                f"{refused}. A backfill start names a position of the server the log was read from: run "
                "without one first, which continues on this server when its GTID history holds what was read"
            )
        ahead = [
            f"{load.id} at {load.p0}"
            for load in self.loads()
            if load.copied() and load.epoch == self._epoch(intervals) and load.p0 > read_to[0]
        ]
        if ahead:
            raise HistoryError(
                f"{refused}: the re-load {ahead[-1]} lies past where the log was read, so this server's "
                f"position for it is unknown. {HISTORY_REMEDY}"
            )
        # The same GTID state and transaction at the same position: its binlog continues there.
        same_place = source.problem(*read_to) is None
        found = (read_to[0], replace(read_to[1], server=source.server)) if same_place else None
        found = found or source.follow(read_to[1])
        if found is None:
            raise HistoryError(
                f"{refused}: its GTID history does not reach the state read so far "
                f"({read_to[1].described()}) at any position of its binlog. {HISTORY_REMEDY}"
            )
        return found


def moved_from(source: SourceView, at: Position, recorded: Mark, what: str, name: str) -> str | None:
    """Why the log cannot simply be read on at ``at`` from ``source``: it no longer holds the
    history recorded there, or it is another server than the one that wrote it; None when it
    is the same server with the same history."""
    problem = source.problem(at, recorded, what)
    if problem is None and recorded.server is not None and recorded.server != source.server:
        return (
            f"source {name} is another server ({source.server}) than the one the log was read from at "
            f"{what} {at} ({recorded.server}), though it holds the same GTID state there"
        )
    return problem
