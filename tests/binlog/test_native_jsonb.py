"""MySQL's binary JSON through the native decoder: the same text as ``jsonb.json_text`` (the
reference) for every document MySQL writes, in the staging rows and ``binlog show``'s lines;
damaged documents are refused wherever the reference refuses them."""

from __future__ import annotations

import random
import struct
from collections import Counter
from typing import Any

from loader._native import json_text
from loader.binlog import show
from loader.binlog.constants import ColumnType
from loader.binlog.events import Rows, TableMap
from loader.binlog.nativeplan import native_plan
from loader.binlog.rowplan import compile_plan
from loader.binlog.transactions import RowsBatch, Transaction, json_keys
from loader.binlog.values import jsonb
from loader.binlog.values.decimal import DIG2BYTES
from loader.core.positions import Position
from loader.extract.files import batch_csv, csv_kind
from loader.staging import csvformat
from tests.binlog.test_native_rows import _col


class Opaque:
    """A MySQL value inside a document: its column type and bytes."""

    def __init__(self, mysql_type: int, raw: bytes) -> None:
        self.mysql_type, self.raw = mysql_type, raw


def _varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _encode(value: Any, rng: random.Random) -> tuple[int, bytes]:
    """(type, bytes) of a value as MySQL writes it (``json_binary.cc``: serialize)."""
    if value is None or isinstance(value, bool):
        return jsonb.LITERAL, bytes([{None: 0, True: 1, False: 2}[value]])
    if isinstance(value, int):
        for t, fmt in ((jsonb.INT16, "<h"), (jsonb.UINT16, "<H"), (jsonb.INT32, "<i"), (jsonb.UINT32, "<I")):
            try:
                return t, struct.pack(fmt, value)
            except struct.error:
                continue
        return (
            (jsonb.INT64, struct.pack("<q", value)) if value < 0 else (jsonb.UINT64, struct.pack("<Q", value))
        )
    if isinstance(value, float):
        return jsonb.DOUBLE, struct.pack("<d", value)
    if isinstance(value, str):
        raw = value.encode()
        return jsonb.STRING, _varlen(len(raw)) + raw
    if isinstance(value, Opaque):
        return jsonb.OPAQUE, bytes([value.mysql_type]) + _varlen(len(value.raw)) + value.raw
    return _container(value, rng.random() < 0.2, rng)


def _container(value: dict[str, Any] | list[Any], large: bool, rng: random.Random) -> tuple[int, bytes]:
    obj = isinstance(value, dict)
    items = list(value.items()) if obj else [(None, v) for v in value]
    step = 4 if large else 2
    keys = [k.encode() for k, _ in items] if obj else []
    fixed = 2 * step + (len(items) * (step + 2) if obj else 0) + len(items) * (1 + step)
    entries, tail = b"", b"".join(keys)
    offset = fixed
    for k in keys:
        entries += offset.to_bytes(step, "little") + len(k).to_bytes(2, "little")
        offset += len(k)
    for _, v in items:
        t, data = _encode(v, rng)
        if t in (jsonb.LITERAL, jsonb.INT16, jsonb.UINT16) or (large and t in (jsonb.INT32, jsonb.UINT32)):
            entries += bytes([t]) + data.ljust(step, b"\0")
        elif not large and fixed + len(tail) > 0xFFFF:
            return _container(value, True, rng)
        else:
            entries += bytes([t]) + (fixed + len(tail)).to_bytes(step, "little")
            tail += data
    body = entries + tail
    size = 2 * step + len(body)
    if not large and size > 0xFFFF:
        return _container(value, True, rng)
    kind = (jsonb.SMALL_OBJECT if obj else jsonb.SMALL_ARRAY) + large
    return kind, len(items).to_bytes(step, "little") + size.to_bytes(step, "little") + body


def document(value: Any, rng: random.Random) -> bytes:
    t, data = _encode(value, rng)
    return bytes([t]) + data


def _decimal(rng: random.Random) -> Opaque:
    precision = rng.randrange(1, 66)
    scale = rng.randrange(0, min(precision, 30) + 1)
    intg = precision - scale
    groups = [(DIG2BYTES[intg % 9], intg % 9)] + [(4, 9)] * (intg // 9)
    groups += [(4, 9)] * (scale // 9) + [(DIG2BYTES[scale % 9], scale % 9)]
    # Small values too: str(Decimal) writes those in scientific notation.
    digits = [rng.choice([0, 1, rng.randrange(10**d)]) if d else 0 for _, d in groups]
    raw = bytearray(b"".join(v.to_bytes(n, "big") for (n, _), v in zip(groups, digits, strict=True) if n))
    raw[0] |= 0x80
    if rng.random() < 0.5:
        raw = bytearray(b ^ 0xFF for b in raw)
    return Opaque(ColumnType.NEWDECIMAL, bytes([precision, scale]) + raw)


_KEYS = ["", "a", "b", "bb", "id", "naïve", 'q"uote', "back\\slash", "tab\t", "\x01", "€uro", "😀", "zz"]
_STRINGS = ["", "plain", 'a "quoted", value', "naïve\n€", "\x00", "\t\x08\x1f\\\r", "😀", "\x7f\u2028"]


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(12 if depth < 4 else 9)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice(
            [0, -1, 32767, -32768, 65535, 65536, -(2**31), 2**32 - 1, 2**63 - 1, -(2**63), 2**64 - 1]
        )
    if kind == 2:
        return rng.randrange(-(2**40), 2**40)
    if kind == 3:
        return rng.choice(
            [0.0, -0.0, 0.1, 1e16, 1e-5, 1e-4, 5e-324, 1.7976931348623157e308, rng.uniform(-1e20, 1e20)]
        )
    if kind == 4:
        return rng.choice(_STRINGS)
    if kind == 5:
        return _decimal(rng)
    if kind == 6:
        t = rng.choice([ColumnType.DATE, ColumnType.DATETIME, ColumnType.TIMESTAMP, ColumnType.TIME])
        return Opaque(t, rng.randbytes(8))
    if kind == 7:
        return Opaque(
            rng.choice([ColumnType.VARCHAR, ColumnType.BLOB, ColumnType.BIT, 15]),
            rng.randbytes(rng.randrange(7)),
        )
    if kind == 8:
        return "x" * rng.choice([127, 128, 300, 20000])  # lengths of 1, 2 and 3 bytes
    if kind in (9, 10):
        keys = sorted(
            set(rng.sample(_KEYS, rng.randrange(len(_KEYS)))), key=lambda k: (len(k.encode()), k.encode())
        )
        return {k: _value(rng, depth + 1) for k in keys}
    return [_value(rng, depth + 1) for _ in range(rng.randrange(6))]


def _native(data: bytes) -> str:
    try:
        return json_text(data)
    except ValueError:
        return "refused"


def _python(data: bytes) -> str:
    try:
        return jsonb.json_text(data)
    except jsonb.JsonbError:
        return "error"


def test_documents_mysql_writes_read_as_the_reference_reads_them() -> None:
    rng = random.Random(7)
    seen = Counter[str]()
    for n in range(1500):
        data = document(_value(rng), rng)
        assert _native(data) == _python(data), (n, data.hex())
        seen[chr(data[0] + 48)] += 1
    assert json_text(b"") == "null"
    # Every type at the top: containers small and large, literals, the integers, DOUBLE, STRING
    # and OPAQUE ('?').
    assert len(seen) == 14, seen


def test_damaged_documents_are_refused_where_the_reference_refuses_them() -> None:
    # A key twice (MySQL never writes one): the reference's dict keeps the first place and the
    # last value.
    twice = bytes.fromhex("00 0200 1400 12000100 13000100 050100 050200 6161")
    assert _python(twice) == '{"a": 2}' and _native(twice) == "refused"
    # A value at its container's end (an empty array after it): refused by both.
    past = bytes.fromhex("02 0100 0700 020700 00000000")
    assert _python(past) == "error" and _native(past) == "refused"
    rng = random.Random(11)
    outcome = Counter[str]()
    for n in range(3000):
        data = bytearray(document(_value(rng), rng))
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(data))
            match rng.randrange(3):
                case 0:
                    data[i] ^= 1 << rng.randrange(8)
                case 1:
                    data[i] = rng.randrange(256)
                case _:
                    del data[i:]
                    if not data:
                        data.append(rng.randrange(16))
        mine, python = _native(bytes(data)), _python(bytes(data))
        # Text the native path writes is the reference's; it may leave more to the reference
        # (which the decoder then asks), never write what the reference refuses.
        assert mine in (python, "refused"), (n, bytes(data).hex(), mine, python)
        outcome["same" if mine == python else "left to python" if python != "error" else "refused"] += 1
    assert outcome["same"] > 500 and outcome["refused"] > 1500, outcome


def test_json_columns_stage_and_show_as_the_python_decoder_writes_them() -> None:
    """A table with MySQL JSON columns (length bytes 4 and 2) takes the native path."""
    rng = random.Random(3)
    cols = (_col(0, ColumnType.LONG, 0), _col(1, ColumnType.JSON, 4), _col(2, ColumnType.JSON, 2))
    tm = TableMap(1, 0, "s", "j", cols, (0,), True)
    plan = compile_plan(tm, None, strict=True)
    native = native_plan(plan)
    assert native is not None
    encode = csvformat.row_encoder([csv_kind(c) for c in plan.columns])
    for n in range(300):
        kind = rng.choice("IDU")
        images = []
        for _ in range(2 if kind == "U" else 1):
            docs = [document(_value(rng), rng) if rng.random() < 0.9 else b"" for _ in range(2)]
            null = rng.random() < 0.2
            docs[1] = docs[1] if len(docs[1]) <= 0xFFFF else b""
            values = n.to_bytes(4, "little") + len(docs[0]).to_bytes(4, "little") + docs[0]
            if not null:
                values += len(docs[1]).to_bytes(2, "little") + docs[1]
            images.append(bytes([4 if null else 0]) + values)
        data = b"".join(images)
        rows = Rows(kind, 1, 0, 3, 7, 7, False, data, 0)
        python = batch_csv(
            RowsBatch(plan, kind, plan.decode(rows, "f:4"), 7, Position("f", 4)), encode, 9, "ts"
        )
        assert native.encode(data, 0, kind).csv(9, 7, "ts") == python, (n, data.hex())
        tx = Transaction(Position("f", 4), Position("f", 90), 9, 1_700_000_000_123_456, "0-1-2")
        tx.batches = [RowsBatch(plan, kind, plan.decode(rows, "f:4"), 7, Position("f", 4))]
        expected = "\n".join(show.jsonl(tx))
        encoded = native.encode_json(data, 0, kind, json_keys(plan.names))
        tx.batches = [RowsBatch(plan, kind, [], 7, Position("f", 4), encoded)]
        assert list(show.jsonl(tx)) == [expected], (n, data.hex())
