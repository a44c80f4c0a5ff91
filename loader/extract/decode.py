"""The decoding of an interval: in one process, or cut at transaction starts into ranges of similar
sizes (binlog files read by each process, or the server's stream read once and spooled) decoded in
several; each range's rows go to its tables' writers (``files.TableWriter``).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from loader.binlog.fingerprint import Fingerprint
from loader.binlog.gtids import GtidSet
from loader.binlog.reader import SourceLog, read_transactions
from loader.binlog.rowplan import TablePlan
from loader.binlog.server import BinlogServer
from loader.binlog.spool import SpooledEvents, spool_pieces
from loader.binlog.transactions import NativeRun, OpenRows, RowsBatch, Transaction
from loader.core import crashpoints
from loader.core.config import Config, SourceConfig, StagingConfig, TablesConfig
from loader.core.errors import ExtractError, TableKeyError
from loader.core.positions import Position
from loader.core.tables import TableSelector, key_columns
from loader.extract.files import TablePiece, TableWriter, commit_ts_text
from loader.extract.schema_changes import check_statements
from loader.staging import layout
from loader.staging.manifest import ColumnSpec, TableEntry
from loader.state.records import Interval

# A transaction's rows wait on disk, not in memory, once this many of its changes are decoded:
# the extract's memory stays bounded whatever the size of a transaction.
OPEN_ROWS_HELD_AT = 20_000
# An interval of less binlog than this is decoded in one process: starting more costs more.
PARALLEL_FROM_BYTES = 4 << 20
SERVER_RANGES_PER_WORKER = 2


@dataclass
class RangeResult:
    """What decoding one range of the interval produced (crosses process boundaries)."""

    tables: dict[tuple[str, str], TablePiece]
    transactions: int = 0
    changes: int = 0
    seqno_min: int | None = None
    seqno_max: int | None = None
    stopped_at: Position | None = None
    commit_ts_max: int | None = None  # microseconds UTC, of the last transaction with changes
    # selected tables a CREATE TABLE made, and where: all their rows follow it
    created: dict[tuple[str, str], str] = field(default_factory=dict)
    gtids: dict[int, str] = field(default_factory=dict)  # the last MariaDB GTID read per domain
    mysql_gtids: GtidSet = field(default_factory=GtidSet)  # every MySQL GTID read
    last_txn: Fingerprint | None = None  # the last transaction read that has a GTID event


Progress = Callable[[str], None]


@dataclass(frozen=True)
class ExtractSettings:
    """What extraction reads of the configuration: the source and which of its tables (their
    keys, what to do on a schema change), how staged files are written, and for which warehouse
    format their values are written."""

    source: SourceConfig
    tables: TablesConfig
    staging: StagingConfig
    warehouse_format: str

    @classmethod
    def of(cls, cfg: Config) -> ExtractSettings:
        return cls(cfg.source, cfg.tables, cfg.staging, cfg.warehouse.format)


def _extract_range(
    settings: ExtractSettings,
    log: SourceLog,
    start: Position,
    end: Position,
    workdir: str,
    max_changes: int | None,
    progress: Progress | None,
    label: str,
    loaded_at: dict[tuple[str, str], Position] | None = None,
    previous: dict[tuple[str, str], list[ColumnSpec]] | None = None,
    epoch: int = 0,
    spool: str | None = None,
) -> RangeResult:
    """Decode ``[start, end)`` and write its CSV parts under ``workdir`` (one decoder's share).

    A table's events before ``loaded_at`` (its last re-load) are passed over: the copy has them.
    ``previous``: each table's columns before ``start``, which its first rows must continue.
    ``epoch``: the binlog history the positions belong to (it leads every seqno).
    ``spool``: the range's events as the parent read them from the server (else the source's
    transport is read); removed once decoded.
    """
    selector = TableSelector(settings.tables.include, settings.tables.exclude)
    # Path(workdir) once: a Path per transaction was 5% of a single-row transaction's cost.
    tables = _RangeTables(settings, Path(workdir), previous or {})
    result = RangeResult({})
    last_report = time.monotonic()
    with log.schemas() as schema:
        txs = read_transactions(
            SpooledEvents(spool) if spool else log.open(),
            start,
            end,
            selector,
            schema,
            skip_before=loaded_at,
            max_open_changes=OPEN_ROWS_HELD_AT,
            gtid_state=result.gtids,
            mysql_gtids=result.mysql_gtids,
            seqno_epoch=epoch,
            native=log.native,
            # Whole transactions decoded natively at once; not where a test counts each
            # transaction's crash point.
            runs=not crashpoints.enabled(),
            budget=max_changes,
        )
        holding = False  # the open transaction handed out rows that writers hold
        for tx in txs:
            if isinstance(tx, OpenRows):  # a large transaction's rows before its commit
                if tx.rolled_back:
                    for writer in tables.writers.values():
                        writer.forget()
                tables.batches(tx.batches, 0, "", held=True)
                holding = not tx.rolled_back
                continue
            if isinstance(tx, NativeRun):  # whole transactions the native reader took
                result.transactions += tx.result.transactions
                last_txn = tx.last_txn
                n = tables.native(tx)
                first, last, commit_ts = tx.result.seqno_min, tx.result.seqno_max, tx.result.commit_ts_max
            else:
                result.transactions += 1
                last_txn = tx.fingerprint
                check_statements(
                    tx,
                    selector,
                    tables.writers,
                    loaded_at or {},
                    tables.pending,
                    result.created,
                    settings.tables.schema_changes,
                )
                n = tables.transaction(tx, holding)
                holding = False
                first = last = tx.seqno
                commit_ts = tx.commit_ts
            result.last_txn = last_txn or result.last_txn
            if n:
                result.changes += n
                result.seqno_min = first if result.seqno_min is None else result.seqno_min
                result.seqno_max = last
                result.commit_ts_max = max(result.commit_ts_max or 0, commit_ts or 0)
            if max_changes and result.changes >= max_changes and tx.end < end:
                result.stopped_at = tx.end
                txs.close()
                break
            if progress is not None and time.monotonic() - last_report >= 5:
                last_report = time.monotonic()
                progress(
                    f"extract: {label}: {result.changes:,} changes in {result.transactions:,} transactions, at {tx.end}"
                )
    result.tables = {key: writer.finish() for key, writer in tables.writers.items()}
    if spool:  # decoded: the scratch disk holds only the ranges still to decode
        os.remove(spool)
    return result


@dataclass(frozen=True)
class _Range:
    start: Position
    end: Position
    spool: str | None = None  # the range's events, read from the server by the parent


def _server_ranges(
    log: SourceLog,
    start: Position,
    end: Position,
    total: int,
    workers: int,
    folder: str,
    progress: Progress,
    label: str,
) -> Iterator[_Range]:
    """The server's stream of the interval (``total`` bytes) read once, spooled under ``folder``
    in ranges of similar sizes cut at transaction starts; each is yielded once spooled."""
    transport = log.open()
    # Twice as many ranges as processes: the first is decoded after a quarter of the stream
    # has arrived, not half, and the last one decoded after the stream ends is smaller.
    parts = SERVER_RANGES_PER_WORKER * workers
    # The native reader's processes read runs of events (split from the stream natively, not
    # one by one here); the Python decoder's, events.
    runs = log.native and not crashpoints.enabled()
    try:
        stream = (
            transport.runs(start, end)
            if runs and isinstance(transport, BinlogServer)
            else transport.events(start, end)
        )
        for i, piece in enumerate(spool_pieces(stream, start, end, total, parts, folder)):
            progress(
                f"extract: {label}: range {i + 1} ({piece.start} to {piece.end}, "
                f"{piece.bytes / 1e6:,.1f} MB of {total / 1e6:,.1f}) read from the server, decoding"
            )
            crashpoints.reached("after range spooled")
            yield _Range(piece.start, piece.end, piece.path)
    finally:
        transport.close()


def decode_interval(
    settings: ExtractSettings,
    log: SourceLog,
    interval: Interval,
    tmp: str,
    progress: Progress,
    workers: int,
    loaded_at: dict[tuple[str, str], Position],
    previous: dict[tuple[str, str], list[ColumnSpec]],
) -> list[RangeResult]:
    """Decode the interval: in this process, or cut into ranges decoded in ``workers`` processes
    (files read by each, or the server's stream read here once and spooled)."""
    start, end = interval.start, interval.end
    label = f"interval {interval.id}"
    ranges: Iterable[_Range] = [_Range(start, end)]
    total = log.bytes_between(start, end) if workers > 1 and not interval.max_changes else 0
    if total >= max(1, PARALLEL_FROM_BYTES):
        if settings.source.transport == "files":
            ranges = [_Range(a, b) for a, b in log.cut(start, end, workers)]
            if len(ranges) > 1:
                progress(f"extract: {label}: {len(ranges)} ranges in {len(ranges)} processes")
        else:
            ranges = _server_ranges(log, start, end, total, workers, tmp, progress, label)
    if isinstance(ranges, list) and len(ranges) == 1:
        one = ranges[0]
        return [
            _extract_range(
                settings,
                log,
                one.start,
                one.end,
                tmp,
                interval.max_changes,
                progress,
                label,
                loaded_at,
                previous,
                interval.epoch,
            )
        ]
    ctx = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        try:
            futures = []
            for i, r in enumerate(ranges):
                futures.append(
                    pool.submit(
                        _extract_range,
                        settings,
                        log,
                        r.start,
                        r.end,
                        f"{tmp}/w{i:03d}",
                        None,
                        None,
                        f"range {i}",
                        loaded_at,
                        previous if i == 0 else None,  # later ranges continue the one before
                        interval.epoch,
                        r.spool,
                    )
                )
                for future in futures:  # a failed range ends the read early
                    if future.done() and future.exception() is not None:
                        future.result()
            return [f.result() for f in futures]
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


@dataclass
class _RangeTables:
    """The writers of one range's tables, and what making one takes."""

    settings: ExtractSettings
    workdir: Path
    previous: dict[tuple[str, str], list[ColumnSpec]]  # each table's columns before the range
    writers: dict[tuple[str, str], TableWriter] = field(default_factory=dict)
    # ALTER statements on tables without rows yet in this range, for the manifest of the first.
    pending: dict[tuple[str, str], list[dict[str, str]]] = field(default_factory=dict)

    def transaction(self, tx: Transaction, holding: bool) -> int:
        """Write a committed transaction's rows (after the ones it handed out early, which the
        writers hold when ``holding``); how many."""
        commit = commit_ts_text(tx.commit_ts)
        written = sum(w.release(tx.seqno, commit) for w in self.writers.values()) if holding else 0
        written += self.batches(tx.batches, tx.seqno, commit)
        crashpoints.reached("after transaction written")
        return written

    def batches(self, batches: list[RowsBatch], seqno: int, commit: str, held: bool = False) -> int:
        written = 0
        for batch in batches:
            self.writer(batch.table, str(batch.position)).write_batch(batch, seqno, commit, held)
            written += batch.change_count
        return written

    def native(self, run: NativeRun) -> int:
        """Write the rows of the transactions the native reader took; how many."""
        for _table, number, data, ends, changes, deletes, first in run.result.segments:
            where = str(Position(run.run.file, run.run.position(first)))
            self.writer(run.plans[number], where).write_segment(data, ends, changes, deletes, where)
        return run.changes

    def writer(self, plan: TablePlan, where: str) -> TableWriter:
        """The writer of ``plan``'s table (made on its first rows), switched to ``plan``'s layout."""
        key = (plan.schema, plan.table)
        writer = self.writers.get(key)
        if writer is None:
            folder = self.workdir / layout.safe_component(plan.schema) / layout.safe_component(plan.table)
            folder.mkdir(parents=True, exist_ok=True)
            settings = self.settings
            writer = TableWriter(
                TableEntry(plan.schema, plan.table, _primary_key(plan, settings.tables, where)),
                folder,
                settings.staging.part_bytes,
                settings.staging.gzip,
                self.previous.get(key),
                settings.warehouse_format,
            )
            self.writers[key] = writer
            writer.entry.statements.extend(self.pending.pop(key, []))
        statement = writer.entry.statements[-1]["query"] if writer.entry.statements else ""
        writer.use(plan, where, statement)
        return writer


def _primary_key(plan: TablePlan, tables: TablesConfig, where: str) -> list[str]:
    try:
        return key_columns(tables.keys, plan.schema, plan.table, plan.primary_key, plan.names)
    except TableKeyError as exc:
        raise ExtractError(f"{where}: {exc}") from None
