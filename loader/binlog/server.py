"""Reading the binlog from a live server over the replication protocol.

Registers as a replica with its own server id (COM_REGISTER_SLAVE), then asks for the log
from a position (COM_BINLOG_DUMP) in non-blocking mode, so the server answers with an EOF
packet at the end of its log instead of waiting for new events. Works against MySQL 5.6+,
8.x and MariaDB; uses pymysql's connection for the wire protocol.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from typing import Any

from loader.binlog.constants import HEADER_LEN, EventType
from loader.binlog.transport import RUN_BYTES, EventRun, RawEvent
from loader.core.driver import pymysql
from loader.core.errors import DecodeError, SourceError, TransientError
from loader.core.positions import Position
from loader.source.connection import LOST_CONNECTION, Credentials, connect, current_position
from loader.source.wire import check_error, read_some

COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
BINLOG_DUMP_NON_BLOCK = 0x01
_HEADER = struct.Struct("<IBIIIH")
# Errors the server sends for a bad request position or a purged file.
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236


class BinlogServer:
    """A replication client of one source server.

    Args:
        creds: the source's address and an account with REPLICATION SLAVE.
        server_id: the replica id to register with; unique among the source's replicas. 0
            reads without registering, as ``mysqlbinlog`` does: a short read beside the loader's
            own stream (a server ends an older dump of the same replica id when a new one starts).
        read_timeout: seconds to wait for a packet before giving up (a TransientError).
    """

    def __init__(self, creds: Credentials, server_id: int, read_timeout: int = 60) -> None:
        self.creds = creds
        self.server_id = server_id
        self.read_timeout = read_timeout
        self._conn: Any = None
        self._checksum = False
        # Where the stream has been read to (file, end of the last event), for an error.
        self._read_to: tuple[str, int] | None = None

    def close(self) -> None:
        if self._conn is not None:
            # The dump may have left the connection mid-stream; closing it may then fail.
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _open(self) -> Any:
        self.close()
        conn = connect(self.creds, read_timeout=self.read_timeout)
        with conn.cursor() as cur:
            # Announce that we verify checksums, so the server sends them; MariaDB also wants to
            # know we understand its GTID events.
            cur.execute("SELECT @@global.binlog_checksum")
            row = cur.fetchone()
            self._checksum = bool(row) and str(row[0]).upper() == "CRC32"
            cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            cur.execute("SET @slave_uuid = UUID()")
            cur.execute("SET @mariadb_slave_capability = 4")
            # A heartbeat when the server has nothing to send for half the read timeout (ns), so
            # that an idle but live server is not taken for a frozen one.
            cur.execute("SET @master_heartbeat_period = %s", (self.read_timeout * 500_000_000,))
        if self.server_id == 0:
            self._conn = conn
            return conn
        host = b"loader"
        user = self.creds.user.encode("utf-8")
        payload = (
            struct.pack("<IB", self.server_id, len(host))
            + host
            + bytes((len(user),))
            + user
            + b"\x00"  # no password is sent with the registration
            + struct.pack("<HII", self.creds.port, 0, 0)
        )
        self._command(conn, COM_REGISTER_SLAVE, payload)
        conn._read_packet()
        self._conn = conn
        return conn

    @staticmethod
    def _command(conn: Any, command: int, payload: bytes) -> None:
        conn._execute_command(command, payload)

    def events(self, start: Position, end: Position | None) -> Iterator[RawEvent]:
        for item in self._dump(start, end, runs=False):
            assert isinstance(item, RawEvent)
            yield item

    def runs(self, start: Position, end: Position | None) -> Iterator[RawEvent | EventRun]:
        """``events``, with the plain events of the stream handed out in runs (for the native
        reader): its packets are split natively, not one by one here."""
        return self._dump(start, end, runs=True)

    def _dump(self, start: Position, end: Position | None, runs: bool) -> Iterator[RawEvent | EventRun]:
        self._read_to = (start.file, start.pos)
        try:
            conn = self._open()
            name = start.file.encode("utf-8")
            dump = struct.pack("<IHI", start.pos, BINLOG_DUMP_NON_BLOCK, self.server_id) + name
            self._command(conn, COM_BINLOG_DUMP, dump)
            yield from self._stream(conn, _Reading(start, end), runs)
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else 0
            message = exc.args[-1] if exc.args else str(exc)
            if code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
                raise SourceError(
                    f"{self.creds.where} cannot send its binlog from {start}: {message}"
                ) from None
            if code in LOST_CONNECTION:
                raise TransientError(
                    f"lost the replication connection to {self.creds.where}: {message}; the binlog was read "
                    f"from {start} to {Position(*self._read_to) if self._read_to else start}, and the next "
                    "run reads it again"
                ) from None
            raise SourceError(f"{self.creds.where} refused the binlog dump from {start}: {message}") from None
        finally:
            self.close()

    def _stream(self, conn: Any, at: _Reading, runs: bool) -> Iterator[RawEvent | EventRun]:
        for data in _packets(conn):
            event = self._event(data, at)
            if event is not None:
                yield event
            if at.done:
                return
            if runs and not at.first:
                break  # the start is checked: the rest in runs
        else:
            return
        from loader._native import PacketStream

        stream = PacketStream()
        fresh = b""
        while not at.done:
            items = stream.feed(fresh, at.limit(), RUN_BYTES)
            if not items:
                fresh = read_some(conn, RUN_BYTES)
                continue
            fresh = b""
            for item in items:
                if isinstance(item, bytes):
                    check_error(item)
                    event = self._event(item, at)
                    if event is not None:
                        yield event
                else:
                    pos, data, offsets, positions, end = item
                    yield EventRun(at.file, pos, data, tuple(offsets), tuple(positions))
                    self._read_to = (at.file, end)
                    at.done = at.end_key is not None and (at.lognum, end) >= at.end_key
                if at.done:
                    return

    def _event(self, data: bytes, at: _Reading) -> RawEvent | None:
        """The event of one packet of the dump, and where the stream is (``at``)."""
        if data[0] == 0xFE and len(data) < 9:  # EOF: the end of the server's log
            if at.end is not None:
                raise self._ended_early(at.file, at.end)
            at.done = True
            return None
        raw = data[1:]
        if len(raw) < HEADER_LEN:
            raise DecodeError(f"the source sent an event of {len(raw)} bytes", at.file)
        timestamp, typ, _sid, size, log_pos, _flags = _HEADER.unpack_from(raw, 0)
        if size != len(raw):
            raise DecodeError(f"event size {size} does not match the {len(raw)} bytes received", at.file)
        if typ == EventType.ROTATE and (log_pos == 0 or timestamp == 0):
            # The server's fake rotate names the file that follows.
            at.move_to(_rotate_name(raw, self._checksum))
            return RawEvent(at.file, 0, raw, artificial=True)
        if log_pos == 0 or typ in (EventType.HEARTBEAT, EventType.HEARTBEAT_V2):
            return RawEvent(at.file, 0, raw, artificial=True)
        pos = log_pos - size
        if at.first and typ != EventType.FORMAT_DESCRIPTION and pos != at.start.pos:
            raise SourceError(f"the source started at {at.file}:{pos}, not at the requested {at.start}")
        if typ == EventType.FORMAT_DESCRIPTION and at.start.pos > 4 and at.file == at.start.file and pos == 4:
            # Re-sent so that the stream can be decoded from a position inside the file.
            return RawEvent(at.file, pos, raw, artificial=True)
        at.first = False
        if at.end_key is not None and (at.lognum, pos) >= at.end_key:
            at.done = True
            return None
        event = RawEvent(at.file, pos, raw)
        self._read_to = (at.file, log_pos)
        at.done = at.end_key is not None and (at.lognum, log_pos) >= at.end_key
        if typ == EventType.ROTATE:
            at.move_to(_rotate_name(raw, self._checksum))
        return event

    def _ended_early(self, file: str, end: Position) -> Exception:
        """The stream's EOF came before ``end``: a server shutting down ends its dumps so (a
        transient failure, when it is gone or holds ``end`` still), or its log no longer
        reaches ``end``."""
        try:
            conn = connect(self.creds)
            try:
                now = current_position(conn)
            finally:
                conn.close()
        except (TransientError, pymysql.err.Error):
            now = None
        if now is None or now >= end:
            return TransientError(
                f"the source stopped sending its binlog in {file}, before the end position {end} "
                f"({'it is shutting down or out of reach' if now is None else 'it holds that position'}); "
                "the next run reads it again"
            )
        return DecodeError(
            f"the source's binlog ended before the end position {end} (the server is at {now})", file
        )


class _Reading:
    """Where a dump stands: its file, whether its first event is still to come, its end."""

    def __init__(self, start: Position, end: Position | None) -> None:
        self.start, self.end = start, end
        self.file, self.lognum = start.file, start.lognum
        self.first = True
        self.done = False
        # Positions compared as numbers: this runs for every event.
        self.end_key = end.key() if end is not None else None

    def move_to(self, file: str) -> None:
        self.file, self.lognum = file, Position(file, 0).lognum

    def limit(self) -> int:
        """The position in the current file where the dump ends (past any event: none here)."""
        if self.end_key is None or self.end_key[0] > self.lognum:
            return 1 << 63
        return self.end_key[1] if self.end_key[0] == self.lognum else 0


def _packets(conn: Any) -> Iterator[bytes]:
    """Packet payloads straight from the connection's buffered socket reader.

    pymysql's own packet reader builds an object per packet; the dump stream is one packet per
    event, so reading the 4-byte header and the payload here halves the cost per event.
    """
    read = conn._read_bytes
    while True:
        header = read(4)
        length = header[0] | header[1] << 8 | header[2] << 16
        payload = read(length)
        while length == 0xFFFFFF:  # a payload of 16 MB or more continues in the next packet
            header = read(4)
            length = header[0] | header[1] << 8 | header[2] << 16
            payload += read(length)
        check_error(payload)
        yield payload


def _rotate_name(raw: bytes, checksum: bool) -> str:
    end = len(raw) - 4 if checksum else len(raw)
    return raw[HEADER_LEN + 8 : end].decode("utf-8")
