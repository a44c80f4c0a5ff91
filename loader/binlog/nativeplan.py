"""A table plan for the native decoder (``loader._native``): each column as the Rust row path
reads it, chosen as ``rowplan._reader`` chooses the Python reader, and written as
``extract.files.csv_kind`` says the Python encoder writes it.

A table with a column the native path does not take (a charset of several bytes per character
other than UTF-8, UTF-16 and UTF-32; labels or a charset the binlog and the schema left
unknown) gets no native plan: its rows take the Python path, which is the reference. So do rows
events the native path refuses (partial JSON updates, bytes it is not sure to write as the
reference does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loader.binlog.charsets import byte_table, codec_for_charset
from loader.binlog.constants import ColumnType
from loader.binlog.rowplan import INT_SIZES, PlanColumn, TablePlan
from loader.binlog.values.strings import string_meta
from loader.core.errors import DecodeError

if TYPE_CHECKING:
    from loader._native import ColumnSpec, RowPlan

_PLAIN: dict[int, str] = {
    ColumnType.FLOAT: "float",
    ColumnType.DOUBLE: "double",
    ColumnType.YEAR: "year",
    ColumnType.DATE: "date",
    ColumnType.NEWDATE: "date",
}
_FSP: dict[int, str] = {
    ColumnType.TIME2: "time2",
    ColumnType.DATETIME2: "datetime2",
    ColumnType.TIMESTAMP2: "timestamp2",
}
_OLD_TEMPORAL: dict[int, str] = {
    ColumnType.TIME: "time",
    ColumnType.DATETIME: "datetime",
    ColumnType.TIMESTAMP: "timestamp",
}
# The Python codecs of the charsets the native path decodes exactly (``charsets``) -> its text
# encodings (binary is 0; 3 is a charset of one byte per character, its table given).
_TEXT = {"utf-8": 1, "ascii": 2, "utf-16-be": 4, "utf-16-le": 5, "utf-32-be": 6}
_BYTE_TABLE = 3


def column_spec(pc: PlanColumn) -> ColumnSpec | None:
    """``(kind, a, b, c, labels)`` of a column for ``loader._native.RowPlan``, or None when the
    native path does not decode it. A string column of a one-byte charset has ``b`` 3 and its
    ``labels`` the charset's 256 characters (``charsets.byte_table``)."""
    t, meta = pc.type, pc.meta
    if t in INT_SIZES:
        return ("int", INT_SIZES[t], int(pc.unsigned), 0, None)
    if t in _PLAIN:
        return (_PLAIN[t], 0, 0, 0, None)
    if t == ColumnType.NEWDECIMAL:
        return ("decimal", meta >> 8, meta & 0xFF, 0, None)
    if t == ColumnType.BIT:
        return ("bit", ((meta >> 8) * 8 + (meta & 0xFF) + 7) // 8, 0, 0, None)
    if t in _FSP:
        return (_FSP[t], meta, 0, 0, None)
    if t in _OLD_TEMPORAL:
        # MariaDB's "hires" forms: the precision comes from the source schema (``PlanColumn.fsp``).
        return (
            (f"{_OLD_TEMPORAL[t]}_hires", pc.fsp, 0, 0, None) if pc.fsp else (_OLD_TEMPORAL[t], 0, 0, 0, None)
        )
    if t in (ColumnType.ENUM, ColumnType.SET):
        real, size = string_meta(meta)
        if real != t or pc.labels is None:
            return None
        return ("enum" if t == ColumnType.ENUM else "set", size, 0, 0, list(pc.labels))
    if t in (ColumnType.GEOMETRY, ColumnType.VECTOR):
        return ("bytes", meta, 0, 0, None)
    if t == ColumnType.JSON:  # MySQL's binary JSON (MariaDB's JSON is a text column)
        return ("json", meta, 0, 0, None)
    text, table = (0, None) if pc.charset is None else _text(pc.charset)
    if text is None:
        return None
    if t in (ColumnType.VARCHAR, ColumnType.VAR_STRING):
        return ("bytes", 1 if meta < 256 else 2, text, 0, table)
    if t == ColumnType.STRING:
        real, max_len = string_meta(meta)
        if real != ColumnType.STRING:
            return None
        # BINARY(n): the zero bytes the binlog drops are put back.
        return ("bytes", 1 if max_len < 256 else 2, text, max_len if pc.charset is None else 0, table)
    if t == ColumnType.BLOB:
        return ("bytes", meta, text, 0, table)
    return None


def _text(charset: str) -> tuple[int | None, list[str] | None]:
    """The native text encoding of a charset, and the table of a one-byte charset."""
    try:
        codec = codec_for_charset(charset)
    except DecodeError:  # unknown ("?") or not decodable: the Python path says what it makes of it
        return None, None
    if codec is None:
        return 0, None
    table = byte_table(codec)
    if table is not None:
        return _BYTE_TABLE, [table]
    return _TEXT.get(codec), None


def native_plan(plan: TablePlan) -> RowPlan | None:
    """The native decoder of ``plan``'s rows, or None when one of its columns needs the Python
    path."""
    from loader._native import RowPlan

    specs = [column_spec(c) for c in plan.columns]
    if any(s is None for s in specs):
        return None
    try:
        return RowPlan([s for s in specs if s is not None])
    except ValueError:  # metadata the native path refuses: the Python path says what it makes of it
        return None
