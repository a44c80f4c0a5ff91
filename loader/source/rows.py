"""A query's rows from the source as Arrow columns of the values' bytes, for the copy of a table.

pymysql sends the query and reads the column definitions; the rows are read from the socket by
the native reader (``loader._native.TextRows``), which lays each column out as Arrow's large
binary (the text protocol's value bytes, NULL as NULL), so that no Python step runs per row or
per value. What the bytes mean, and the cast to the column's type, is the caller's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from loader import _native
from loader.core.driver import pymysql
from loader.source.wire import check_error, read_some

# Bytes read from the socket at a time, and the bytes of rows gathered into one batch.
READ_BYTES = 1 << 20
BATCH_BYTES = 16 << 20


def row_batches(conn: Any, sql: str, width: int, batch_bytes: int = BATCH_BYTES) -> Iterator[list[pa.Array]]:
    """The rows of ``sql`` (``width`` columns) in batches of about ``batch_bytes`` of values, each
    a list of ``pa.large_binary()`` arrays, one per column.

    Raises:
        pymysql.err.Error: the server refused the query or ended the rows with an error.
        ValueError: a row the reader could not take (the connection is closed).
    """
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(sql)  # reads the column definitions; the rows wait in the socket
        result = conn._result
        if result is None or not result.unbuffered_active:
            return  # not a query that returns rows
        # The rows are read here, not by pymysql: it must not look for them when the cursor closes.
        result.unbuffered_active = False
        conn._result = None
        if result.field_count != width:
            conn._force_close()
            raise ValueError(f"the query returns {result.field_count} columns, not {width}: {sql}")
        reader = _native.TextRows(width)
        # A read never takes more than a batch, so batches keep their size however far ahead
        # the server has sent (a busy client finds a full socket buffer).
        most = min(READ_BYTES, batch_bytes)
        done, gathered = False, 0
        try:
            while not done:
                chunk = read_some(conn, most)
                done, error = reader.feed(chunk)
                if error is not None:
                    check_error(error)
                gathered += len(chunk)
                if done or gathered >= batch_bytes:
                    rows, buffers = reader.take()
                    gathered = 0
                    if rows:
                        yield [_column(rows, b) for b in buffers]
        finally:
            if not done:  # rows left in the socket (an error, or the caller stopped reading)
                conn._force_close()


def _column(rows: int, buffers: tuple[bytes | None, bytes, bytes]) -> pa.Array:
    validity, offsets, data = buffers
    return pa.Array.from_buffers(
        pa.large_binary(),
        rows,
        [pa.py_buffer(validity) if validity is not None else None, pa.py_buffer(offsets), pa.py_buffer(data)],
    )
