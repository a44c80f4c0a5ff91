"""A table's staging files as an interval's decoding writes them: its change rows as CSV parts (``op,
seqno, row_id, commit_ts, <columns>``, an update as its D then its I), a new part per column layout
and past ``[staging] part_bytes``, each part's checksum taken as it is written; then published
under the interval's folder for the manifest. A transaction's rows not committed yet wait on disk.
"""

from __future__ import annotations

import bisect
import gzip
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

from loader.binlog.constants import ColumnType
from loader.binlog.rowplan import PlanColumn, TablePlan
from loader.binlog.transactions import RowsBatch
from loader.core.errors import ExtractError
from loader.core.naming import reserved_column_problem
from loader.core.tables import reload_remedy
from loader.staging import checksums, csvformat, layout
from loader.staging.manifest import ColumnSpec, FileEntry, TableEntry
from loader.staging.stores import Store
from loader.warehouse import types

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def commit_ts_text(micros: int) -> str:
    """A commit time as the staging files write it: UTC, microseconds."""
    return (_EPOCH + timedelta(microseconds=micros)).strftime("%Y-%m-%d %H:%M:%S.%f")


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
