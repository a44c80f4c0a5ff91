"""Reading binlog files from a directory or an index file, following rotations."""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from loader.binlog.constants import (
    BINLOG_MAGIC,
    CHECKSUM_CRC32,
    HEADER_LEN,
    EventType,
    event_name,
)
from loader.binlog.parser import BinlogParser
from loader.binlog.transport import RUN_BYTES, EventRun, RawEvent
from loader.core.errors import DecodeError, SourceError
from loader.core.positions import Position, lognum_of

_HEADER = struct.Struct("<IBIIIH")
_NUMBERED = re.compile(r"^(?P<base>.+)\.(?P<num>\d+)$")
_READ_BUFFER = RUN_BYTES


def _known_type(code: int) -> bool:
    try:
        EventType(code)
    except ValueError:
        return False
    return True


class BinlogFiles:
    """Binlog files on local disk: an index file (``mysql-bin.index``), a directory, or one file.

    Args:
        location: path of the index file, of the directory holding the files, or of a single
            binlog file (then only that file is read).
    """

    def __init__(self, location: str | os.PathLike[str]) -> None:
        self.location = Path(location)
        if not self.location.exists():
            raise SourceError(f"binlog location {self.location} does not exist")
        # A single file is read alone: its rotate names a file that is not here.
        self.single = self.location.is_file() and self.location.suffix != ".index"

    def list_files(self) -> list[Path]:
        """The binlog files in log order."""
        loc = self.location
        if loc.is_dir():
            indexes = sorted(loc.glob("*.index"))
            if len(indexes) == 1:
                return self._from_index(indexes[0])
            files = [p for p in loc.iterdir() if p.is_file() and _NUMBERED.match(p.name)]
            return sorted(files, key=lambda p: lognum_of(p.name))
        if loc.suffix == ".index":
            return self._from_index(loc)
        return [loc]

    def _from_index(self, index: Path) -> list[Path]:
        out = []
        for line in index.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line:
                continue
            p = Path(line)
            # Index entries are often relative to the server's data directory: look beside the index.
            out.append(p if p.is_absolute() and p.exists() else index.parent / p.name)
        return out

    def first_position(self) -> Position:
        """The position of the first event after the format description of the oldest file."""
        files = self.list_files()
        if not files:
            raise SourceError(f"no binlog files in {self.location}")
        return Position(files[0].name, 4)

    def end_position(self) -> Position:
        """The end of the newest file, as it is now."""
        files = self.list_files()
        if not files:
            raise SourceError(f"no binlog files in {self.location}")
        return Position(files[-1].name, files[-1].stat().st_size)

    def close(self) -> None:
        """Files are opened per read; nothing to release."""

    def events(self, start: Position, end: Position | None) -> Iterator[RawEvent]:
        for item in self._events(start, end, runs=False):
            assert isinstance(item, RawEvent)
            yield item

    def runs(self, start: Position, end: Position | None) -> Iterator[RawEvent | EventRun]:
        """``events``, with the events between a file's format description and its rotate or
        stop handed out in runs of whole events (for the native reader)."""
        return self._events(start, end, runs=True)

    def _events(self, start: Position, end: Position | None, runs: bool) -> Iterator[RawEvent | EventRun]:
        files = self.list_files()
        names = [p.name for p in files]
        if start.file not in names:
            oldest = names[0] if names else "none"
            raise SourceError(
                f"binlog file {start.file} is not in {self.location} (purged, or never written); "
                f"the oldest file there is {oldest}"
            )
        i = names.index(start.file)
        pos = start.pos
        while True:
            path = files[i]
            next_name: str | None = None
            with open(path, "rb", buffering=_READ_BUFFER) as f:
                for raw in self._file_events(f, path.name, pos, end, runs):
                    if isinstance(raw, str):
                        next_name = raw
                        break
                    yield raw
                else:
                    next_name = None
            if self.single or (end is not None and (path.name == end.file or Position(path.name, 0) > end)):
                return
            if next_name is None:
                # No rotate or stop at the end: the server crashed or is still writing this
                # file. Continue with the next file of the index when there is one.
                if i + 1 >= len(files):
                    if end is not None:
                        raise DecodeError(
                            f"the binlog ends at {path.name}:{path.stat().st_size}, before the end position {end}",
                            f"{path.name}:{path.stat().st_size}",
                        )
                    return
                next_name = names[i + 1]
            if next_name not in names:
                raise SourceError(
                    f"binlog file {next_name} (the next after {path.name}) is missing in {self.location}"
                )
            i = names.index(next_name)
            pos = 4

    def _file_events(
        self, f: BinaryIO, name: str, pos: int, end: Position | None, runs: bool = False
    ) -> Iterator[RawEvent | EventRun | str]:
        """Events of one file (``runs``: in runs of whole events where it can); yields the next
        file's name (a str) on a rotate or stop."""
        if f.read(4) != BINLOG_MAGIC:
            raise DecodeError("not a binlog file (bad magic number)", f"{name}:0")
        fde = _read_event(f, name, 4)
        if fde is None:
            raise DecodeError("binlog file has no format description event", f"{name}:4")
        header = _HEADER.unpack_from(fde, 0)
        if header[1] != EventType.FORMAT_DESCRIPTION:
            raise DecodeError(
                f"first event is {event_name(header[1])}, not a format description",
                f"{name}:4",
                event_name(header[1]),
            )
        probe = BinlogParser(name)
        probe.parse(fde, 4)
        checksum = probe.fde.checksum_alg == CHECKSUM_CRC32
        yield RawEvent(name, 4, fde, artificial=pos > 4)
        after_fde = 4 + len(fde)
        if 4 < pos < after_fde:
            raise DecodeError(f"position {name}:{pos} is not an event boundary", f"{name}:{pos}")
        if pos < after_fde:
            pos = after_fde
        elif pos > after_fde:
            f.seek(pos)
            _check_boundary(f, name, pos, checksum)
        end_pos = end.pos if end is not None and end.file == name else None
        whole = _whole_events() if runs else None
        while end_pos is None or pos < end_pos:
            if whole is not None:
                block = f.read(_READ_BUFFER if end_pos is None else min(_READ_BUFFER, end_pos - pos))
                n = whole(block)
                if n:
                    if n < len(block):
                        f.seek(pos + n)
                    yield EventRun(name, pos, block[:n] if n < len(block) else block)
                    pos += n
                    continue
                # A rotate, a stop, an event past the end position or larger than a block, or
                # a damaged one: read alone, as without runs.
                f.seek(pos)
            raw = _read_event(f, name, pos)
            if raw is None:
                return
            yield RawEvent(name, pos, raw)
            typ = raw[4]
            pos += len(raw)
            if typ == EventType.ROTATE and pos < os.fstat(f.fileno()).st_size:
                # A relay log carries its source's rotate events in the middle of the file.
                continue
            if typ == EventType.ROTATE:
                body_end = len(raw) - (4 if checksum else 0)
                yield raw[HEADER_LEN + 8 : body_end].decode("utf-8")
                return
            if typ == EventType.STOP:
                yield ""
                return


def _whole_events() -> Callable[[bytes], int]:
    from loader._native import whole_events

    return whole_events


def _read_event(f: BinaryIO, name: str, pos: int) -> bytes | None:
    head = f.read(HEADER_LEN)
    if not head:
        return None
    if len(head) < HEADER_LEN:
        raise DecodeError(f"truncated event header ({len(head)} of {HEADER_LEN} bytes)", f"{name}:{pos}")
    size = _HEADER.unpack_from(head, 0)[3]
    if size < HEADER_LEN:
        raise DecodeError(
            f"event size {size} is smaller than its header", f"{name}:{pos}", event_name(head[4])
        )
    rest = f.read(size - HEADER_LEN)
    if len(rest) < size - HEADER_LEN:
        raise DecodeError(
            f"truncated event: {HEADER_LEN + len(rest)} of {size} bytes", f"{name}:{pos}", event_name(head[4])
        )
    return head + rest


def _check_boundary(f: BinaryIO, name: str, pos: int, checksum: bool) -> None:
    """Refuse a start position that is not where an event begins."""
    where = f"{name}:{pos}"
    head = f.read(HEADER_LEN)
    ok = len(head) == HEADER_LEN
    if ok:
        _ts, typ, _sid, size, log_pos, _flags = _HEADER.unpack_from(head, 0)
        ok = _known_type(typ) and size >= HEADER_LEN and log_pos in (0, pos + size)
        if ok and checksum:
            rest = f.read(size - HEADER_LEN)
            raw = head + rest
            ok = len(raw) == size and zlib.crc32(raw[:-4]) == int.from_bytes(raw[-4:], "little")
    if not ok:
        raise DecodeError(f"position {where} is not an event boundary", where)
    f.seek(pos)
