"""A source connection's bytes read past pymysql: where the loader takes a long answer (a binlog
dump, a table's rows) straight from the socket to the native reader, without pymysql's object
per packet."""

from __future__ import annotations

from typing import Any

from loader.core.driver import pymysql


def read_some(conn: Any, most: int) -> bytes:
    """What the connection has to read (at least a byte, at most ``most``), failing as pymysql's
    own reads fail."""
    conn._sock.settimeout(conn._read_timeout)
    try:
        data: bytes = conn._rfile.read1(most)
    except OSError as exc:
        conn._force_close()
        raise pymysql.err.OperationalError(
            2013, f"Lost connection to MySQL server during query ({exc})"
        ) from None
    if not data:
        conn._force_close()
        raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
    return data


def check_error(payload: bytes) -> None:
    """An error packet as the exception pymysql gives for it."""
    if payload[:1] == b"\xff":
        code = int.from_bytes(payload[1:3], "little")
        message = payload[9:] if payload[3:4] == b"#" else payload[3:]
        raise pymysql.err.OperationalError(code, message.decode("utf-8", "replace"))
