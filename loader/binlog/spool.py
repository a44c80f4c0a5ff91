"""One server's binlog stream, read once and spooled to local files in pieces cut at
transaction starts, so that worker processes decode the pieces in parallel.

A piece is decoded as the files transport decodes a range that starts inside a file: the
format description in force there comes first (marked artificial), then the piece's events.
Each transaction carries its own table maps, so nothing else carries over from one piece to
the next. The pieces are written as the stream arrives, so the first ones are decoded while
the parent still reads the rest.
"""

from __future__ import annotations

import array
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import BinaryIO

from loader.binlog import split
from loader.binlog.constants import HEADER_LEN, EventType
from loader.binlog.split import starts_transaction
from loader.binlog.transport import RUN_BYTES, EventRun, RawEvent, in_runs, joined
from loader.core.errors import DecodeError
from loader.core.positions import Position

_RECORD = struct.Struct("<BQI")  # kind, position, length of what follows
# An event; one without a position of its own; the file the records after it are in; a run
# of events (its position the first one's); the gaps of the run that follows (native u64s:
# its offsets, then its positions; the position field holds how many).
_EVENT, _ARTIFICIAL, _FILE, _RUN, _GAPS = 0, 1, 2, 3, 4
_READ_BUFFER = 1 << 20


@dataclass(frozen=True)
class Piece:
    """A spooled part of the stream: the events of ``[start, end)`` in the file at ``path``."""

    start: Position
    end: Position
    path: str
    bytes: int  # of log between its positions (the server sends less where it leaves events out)


def stream_bytes(sizes: Mapping[str, int], start: Position, end: Position) -> int:
    """Bytes of log between two positions, from the sizes of the binlog files (oldest first,
    as SHOW BINARY LOGS lists them); the files between must be listed."""
    if start.file == end.file:
        return max(0, end.pos - start.pos)
    total = 0
    for name, size in sizes.items():
        if Position(start.file, 0) <= Position(name, 0) <= Position(end.file, 0):
            first = start.pos if name == start.file else 4
            last = end.pos if name == end.file else size
            total += max(0, last - first)
    return total


class _Writer:
    def __init__(self, path: str) -> None:
        self.path = path
        self.out: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.file: str | None = None

    def write(self, event: RawEvent | EventRun, artificial: bool = False) -> None:
        if event.file != self.file:
            name = event.file.encode("utf-8")
            self.out.write(_RECORD.pack(_FILE, 0, len(name)) + name)
            self.file = event.file
        if isinstance(event, EventRun):
            if event.gap_offsets:
                gaps = array.array("Q", event.gap_offsets + event.gap_positions).tobytes()
                self.out.write(_RECORD.pack(_GAPS, len(event.gap_offsets), len(gaps)) + gaps)
            self.out.write(_RECORD.pack(_RUN, event.pos, len(event.data)))
            self.out.write(event.data)
            return
        kind = _ARTIFICIAL if artificial or event.artificial else _EVENT
        self.out.write(_RECORD.pack(kind, event.pos, len(event.data)))
        self.out.write(event.data)

    def close(self) -> None:
        self.out.close()


def spool_pieces(
    events: Iterable[RawEvent | EventRun], start: Position, end: Position, total: int, parts: int, folder: str
) -> Iterator[Piece]:
    """Write the stream of ``[start, end)`` (``total`` bytes of log; events, or runs of them) to
    up to ``parts`` files of similar sizes, each cut where a transaction starts; yields each
    piece once it is written."""
    targets = [total * k // parts for k in range(1, parts)]
    number = 0
    fde: RawEvent | None = None  # the format description in force

    def next_piece() -> _Writer:
        """The next piece's file, the format description in force first (marked artificial)."""
        piece = _Writer(f"{folder}/piece-{number:03d}.events")
        if fde is not None:
            piece.write(fde, artificial=True)
        return piece

    writer = next_piece()
    begin = start
    log = _LogRead(start)  # bytes of log read, over all pieces
    written = 0  # of them, in this piece
    try:
        for event in events:
            if isinstance(event, EventRun):
                # Cut where a transaction starts past the target, as often as targets fall in it.
                while targets and log.after(event.file, event.position(len(event.data))) > targets[0]:
                    cut = _transaction_start(event, event.offset_at(log.position_at(event.file, targets[0])))
                    if cut is None:
                        break
                    if cut > 0:
                        writer.write(event.head(cut))
                        written += log.passed(event.file, event.position(cut))
                    at = Position(event.file, event.position(cut))
                    event = event.rest(cut)
                    if at != begin:
                        writer.close()
                        yield Piece(begin, at, writer.path, written)
                        number += 1
                        writer = next_piece()
                        begin, written = at, 0
                    while targets and targets[0] <= log.done:
                        targets.pop(0)
                if event.data:
                    writer.write(event)
                    written += log.passed(event.file, event.position(len(event.data)))
                continue
            data = event.data
            typ = data[4]
            if (
                targets
                and not event.artificial
                and log.done >= targets[0]
                and starts_transaction(typ, data[HEADER_LEN:] if typ == EventType.QUERY else b"")
                and (at := Position(event.file, event.pos)) != begin
            ):
                writer.close()
                yield Piece(begin, at, writer.path, written)
                while targets and targets[0] <= log.done:
                    targets.pop(0)
                number += 1
                writer = next_piece()
                begin, written = at, 0
            if typ == EventType.FORMAT_DESCRIPTION:
                fde = event
            writer.write(event)
            if not event.artificial:
                written += log.passed(event.file, event.pos + len(data))
    finally:
        writer.close()
    yield Piece(begin, end, writer.path, written)


class _LogRead:
    """How many bytes of log the stream has gone past since its start, counted in positions:
    the server leaves some events out of a replica's stream (MariaDB its Annotate_rows events,
    the statements' text, often most of the log of single-row transactions), and the pieces are
    cut at shares of the log's bytes between the interval's positions (``stream_bytes``)."""

    def __init__(self, start: Position) -> None:
        self.file, self.pos = start.file, start.pos
        self.done = 0

    def _base(self, file: str) -> int:
        """Where the stream stands in ``file``: a file after this one is read from its first
        event, at 4."""
        return self.pos if file == self.file else 4

    def after(self, file: str, end: int) -> int:
        """``done`` once the stream has read to ``end`` in ``file``."""
        return self.done + max(0, end - self._base(file))

    def position_at(self, file: str, done: int) -> int:
        """The position in ``file`` (this one or the next) where ``done`` bytes are read."""
        return self._base(file) + done - self.done

    def passed(self, file: str, end: int) -> int:
        """Record that the stream has read to ``end`` in ``file``; the bytes of log passed."""
        before = self.done
        self.pos, self.done = max(self._base(file), end), self.after(file, end)
        self.file = file
        return self.done - before


def _transaction_start(run: EventRun, at_least: int) -> int | None:
    """The offset of the first event of ``run`` at or past ``at_least`` that starts a
    transaction (``split``'s walk of event headers); None when none does. ``at_least`` is 0
    once a transaction longer than the rest of the last run carried the stream past the target."""
    off, status = split.transaction_start(run.data, at_least)
    return off if status == split.FOUND else None


def _coalesced(items: Iterable[RawEvent | EventRun], most: int = RUN_BYTES) -> Iterator[RawEvent | EventRun]:
    """Runs of one file one after the other joined into runs of up to ``most`` bytes. The runs
    are spooled as the parent's reads of the socket gave them, often tens of KB, and each run
    the native reader takes costs a write per table it holds rows of."""
    pending: list[EventRun] = []
    size = 0
    for item in items:
        if (
            isinstance(item, EventRun)
            and pending
            and item.file == pending[0].file
            and size + len(item.data) <= most
        ):
            pending.append(item)
            size += len(item.data)
            continue
        if pending:
            yield joined(*pending)
            pending, size = [], 0
        if isinstance(item, EventRun):
            pending, size = [item], len(item.data)
        else:
            yield item
    if pending:
        yield joined(*pending)


class SpooledEvents:
    """A transport that replays one spooled piece (what the server sent for it)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def runs(self, start: Position, end: Position | None) -> Iterator[RawEvent | EventRun]:
        """The piece's events in runs (those spooled joined up to ``RUN_BYTES``, or grouped
        here)."""
        return in_runs(_coalesced(self._records(start)))

    def _records(self, start: Position) -> Iterator[RawEvent | EventRun]:
        file = start.file
        offsets: tuple[int, ...] = ()
        positions: tuple[int, ...] = ()
        with open(self.path, "rb", buffering=_READ_BUFFER) as f:
            while head := f.read(_RECORD.size):
                kind, pos, size = _RECORD.unpack(head)
                data = f.read(size)
                if len(data) != size:
                    raise DecodeError(f"the spooled stream in {self.path} is cut short", f"{file}:{pos}")
                if kind == _FILE:
                    file = data.decode("utf-8")
                elif kind == _GAPS:
                    values = array.array("Q", data).tolist()
                    offsets, positions = tuple(values[:pos]), tuple(values[pos:])
                elif kind == _RUN:
                    yield EventRun(file, pos, data, offsets, positions)
                    offsets = positions = ()
                else:
                    yield RawEvent(file, pos, data, kind == _ARTIFICIAL)

    def events(self, start: Position, end: Position | None) -> Iterator[RawEvent]:
        for item in self._records(start):
            if isinstance(item, RawEvent):
                yield item
                continue
            yield from (event for _, event in item.events())

    def close(self) -> None:
        """The file is opened per read; nothing to release."""
