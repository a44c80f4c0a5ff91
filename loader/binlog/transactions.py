"""Events to committed transactions, with seqno, row_id and commit time (DESIGN.md section 2).

A transaction starts at a GTID (MySQL, MariaDB) or BEGIN and ends at its Xid or COMMIT; a
statement outside BEGIN (DDL, or a non-transactional write) is a transaction of its own; a
group that ends in ROLLBACK yields nothing. Rows are decoded only for the tables the filter
selects; other tables' rows are passed over undecoded.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from loader.binlog import events as ev
from loader.binlog.constants import ColumnType, EventType
from loader.binlog.fingerprint import Fingerprint, of_event
from loader.binlog.gtids import GtidSet
from loader.binlog.nativeplan import native_plan
from loader.binlog.parser import BinlogParser, uuid_text
from loader.binlog.rowplan import Row, TablePlan, compile_plan
from loader.binlog.schema import SchemaProvider
from loader.binlog.transport import EventRun, RawEvent, joined
from loader.core.errors import DecodeError, IncidentError, LoaderError
from loader.core.positions import Position, seqno_of
from loader.core.tables import reload_remedy

if TYPE_CHECKING:
    from loader._native import EncodedRows, RowPlan, Scanner, ScanResult

TableFilter = Callable[[str, str], bool]
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RowsBatch:
    """The rows of one rows event: a table, an op, and (before, after) images in order."""

    table: TablePlan
    op: str  # I, U or D as decoded (an update is split into D then I downstream)
    rows: list[tuple[Row | None, Row | None]]
    first_row_id: int
    position: Position
    # The native decoder's staging rows instead of ``rows`` (``TransactionReader(native=True)``).
    encoded: EncodedRows | None = None

    def row_ids(self) -> Iterator[int]:
        """The row_id of each row: updates take two (their D and their I)."""
        step = 2 if self.op == "U" else 1
        return iter(range(self.first_row_id, self.first_row_id + step * len(self.rows), step))

    @property
    def change_count(self) -> int:
        if self.encoded is not None:
            return self.encoded.changes
        return len(self.rows) * (2 if self.op == "U" else 1)


@dataclass(frozen=True, slots=True)
class Statement:
    """A statement logged as a query (DDL, TRUNCATE, ...), with where it was written."""

    schema: str
    query: str
    position: Position


@dataclass(slots=True)
class Transaction:
    """A committed transaction."""

    start: Position
    end: Position  # end of the commit event: where the next transaction starts
    seqno: int
    commit_ts: int  # microseconds since the epoch, UTC
    gtid: str
    batches: list[RowsBatch] = field(default_factory=list)
    statements: list[Statement] = field(default_factory=list)
    fingerprint: Fingerprint | None = None  # of its GTID event (None: the log has none)

    @property
    def change_count(self) -> int:
        return sum(b.change_count for b in self.batches)


@dataclass(slots=True)
class OpenRows:
    """Rows of a transaction not committed yet, handed out early so that a large transaction is
    not held in memory whole (``TransactionReader(max_open_changes=...)``). The ``Transaction``
    that commits them follows, with only its rows after these; ``rolled_back`` says the open
    transaction whose rows were handed out was dropped instead (its rows must be forgotten)."""

    batches: list[RowsBatch]
    rolled_back: bool = False


@dataclass(frozen=True, slots=True)
class NativeRun:
    """Whole committed transactions the native reader took from a run of events at once
    (``TransactionReader(native=True)`` reading ``EventRun``s): their staging rows per table,
    in segments of one plan each, and what they add up to."""

    run: EventRun  # what it was read from (its segments' offsets count in it)
    end: Position  # the end of the last transaction taken
    result: ScanResult
    plans: tuple[TablePlan, ...]  # by the segments' plan numbers
    last_txn: Fingerprint | None  # of the last transaction taken

    @property
    def changes(self) -> int:
        return self.result.changes


# A transaction a run ends inside of is carried over to the next run while what is carried is
# smaller than this; a larger one is read by the Python reader (which holds large ones on disk).
_CARRY_BYTES = 8 << 20

_OLD_TEMPORAL = frozenset({ColumnType.TIME, ColumnType.DATETIME, ColumnType.TIMESTAMP})
_BEGIN = re.compile(r"^\s*(BEGIN|START\s+TRANSACTION|XA\s+START)\b", re.I)
_COMMIT = re.compile(r"^\s*COMMIT\b", re.I)
_ROLLBACK = re.compile(r"^\s*ROLLBACK\s*$", re.I)
_SAVEPOINT = re.compile(r"^\s*SAVEPOINT\s+(.+?)\s*$", re.I | re.S)
_ROLLBACK_TO = re.compile(r"^\s*ROLLBACK\s+(?:WORK\s+)?TO\s+(?:SAVEPOINT\s+)?(.+?)\s*$", re.I | re.S)
_RELEASE = re.compile(r"^\s*RELEASE\s+SAVEPOINT\s+(.+?)\s*$", re.I | re.S)
_XA_END = re.compile(r"^\s*XA\s+END\b", re.I)
_XA_COMMIT = re.compile(r"^\s*XA\s+(COMMIT|ROLLBACK)\b", re.I)


@dataclass(slots=True)
class _Open:
    start: Position
    gtid: str = ""
    commit_ts: int = 0
    fingerprint: Fingerprint | None = None
    began: bool = False
    standalone: bool = False
    # (name, index in ``batches``) of each savepoint set and not released, oldest first
    savepoints: list[tuple[str, int]] = field(default_factory=list)
    batches: list[RowsBatch] = field(default_factory=list)
    statements: list[Statement] = field(default_factory=list)
    row_id: int = 0
    handed_out: int = 0  # row ids already handed out as OpenRows


class TransactionReader:
    """Turns a stream of raw events into committed transactions.

    Args:
        table_filter: which tables' rows to decode (others are skipped undecoded).
        schema: where to read table schemas when table maps lack full metadata.
        strict: refuse values that cannot be decoded exactly (see ``rowplan.compile_plan``).
        skip_before: tables whose rows are passed over undecoded in transactions that start
            before the given position (a re-load of the table copied them already, including
            rows it could not decode).
        max_open_changes: hand out the rows of a transaction not committed yet as ``OpenRows``
            once this many changes are held (None: every transaction comes whole).
        native: decode rows with the native module into staging rows (``RowsBatch.encoded``)
            where it takes the table; other tables' rows (and rows it refuses, whose error the
            Python decoder then gives) come decoded as values.
        native_json: with ``native``, ``binlog show``'s JSON images (and a ``NativeRun``'s
            JSON lines) instead of staging rows.
    """

    def __init__(
        self,
        table_filter: TableFilter | None = None,
        schema: SchemaProvider | None = None,
        strict: bool = True,
        skip_before: Mapping[tuple[str, str], Position] | None = None,
        max_open_changes: int | None = None,
        gtid_state: dict[int, str] | None = None,
        seqno_epoch: int = 0,
        mysql_gtids: GtidSet | None = None,
        native: bool = False,
        native_json: bool = False,
    ) -> None:
        self.parser = BinlogParser()
        self.native = native
        self.native_json = native_json
        self.seqno_epoch = seqno_epoch  # the binlog history the positions belong to (``seqno_of``)
        # The last MariaDB GTID read in each domain (every GTID event, committed or not): the
        # stream's own account of the GTID position it reaches (``gtids.advance``).
        self.gtid_state = {} if gtid_state is None else gtid_state
        # MySQL's: every GTID read (``gtids.reached``).
        self.mysql_gtids = GtidSet() if mysql_gtids is None else mysql_gtids
        self.max_open_changes = max_open_changes
        self.table_filter = table_filter
        self.skip_before = skip_before
        self.schema = schema
        self.strict = strict
        # Plans by table map record (the parser hands out the same record for the same bytes),
        # with their native decoder when there is one.
        self._plans: dict[int, tuple[ev.TableMap, TablePlan | None, RowPlan | None]] = {}
        self._open: _Open | None = None
        self.file = ""
        self.last_position: Position | None = None  # end of the last event read
        # The native reader of whole transactions (runs of events), for the format in force;
        # the plans registered with it by number, and the tables' numbers.
        self._scanner: Scanner | None = None
        self._scanner_fde: ev.FormatDescription | None = None
        self._scan_plans: list[TablePlan] = []
        self._scan_tables: dict[tuple[str, str], int] = {}
        # Changes handed out so far, and (``scan_budget``) how many before the caller stops: the
        # native reader stops at the transaction that reaches it, as the caller would.
        self.changes_read = 0
        self.scan_budget: int | None = None

    def read(self, raw_events: Iterable[RawEvent]) -> Iterator[Transaction | OpenRows]:
        """Yield each committed transaction of the stream, in log order (and, with
        ``max_open_changes``, the rows of a large one before its commit)."""
        for raw in raw_events:
            if raw.file != self.file:
                self.file = raw.file
                self.parser.file = raw.file
            if raw.artificial:
                # Only a re-sent format description matters: it says how to read what follows.
                if raw.data[4] == EventType.FORMAT_DESCRIPTION:
                    self.parser.parse(raw.data, raw.pos)
                continue
            event = self.parser.parse(raw.data, raw.pos)
            end = Position(raw.file, raw.pos + len(raw.data))
            self.last_position = end
            yield from self._handle(event, Position(raw.file, raw.pos), end)

    def read_runs(self, items: Iterable[RawEvent | EventRun]) -> Iterator[Transaction | OpenRows | NativeRun]:
        """``read``, for a stream that hands out runs of whole events too: whole transactions of
        a run the native reader takes come as one ``NativeRun``; the rest as ``read`` gives them.
        A transaction a run ends inside of waits for the next run of the file (up to a bound)."""
        left: EventRun | None = None
        stream = iter(items)
        while True:
            try:
                item = next(stream)
            except StopIteration:
                break
            except LoaderError:  # the stream broke off: what came before it is read first
                if left is not None:
                    yield from self._run(left, last=True)
                raise
            if isinstance(item, EventRun):
                if left is not None and left.file == item.file and len(left.data) < _CARRY_BYTES:
                    item = joined(left, item)
                elif left is not None:
                    yield from self._run(left, last=True)
                left = yield from self._run(item)
            else:
                if left is not None:
                    yield from self._run(left, last=True)
                    left = None
                yield from self._counted(self.read((item,)))
        if left is not None:
            yield from self._run(left, last=True)

    def _counted(self, items: Iterator[Transaction | OpenRows]) -> Iterator[Transaction | OpenRows]:
        for item in items:
            self.changes_read += (
                item.change_count
                if isinstance(item, Transaction)
                else sum(b.change_count for b in item.batches)
            )
            yield item

    def _run(
        self, run: EventRun, last: bool = False
    ) -> Generator[Transaction | OpenRows | NativeRun, None, EventRun | None]:
        """The transactions of a run; what is left of it when it ends inside a transaction the
        native reader would take with the next run (not the ``last``)."""
        if run.file != self.file:
            self.file = run.file
            self.parser.file = run.file
        data, off = run.data, 0
        try:
            base = seqno_of(run.file, 0, self.seqno_epoch)
        except LoaderError:  # a file name without a number: the Python reader says so at a commit
            base = None
        while off < len(data):
            scanner = self._scanner_now() if self._open is None and base is not None else None
            if scanner is not None:
                budget = 1 << 62 if self.scan_budget is None else self.scan_budget - self.changes_read
                most = 1 << 62 if self.max_open_changes is None else self.max_open_changes - 1
                assert base is not None
                result = scanner.scan(
                    data,
                    off,
                    base,
                    run.pos,
                    run.gap_offsets,
                    run.gap_positions,
                    max(budget, 1),
                    most,
                    run.file.encode() if self.native_json else None,
                )
                took = result.consumed > off
                if took:
                    yield self._native_run(run, result)
                    off = result.consumed
                if result.stop == "end" and off < len(data) and not last:
                    return run.rest(off)
                if took:
                    continue
            # One event the Python reader reads: it may open the transaction the native one
            # left (and read it to its end), or lie between two.
            raw = run.event_at(off)
            yield from self._counted(self.read((raw,)))
            off += len(raw.data)
        return None

    def _scanner_now(self) -> Scanner | None:
        """The native reader for the format description in force (a new one forgets the
        plans, which register again with it as they are compiled)."""
        if self.parser.fde is not self._scanner_fde:
            from loader._native import Scanner

            self._scanner_fde = self.parser.fde
            self._scanner = Scanner(self.parser.checksum, self.parser.fde.post_header_lengths)
            self._forget_plans()
        return self._scanner

    def _forget_plans(self) -> None:
        self._plans.clear()
        self._scan_plans = []
        if self._scanner is not None:
            self._scanner.clear()

    def _native_run(self, run: EventRun, result: ScanResult) -> NativeRun:
        for domain, server_id, seq_no in result.gtids:
            self.gtid_state[domain] = f"{domain}-{server_id}-{seq_no}"
        for sid, first, last in result.mysql_gtids:
            self.mysql_gtids.add_range(uuid_text(sid), "", first, last)
        last_txn = None
        if result.last_gtid is not None:
            gtid = run.event_at(result.last_gtid)
            last_txn = of_event(self.parser.parse(gtid.data, gtid.pos), Position(gtid.file, gtid.pos))
        end = Position(run.file, result.end_pos)
        self.last_position = end
        self.changes_read += result.changes
        return NativeRun(run, end, result, tuple(self._scan_plans), last_txn)

    @property
    def open_since(self) -> Position | None:
        """Where the transaction left unfinished by the last event read started, if one was."""
        return self._open.start if self._open is not None else None

    def _handle(self, event: ev.Event, pos: Position, end: Position) -> Iterator[Transaction | OpenRows]:
        body = event.body
        h = event.header
        if isinstance(body, ev.Rows):
            self._rows(body, pos)
            tx = self._open
            if (
                self.max_open_changes
                and tx is not None
                and tx.row_id - tx.handed_out >= self.max_open_changes
                and not tx.savepoints  # a ROLLBACK TO may still take back rows after one
            ):
                yield OpenRows(tx.batches)
                tx.batches, tx.handed_out = [], tx.row_id
        elif isinstance(body, ev.Xid):
            yield from self._commit(end, h.timestamp)
        elif isinstance(body, ev.Query):
            yield from self._query(body, pos, end, h.timestamp)
        elif isinstance(body, ev.Gtid):
            yield from self._drop_open()
            tx = self._start(pos)
            tx.gtid = body.text()
            if not body.anonymous:
                self.mysql_gtids.add_range(body.sid, body.tag, body.gno, body.gno)
            tx.commit_ts = body.original_commit_ts
            tx.fingerprint = of_event(event, pos)
        elif isinstance(body, ev.MariaGtid):
            yield from self._drop_open()
            tx = self._start(pos)
            tx.gtid = body.text(h.server_id)
            self.gtid_state[body.domain_id] = tx.gtid
            tx.standalone = body.standalone
            tx.began = not body.standalone  # a group that ends in its commit, as after BEGIN
            tx.fingerprint = of_event(event, pos)
        elif isinstance(body, ev.TransactionPayload):
            yield from self._payload(body, pos, end)
        elif isinstance(body, ev.XaPrepare):
            if not body.one_phase:
                raise DecodeError(
                    "XA PREPARE: two-phase XA transactions are not supported (their rows commit later)",
                    str(pos),
                    "XA_PREPARE",
                )
            yield from self._commit(end, h.timestamp)
        elif isinstance(body, ev.Incident):
            raise IncidentError(
                f"{pos}: incident event {body.code} ({body.message or 'no message'}): the server lost "
                "changes here; load the affected tables again with a new initial load"
            )
        elif isinstance(body, ev.FormatDescription):
            self._forget_plans()
        elif isinstance(body, ev.Skipped) and body.reason.startswith(("unknown", "ignorable")):
            log.warning("skipped %s at %s", body.reason, pos)

    def _drop_open(self) -> Iterator[OpenRows]:
        """A transaction that never committed (the next one starts): forget what it handed out."""
        if self._open is not None and self._open.handed_out:
            yield OpenRows([], rolled_back=True)
        self._open = None

    def _start(self, pos: Position) -> _Open:
        self._open = _Open(start=pos)
        return self._open

    def _query(
        self, q: ev.Query, pos: Position, end: Position, timestamp: int
    ) -> Iterator[Transaction | OpenRows]:
        text = q.query
        if _BEGIN.match(text):
            (self._open or self._start(pos)).began = True
            return
        if _COMMIT.match(text):
            yield from self._commit(end, timestamp)
            return
        if _ROLLBACK.match(text):
            yield from self._rollback(pos)
            return
        current = self._open
        if current is not None and current.began and not _XA_COMMIT.match(text):
            if m := _SAVEPOINT.match(text):
                name = _savepoint_name(m.group(1))
                current.savepoints = [sp for sp in current.savepoints if sp[0] != name]
                current.savepoints.append((name, len(current.batches)))
            elif m := _ROLLBACK_TO.match(text):
                self._rollback_to(current, _savepoint_name(m.group(1)), pos)
            elif m := _RELEASE.match(text):
                names = [sp[0] for sp in current.savepoints]  # unique: a name set again moves
                name = _savepoint_name(m.group(1))
                if name in names:
                    del current.savepoints[names.index(name) :]
            elif not _XA_END.match(text):
                current.statements.append(Statement(q.schema, text, pos))
                self._forget_tables(q.schema)  # CREATE TABLE ... SELECT: its rows follow
            return
        # A statement of its own: DDL, TRUNCATE, XA COMMIT of a prepared transaction, ...
        (current or self._start(pos)).statements.append(Statement(q.schema, text, pos))
        self._forget_tables(q.schema)
        yield from self._commit(end, timestamp)

    def _forget_tables(self, schema: str) -> None:
        """After a statement, which may have changed any table: plans are compiled again, from
        fresh schemas."""
        self._forget_plans()
        if self.schema is not None and schema:
            self.schema.invalidate(schema)

    def _rollback(self, pos: Position) -> Iterator[OpenRows]:
        """A group that ends in ROLLBACK (it changed a non-transactional table too): its rows
        are undone (in row format the server logs non-transactional rows in groups of their own).

        Raises:
            DecodeError: it holds rows of a table the source reports as non-transactional.
        """
        if self._open is not None:
            self._check_undone(self._open, self._open.batches, "ROLLBACK", pos)
        yield from self._drop_open()

    def _rollback_to(self, tx: _Open, name: str, pos: Position) -> None:
        """``ROLLBACK TO SAVEPOINT name``: the rows since that savepoint are undone; the
        savepoints set after it go, it stays.

        Raises:
            DecodeError: no such savepoint in the transaction (which rows it undid is unknown),
                or rows it undid belong to a table the source reports as non-transactional.
        """
        names = [sp[0] for sp in tx.savepoints]
        if name not in names:
            tables = sorted({(b.table.schema, b.table.table) for b in tx.batches})
            raise DecodeError(
                f"ROLLBACK TO SAVEPOINT {name} without that savepoint in the transaction that starts at "
                f"{tx.start}: the rows it undid cannot be told"
                + (f"; {reload_remedy(*tables)}" if tables else ""),
                str(pos),
                "QUERY",
            )
        at = names.index(name)  # unique: a name set again moves
        index = tx.savepoints[at][1]
        self._check_undone(tx, tx.batches[index:], f"ROLLBACK TO SAVEPOINT {name}", pos)
        del tx.batches[index:]
        del tx.savepoints[at + 1 :]

    def _check_undone(self, tx: _Open, undone: list[RowsBatch], what: str, pos: Position) -> None:
        """Refuse to undo rows of a table whose engine the source reports as non-transactional:
        such rows stay on the source, unless its engine changed since they were logged (which
        the log does not tell), and in row format the server logs them in groups of their own."""
        kept = sorted(
            {(b.table.schema, b.table.table) for b in undone if self._transactional(b.table) is False}
        )
        if kept:
            names = ", ".join(f"{schema}.{table}" for schema, table in kept)
            raise DecodeError(
                f"{what} in the transaction that starts at {tx.start} undid rows of {names}, whose engine "
                "the source reports as non-transactional now: whether the source kept them cannot be told "
                f"from the log (an ALTER TABLE ... ENGINE since they were written?); {reload_remedy(*kept)}",
                str(pos),
                "QUERY",
            )

    def _transactional(self, table: TablePlan) -> bool | None:
        """Whether the source's engine of ``table`` rolls back now; None when not known."""
        source = self.schema.get(table.schema, table.table) if self.schema is not None else None
        return source.transactional if source is not None else None

    def _rows(self, rows: ev.Rows, pos: Position) -> None:
        tx = self._open or self._start(pos)
        if self.skip_before:
            tm = self.parser.tables.get(rows.table_id)
            until = self.skip_before.get((tm.schema, tm.table)) if tm is not None else None
            if until is not None and tx.start < until:
                return
        plan, native = self._plan(rows.table_id, pos)
        if plan is None:
            return
        encoded = self._encode(native, rows, plan, pos) if native is not None else None
        if encoded is not None:
            batch = RowsBatch(plan, rows.kind, [], tx.row_id, pos, encoded)
        else:
            batch = RowsBatch(plan, rows.kind, plan.decode(rows, str(pos)), tx.row_id, pos)
        tx.batches.append(batch)
        tx.row_id += batch.change_count

    def _encode(self, native: RowPlan, rows: ev.Rows, plan: TablePlan, pos: Position) -> EncodedRows | None:
        """The native decoder's staging rows of a rows event; None where the Python decoder
        must speak: images lacking columns, partial JSON, bytes the native path refuses (the
        Python decoder names the row and column, or decodes them and its writer refuses them)."""
        columns = len(plan.columns)
        full = (1 << columns) - 1
        if (
            rows.partial
            or rows.column_count != columns
            or rows.present & full != full
            or (rows.kind == "U" and rows.present_after & full != full)
        ):
            return None
        try:
            if self.native_json:
                return native.encode_json(rows.data, rows.rows_off, rows.kind, json_keys(plan.names))
            return native.encode(rows.data, rows.rows_off, rows.kind)
        except ValueError:
            return None
        except BaseException as exc:  # a panic in the native module: a bug, never a crash
            if type(exc).__name__ != "PanicException":
                raise
            log.warning("the native decoder failed at %s (%s); the Python decoder takes these rows", pos, exc)
            return None

    def _plan(self, table_id: int, pos: Position) -> tuple[TablePlan | None, RowPlan | None]:
        tm = self.parser.tables.get(table_id)
        if tm is None:
            raise DecodeError(f"rows event for table id {table_id} without a table map before it", str(pos))
        cached = self._plans.get(id(tm))
        if cached is not None and cached[0] is tm:
            return cached[1], cached[2]
        plan: TablePlan | None = None
        if self.table_filter is None or self.table_filter(tm.schema, tm.table):
            source = None
            if self.schema is not None and (not tm.has_full_metadata or self._needs_fsp(tm)):
                source = self.schema.get(tm.schema, tm.table)
                if source is None and self.strict:
                    raise DecodeError(f"table {tm.qualified} is not in the source schema", str(pos))
            try:
                plan = compile_plan(tm, source, strict=self.strict, mariadb=self.parser.fde.is_mariadb)
            except DecodeError as exc:
                raise DecodeError(exc.message, str(pos), "TABLE_MAP") from None
        native = native_plan(plan) if self.native and plan is not None else None
        if len(self._plans) > 4096:
            self._forget_plans()
        self._plans[id(tm)] = (tm, plan, native)
        key = self.parser.table_keys.get(table_id)
        if self._scanner is not None and key is not None:
            if plan is None or native is None:
                self._scanner.register_other(key, python=plan is not None)
            else:
                number = self._scan_tables.setdefault((plan.schema, plan.table), len(self._scan_tables))
                # The scanner numbers its plans as they come, as this list does.
                json = None
                if self.native_json:
                    schema, table = json_keys((plan.schema, plan.table))
                    json = (json_keys(plan.names), schema, table)
                self._scanner.register_native(key, native, number, json)
                self._scan_plans.append(plan)
        return plan, native

    def _needs_fsp(self, tm: ev.TableMap) -> bool:
        """MariaDB's pre-10.1 temporal columns hide their precision even from full metadata."""
        return self.parser.fde.is_mariadb and any(c.type in _OLD_TEMPORAL for c in tm.columns)

    def _commit(self, end: Position, timestamp: int) -> Iterator[Transaction]:
        tx = self._open
        self._open = None
        if tx is None:
            return
        yield Transaction(
            start=tx.start,
            end=end,
            seqno=seqno_of(end.file, end.pos, self.seqno_epoch),
            commit_ts=tx.commit_ts or timestamp * 1_000_000,
            gtid=tx.gtid,
            batches=tx.batches,
            statements=tx.statements,
            fingerprint=tx.fingerprint,
        )

    def _payload(
        self, payload: ev.TransactionPayload, pos: Position, end: Position
    ) -> Iterator[Transaction | OpenRows]:
        """Inner events of a compressed transaction: no CRC32, positions of the outer event."""
        data = payload.payload
        off = 0
        while off < len(data):
            if off + 19 > len(data):
                raise DecodeError(
                    "transaction payload ends inside an event header", str(pos), "TRANSACTION_PAYLOAD"
                )
            size = int.from_bytes(data[off + 9 : off + 13], "little")
            if size < 19 or off + size > len(data):
                raise DecodeError(
                    f"inner event of {size} bytes runs past the transaction payload",
                    str(pos),
                    "TRANSACTION_PAYLOAD",
                )
            inner = self.parser.parse(data[off : off + size], pos.pos, in_payload=True)
            off += size
            # Every inner event sits at the outer event's position; the commit ends where it ends.
            yield from self._handle(inner, pos, end)


@functools.lru_cache(maxsize=1024)
def json_keys(names: tuple[str, ...]) -> tuple[bytes, ...]:
    """Column names as JSON text, as ``binlog show``'s objects key them."""
    return tuple(json.dumps(name, ensure_ascii=False).encode() for name in names)


def _savepoint_name(text: str) -> str:
    """A savepoint's name as the server compares it: unquoted, case-insensitive."""
    name = text.strip()
    if len(name) >= 2 and name[0] == name[-1] == "`":
        name = name[1:-1].replace("``", "`")
    return name.lower()
