"""What a MySQL server's settings make of its binlog, read live: compressed transactions (zstd,
across both transports and both decoders), MySQL's default ``binlog_row_metadata=MINIMAL`` (the
columns then come from the source's schema, a YEAR among integers included), and a session's
``binlog_row_image=MINIMAL``, which the reader refuses with the setting to change."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loader.binlog.constants import EventType
from loader.binlog.files import BinlogFiles
from loader.binlog.reader import read_transactions
from loader.binlog.schema import InformationSchema
from loader.binlog.server import BinlogServer
from loader.binlog.transactions import Transaction
from loader.core.errors import DecodeError, ExtractError
from loader.core.positions import Position
from loader.core.tables import TableSelector
from loader.extract.files import batch_csv, commit_ts_text, csv_kind
from loader.extract.interval import run_extract
from loader.source.connection import Credentials, current_position
from loader.staging import csvformat
from tests.conftest import MySQL

pytestmark = pytest.mark.integration

SCHEMA = "my_sessions"
# Signed and unsigned integers around a YEAR (MySQL's signedness bits skip it), text in two charsets.
TABLE = (
    "t (id INT PRIMARY KEY, yr YEAR, qty INT UNSIGNED, d INT, tiny TINYINT UNSIGNED, "
    "l1 VARCHAR(20) CHARACTER SET latin1, note TEXT)"
)
ROWS = [
    (1, 2024, 4294967295, -5, 255, "café", "compressible text " * 30),
    (2, 1901, 0, 2147483647, 0, "", "x"),
    (3, None, None, None, None, None, None),
]


def _read(mysql: MySQL, transport: str, start: Position, end: Position, **kw: Any) -> list[Transaction]:
    creds = Credentials(mysql.host, mysql.port, "loader", mysql.password)
    source = BinlogServer(creds, server_id=4250) if transport == "server" else BinlogFiles(mysql.binlog_dir)
    conn = mysql.connect(user="loader")
    try:
        return list(
            read_transactions(
                source, start, end, TableSelector((f"{SCHEMA}.*",)), InformationSchema(conn), **kw
            )
        )
    finally:
        conn.close()


def _rows(txs: list[Transaction]) -> list[tuple[str, Any, Any]]:
    return [(b.op, before, after) for tx in txs for b in tx.batches for before, after in b.rows]


@pytest.fixture(scope="module")
def compressed(mysql: MySQL) -> Iterator[dict[str, Any]]:
    """Inserts, an update and a delete in compressed transactions, logged with MINIMAL metadata."""
    conn = mysql.connect()
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
        cur.execute(f"CREATE DATABASE {SCHEMA}")
        cur.execute(f"CREATE TABLE {SCHEMA}.{TABLE}")
        cur.execute("SET GLOBAL binlog_row_metadata = 'MINIMAL'")
        try:
            writer = mysql.connect()  # a new session takes the global setting
            with writer.cursor() as w:
                w.execute("SET SESSION binlog_transaction_compression = ON")
                start = current_position(writer)
                w.executemany(f"INSERT INTO {SCHEMA}.t VALUES (%s, %s, %s, %s, %s, %s, %s)", ROWS)
                w.execute(f"UPDATE {SCHEMA}.t SET qty = qty - 1, l1 = 'naïve' WHERE id = 1")
                w.execute(f"DELETE FROM {SCHEMA}.t WHERE id = 2")
                end = current_position(writer)
            writer.close()
        finally:
            cur.execute("SET GLOBAL binlog_row_metadata = 'FULL'")
    conn.close()
    yield {"start": start, "end": end}


@pytest.mark.parametrize("transport", ["files", "server"])
def test_compressed_transactions_with_minimal_metadata_decode_as_selected(
    mysql: MySQL, compressed: dict[str, Any], transport: str
) -> None:
    events = list(BinlogFiles(mysql.binlog_dir).events(compressed["start"], compressed["end"]))
    assert (
        sum(1 for e in events if e.data[4] == EventType.TRANSACTION_PAYLOAD) == 3
    )  # the insert, the update, the delete
    python = _read(mysql, transport, compressed["start"], compressed["end"])
    updated = (1, 2024, 4294967294, -5, 255, "naïve", ROWS[0][6])
    assert _rows(python) == [
        *[("I", None, row) for row in ROWS],
        ("U", ROWS[0], updated),
        ("D", ROWS[1], None),
    ]
    native = _read(mysql, transport, compressed["start"], compressed["end"], native=True)
    took = False
    for p, n in zip(python, native, strict=True):
        commit = commit_ts_text(p.commit_ts)
        for pb, nb in zip(p.batches, n.batches, strict=True):
            encode = csvformat.row_encoder([csv_kind(c) for c in pb.table.columns])
            assert batch_csv(nb, encode, n.seqno, commit) == batch_csv(pb, encode, p.seqno, commit)
            took = took or nb.encoded is not None
    assert took


def test_minimal_metadata_without_the_schema_is_refused(mysql: MySQL, compressed: dict[str, Any]) -> None:
    with pytest.raises(DecodeError, match="set binlog_row_metadata=FULL or let the loader read the schema"):
        list(read_transactions(BinlogFiles(mysql.binlog_dir), compressed["start"], compressed["end"]))


def test_a_minimal_row_image_is_refused_naming_the_setting(mysql: MySQL) -> None:
    conn = mysql.connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {SCHEMA}")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.img (id INT PRIMARY KEY, a INT, b INT)")
        cur.execute(f"REPLACE INTO {SCHEMA}.img VALUES (1, 1, 1)")
        cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
        start = current_position(conn)
        cur.execute(f"UPDATE {SCHEMA}.img SET a = a + 1 WHERE id = 1")
        end = current_position(conn)
    conn.close()
    with pytest.raises(DecodeError, match=r"lacks columns .*binlog_row_image=FULL") as caught:
        _read(mysql, "files", start, end)
    assert f"{SCHEMA}.img" in str(caught.value)


@pytest.mark.parametrize("logged_as", ["STATEMENT", "MIXED"])
def test_dml_a_mysql_session_logs_as_a_statement_stops_the_extract_naming_it(
    mysql: MySQL, tmp_path: Path, logged_as: str
) -> None:
    schema = f"my_stmt_{logged_as.lower()}"
    start = mysql.execute(f"DROP DATABASE IF EXISTS {schema}")
    mysql.execute(
        f"CREATE DATABASE {schema}",
        f"CREATE TABLE {schema}.t (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        f"INSERT INTO {schema}.t VALUES (1, 'a', 1)",
        f"SET SESSION binlog_format = '{logged_as}'",
        f"UPDATE {schema}.t SET v = 'b', n = n + 1 WHERE id = 1",
    )
    cfg = mysql.config(tmp_path, tables={"include": f'["{schema}.*"]'})
    with pytest.raises(ExtractError) as stopped:
        run_extract(cfg, start=start, progress=lambda _: None)
    message = str(stopped.value)
    assert f"{schema}.t: the UPDATE was logged as a statement" in message, message
    assert "set binlog_format=ROW for every session that writes to it" in message, message
    assert message.endswith(f"loader initial-load --tables {schema}.t"), message
