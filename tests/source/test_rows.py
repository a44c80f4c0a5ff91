"""A query's rows read past pymysql into Arrow columns (``loader.source.rows``), on the test server."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from loader.core.driver import pymysql
from loader.source import rows as source_rows
from loader.source.rows import row_batches
from tests.conftest import MariaDB

pytestmark = pytest.mark.integration


def test_rows_arrive_as_the_servers_bytes_in_batches_and_null_is_not_the_text_null(
    mariadb: MariaDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS sr",
        "CREATE DATABASE sr",
        "CREATE TABLE sr.t (id INT PRIMARY KEY, s VARCHAR(300), b VARBINARY(8))",
        "INSERT INTO sr.t VALUES (1, 'NULL', x'00ff'), (2, NULL, NULL), (3, '', ''), (4, 'tab\\there', x'0a')",
        "INSERT INTO sr.t SELECT seq + 10, REPEAT('é', 300), x'01' FROM mysql.seq_1_to_3000",
    )
    read_some = source_rows.read_some

    def busy_reader(conn: object, most: int) -> bytes:
        time.sleep(0.05)  # a busy client: the socket's window grows and the server sends ahead
        return read_some(conn, most)

    monkeypatch.setattr(source_rows, "read_some", busy_reader)
    conn = mariadb.connect()
    try:
        batches = list(row_batches(conn, "SELECT id, s, b FROM sr.t ORDER BY id", 3, batch_bytes=256 << 10))
        assert len(batches) > 2  # 1.8 MB of rows in batches of ~256 KB
        rows = pa.Table.from_batches(
            [pa.RecordBatch.from_arrays(b, names=["id", "s", "b"]) for b in batches]
        ).to_pylist()
        with conn.cursor() as cur:  # the connection is ready for the next query
            cur.execute("SELECT id, s, b FROM sr.t ORDER BY id")
            want = [(str(i).encode(), None if s is None else s.encode(), b) for i, s, b in cur.fetchall()]
        assert [(r["id"], r["s"], r["b"]) for r in rows] == want
        assert want[:4] == [
            (b"1", b"NULL", b"\x00\xff"),
            (b"2", None, None),
            (b"3", b"", b""),
            (b"4", b"tab\there", b"\n"),
        ]
    finally:
        conn.close()


def test_a_refused_query_is_pymysqls_error_and_a_reader_left_early_closes_its_connection(
    mariadb: MariaDB,
) -> None:
    conn = mariadb.connect()
    try:
        with pytest.raises(pymysql.err.ProgrammingError, match="doesn't exist"):
            list(row_batches(conn, "SELECT * FROM sr.missing", 1))
        reader = row_batches(conn, "SELECT seq FROM mysql.seq_1_to_1000000", 1, batch_bytes=1 << 16)
        assert len(next(reader)[0]) > 0
        reader.close()  # its rows are still coming: the connection cannot be used again
        assert not conn.open
    finally:
        conn.close()
