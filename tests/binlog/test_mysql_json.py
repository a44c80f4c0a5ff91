"""MySQL's binary JSON as the staging files write it: the text MySQL itself gives for the same
document (``SELECT doc``), byte for byte, from both decoders. A value that reads back in other
text (``1e-7`` where MySQL says ``0.0000001``) makes ``loader compare`` call equal tables
different, so every kind of JSON value is written to a live MySQL and read from its binlog."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from loader.binlog.constants import EventType
from loader.binlog.files import BinlogFiles
from loader.binlog.reader import read_transactions
from loader.binlog.schema import InformationSchema
from loader.binlog.transactions import Transaction
from loader.core.positions import Position
from loader.core.tables import TableSelector
from loader.extract.files import batch_csv, commit_ts_text, csv_kind
from loader.source.connection import current_position
from loader.staging import csvformat
from tests.conftest import MySQL

pytestmark = pytest.mark.integration

SCHEMA = "json_text"
PARTIAL_UPDATE_ROWS = EventType.PARTIAL_UPDATE_ROWS

# Doubles where MySQL's text and the shortest round trip part ways (the exponent's edges, the
# 17th digit), the extremes, and the ones where they always agreed.
DOUBLES = [
    0.0,
    -0.0,
    0.1,
    1 / 3,
    3.0,
    -2.5,
    1e-7,
    1e-15,
    1e-16,
    1e15,
    1e16,
    2.0**53,
    2.0**53 + 2,
    123456789012345.6,
    1234567890123456.7,
    0.000123,
    1e-5,
    1e-4,
    1.5e-14,
    1.5e-15,
    9.999999999999999e14,
    1e21,
    1e22,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    100.0,
    1e14,
]
# SQL expressions of values only SQL can put in a document: decimals of every scale, temporals.
SQL_VALUES = [
    "CAST('0.0000001' AS DECIMAL(10,7))",
    "CAST(0 AS DECIMAL(12,10))",
    "CAST('-12345678901234567890.123456789' AS DECIMAL(65,30))",
    "CAST('1' AS DECIMAL(1,0))",
    "CAST('-0.5' AS DECIMAL(2,1))",
    "CAST('99999999999999999999999999999999999.999999999999999999999999999999' AS DECIMAL(65,30))",
    "CAST('1000' AS DECIMAL(10,0))",
    "CAST('0.000000000000000000000000000001' AS DECIMAL(30,30))",
    "CAST('2024-02-29' AS DATE)",
    "CAST('12:34:56.789' AS TIME(3))",
    "CAST('-838:59:59' AS TIME)",
    "CAST('2024-02-29 12:34:56.123456' AS DATETIME(6))",
    "CAST('1000-01-01 00:00:00' AS DATETIME)",
    "CAST(x'00ff10' AS BINARY)",
]


KEY_ENDS = ["", "ü", " x", '"', "\\"]


def _random_double(rng: random.Random) -> float:
    """A double of any magnitude, normal or not, with all its digits."""
    bits = rng.getrandbits(64)
    value = float.fromhex(
        f"{'-' if bits >> 63 else ''}0x1.{bits & ((1 << 52) - 1):013x}p{rng.randint(-1074, 1023)}"
    )
    return value


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return _random_double(rng)
    if kind == 1:
        return rng.choice(
            [rng.randint(-(2**63), 2**63 - 1), rng.randint(0, 2**64 - 1), rng.randint(-999, 999)]
        )
    if kind == 2:
        return float(rng.randint(1, 99)) * 10.0 ** rng.randint(-20, 20)
    if kind == 3:
        return "".join(rng.choice('aé€😀"\\\n\t\x01/<>\u2028 ') for _ in range(rng.randint(0, 12)))
    if kind == 4:
        return rng.choice([True, False, None])
    if kind == 5:
        return rng.choice(DOUBLES)
    if kind == 6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {f"k{i}{rng.choice(KEY_ENDS)}": _random_value(rng, depth + 1) for i in range(rng.randint(0, 5))}


def _documents(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    docs = [json.dumps([d]) for d in DOUBLES] + [json.dumps({"d": d, "n": [d, -d]}) for d in DOUBLES]
    docs += [json.dumps(_random_value(rng, 0)) for _ in range(count)]
    # One document past 64 KB, which MySQL stores in its large format (4-byte offsets).
    docs.append(
        json.dumps({"big": ["x" * 100 for _ in range(700)], "f": [_random_double(rng) for _ in range(50)]})
    )
    return docs


@pytest.fixture(scope="module")
def documents(mysql: MySQL) -> Iterator[dict[str, Any]]:
    conn = mysql.connect()
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
        cur.execute(f"CREATE DATABASE {SCHEMA}")
        cur.execute(f"CREATE TABLE {SCHEMA}.docs (id INT PRIMARY KEY, doc JSON)")
        start = current_position(conn)
        docs = _documents(20261129, 1500)
        conn.begin()
        cur.executemany(f"INSERT INTO {SCHEMA}.docs VALUES (%s, %s)", list(enumerate(docs)))
        base = len(docs)
        for n, expr in enumerate(SQL_VALUES):
            cur.execute(
                f"INSERT INTO {SCHEMA}.docs VALUES (%s, JSON_ARRAY({expr})), (%s, JSON_OBJECT('v', {expr}, 'l', JSON_ARRAY({expr}, 1)))",
                (base + 2 * n, base + 2 * n + 1),
            )
        conn.commit()
        # Partial updates: MySQL logs only what changed; the decoder applies it to the before image.
        cur.execute("SET SESSION binlog_row_value_options = 'PARTIAL_JSON'")
        conn.begin()
        cur.execute(f"UPDATE {SCHEMA}.docs SET doc = JSON_SET(doc, '$[0]', 1.5e-7) WHERE id < {len(DOUBLES)}")
        cur.execute(
            f"UPDATE {SCHEMA}.docs SET doc = JSON_REPLACE(doc, '$.d', -2.5e-20, '$.n[1]', CAST('0.000010' AS DECIMAL(8,6))) "
            f"WHERE id BETWEEN {len(DOUBLES)} AND {2 * len(DOUBLES) - 1}"
        )
        cur.execute(
            f"UPDATE {SCHEMA}.docs SET doc = JSON_REMOVE(doc, '$.n[0]') WHERE id = {len(DOUBLES) + 3}"
        )
        conn.commit()
        end = current_position(conn)
        cur.execute(f"SELECT id, doc FROM {SCHEMA}.docs ORDER BY id")
        selected = {row[0]: row[1] for row in cur.fetchall()}
    conn.close()
    yield {"start": start, "end": end, "selected": selected}


def _read(mysql: MySQL, start: Position, end: Position, native: bool) -> list[Transaction]:
    conn = mysql.connect(user="loader")
    try:
        return list(
            read_transactions(
                BinlogFiles(mysql.binlog_dir),
                start,
                end,
                TableSelector((f"{SCHEMA}.docs",)),
                InformationSchema(conn),
                native=native,
            )
        )
    finally:
        conn.close()


def test_the_python_decoder_writes_json_as_mysql_selects_it(mysql: MySQL, documents: dict[str, Any]) -> None:
    decoded = {
        after[0]: after[1]
        for tx in _read(mysql, documents["start"], documents["end"], native=False)
        for batch in tx.batches
        for _, after in batch.rows
        if after is not None
    }
    selected = documents["selected"]
    assert decoded.keys() == selected.keys()
    differing = [(i, selected[i], decoded[i]) for i in selected if decoded[i] != selected[i]]
    assert differing[:5] == [] and not differing


def test_partial_updates_were_logged_as_such(mysql: MySQL, documents: dict[str, Any]) -> None:
    """The case the first test covers only if MySQL logged the updates partially."""
    events = BinlogFiles(mysql.binlog_dir).events(documents["start"], documents["end"])
    assert sum(1 for e in events if e.data[4] == PARTIAL_UPDATE_ROWS) == 3


def test_the_native_decoder_stages_the_python_decoders_json(mysql: MySQL, documents: dict[str, Any]) -> None:
    python = _read(mysql, documents["start"], documents["end"], native=False)
    native = _read(mysql, documents["start"], documents["end"], native=True)
    took = False
    for p, n in zip(python, native, strict=True):
        commit = commit_ts_text(p.commit_ts)
        for pb, nb in zip(p.batches, n.batches, strict=True):
            encode = csvformat.row_encoder([csv_kind(c) for c in pb.table.columns])
            assert batch_csv(nb, encode, n.seqno, commit) == batch_csv(pb, encode, p.seqno, commit)
            took = took or nb.encoded is not None
    assert took  # the native decoder wrote them, not the Python one in its place
