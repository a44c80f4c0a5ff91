"""Per-table row plans: compiled once per table map, used for every row of that table.

A plan resolves each column's name, signedness, charset and labels (from the table map's full
metadata, else from the source schema), picks one value reader per column, and decodes the
row images of rows events with no per-value type dispatch.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loader.binlog.charsets import BINARY_COLLATION, codec_for_charset
from loader.binlog.constants import GEOMETRY_TYPE_NAMES, ColumnType, column_type_name
from loader.binlog.events import Column, Rows, TableMap
from loader.binlog.rowcode import (
    Date,
    Datetime2,
    EnumLabel,
    Fixed,
    ImageDecoder,
    Inline,
    Prefixed,
    compile_image_decoder,
)
from loader.binlog.schema import SourceColumn, SourceTable
from loader.binlog.values import Reader, jsonb, lenenc, numeric, strings, temporal
from loader.binlog.values.decimal import decimal_reader
from loader.core.errors import DecodeError
from loader.core.tables import reload_remedy


class _Absent:
    """A column not present in a row image (MINIMAL/NOBLOB row images)."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()
# What a value reader raises on bytes that are not a valid value.
VALUE_ERRORS = (IndexError, ValueError, UnicodeDecodeError, OverflowError, KeyError, TypeError, struct.error)


@dataclass(frozen=True, slots=True)
class JsonDiff:
    """A partial JSON update that could not be applied (no before image): the diffs themselves."""

    diffs: tuple[tuple[int, list[str | int], Any], ...]

    def describe(self) -> list[dict[str, Any]]:
        """The diffs as plain data: operation, path, and the new value as JSON text."""
        ops = {jsonb.DIFF_REPLACE: "replace", jsonb.DIFF_INSERT: "insert", jsonb.DIFF_REMOVE: "remove"}
        out: list[dict[str, Any]] = []
        for op, path, value in self.diffs:
            text = "$" + "".join(f"[{p}]" if isinstance(p, int) else "." + json.dumps(p) for p in path)
            item: dict[str, Any] = {"op": ops[op], "path": text}
            if op != jsonb.DIFF_REMOVE:
                item["value"] = jsonb.dumps(value)
            out.append(item)
        return out


Row = tuple[Any, ...]

_COMPATIBLE: dict[int, frozenset[str]] = {
    ColumnType.TINY: frozenset({"tinyint", "bool", "boolean"}),
    ColumnType.SHORT: frozenset({"smallint"}),
    ColumnType.INT24: frozenset({"mediumint"}),
    ColumnType.LONG: frozenset({"int", "integer"}),
    ColumnType.LONGLONG: frozenset({"bigint"}),
    ColumnType.FLOAT: frozenset({"float"}),
    ColumnType.DOUBLE: frozenset({"double", "real", "double precision"}),
    ColumnType.NEWDECIMAL: frozenset({"decimal", "numeric"}),
    ColumnType.YEAR: frozenset({"year"}),
    ColumnType.DATE: frozenset({"date"}),
    ColumnType.TIME: frozenset({"time"}),
    ColumnType.TIME2: frozenset({"time"}),
    ColumnType.DATETIME: frozenset({"datetime"}),
    ColumnType.DATETIME2: frozenset({"datetime"}),
    ColumnType.TIMESTAMP: frozenset({"timestamp"}),
    ColumnType.TIMESTAMP2: frozenset({"timestamp"}),
    ColumnType.VARCHAR: frozenset({"varchar", "varbinary"}),
    ColumnType.VAR_STRING: frozenset({"varchar", "varbinary"}),
    ColumnType.STRING: frozenset({"char", "binary", "uuid", "inet6", "inet4"}),
    ColumnType.ENUM: frozenset({"enum"}),
    ColumnType.SET: frozenset({"set"}),
    ColumnType.BIT: frozenset({"bit"}),
    ColumnType.BLOB: frozenset(
        {"tinyblob", "blob", "mediumblob", "longblob", "tinytext", "text", "mediumtext", "longtext", "json"}
    ),
    ColumnType.JSON: frozenset({"json"}),
    ColumnType.GEOMETRY: GEOMETRY_TYPE_NAMES,
    ColumnType.VECTOR: frozenset({"vector"}),
}
_TEMPORAL_OLD = frozenset({ColumnType.TIME, ColumnType.DATETIME, ColumnType.TIMESTAMP})
_INT_TYPES = frozenset(
    {ColumnType.TINY, ColumnType.SHORT, ColumnType.INT24, ColumnType.LONG, ColumnType.LONGLONG}
)
_TEMPORAL_WORDS: dict[int, str] = {
    ColumnType.TIME: "time",
    ColumnType.TIME2: "time",
    ColumnType.DATETIME: "datetime",
    ColumnType.DATETIME2: "datetime",
    ColumnType.TIMESTAMP: "timestamp",
    ColumnType.TIMESTAMP2: "timestamp",
}
_TYPE_WORDS: dict[int, str] = {
    ColumnType.TINY: "tinyint",
    ColumnType.SHORT: "smallint",
    ColumnType.INT24: "mediumint",
    ColumnType.LONG: "int",
    ColumnType.LONGLONG: "bigint",
    ColumnType.FLOAT: "float",
    ColumnType.DOUBLE: "double",
    ColumnType.YEAR: "year",
    ColumnType.DATE: "date",
    ColumnType.NEWDATE: "date",
    ColumnType.JSON: "json",
    ColumnType.ENUM: "enum",
    ColumnType.SET: "set",
    ColumnType.GEOMETRY: "geometry",
    ColumnType.VECTOR: "vector",
}


@dataclass(frozen=True, slots=True)
class PlanColumn:
    """A column as the plan decodes it."""

    index: int
    name: str
    type: int  # the real type (ENUM/SET/STRING resolved)
    meta: int
    unsigned: bool
    charset: str | None  # None: binary / not a character column
    labels: tuple[str, ...] | None
    fsp: int

    @property
    def type_name(self) -> str:
        return column_type_name(self.type)

    @property
    def mysql_type(self) -> str:
        """The column's MySQL type as far as the values need it: ``int unsigned``,
        ``decimal(12,2)``, ``datetime(6)``, ``varchar``, ``varbinary``, ``bit(13)``..."""
        t = self.type
        base = _TYPE_WORDS.get(t)
        if base is not None:
            return f"{base} unsigned" if self.unsigned and t in _INT_TYPES else base
        if t == ColumnType.NEWDECIMAL:
            return f"decimal({self.meta >> 8},{self.meta & 0xFF})"
        word = _TEMPORAL_WORDS.get(t)
        if word is not None:
            fsp = (
                self.meta
                if t in (ColumnType.TIME2, ColumnType.DATETIME2, ColumnType.TIMESTAMP2)
                else self.fsp
            )
            return f"{word}({fsp})" if fsp else word
        if t in (ColumnType.VARCHAR, ColumnType.VAR_STRING):
            return "varbinary" if self.charset is None else "varchar"
        if t == ColumnType.STRING:
            return f"binary({strings.string_meta(self.meta)[1]})" if self.charset is None else "char"
        if t == ColumnType.BLOB:
            return "blob" if self.charset is None else "text"
        if t == ColumnType.BIT:
            return f"bit({(self.meta >> 8) * 8 + (self.meta & 0xFF)})"
        return column_type_name(t).lower()


@dataclass(slots=True)
class TablePlan:
    """The compiled decoder of one table map."""

    schema: str
    table: str
    table_id: int
    columns: tuple[PlanColumn, ...]
    primary_key: tuple[str, ...]
    readers: tuple[Reader, ...]
    json_columns: frozenset[int]
    strict: bool = True
    # The generated decoder of an image holding every column, compiled on its first use from
    # ``image_columns``: most tables' rows are the native reader's, and a plan is made for each
    # table in each range a process decodes (compiling took ~0.2 ms a table).
    image_columns: tuple[list[tuple[Inline | None, Reader]], list[bool]] | None = None
    full_image: ImageDecoder | None = None
    _subsets: dict[int, tuple[tuple[int, Reader], ...]] = field(default_factory=dict)

    def _full_image(self) -> ImageDecoder | None:
        if self.image_columns is not None:
            self.full_image = compile_image_decoder(*self.image_columns)
            self.image_columns = None
        return self.full_image

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def _present(self, bitmap: int) -> tuple[tuple[int, Reader], ...]:
        subset = self._subsets.get(bitmap)
        if subset is None:
            subset = tuple((i, r) for i, r in enumerate(self.readers) if bitmap >> i & 1)
            self._subsets[bitmap] = subset
        return subset

    def decode(self, ev: Rows, where: str) -> list[tuple[Row | None, Row | None]]:
        """Decode every row of a rows event into (before, after) pairs.

        Raises:
            DecodeError: naming ``where`` (file:position), the table and the column.
        """
        ncols = len(self.columns)
        if ev.column_count != ncols:
            raise DecodeError(
                f"rows event has {ev.column_count} columns, the table map of {self.qualified} has {ncols}",
                where,
            )
        data = ev.data
        end = len(data)
        off = ev.rows_off
        full = (1 << ncols) - 1
        out: list[tuple[Row | None, Row | None]] = []
        kind = ev.kind
        # Servers may set the unused high bits of the last bitmap byte.
        present, present_after = ev.present & full, ev.present_after & full
        if self.strict and (present != full or (kind == "U" and present_after != full)):
            raise DecodeError(
                f"a row image of {self.qualified} lacks columns (a session logged it with "
                "binlog_row_image=MINIMAL or NOBLOB); set binlog_row_image=FULL for every session that "
                f"writes to it, then {reload_remedy((self.schema, self.table))}",
                where,
            )
        if kind != "U" and present == full and self._full_image() is not None:
            return self._decode_full(ev, where)
        try:
            while off < end:
                if kind == "I":
                    after, off = self._image(data, off, present, full)
                    out.append((None, after))
                elif kind == "D":
                    before, off = self._image(data, off, present, full)
                    out.append((before, None))
                else:
                    before, off = self._image(data, off, present, full)
                    if ev.partial:
                        after, off = self._partial_after(data, off, present_after, before)
                    else:
                        after, off = self._image(data, off, present_after, full)
                    out.append((before, after))
        except DecodeError:
            raise
        except VALUE_ERRORS as exc:
            raise self._row_error(ev, len(out), exc, where) from None
        return self._finished(off, end, out, where)

    def _decode_full(self, ev: Rows, where: str) -> list[tuple[Row | None, Row | None]]:
        """The common case: inserts or deletes with every column in the image."""
        data, off, end = ev.data, ev.rows_off, len(ev.data)
        decode = self.full_image
        assert decode is not None
        out: list[tuple[Row | None, Row | None]] = []
        append = out.append
        insert = ev.kind == "I"
        try:
            while off < end:
                row, off = decode(data, off)
                append((None, row) if insert else (row, None))
        except VALUE_ERRORS as exc:
            raise self._row_error(ev, len(out), exc, where) from None
        return self._finished(off, end, out, where)

    def _row_error(self, ev: Rows, row: int, exc: Exception, where: str) -> DecodeError:
        column = self._locate(ev.data, ev, row)
        return DecodeError(f"cannot decode row {row} of {self.qualified}{column}: {exc}", where)

    def _finished(
        self, off: int, end: int, out: list[tuple[Row | None, Row | None]], where: str
    ) -> list[tuple[Row | None, Row | None]]:
        if off != end:
            raise DecodeError(f"rows of {self.qualified} overrun their event by {off - end} bytes", where)
        return out

    def _image(self, data: bytes, off: int, present: int, full: int) -> tuple[Row, int]:
        decode = self._full_image() if present == full else None
        if decode is not None:
            return decode(data, off)
        subset = self._present(present)
        nb = (len(subset) + 7) >> 3
        if off + nb > len(data):
            raise IndexError("null bitmap runs past the event")
        nulls = int.from_bytes(data[off : off + nb], "little")
        off += nb
        row_list: list[Any] = [ABSENT] * len(self.readers)
        for n, (i, read) in enumerate(subset):
            if nulls >> n & 1:
                row_list[i] = None
            else:
                row_list[i], off = read(data, off)
        return tuple(row_list), off

    def _partial_after(self, data: bytes, off: int, present: int, before: Row) -> tuple[Row, int]:
        options, off = lenenc(data, off)
        if not options & 1:
            return self._image(data, off, present, (1 << len(self.readers)) - 1)
        json_present = [i for i, _ in self._present(present) if i in self.json_columns]
        nb = (len(json_present) + 7) >> 3
        partial_bits = int.from_bytes(data[off : off + nb], "little")
        off += nb
        partial = {i for n, i in enumerate(json_present) if partial_bits >> n & 1}
        subset = self._present(present)
        nb = (len(subset) + 7) >> 3
        nulls = int.from_bytes(data[off : off + nb], "little")
        off += nb
        row: list[Any] = [ABSENT] * len(self.readers)
        for n, (i, read) in enumerate(subset):
            if nulls >> n & 1:
                row[i] = None
            elif i in partial:
                size = self.columns[i].meta
                length = int.from_bytes(data[off : off + size], "little")
                start = off + size
                off = start + length
                if off > len(data):
                    raise IndexError("JSON diff runs past the event")
                base = before[i]
                diffs = jsonb.parse_diffs(data[start:off])
                if isinstance(base, str):
                    doc = jsonb.loads(base)
                    row[i] = jsonb.dumps(jsonb.apply_diffs(doc, diffs))
                elif self.strict:
                    raise ValueError(
                        "a partial JSON update without the column's before image cannot be applied "
                        "(the source needs binlog_row_image=FULL)"
                    )
                else:
                    row[i] = JsonDiff(tuple(diffs))
            else:
                row[i], off = read(data, off)
        return tuple(row), off

    def _locate(self, data: bytes, ev: Rows, row_index: int) -> str:
        """Find the column a failed row broke on, by decoding again column by column."""
        off = ev.rows_off
        try:
            for n in range(row_index + 1):
                images = 1 if ev.kind in "ID" else 2
                for image in range(images):
                    present = ev.present if image == 0 else ev.present_after
                    if image == 1 and ev.partial:
                        _, off = self._partial_after(data, off, present, (None,) * len(self.readers))
                        continue
                    subset = self._present(present)
                    nb = (len(subset) + 7) >> 3
                    nulls = int.from_bytes(data[off : off + nb], "little")
                    off += nb
                    for k, (i, read) in enumerate(subset):
                        if nulls >> k & 1:
                            continue
                        try:
                            _, off = read(data, off)
                        except Exception:
                            if n == row_index:
                                c = self.columns[i]
                                return f", column {c.name} ({c.type_name})"
                            raise
        except Exception:
            return ""
        return ""


def _column_error(tm: TableMap, name: str, message: str) -> DecodeError:
    return DecodeError(f"{tm.qualified} column {name}: {message}")


def compile_plan(
    tm: TableMap, source: SourceTable | None, *, strict: bool, mariadb: bool = False
) -> TablePlan:
    """Compile the decoder of a table map.

    Args:
        tm: the table map.
        source: the table's schema from the source, when the table map lacks full metadata.
        strict: refuse to decode what cannot be decoded exactly (unknown names, signedness,
            charsets, labels); when False, positional names ``@1``... and raw values are used.
        mariadb: the binlog was written by MariaDB (old-type temporals may be "hires").

    Raises:
        DecodeError: naming the table and column that cannot be decoded, or a schema mismatch.
    """
    if source is not None and len(source.columns) != len(tm.columns):
        raise DecodeError(
            f"{tm.qualified}: the binlog has {len(tm.columns)} columns but the source schema has "
            f"{len(source.columns)}; the table changed after this event was written"
        )
    columns: list[PlanColumn] = []
    readers: list[Reader] = []
    inlines: list[Inline | None] = []
    for col in tm.columns:
        src = source.columns[col.index] if source is not None else None
        pc = _resolve(tm, col, src, strict=strict)
        columns.append(pc)
        readers.append(_reader(tm, pc, col, src, strict=strict, mariadb=mariadb))
        inlines.append(_inline(tm, pc, col))
    if tm.primary_key is not None:
        pk = tuple(columns[i].name for i in tm.primary_key)
    elif source is not None:
        pk = source.primary_key
    else:
        pk = ()
    return TablePlan(
        tm.schema,
        tm.table,
        tm.table_id,
        tuple(columns),
        pk,
        tuple(readers),
        frozenset(c.index for c in columns if c.type == ColumnType.JSON),
        strict,
        (list(zip(inlines, readers, strict=True)), [not c.nullable for c in tm.columns]),
    )


_INT_FORMATS = {1: "b", 2: "h", 4: "i", 8: "q"}


def _inline(tm: TableMap, pc: PlanColumn, col: Column) -> Inline | None:
    """How the generated decoder reads a column in place, when it can (see ``rowcode``)."""
    t = pc.type
    size = INT_SIZES.get(t)
    if size is not None and size != 3:
        fmt = _INT_FORMATS[size]
        return Fixed("<" + (fmt.upper() if pc.unsigned else fmt), size)
    if t == ColumnType.FLOAT:
        return Fixed("<f", 4)
    if t == ColumnType.DOUBLE:
        return Fixed("<d", 8)
    if t in (ColumnType.VARCHAR, ColumnType.VAR_STRING):
        return Prefixed(1 if col.meta < 256 else 2, _codec(tm, pc))
    if t == ColumnType.STRING and pc.charset is not None:
        max_len = strings.string_meta(col.meta)[1]
        return Prefixed(1 if max_len < 256 else 2, _codec(tm, pc))
    if t == ColumnType.BLOB:
        return Prefixed(col.meta, _codec(tm, pc))
    if t in (ColumnType.GEOMETRY, ColumnType.VECTOR):
        return Prefixed(col.meta, None)
    if t == ColumnType.DATETIME2:
        return Datetime2(col.meta)
    if t in (ColumnType.DATE, ColumnType.NEWDATE):
        return Date()
    if t == ColumnType.ENUM and pc.labels is not None:
        size = strings.string_meta(col.meta)[1]
        return EnumLabel(size, pc.labels) if size in (1, 2) else None
    return None


def _resolve(tm: TableMap, col: Column, src: SourceColumn | None, *, strict: bool) -> PlanColumn:
    name = col.name or (src.name if src else None)
    if name is None:
        if strict:
            raise DecodeError(
                f"{tm.qualified}: column #{col.index + 1} has no name in the binlog and no source "
                "schema was given (set binlog_row_metadata=FULL or let the loader read the schema)"
            )
        name = f"@{col.index + 1}"
    real = col.real_type
    if src is not None:
        allowed = _COMPATIBLE.get(real)
        if allowed is not None and src.data_type not in allowed:
            raise _column_error(
                tm,
                name,
                f"the binlog has type {column_type_name(real)} but the source schema says "
                f"{src.data_type}; the table changed after this event was written",
            )
    unsigned = col.unsigned if col.unsigned is not None else (src.unsigned if src else None)
    charset: str | None = None
    if real in (ColumnType.ENUM, ColumnType.SET):
        if col.collation is not None:
            charset = _charset_name(tm, name, col.collation)
        elif src is not None:
            charset = src.charset
    elif real in (ColumnType.VARCHAR, ColumnType.VAR_STRING, ColumnType.STRING, ColumnType.BLOB):
        if col.collation is not None:
            charset = None if col.collation == BINARY_COLLATION else _charset_name(tm, name, col.collation)
        elif src is not None:
            charset = src.charset
        elif strict:
            raise _column_error(tm, name, "its charset is not in the binlog and no source schema was given")
        else:
            charset = "?"  # unknown: keep bytes
    labels = col.labels if col.labels is not None else (src.labels if src else None)
    if strict and real in (ColumnType.ENUM, ColumnType.SET) and labels is None:
        raise _column_error(
            tm, name, "its ENUM/SET members are not in the binlog and no source schema was given"
        )
    if (
        strict
        and unsigned is None
        and real
        in (
            ColumnType.TINY,
            ColumnType.SHORT,
            ColumnType.INT24,
            ColumnType.LONG,
            ColumnType.LONGLONG,
        )
    ):
        raise _column_error(tm, name, "its signedness is not in the binlog and no source schema was given")
    return PlanColumn(
        col.index,
        name,
        real,
        col.meta,
        bool(unsigned),
        charset,
        labels,
        src.fsp if src else 0,
    )


def _charset_name(tm: TableMap, name: str, collation: int) -> str:
    from loader.binlog.charsets import charset_of

    try:
        return charset_of(collation)
    except DecodeError as exc:
        raise _column_error(tm, name, str(exc)) from None


def _codec(tm: TableMap, pc: PlanColumn) -> str | None:
    if pc.charset in (None, "?", "binary"):
        return None
    try:
        return codec_for_charset(pc.charset)
    except DecodeError as exc:
        raise _column_error(tm, pc.name, str(exc)) from None


INT_SIZES: dict[int, int] = {
    ColumnType.TINY: 1,
    ColumnType.SHORT: 2,
    ColumnType.INT24: 3,
    ColumnType.LONG: 4,
    ColumnType.LONGLONG: 8,
}
_SIMPLE: dict[int, Callable[[], Reader]] = {
    ColumnType.FLOAT: numeric.float_reader,
    ColumnType.DOUBLE: numeric.double_reader,
    ColumnType.YEAR: numeric.year_reader,
    ColumnType.DATE: temporal.date_reader,
    ColumnType.NEWDATE: temporal.date_reader,
}


def _reader(
    tm: TableMap, pc: PlanColumn, col: Column, src: SourceColumn | None, *, strict: bool, mariadb: bool
) -> Reader:
    t = pc.type
    try:
        if t in INT_SIZES:
            return numeric.int_reader(INT_SIZES[t], pc.unsigned)
        if t in _SIMPLE:
            return _SIMPLE[t]()
        if t == ColumnType.NEWDECIMAL:
            return decimal_reader(col.meta)
        if t == ColumnType.BIT:
            return numeric.bit_reader(col.meta)
        if t in _TEMPORAL_OLD:
            return _old_temporal(tm, pc, src, strict=strict, mariadb=mariadb)
        if t == ColumnType.TIME2:
            return temporal.time2_reader(col.meta)
        if t == ColumnType.DATETIME2:
            return temporal.datetime2_reader(col.meta)
        if t == ColumnType.TIMESTAMP2:
            return temporal.timestamp2_reader(col.meta)
        if t in (ColumnType.VARCHAR, ColumnType.VAR_STRING):
            return strings.varchar_reader(col.meta, _codec(tm, pc))
        if t in (ColumnType.ENUM, ColumnType.SET):
            return strings.string_column_reader(col.meta, None, pc.labels, False)[1]
        if t == ColumnType.STRING:
            return strings.string_column_reader(col.meta, _codec(tm, pc), None, pc.charset is None)[1]
        if t in (ColumnType.BLOB, ColumnType.GEOMETRY, ColumnType.VECTOR):
            return strings.blob_reader(col.meta, _codec(tm, pc) if t == ColumnType.BLOB else None)
        if t == ColumnType.JSON:
            return _json_reader(col.meta)
    except ValueError as exc:
        raise _column_error(tm, pc.name, f"bad metadata {col.meta} for {pc.type_name}: {exc}") from None
    raise _column_error(tm, pc.name, f"column type {pc.type_name} ({t}) cannot be decoded")


def _old_temporal(
    tm: TableMap, pc: PlanColumn, src: SourceColumn | None, *, strict: bool, mariadb: bool
) -> Reader:
    fsp = src.fsp if src else 0
    if mariadb and src is None and strict:
        raise _column_error(
            tm,
            pc.name,
            f"MariaDB {pc.type_name} columns may carry fractional seconds the binlog does not describe; "
            "the source schema is needed",
        )
    hires: dict[int, Callable[[int], Reader]] = {
        ColumnType.TIME: temporal.maria_time_hires_reader,
        ColumnType.DATETIME: temporal.maria_datetime_hires_reader,
        ColumnType.TIMESTAMP: temporal.maria_timestamp_hires_reader,
    }
    if fsp:
        return hires[pc.type](fsp)
    plain: dict[int, Callable[[], Reader]] = {
        ColumnType.TIME: temporal.time_reader,
        ColumnType.DATETIME: temporal.datetime_reader,
        ColumnType.TIMESTAMP: temporal.timestamp_reader,
    }
    return plain[pc.type]()


def _json_reader(pack_len: int) -> Reader:
    raw = strings.blob_reader(pack_len, None)

    def read_json(buf: bytes, off: int) -> tuple[str, int]:
        data, off = raw(buf, off)
        assert isinstance(data, bytes)
        return jsonb.json_text(data), off

    return read_json
