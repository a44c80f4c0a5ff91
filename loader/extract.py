"""Extraction: one interval of the binlog into per-table CSV staging files and a manifest.

Every committed change of every selected table lands in ``<source>/<schema>/<table>/<interval>/``
as CSV rows ``op, seqno, row_id, commit_ts, <columns>`` (an update as its D then its I), the
files are published, and the manifest is written last. Extracting the same interval again
writes the same bytes.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import gzip
import itertools
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

from loader import crashpoints, gtids, history, scratch, statements
from loader.binlog.constants import ColumnType
from loader.binlog.fingerprint import Fingerprint
from loader.binlog.reader import native_decoder, open_transport, read_transactions, source_schema
from loader.binlog.rowplan import PlanColumn, TablePlan
from loader.binlog.server import BinlogServer
from loader.binlog.spool import SpooledEvents, spool_pieces, stream_bytes
from loader.binlog.transactions import NativeRun, OpenRows, RowsBatch, Transaction
from loader.config import Config, SourceConfig, StagingConfig, TablesConfig
from loader.errors import ExtractError, HistoryError, TableKeyError
from loader.gtids import GtidSet
from loader.ledger import (
    ABANDONED,
    EXTRACTED,
    MATERIALISED,
    Interval,
    Ledger,
    awaiting_copy,
    layout_record,
    loaded_seqnos,
    moved_from,
)
from loader.naming import reserved_column_problem
from loader.positions import Position
from loader.results import ExtractedTable, ExtractSummary
from loader.source import binary_logs, check_binlog_settings, connect, credentials
from loader.staging import checksums, csvformat, layout
from loader.staging.manifest import ColumnSpec, FileEntry, Manifest, TableEntry
from loader.staging.stores import Store, open_store
from loader.staging.verify import sha256_hex
from loader.tables import TableSelector, key_columns, reload_remedy
from loader.warehouse import types

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def commit_ts_text(micros: int) -> str:
    """A commit time as the staging files write it: UTC, microseconds."""
    return (_EPOCH + timedelta(microseconds=micros)).strftime("%Y-%m-%d %H:%M:%S.%f")


# --- schema changes -------------------------------------------------------------------------


def layout_change_problem(old: list[ColumnSpec], new: list[ColumnSpec], table_format: str) -> str | None:
    """Why a table's new column layout cannot follow its old one in staging and in warehouse
    tables of ``table_format``, or None."""
    if len(new) < len(old):
        return f"the table went from {len(old)} to {len(new)} columns (dropped columns cannot be carried)"
    for o, n in zip(old, new, strict=False):
        if o.name != n.name:
            return f"column {o.name} became {n.name} (renamed or moved columns cannot be carried)"
        problem = types.type_change_problem(o.mysql_type, n.mysql_type, table_format)
        if problem:
            return f"column {o.name} {problem}"
    return None


# --- writing ---

# A transaction's rows wait on disk, not in memory, once this many of its changes are decoded:
# the extract's memory stays bounded whatever the size of a transaction.
OPEN_ROWS_HELD_AT = 20_000
# An interval of less binlog than this is decoded in one process: starting more costs more.
PARALLEL_FROM_BYTES = 4 << 20
SERVER_RANGES_PER_WORKER = 2

_INT_KIND = {ColumnType.TINY, ColumnType.SHORT, ColumnType.INT24, ColumnType.LONG, ColumnType.LONGLONG}
_INT_KIND |= {ColumnType.YEAR, ColumnType.BIT}
_TEMPORAL_KIND = {ColumnType.DATE, ColumnType.NEWDATE, ColumnType.TIME, ColumnType.TIME2, ColumnType.DATETIME}
_TEMPORAL_KIND |= {ColumnType.DATETIME2, ColumnType.TIMESTAMP, ColumnType.TIMESTAMP2}


def csv_kind(column: PlanColumn) -> str:
    """How the CSV row encoder writes a column's values (see ``csvformat.row_encoder``)."""
    t = column.type
    if t in _INT_KIND:
        return "int"
    if t in (ColumnType.FLOAT, ColumnType.DOUBLE):
        return "float"
    if t == ColumnType.NEWDECIMAL:
        return "decimal"
    if t in _TEMPORAL_KIND:
        return "temporal"
    if t in (ColumnType.GEOMETRY, ColumnType.VECTOR):
        return "binary"
    if t in (ColumnType.VARCHAR, ColumnType.VAR_STRING, ColumnType.STRING, ColumnType.BLOB):
        if column.charset is None:
            return "binary"
        return "any" if column.charset == "?" else "text"
    if t in (ColumnType.ENUM, ColumnType.SET, ColumnType.JSON):
        return "text" if column.labels is not None or t == ColumnType.JSON else "any"
    return "any"


def batch_csv(batch: RowsBatch, encode: csvformat.RowEncoder, seqno: int, commit_ts: str) -> bytes:
    """The staging rows of one rows event: inserts as I, deletes as D, updates as D then I.
    ``encode`` writes the rows the Python decoder decoded (``csvformat.row_encoder`` of the
    table's columns); the native decoder's come written.

    Raises:
        CsvValueError: a value the staging format cannot hold.
    """
    if batch.encoded is not None:
        return batch.encoded.csv(seqno, batch.first_row_id, commit_ts)
    return "".join(_python_lines(batch, encode, seqno, commit_ts)).encode()


def batch_lines(batch: RowsBatch, encode: csvformat.RowEncoder, seqno: int, commit_ts: str) -> list[bytes]:
    """``batch_csv``'s rows, one bytes each."""
    if batch.encoded is not None:
        return batch.encoded.lines(seqno, batch.first_row_id, commit_ts)
    return [line.encode() for line in _python_lines(batch, encode, seqno, commit_ts)]


def _python_lines(batch: RowsBatch, encode: csvformat.RowEncoder, seqno: int, commit_ts: str) -> list[str]:
    rid = batch.first_row_id
    if batch.op == "I":
        return [encode("I", seqno, rid + i, commit_ts, after) for i, (_, after) in enumerate(batch.rows)]
    if batch.op == "D":
        return [encode("D", seqno, rid + i, commit_ts, before) for i, (before, _) in enumerate(batch.rows)]
    lines = []
    for i, (before, after) in enumerate(batch.rows):
        lines.append(encode("D", seqno, rid + 2 * i, commit_ts, before))
        lines.append(encode("I", seqno, rid + 2 * i + 1, commit_ts, after))
    return lines


class _HashedFile:
    """A part's file, its checksum and size taken from the bytes as they are written (not read
    back once it is closed)."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "wb")  # noqa: SIM115 - closed in close
        self.checksum = checksums.RunningChecksum()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.checksum.update(data)
        self.size += len(data)
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()


@dataclass
class _Part:
    path: Path
    layout: int
    raw: _HashedFile  # the open file
    out: Any  # where rows are written: the file, or a gzip stream over it
    bytes: int = 0  # of CSV text (before any gzip)
    rows: int = 0
    ops: dict[str, int] = field(default_factory=dict)


class TableWriter:
    """The CSV parts of one table in one interval."""

    def __init__(
        self,
        entry: TableEntry,
        workdir: Path,
        part_bytes: int,
        gzip_parts: bool,
        previous: list[ColumnSpec] | None,
        table_format: str,
    ) -> None:
        self.entry = entry
        self.table_format = table_format  # the warehouse's: which type changes it can follow
        self.previous = previous  # the table's columns as earlier intervals or its load left them
        self.first_position: str | None = None  # of its first rows event
        self.workdir = workdir
        self.part_bytes = part_bytes
        self.gzip = gzip_parts
        self.part: _Part | None = None
        self.finished: list[_Part] = []
        self.plan: TablePlan | None = None
        self.layout_index = -1
        # The encoder of the Python decoder's rows, for ``plan``: compiled when first needed
        # (the native decoder's rows come written).
        self._encoder: tuple[TablePlan, csvformat.RowEncoder] | None = None
        # Rows of a transaction not committed yet (OpenRows), without their seqno and commit
        # time, each after its length (values may hold newlines): a large transaction waits
        # on disk, not in memory.
        self.held: BinaryIO | None = None
        self.held_rows = 0

    def use(self, plan: TablePlan, where: str, statement: str) -> None:
        """Switch to ``plan``'s column layout when it differs from the current one."""
        if plan is self.plan:
            return
        columns = [ColumnSpec(c.name, c.mysql_type) for c in plan.columns]
        self.plan = plan
        if self.entry.layouts and self.entry.layouts[-1] == columns:
            return
        reserved = reserved_column_problem(
            self.entry.schema, self.entry.table, (c.name for c in columns), self.table_format
        )
        if reserved:
            raise ExtractError(f"{where}: {reserved}")
        before = self.entry.layouts[-1] if self.entry.layouts else self.previous
        if before is not None:
            problem = layout_change_problem(before, columns, self.table_format)
            if problem:
                since = "" if self.entry.layouts else " since its rows staged or loaded before"
                raise ExtractError(
                    f"{where}: {self.entry.schema}.{self.entry.table} changed{since} in a way the loader "
                    f"cannot carry: {problem}"
                    + (f" (statement: {statement})" if statement else "")
                    + f"; {reload_remedy((self.entry.schema, self.entry.table))}"
                )
        self.entry.layouts.append(columns)
        self.layout_index = len(self.entry.layouts) - 1
        self._close_part()  # one layout per file

    def _open_part(self) -> _Part:
        number = len(self.finished)
        path = self.workdir / layout.part_name(number, self.gzip)
        raw = _HashedFile(path)
        out: Any = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if self.gzip else raw
        assert self.plan is not None
        header = csvformat.header_line([c.name for c in self.plan.columns]).encode()
        out.write(header)
        self.part = _Part(path, self.layout_index, raw, out, bytes=len(header))
        return self.part

    def _close_part(self) -> None:
        if self.part is not None:
            self.part.out.close()
            self.part.raw.close()  # a gzip stream leaves the file it writes to open, its tail unflushed
            self.finished.append(self.part)
            self.part = None

    def write_batch(self, batch: RowsBatch, seqno: int, commit_ts: str, held: bool = False) -> None:
        """Every change row of one rows event: inserts as I, deletes as D, updates as D then I.
        ``held``: rows of a transaction not committed yet, kept aside until ``release``."""
        if self.first_position is None:
            self.first_position = str(batch.position)
        encode = self._encode(batch.table) if batch.encoded is None else csvformat.row_line
        try:
            if held:
                self._hold(batch_lines(batch, encode, seqno, commit_ts))
                return
            data = batch_csv(batch, encode, seqno, commit_ts)
        except csvformat.CsvValueError as exc:
            raise ExtractError(f"{batch.position}: {self.entry.schema}.{self.entry.table}: {exc}") from None
        n = batch.change_count
        self._append(data, n, {"D": n // 2, "I": n // 2} if batch.op == "U" else {batch.op: n})

    def _encode(self, plan: TablePlan) -> csvformat.RowEncoder:
        if self._encoder is None or self._encoder[0] is not plan:
            self._encoder = (plan, csvformat.row_encoder([csv_kind(c) for c in plan.columns]))
        return self._encoder[1]

    def write_segment(self, data: bytes, ends: bytes, changes: bytes, deletes: bytes, where: str) -> None:
        """Rows the native reader wrote for several rows events (``ends``, ``changes`` and
        ``deletes``: native u64s, cumulative after each), parts closed after the rows event
        where ``write_batch`` would close them."""
        if self.first_position is None:
            self.first_position = where
        end_at, changed, deleted = (memoryview(a).cast("Q") for a in (ends, changes, deletes))
        i = start = rows_before = deletes_before = 0
        while i < len(end_at):
            part = self.part or self._open_part()
            # The first rows event that fills the part: it closes there.
            j = min(bisect.bisect_left(end_at, start + self.part_bytes - part.bytes, lo=i), len(end_at) - 1)
            rows, dels = changed[j] - rows_before, deleted[j] - deletes_before
            self._append(
                data[start : end_at[j]], rows, {op: n for op, n in (("D", dels), ("I", rows - dels)) if n}
            )
            i, start, rows_before, deletes_before = j + 1, end_at[j], changed[j], deleted[j]

    def _hold(self, lines: list[bytes]) -> None:
        if self.held is None:
            self.held = open(self.workdir / "held.csv", "w+b")  # noqa: SIM115 - closed in forget
        self.held.write(b"".join(b"%010d%s" % (len(line), line) for line in lines))
        self.held_rows += len(lines)

    def _append(self, data: bytes, rows: int, ops: dict[str, int]) -> None:
        part = self.part or self._open_part()
        part.out.write(data)
        part.bytes += len(data)
        part.rows += rows
        for op, n in ops.items():
            part.ops[op] = part.ops.get(op, 0) + n
        if part.bytes >= self.part_bytes:
            self._close_part()

    def release(self, seqno: int, commit_ts: str) -> int:
        """The held rows, now that their transaction committed, with its seqno and commit time
        (as ``write_batch`` would have written them); how many."""
        if self.held is None:
            return 0
        count = self.held_rows
        self.held.seek(0)
        out: list[bytes] = []
        ops: dict[str, int] = {}
        commit = commit_ts.encode()
        for _ in range(count):
            op, _, row_id, _, rest = self.held.read(int(self.held.read(10))).split(b",", 4)
            out.append(b'%s,%d,%s,"%s",%s' % (op, seqno, row_id, commit, rest))
            ops[op.decode()] = ops.get(op.decode(), 0) + 1
            if len(out) >= 10_000:
                self._append(b"".join(out), len(out), ops)
                out, ops = [], {}
        if out:
            self._append(b"".join(out), len(out), ops)
        self.forget()
        return count

    def forget(self) -> None:
        """Drop the held rows (their transaction was rolled back, or never committed)."""
        if self.held is not None:
            self.held.close()
            (self.workdir / "held.csv").unlink(missing_ok=True)
        self.held = None
        self.held_rows = 0

    def finish(self) -> TablePiece:
        """Close the open part; what this writer wrote, for publishing."""
        self.forget()  # rows of a transaction the range ended inside of
        self._close_part()
        return TablePiece(
            self.entry.primary_key,
            self.entry.layouts,
            [
                PartInfo(
                    str(p.path),
                    p.layout,
                    p.rows,
                    dict(sorted(p.ops.items())),
                    p.raw.checksum.text(),
                    p.raw.size,
                )
                for p in self.finished
            ],
            self.entry.statements,
            self.first_position,
        )


@dataclass
class PartInfo:
    """A written part, before it is published."""

    path: str
    layout: int
    rows: int
    ops: dict[str, int]
    checksum: str
    bytes: int


@dataclass
class TablePiece:
    """What one decoder wrote for one table: its layouts in order and its parts."""

    primary_key: list[str]
    layouts: list[list[ColumnSpec]]
    parts: list[PartInfo]
    statements: list[dict[str, str]]
    first_position: str | None = None


@dataclass
class RangeResult:
    """What decoding one range of the interval produced (crosses process boundaries)."""

    tables: dict[tuple[str, str], TablePiece]
    transactions: int = 0
    changes: int = 0
    seqno_min: int | None = None
    seqno_max: int | None = None
    stopped_at: str | None = None
    commit_ts_max: int | None = None  # microseconds UTC, of the last transaction with changes
    # selected tables a CREATE TABLE made, and where: all their rows follow it
    created: dict[tuple[str, str], str] = field(default_factory=dict)
    gtids: dict[int, str] = field(default_factory=dict)  # the last MariaDB GTID read per domain
    mysql_gtids: GtidSet = field(default_factory=GtidSet)  # every MySQL GTID read
    last_txn: Fingerprint | None = None  # the last transaction read that has a GTID event


def publish_table(
    store: Store,
    folder: str,
    schema: str,
    table: str,
    pieces: list[TablePiece],
    gzip_parts: bool,
    table_format: str,
) -> TableEntry:
    """Upload the parts of one table, in log order, and describe them for the manifest."""
    entry = TableEntry(schema, table, pieces[0].primary_key)
    number = 0
    for piece in pieces:
        mapping: dict[int, int] = {}
        for i, columns in enumerate(piece.layouts):
            if not entry.layouts or entry.layouts[-1] != columns:
                if entry.layouts:
                    problem = layout_change_problem(entry.layouts[-1], columns, table_format)
                    if problem:
                        raise ExtractError(
                            f"{schema}.{table} changed in a way the loader cannot carry: {problem}; "
                            + reload_remedy((schema, table))
                        )
                entry.layouts.append(columns)
            mapping[i] = len(entry.layouts) - 1
        for part in piece.parts:
            key = f"{folder}/{layout.part_name(number, gzip_parts)}"
            number += 1
            store.put_file(key, Path(part.path))
            entry.files.append(
                FileEntry(key, mapping[part.layout], part.rows, part.ops, part.bytes, part.checksum)
            )
        entry.statements.extend(piece.statements)
    return entry


# --- the interval ---------------------------------------------------------------------------


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


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _extract_range(
    settings: ExtractSettings,
    start: str,
    end: str,
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
    end_pos = Position.parse(end)
    last_report = time.monotonic()
    with source_schema(credentials(settings.source)) as schema:
        txs = read_transactions(
            SpooledEvents(spool) if spool else open_transport(settings.source),
            Position.parse(start),
            end_pos,
            selector,
            schema,
            skip_before=loaded_at,
            max_open_changes=OPEN_ROWS_HELD_AT,
            gtid_state=result.gtids,
            mysql_gtids=result.mysql_gtids,
            seqno_epoch=epoch,
            native=native_decoder(settings.source),
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
                _check_statements(
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
            if max_changes and result.changes >= max_changes and tx.end < end_pos:
                result.stopped_at = str(tx.end)
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
    start: str
    end: str
    spool: str | None = None  # the range's events, read from the server by the parent


def _file_ranges(source: SourceConfig, start: Position, end: Position, workers: int) -> list[_Range]:
    """The interval cut at transaction starts into ranges of similar sizes of binlog files."""
    from loader.binlog.files import BinlogFiles
    from loader.binlog.split import split_points

    cuts = [start, *split_points(BinlogFiles(source.binlog_dir), start, end, workers), end]
    return [_Range(str(a), str(b)) for a, b in itertools.pairwise(cuts) if a < b]


def _interval_bytes(source: SourceConfig, start: Position, end: Position) -> int:
    """Bytes of binlog in ``[start, end)``, from the sizes of the files or the server's list."""
    sizes: dict[str, int] = {}
    if source.transport == "files":
        from loader.binlog.files import BinlogFiles

        sizes = {p.name: p.stat().st_size for p in BinlogFiles(source.binlog_dir).list_files()}
    elif start.file != end.file:
        conn = connect(credentials(source))
        try:
            sizes = binary_logs(conn)
        finally:
            conn.close()
    return stream_bytes(sizes, start, end)


def _server_ranges(
    source: SourceConfig,
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
    transport = open_transport(source)
    # Twice as many ranges as processes: the first is decoded after a quarter of the stream
    # has arrived, not half, and the last one decoded after the stream ends is smaller.
    parts = SERVER_RANGES_PER_WORKER * workers
    # The native reader's processes read runs of events (split from the stream natively, not
    # one by one here); the Python decoder's, events.
    runs = native_decoder(source) and not crashpoints.enabled()
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
            yield _Range(str(piece.start), str(piece.end), piece.path)
    finally:
        transport.close()


def _decode(
    settings: ExtractSettings,
    interval: Interval,
    tmp: str,
    progress: Progress,
    workers: int,
    loaded_at: dict[tuple[str, str], Position],
    previous: dict[tuple[str, str], list[ColumnSpec]],
) -> list[RangeResult]:
    """Decode the interval: in this process, or cut into ranges decoded in ``workers`` processes
    (files read by each, or the server's stream read here once and spooled)."""
    start, end = Position.parse(interval.start), Position.parse(interval.end)
    label = f"interval {interval.id}"
    ranges: Iterable[_Range] = [_Range(interval.start, interval.end)]
    total = _interval_bytes(settings.source, start, end) if workers > 1 and not interval.max_changes else 0
    if total >= max(1, PARALLEL_FROM_BYTES):
        if settings.source.transport == "files":
            ranges = _file_ranges(settings.source, start, end, workers)
            if len(ranges) > 1:
                progress(f"extract: {label}: {len(ranges)} ranges in {len(ranges)} processes")
        else:
            ranges = _server_ranges(settings.source, start, end, total, workers, tmp, progress, label)
    if isinstance(ranges, list) and len(ranges) == 1:
        one = ranges[0]
        return [
            _extract_range(
                settings,
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


def extract_interval(
    settings: ExtractSettings,
    store: Store,
    ledger: Ledger,
    interval: Interval,
    progress: Progress = _stderr,
    source_info: dict[str, str] | None = None,
    workers: int = 1,
) -> ExtractSummary:
    """Extract one planned interval, publish its files and manifest, mark it extracted.

    With ``workers`` > 1 and binlog files to read, the interval is cut at transaction starts
    and the pieces are decoded in as many processes; the files are the same whatever the
    number of workers only in their content, not in how rows are split into parts.
    """
    started = time.monotonic()
    start, end = Position.parse(interval.start), Position.parse(interval.end)
    loaded_at = ledger.loaded_at(interval.epoch)  # loads of an earlier history are all before it
    previous = ledger.layouts_before(interval.id)
    with scratch.folder("extract") as tmp:
        results = _decode(settings, interval, tmp, progress, workers, loaded_at, previous)
        stopped_at = results[-1].stopped_at
        interval_end = Position.parse(stopped_at) if stopped_at else end
        reached = _gtid_reached(interval, results, stopped_at is not None)
        keys = sorted({key for r in results for key in r.tables})
        created = {name: at for r in results for name, at in r.created.items()}
        # Tables are loaded before their changes are applied; those a load has not copied yet
        # are staged for the copy's catch-up.
        loads = ledger.loads()
        loaded = set(loaded_seqnos(loads)) | set(awaiting_copy(loads))
        if loaded:
            _check_loaded(keys, results, loaded, created, ledger.created_before(interval.id))
        tables = [
            publish_table(
                store,
                layout.table_dir(settings.source.name, schema_name, table, interval.id),
                schema_name,
                table,
                [r.tables[(schema_name, table)] for r in results if (schema_name, table) in r.tables],
                settings.staging.gzip,
                settings.warehouse_format,
            )
            for schema_name, table in keys
        ]
    seqnos = [r.seqno_min for r in results if r.seqno_min is not None]
    seqno_maxes = [r.seqno_max for r in results if r.seqno_max is not None]
    changes = sum(r.changes for r in results)
    manifest = Manifest(
        interval_id=interval.id,
        source={"name": settings.source.name, **(source_info or {})},
        start=str(start),
        end=str(interval_end),
        seqno_min=min(seqnos) if seqnos else None,
        seqno_max=max(seqno_maxes) if seqno_maxes else None,
        transactions=sum(r.transactions for r in results),
        tables=tables,
    )
    key = layout.manifest_key(settings.source.name, interval.id)
    manifest_bytes = manifest.to_json()
    store.put(key, manifest_bytes)
    if interval.state != MATERIALISED:  # extracting a materialised interval again changes nothing there
        interval.state = EXTRACTED
    interval.extracted_end = str(interval_end) if stopped_at else None
    interval.extracted_end_gtid = reached if stopped_at else None
    # The last transaction before where it ends; before its start when it holds none.
    last = next((r.last_txn.text() for r in reversed(results) if r.last_txn), interval.start_txn)
    if stopped_at:
        interval.extracted_end_txn = last
    else:
        interval.end_txn, interval.extracted_end_txn = last, None
    interval.manifest = key
    interval.manifest_sha256 = sha256_hex(manifest_bytes)
    interval.created_tables = sorted(f"{schema}.{table}" for schema, table in created)
    interval.layouts = [layout_record(t.schema, t.table, t.layouts[-1]) for t in tables if t.layouts]
    interval.changes = changes
    commit_times = [r.commit_ts_max for r in results if r.commit_ts_max is not None]
    interval.last_commit_ts = max(commit_times) if commit_times else None
    interval.error = None
    ledger.save(interval)
    return ExtractSummary(
        interval=interval.id,
        start=str(start),
        end=str(interval_end),
        transactions=manifest.transactions,
        changes=changes,
        seconds=time.monotonic() - started,
        tables=[
            ExtractedTable(f"{t.schema}.{t.table}", t.ops, len(t.files), sum(f.bytes for f in t.files))
            for t in tables
        ],
        manifest=key,
    )


def _gtid_reached(interval: Interval, results: list[RangeResult], stopped: bool) -> str | None:
    """The GTID state the stream's own GTID events lead to from the interval's start (None when
    its start's is unknown). Read through to the end, it must be the one the server reported
    there when the interval was planned: else the log changed in between.

    Raises:
        HistoryError: the stream does not lead to the state recorded at the interval's end.
    """
    if interval.start_gtid is None:
        return None
    mysql = GtidSet()
    for r in results:
        mysql.update(r.mysql_gtids)
    reached = gtids.reached(interval.start_gtid, [g for r in results for g in r.gtids.values()], mysql)
    if not stopped and interval.end_gtid is not None and not gtids.same_gtid(reached, interval.end_gtid):
        raise HistoryError(
            f"interval {interval.id}: the binlog read from {interval.start} to {interval.end} leads to GTID "
            f"state {reached or '(empty)'}, but the server had {interval.end_gtid or '(empty)'} at "
            f"{interval.end} when the interval was planned: the log changed in between (reset, restored, "
            f"or another server behind the address). Nothing was staged and the checkpoint stays. {history.REMEDY}"
        )
    return reached


def _check_loaded(
    keys: list[tuple[str, str]],
    results: list[RangeResult],
    loaded: set[tuple[str, str]],
    created: dict[tuple[str, str], str],
    created_before: set[str],
) -> None:
    """Refuse changes to a table the warehouse has not been given the rows of: one neither
    loaded nor created in the log (it started matching the include patterns after the load,
    or came back after a CREATE TABLE IF NOT EXISTS)."""
    for schema, table in keys:
        qualified = f"{schema}.{table}"
        if (schema, table) in loaded or qualified in created_before:
            continue
        first = min(
            (
                Position.parse(p.first_position)
                for r in results
                if (p := r.tables.get((schema, table))) and p.first_position
            ),
            default=None,
        )
        made = created.get((schema, table))
        if made is not None and first is not None and Position.parse(made) < first:
            continue
        raise ExtractError(
            f"{first}: {qualified} has changes but was never loaded (it started matching the "
            "include patterns after the initial load, or was created with CREATE TABLE IF NOT "
            "EXISTS, which may not have made it): its other rows are not in the warehouse; "
            f"load it first: loader initial-load --tables {qualified}"
        )


def _stale(tx: Transaction, loaded_at: dict[tuple[str, str], Position], name: tuple[str, str]) -> bool:
    since = loaded_at.get(name)
    return since is not None and tx.start < since


def _check_statements(
    tx: Transaction,
    selector: TableSelector,
    writers: dict[tuple[str, str], TableWriter],
    loaded_at: dict[tuple[str, str], Position],
    pending: dict[tuple[str, str], list[dict[str, str]]],
    created: dict[tuple[str, str], str],
    schema_changes: str = "evolve",
) -> None:
    """Stop at a statement that changes a selected table in a way rows events do not carry.
    A carried one is noted in the table's manifest entry (``pending`` until its first row); a
    new table's CREATE in ``created``.

    Carried (``schema_changes = "evolve"``): ALTER TABLE without a rename (the rows after it show
    its effect on the columns, checked by ``layout_change_problem``) and CREATE TABLE of a new
    table (its rows all follow). Everything else that names a selected table stops the interval
    at the statement, unless the table was re-loaded after it; with ``"stop"``, every statement.
    """
    for st in tx.statements:
        change = statements.classify(st.query, st.schema)
        hit = list(dict.fromkeys(n for n in change.names if selector(*n) and not _stale(tx, loaded_at, n)))
        hit += [(schema, "*") for schema in change.dropped_schemas if selector.may_select(schema)]
        if not hit:
            continue
        text = st.query.strip()
        stop = _stop_reason(change, hit)
        if stop is None and schema_changes == "stop":
            stop = (
                f'tables.schema_changes = "stop" stops at every schema change ({change.verb})',
                f"review the change, then {reload_remedy(*hit)} "
                '(or set tables.schema_changes = "evolve" to carry the changes the warehouse can follow)',
            )
        if stop is not None:
            shown = text if len(text) <= 300 else text[:300] + "..."
            names = ", ".join(f"{schema}.{table}" for schema, table in hit)
            raise ExtractError(f"{st.position}: {names}: {stop[0]} (statement: {shown}); {stop[1]}")
        if change.verb == "CREATE TABLE" and not change.if_not_exists:
            created.update((name, str(st.position)) for name in hit)
        for name in hit:
            noted = {"position": str(st.position), "query": text}
            writer = writers.get(name)
            if writer is not None:
                writer.entry.statements.append(noted)
            else:
                pending.setdefault(name, []).append(noted)


def _stop_reason(change: statements.Change, hit: list[tuple[str, str]]) -> tuple[str, str] | None:
    """Why ``change`` to the selected tables ``hit`` cannot be carried and what to do, or None
    when it can be carried."""
    if change.dropped_schemas:
        schema = change.dropped_schemas[0]
        return (
            f"DROP DATABASE dropped every table of {schema}",
            f'leave them out with tables.exclude = ["{schema}.*"], or re-load each once it exists again '
            f"(loader initial-load --tables {schema}.<table>)",
        )
    remedy = reload_remedy(*hit)
    if len(hit) == 1:
        gone = f"{remedy} once it exists again, or leave it out with tables.exclude if it is gone for good"
    else:
        gone = f"{remedy} once they exist again, or leave out those gone for good with tables.exclude"
    if change.dml:
        return (
            f"the {change.verb} was logged as a statement, not as row changes (the session's "
            "binlog_format was STATEMENT or MIXED), and the loader carries only row changes",
            f"set binlog_format=ROW for every session that writes to it, then {remedy}",
        )
    if change.added_with_values:
        columns = ", ".join(change.added_with_values)
        return (
            f"ALTER TABLE added {columns} with a value for the rows already there (a default, NOT NULL "
            "or a generated value), which no row change carries",
            remedy,
        )
    if change.reshaped:
        return (
            f"ALTER TABLE {', '.join(change.reshaped)}, which the warehouse table cannot follow "
            "(its columns go by name; only columns added at the end are carried)",
            remedy,
        )
    if change.verb == "ALTER TABLE" and not change.created:
        return None
    if change.verb == "CREATE TABLE":
        if not change.replaced:
            return None
        return "CREATE OR REPLACE TABLE replaced the table, whose old rows the warehouse holds", remedy
    if change.created and any(name in change.created for name in hit):
        return "a table was renamed to a selected name; the warehouse holds the old table's rows", remedy
    if change.created:
        return "the table was renamed; its rows now live under another name", gone
    if change.verb.startswith("DROP"):
        return f"{change.verb} cannot be carried as row changes", gone
    return f"{change.verb} cannot be carried as row changes", remedy


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


def run_extract(
    cfg: Config,
    start: Position | None = None,
    end: Position | None = None,
    max_changes: int | None = None,
    progress: Progress | None = None,
    interval_id: str | None = None,
    workers: int = 1,
) -> ExtractSummary | None:
    """Plan the next interval (or the one given) and extract it. None when there is nothing new.

    ``interval_id`` extracts a recorded interval again, with its recorded boundaries (a rerun
    writes the same files).
    """
    native_decoder(cfg.source)  # before any work: a decoder asked for and not built stops here
    store = open_store(cfg.staging)
    ledger = Ledger(store, cfg.source.name)
    creds = credentials(cfg.source)
    conn = connect(creds)
    try:
        server = check_binlog_settings(conn)
        source = history.SourceHistory.of(conn, cfg.source, creds)
        # A recorded interval keeps its own end; a new one ends at the server's position.
        if interval_id is None:
            interval = ledger.plan(
                end or source.current(),
                start=start,
                max_changes=max_changes,
                source=source,
                follow=cfg.source.failover == "follow",
            )
        else:
            interval = ledger.get(interval_id)
            if interval is None:
                raise ExtractError(f"source {cfg.source.name} has no interval {interval_id}")
            if interval.state == ABANDONED:
                raise ExtractError(f"interval {interval_id} was abandoned: {interval.abandoned_reason}")
            interval.extracted_end = None  # a bounded interval stops at the same place again
            # The server may have been replaced since the interval was planned.
            what = f"interval {interval_id}'s start"
            problem = moved_from(
                source, Position.parse(interval.start), interval.start_mark(), what, cfg.source.name
            )
            if problem:
                raise HistoryError(
                    f"{problem}. Nothing was extracted and the checkpoint stays. {history.REMEDY}"
                )
    finally:
        conn.close()
    if interval is None:
        return None
    info: dict[str, str] = {k: server[k] for k in ("server_id", "server_uuid", "version") if k in server}
    return extract_interval(
        ExtractSettings.of(cfg), store, ledger, interval, progress or _stderr, info, workers
    )
