"""MySQL's binary JSON (``sql-common/json_binary.cc``) to JSON text, and partial updates.

The text matches what MySQL prints for the document: members in stored order, ``", "`` and
``": "`` separators. DECIMAL inside a document prints as a number; DATE/TIME/DATETIME/TIMESTAMP
print as quoted strings (datetimes with six fractional digits); any other opaque value as
``"base64:typeNN:..."``, as MySQL does.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from decimal import Decimal
from typing import Any

from loader.binlog.constants import ColumnType
from loader.binlog.values import lenenc
from loader.binlog.values.decimal import decode_decimal
from loader.binlog.values.temporal import datetime_packed_text, time_packed_text
from loader.core.doubles import mysql_json_text
from loader.core.errors import JsonbError

SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY = 0, 1, 2, 3
LITERAL, INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING = range(4, 13)
OPAQUE = 15
_LITERALS = {0: None, 1: True, 2: False}


class Opaque:
    """A non-JSON MySQL value inside a document, kept as the text MySQL prints for it."""

    __slots__ = ("quoted", "text")

    def __init__(self, text: str, quoted: bool) -> None:
        self.text = text
        self.quoted = quoted

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and (self.text, self.quoted) == (other.text, other.quoted)

    def __repr__(self) -> str:
        return f"Opaque({self.text!r})"


def _u16(data: bytes, pos: int) -> int:
    if pos + 2 > len(data):
        raise JsonbError("binary JSON truncated")
    return data[pos] | data[pos + 1] << 8


def _u32(data: bytes, pos: int) -> int:
    if pos + 4 > len(data):
        raise JsonbError("binary JSON truncated")
    return int.from_bytes(data[pos : pos + 4], "little")


def _varlen(data: bytes, pos: int) -> tuple[int, int]:
    """A length of 1-5 bytes, 7 bits each, low group first."""
    value = shift = 0
    for i in range(5):
        if pos + i >= len(data):
            raise JsonbError("binary JSON truncated in a length")
        b = data[pos + i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos + i + 1
        shift += 7
    raise JsonbError("binary JSON length longer than 5 bytes")


def parse_value(type_code: int, data: bytes, pos: int, end: int) -> Any:
    """Decode one value of ``type_code`` whose data starts at ``pos`` (container-relative)."""
    if type_code in (SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY):
        return _container(type_code, data, pos, end)
    if type_code == LITERAL:
        if pos >= end:
            raise JsonbError("binary JSON truncated")
        try:
            return _LITERALS[data[pos]]
        except KeyError:
            raise JsonbError(f"unknown JSON literal {data[pos]}") from None
    fixed = _SCALARS.get(type_code)
    if fixed is not None:
        size, unpack = fixed
        if pos + size > end:
            raise JsonbError("binary JSON truncated")
        value = unpack(data, pos)[0]
        if type_code == DOUBLE and not math.isfinite(value):
            raise JsonbError("JSON double is not finite")
        return value
    if type_code == STRING:
        n, start = _varlen(data, pos)
        if start + n > end:
            raise JsonbError("JSON string runs past its document")
        return data[start : start + n].decode("utf-8")
    if type_code == OPAQUE:
        if pos >= end:
            raise JsonbError("binary JSON truncated")
        mysql_type = data[pos]
        n, start = _varlen(data, pos + 1)
        if start + n > end:
            raise JsonbError("JSON opaque value runs past its document")
        return _opaque(mysql_type, data[start : start + n])
    raise JsonbError(f"unknown JSON value type {type_code}")


_SCALARS: dict[int, tuple[int, Any]] = {
    INT16: (2, struct.Struct("<h").unpack_from),
    UINT16: (2, struct.Struct("<H").unpack_from),
    INT32: (4, struct.Struct("<i").unpack_from),
    UINT32: (4, struct.Struct("<I").unpack_from),
    INT64: (8, struct.Struct("<q").unpack_from),
    UINT64: (8, struct.Struct("<Q").unpack_from),
    DOUBLE: (8, struct.Struct("<d").unpack_from),
}


def _opaque(mysql_type: int, raw: bytes) -> Any:
    if mysql_type == ColumnType.NEWDECIMAL:
        if len(raw) < 2:
            raise JsonbError("JSON decimal truncated")
        return decode_decimal(raw[2:], raw[0], raw[1])
    if mysql_type in (ColumnType.DATE, ColumnType.DATETIME, ColumnType.TIMESTAMP, ColumnType.TIME):
        if len(raw) < 8:
            raise JsonbError("JSON temporal value truncated")
        packed = int.from_bytes(raw[:8], "little", signed=True)
        if mysql_type == ColumnType.TIME:
            return Opaque(time_packed_text(packed, 6), quoted=True)
        text = datetime_packed_text(packed, 6)
        return Opaque(text[:10] if mysql_type == ColumnType.DATE else text, quoted=True)
    return Opaque(f"base64:type{mysql_type}:{base64.b64encode(raw).decode('ascii')}", quoted=True)


def _container(type_code: int, data: bytes, base: int, end: int) -> Any:
    large = type_code in (LARGE_OBJECT, LARGE_ARRAY)
    read = _u32 if large else _u16
    step = 4 if large else 2
    count = read(data, base)
    size = read(data, base + step)
    if base + size > end:
        raise JsonbError("JSON container runs past its document")
    cend = base + size
    is_object = type_code in (SMALL_OBJECT, LARGE_OBJECT)
    pos = base + 2 * step
    keys: list[str] = []
    if is_object:
        for _ in range(count):
            koff = read(data, pos)
            klen = _u16(data, pos + step)
            pos += step + 2
            if base + koff + klen > cend:
                raise JsonbError("JSON key runs past its object")
            keys.append(data[base + koff : base + koff + klen].decode("utf-8"))
    values: list[Any] = []
    for _ in range(count):
        if pos + 1 + step > cend:
            raise JsonbError("JSON value entry runs past its container")
        vtype = data[pos]
        if vtype == LITERAL or vtype in (INT16, UINT16) or (large and vtype in (INT32, UINT32)):
            values.append(parse_value(vtype, data, pos + 1, pos + 1 + step))
        else:
            voff = read(data, pos + 1)
            if base + voff >= cend:
                raise JsonbError("JSON value offset runs past its container")
            values.append(parse_value(vtype, data, base + voff, cend))
        pos += 1 + step
    return dict(zip(keys, values, strict=True)) if is_object else values


def parse_document(data: bytes) -> Any:
    """A whole binary JSON document; empty data is JSON null (as MySQL stores it)."""
    if not data:
        return None
    try:
        return parse_value(data[0], data, 1, len(data))
    except (UnicodeDecodeError, struct.error, IndexError) as exc:
        raise JsonbError(f"malformed binary JSON: {exc}") from None


def dumps(value: Any) -> str:
    """JSON text as MySQL prints it."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return mysql_json_text(value)
    if isinstance(value, Decimal):
        return format(value, "f")  # as MySQL: fixed notation, its scale's digits (0.0000000000)
    if isinstance(value, Number):
        return str.__str__(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Opaque):
        return json.dumps(value.text, ensure_ascii=False) if value.quoted else value.text
    if isinstance(value, list):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {dumps(v)}" for k, v in value.items())
            + "}"
        )
    raise TypeError(f"not a JSON value: {value!r}")


class Number(str):
    """A number of JSON text kept as its text (a document read back to apply partial updates to:
    its text is MySQL's already, which a float or a Decimal would not give back)."""


def loads(text: str) -> Any:
    """JSON text as ``dumps`` writes it, read back; numbers with a fraction or an exponent keep
    their text (``Number``)."""
    return json.loads(text, parse_float=Number)


def json_text(data: bytes) -> str:
    """Binary JSON to MySQL's JSON text."""
    return dumps(parse_document(data))


# Partial JSON updates (``Json_diff_vector::read_binary``, MySQL 8 PARTIAL_UPDATE_ROWS).
DIFF_REPLACE, DIFF_INSERT, DIFF_REMOVE = 0, 1, 2


def parse_diffs(data: bytes) -> list[tuple[int, list[str | int], Any]]:
    """The list of (operation, path, value) of a partial update."""
    diffs: list[tuple[int, list[str | int], Any]] = []
    pos = 0
    while pos < len(data):
        op = data[pos]
        if op not in (DIFF_REPLACE, DIFF_INSERT, DIFF_REMOVE):
            raise JsonbError(f"unknown JSON diff operation {op}")
        plen, pos = lenenc(data, pos + 1)
        if pos + plen > len(data):
            raise JsonbError("JSON diff path runs past its value")
        path = parse_path(data[pos : pos + plen].decode("utf-8"))
        pos += plen
        value: Any = None
        if op != DIFF_REMOVE:
            vlen, pos = lenenc(data, pos)
            if pos + vlen > len(data):
                raise JsonbError("JSON diff value runs past its column")
            value = parse_document(data[pos : pos + vlen])
            pos += vlen
        diffs.append((op, path, value))
    return diffs


def parse_path(text: str) -> list[str | int]:
    """A JSON path such as ``$.a."b c"[3]`` as a list of keys and indexes."""
    if not text.startswith("$"):
        raise JsonbError(f"JSON path {text!r} does not start with $")
    out: list[str | int] = []
    i = 1
    while i < len(text):
        c = text[i]
        if c == ".":
            i += 1
            if i < len(text) and text[i] == '"':
                j = i + 1
                while j < len(text) and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                out.append(json.loads(text[i : j + 1]))
                i = j + 1
            else:
                j = i
                while j < len(text) and text[j] not in '.["':
                    j += 1
                out.append(text[i:j])
                i = j
        elif c == "[":
            j = text.index("]", i)
            out.append(int(text[i + 1 : j].strip()))
            i = j + 1
        else:
            raise JsonbError(f"cannot read JSON path {text!r} at {i}")
    return out


def _sort_key(key: str) -> tuple[int, bytes]:
    raw = key.encode("utf-8")
    return (len(raw), raw)


def apply_diffs(document: Any, diffs: list[tuple[int, list[str | int], Any]]) -> Any:
    """Apply a partial update to the before image's document (as JSON_REPLACE/INSERT/REMOVE)."""
    for op, path, value in diffs:
        if not path:
            if op == DIFF_REMOVE:
                raise JsonbError("a JSON diff cannot remove the whole document")
            document = value
            continue
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        if op == DIFF_REMOVE:
            del parent[last]
        elif op == DIFF_REPLACE:
            parent[last] = value
        elif isinstance(parent, list):
            assert isinstance(last, int)
            parent.insert(last, value)
        else:
            parent[last] = value
            # MySQL keeps object members ordered by key length, then bytes.
            items = sorted(parent.items(), key=lambda kv: _sort_key(kv[0]))
            parent.clear()
            parent.update(items)
    return document
