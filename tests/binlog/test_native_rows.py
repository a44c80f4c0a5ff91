"""The native decoder stages the same bytes as the Python decoder (the reference) over every real
binlog of the shared test data, and over random row images of every column kind it takes."""

from __future__ import annotations

import random
import struct
from collections import Counter
from pathlib import Path

import pytest

from loader.binlog import show
from loader.binlog.charsets import BINARY_COLLATION, byte_table, codec_for_collation
from loader.binlog.constants import ColumnType
from loader.binlog.events import Column, Rows, TableMap
from loader.binlog.files import BinlogFiles
from loader.binlog.nativeplan import native_plan
from loader.binlog.rowplan import compile_plan
from loader.binlog.schema import StaticSchema
from loader.binlog.transactions import NativeRun, RowsBatch, Transaction, TransactionReader, json_keys
from loader.core.errors import DecodeError, LoaderError
from loader.core.positions import Position
from loader.extract.files import batch_csv, commit_ts_text, csv_kind
from loader.staging import csvformat
from tests.binlog.reference import prepare
from tests.binlog.test_testdata import FILES, SCHEMAS
from tests.conftest import BINLOG_TESTDATA


def staged(
    path: Path, native: bool, schema: StaticSchema | None = None
) -> tuple[str, dict[str, bytes], dict[int, str], str, int]:
    """What extraction stages per table from a binlog file: the Python reader's transactions,
    or (``native``) the native decoder's rows and its reader's runs of whole transactions; with
    the error it stopped at, the MariaDB and MySQL GTIDs read, and how many transactions (and
    rows events) the native path took."""
    reader = TransactionReader(schema=schema, strict=False, native=native)
    files = BinlogFiles(path)
    start = Position(path.name, 4)
    out: dict[str, list[bytes]] = {}
    took = 0
    try:
        for item in (
            reader.read_runs(files.runs(start, None)) if native else reader.read(files.events(start, None))
        ):
            if isinstance(item, NativeRun):
                took += item.result.transactions
                for _, plan, data, *_ in item.result.segments:
                    name = item.plans[plan].qualified
                    out.setdefault(name, []).append(data)
            elif isinstance(item, Transaction):
                for b in item.batches:
                    took += b.encoded is not None
                    encode = csvformat.row_encoder([csv_kind(c) for c in b.table.columns])
                    data = batch_csv(b, encode, item.seqno, commit_ts_text(item.commit_ts))
                    out.setdefault(b.table.qualified, []).append(data)
    except (LoaderError, csvformat.CsvValueError, AttributeError, TypeError) as exc:
        # Damaged files stop both alike; values the staging format cannot hold (strict=False
        # keeps raw values of columns the log does not describe) fail both alike.
        error = f"{type(exc).__name__}: {exc}"
    else:
        error = ""
    joined = {name: b"".join(parts) for name, parts in out.items()}
    return error, joined, reader.gtid_state, reader.mysql_gtids.text(), took


@pytest.mark.parametrize("rel", FILES)
def test_native_rows_are_the_python_rows(rel: str, tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / rel, tmp_path)
    schema = SCHEMAS.get(rel)
    assert staged(path, native=True, schema=schema)[:4] == staged(path, native=False, schema=schema)[:4]


@pytest.mark.parametrize("rel", FILES)
def test_native_json_lines_are_the_python_ones(rel: str, tmp_path: Path) -> None:
    """``binlog show --format jsonl``: the same lines from the native decoder's JSON images."""
    path = prepare(BINLOG_TESTDATA / rel, tmp_path)

    def lines(native: bool) -> tuple[str, list[str], int]:
        reader = TransactionReader(schema=SCHEMAS.get(rel), strict=False, native=native, native_json=native)
        out: list[str] = []
        took = 0
        try:
            for tx in reader.read(BinlogFiles(path).events(Position(path.name, 4), None)):
                took += sum(b.encoded is not None for b in tx.batches)
                out.extend(show.jsonl(tx))
        except LoaderError as exc:
            return str(exc), out, took
        return "", out, took

    mine, python = lines(True), lines(False)
    # A native rows event gives its lines as one piece: the same text.
    assert (mine[0], "\n".join(mine[1])) == (python[0], "\n".join(python[1]))


def test_most_test_data_rows_take_the_native_path(tmp_path: Path) -> None:
    took: Counter[str] = Counter()
    for n, rel in enumerate(FILES):
        (tmp_path / str(n)).mkdir()
        path = prepare(BINLOG_TESTDATA / rel, tmp_path / str(n))
        took[rel] = staged(path, native=True, schema=SCHEMAS.get(rel))[4]
    # The others' tables have columns whose charset or labels neither the log nor a schema gives
    # (read here without one), or JSON: those take the Python path.
    assert sum(n > 0 for n in took.values()) >= 20, took
    assert sum(took.values()) >= 5000, took


# --- random images of one table: every kind of column, valid values and random bytes ----------

UTF8MB4 = 45
LATIN1 = 8
ASCII = 11
# One-byte charsets (cp1250, koi8r, greek, tis620: some bytes undefined), UTF-16 (ucs2, utf16,
# utf16le) and UTF-32.
OTHER_CHARSETS = (26, 7, 25, 18, 35, 54, 56, 60)


def _col(
    i: int, t: int, meta: int, unsigned: bool = False, collation: int | None = None, **kw: object
) -> Column:
    real = t
    if t == ColumnType.STRING and meta >> 8 in (ColumnType.ENUM, ColumnType.SET):
        real = meta >> 8
    return Column(i, t, meta, True, real, f"c{i}", unsigned, collation, **kw)  # type: ignore[arg-type]


COLUMNS = [
    (ColumnType.TINY, 0, False),
    (ColumnType.TINY, 0, True),
    (ColumnType.SHORT, 0, False),
    (ColumnType.SHORT, 0, True),
    (ColumnType.INT24, 0, False),
    (ColumnType.INT24, 0, True),
    (ColumnType.LONG, 0, False),
    (ColumnType.LONG, 0, True),
    (ColumnType.LONGLONG, 0, False),
    (ColumnType.LONGLONG, 0, True),
    (ColumnType.FLOAT, 4, False),
    (ColumnType.DOUBLE, 8, False),
    (ColumnType.YEAR, 0, False),
    (ColumnType.BIT, 1 << 8 | 5, False),
    (ColumnType.BIT, 8 << 8, False),
    (ColumnType.NEWDECIMAL, 5 << 8 | 2, False),
    (ColumnType.NEWDECIMAL, 65 << 8 | 30, False),
    (ColumnType.NEWDECIMAL, 18 << 8, False),
    (ColumnType.NEWDECIMAL, 10 << 8 | 10, False),
    (ColumnType.DATE, 0, False),
    (ColumnType.TIME, 0, False),
    (ColumnType.DATETIME, 0, False),
    (ColumnType.TIMESTAMP, 0, False),
    *[
        (t, fsp, False)
        for t in (ColumnType.TIME2, ColumnType.DATETIME2, ColumnType.TIMESTAMP2)
        for fsp in range(7)
    ],
]
STRINGS = [
    (ColumnType.VARCHAR, 40, UTF8MB4),
    (ColumnType.VARCHAR, 300, UTF8MB4),
    (ColumnType.VARCHAR, 40, LATIN1),
    (ColumnType.VARCHAR, 40, ASCII),
    (ColumnType.VARCHAR, 40, BINARY_COLLATION),
    (ColumnType.STRING, ColumnType.STRING << 8 | 12, UTF8MB4),
    (ColumnType.STRING, ColumnType.STRING << 8 | 6, BINARY_COLLATION),
    (ColumnType.BLOB, 2, UTF8MB4),
    (ColumnType.BLOB, 1, BINARY_COLLATION),
    (ColumnType.BLOB, 4, LATIN1),
    *[(ColumnType.VARCHAR, 300, collation) for collation in OTHER_CHARSETS],
]
LABELS = ("a", 'b"q', "", "c,d", "é")


def _table() -> TableMap:
    cols = [_col(i, t, meta, unsigned) for i, (t, meta, unsigned) in enumerate(COLUMNS)]
    for t, meta, collation in STRINGS:
        cols.append(_col(len(cols), t, meta, collation=collation))
    cols.append(_col(len(cols), ColumnType.GEOMETRY, 4))
    cols.append(_col(len(cols), ColumnType.STRING, ColumnType.ENUM << 8 | 1, labels=LABELS))
    cols.append(_col(len(cols), ColumnType.STRING, ColumnType.SET << 8 | 1, labels=LABELS))
    return TableMap(1, 0, "s", "t", tuple(cols), (0,), True)


def _value(rng: random.Random, col: Column, valid: bool) -> bytes:
    """A value of the column's type (random where any bytes are one), or (not ``valid``) bytes
    that may not be one."""
    t, meta = col.type, col.meta
    fixed = {ColumnType.TINY: 1, ColumnType.SHORT: 2, ColumnType.INT24: 3, ColumnType.LONG: 4}
    fixed |= {ColumnType.LONGLONG: 8, ColumnType.YEAR: 1, ColumnType.DATE: 3, ColumnType.TIME: 3}
    fixed |= {ColumnType.DATETIME: 8, ColumnType.TIMESTAMP: 4}
    if t in fixed:
        return rng.randbytes(fixed[t])
    if t == ColumnType.FLOAT:
        return struct.pack("<f", rng.choice([0.0, -0.0, 1.5, 3.4e38, 1e-45, rng.uniform(-1e6, 1e6)]))
    if t == ColumnType.DOUBLE:
        return struct.pack("<d", rng.choice([1e16, 1e-5, 0.1, -2.5e-300, rng.uniform(-1e20, 1e20)]))
    if t == ColumnType.BIT:
        return rng.randbytes(((meta >> 8) * 8 + (meta & 0xFF) + 7) // 8)
    if t == ColumnType.NEWDECIMAL:
        from loader.binlog.values.decimal import DIG2BYTES, decimal_size

        if not valid:
            return rng.randbytes(decimal_size(meta >> 8, meta & 0xFF))
        intg, scale = (meta >> 8) - (meta & 0xFF), meta & 0xFF
        groups = [(DIG2BYTES[intg % 9], intg % 9)] + [(4, 9)] * (intg // 9)
        groups += [(4, 9)] * (scale // 9) + [(DIG2BYTES[scale % 9], scale % 9)]
        raw = bytearray(b"".join(rng.randrange(10**d).to_bytes(n, "big") for n, d in groups if n))
        raw[0] |= 0x80
        return bytes(b ^ 0xFF for b in raw) if rng.random() < 0.5 else bytes(raw)
    if t in (ColumnType.TIME2, ColumnType.DATETIME2, ColumnType.TIMESTAMP2):
        base = {ColumnType.TIME2: 3, ColumnType.DATETIME2: 5, ColumnType.TIMESTAMP2: 4}[t]
        return rng.randbytes(base + (meta + 1) // 2)
    if col.real_type in (ColumnType.ENUM, ColumnType.SET):
        top = len(LABELS) + 1 if col.real_type == ColumnType.ENUM else 1 << len(LABELS)
        return bytes([rng.randrange(0, top if valid else 255)])
    if t in (ColumnType.VARCHAR, ColumnType.STRING):
        size = meta if t == ColumnType.VARCHAR else meta & 0xFF
        text = rng.choice(["", "plain", 'a "quoted", value', "naïve\n€", "\x00", "\t\x08\x1f\\\r"])
        if col.collation == ASCII:
            text = text.encode("ascii", "replace").decode()
        codec = codec_for_collation(col.collation or BINARY_COLLATION) or "utf-8"
        if byte_table(codec) is not None:  # any byte: some the charset leaves undefined
            data = bytes(rng.randrange(256) for _ in range(5))
        else:
            data = text.encode(codec)
        if not valid:  # any bytes: invalid UTF-8 or ASCII too, or the empty-string marker
            data = rng.choice([rng.randbytes(rng.randrange(6)), csvformat.EMPTY_MARKER.encode()])
        data = data[:size]
        return (len(data).to_bytes(1 if size < 256 else 2, "little")) + data
    if t in (ColumnType.BLOB, ColumnType.GEOMETRY):
        data = rng.randbytes(rng.randrange(9))
        if valid and col.collation == UTF8MB4:
            data = rng.choice(["", "tëxt", '"'] * 3).encode()
        return len(data).to_bytes(meta, "little") + data
    raise AssertionError(t)


def _image(rng: random.Random, tm: TableMap) -> bytes:
    """A row image; one in ten has a column of random bytes."""
    nulls = [rng.random() < 0.1 for _ in tm.columns]
    bitmap = sum(1 << i for i, n in enumerate(nulls) if n).to_bytes((len(tm.columns) + 7) // 8, "little")
    odd = rng.randrange(len(tm.columns)) if rng.random() < 0.1 else -1
    values = (_value(rng, c, i != odd) for i, c in enumerate(tm.columns) if not nulls[i])
    return bitmap + b"".join(values)


@pytest.mark.parametrize("seed", range(3))
def test_random_images_of_every_kind_stage_alike(seed: int) -> None:
    rng = random.Random(seed)
    tm = _table()
    plan = compile_plan(tm, None, strict=True)
    native = native_plan(plan)
    assert native is not None  # every column above takes the native path
    encode = csvformat.row_encoder([csv_kind(c) for c in plan.columns])
    full = (1 << len(tm.columns)) - 1
    agreed = Counter[str]()
    for n in range(2500):
        kind = rng.choice("IDU")
        data = b"".join(_image(rng, tm) for _ in range(rng.randrange(1, 4) * (2 if kind == "U" else 1)))
        if rng.random() < 0.05:  # cut short
            data = data[: rng.randrange(len(data))]
        rows = Rows(kind, 1, 0, len(tm.columns), full, full, False, data, 0)
        try:
            python: bytes | str = batch_csv(
                RowsBatch(plan, kind, plan.decode(rows, "f:4"), 7, Position("f", 4)),
                encode,
                9,
                "2024-01-01 00:00:00.000000",
            )
        except (DecodeError, csvformat.CsvValueError) as exc:
            python = type(exc).__name__
        try:
            mine: bytes | str = native.encode(data, 0, kind).csv(9, 7, "2024-01-01 00:00:00.000000")
        except ValueError:
            mine = "refused"
        # The same bytes, or refused where the Python path refuses (which then names the fault).
        assert mine == (python if isinstance(python, bytes) else "refused"), (n, kind, data.hex())
        if isinstance(mine, bytes):  # and binlog show's JSON lines (no marker there)
            tx = Transaction(Position("f", 4), Position("f", 90), 9, 1_700_000_000_123_456, "0-1-2")
            tx.batches = [RowsBatch(plan, kind, plan.decode(rows, "f:4"), 7, Position("f", 4))]
            expected = list(show.jsonl(tx))
            keys = json_keys(plan.names)
            tx.batches = [
                RowsBatch(plan, kind, [], 7, Position("f", 4), native.encode_json(data, 0, kind, keys))
            ]
            assert list(show.jsonl(tx)) == ["\n".join(expected)], (n, kind, data.hex())
        agreed["refused" if isinstance(python, str) else "rows"] += 1
    assert agreed["rows"] > 800 and agreed["refused"] > 100, agreed
