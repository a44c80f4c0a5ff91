"""Splitting a range of binlog files at transaction starts, for decoding it in parallel.

Only event headers are read (and the few bytes of a Query event that say BEGIN), so finding
the split points costs a small part of decoding the range. Each transaction carries its own
table maps, so any transaction start is a place a decoder can begin.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

from loader.binlog.constants import HEADER_LEN, EventType
from loader.binlog.files import BinlogFiles
from loader.positions import Position

_HEADER = struct.Struct("<IBIIIH")
_BEGIN_MAX = 512  # bytes: a BEGIN query event is far smaller
_STARTS = frozenset({EventType.GTID, EventType.ANONYMOUS_GTID, EventType.GTID_TAGGED, EventType.MARIA_GTID})


def split_points(files: BinlogFiles, start: Position, end: Position, parts: int) -> list[Position]:
    """Up to ``parts - 1`` transaction starts that cut ``[start, end)`` into similar byte sizes."""
    if parts <= 1:
        return []
    paths = {p.name: p for p in files.list_files()}
    names = sorted((n for n in paths if start.file <= n <= end.file), key=lambda n: Position(n, 0).key())
    sizes = {
        n: (end.pos if n == end.file else paths[n].stat().st_size) - (start.pos if n == start.file else 4)
        for n in names
    }
    total = sum(max(0, s) for s in sizes.values())
    if total <= 0:
        return []
    targets = [total * k // parts for k in range(1, parts)]
    out: list[Position] = []
    done = 0  # bytes of the range before the current file
    for name in names:
        first = start.pos if name == start.file else 4
        last = end.pos if name == end.file else paths[name].stat().st_size
        with open(paths[name], "rb") as f:
            pos = first if name == start.file else _after_format_description(f)
            while pos < last and targets:
                f.seek(pos)
                head = f.read(HEADER_LEN)
                if len(head) < HEADER_LEN:
                    break
                _ts, typ, _sid, size, _lp, _fl = _HEADER.unpack_from(head, 0)
                if size < HEADER_LEN:
                    break
                offset = done + (pos - first)
                if offset >= targets[0] and pos != start.pos and _starts_transaction(f, typ, size):
                    out.append(Position(name, pos))
                    while targets and targets[0] <= offset:
                        targets.pop(0)
                pos += size
        done += max(0, last - first)
    return out


def _after_format_description(f: BinaryIO) -> int:
    f.seek(4)
    head = f.read(HEADER_LEN)
    return 4 + int(_HEADER.unpack_from(head, 0)[3])


def _starts_transaction(f: BinaryIO, typ: int, size: int) -> bool:
    # Only a small query's body is read: the BEGIN of a binlog without GTIDs.
    body = f.read(size - HEADER_LEN) if typ == EventType.QUERY and size <= _BEGIN_MAX else b""
    return starts_transaction(typ, body)


def starts_transaction(typ: int, body: bytes) -> bool:
    """Whether an event of type ``typ`` with ``body`` (the bytes after its header) begins a
    transaction: a GTID event, or in binlogs without GTIDs a BEGIN query."""
    if typ in _STARTS:
        return True
    if typ != EventType.QUERY or len(body) < 13 or len(body) > _BEGIN_MAX - HEADER_LEN:
        return False
    db_len, status_len = body[8], int.from_bytes(body[11:13], "little")
    query = body[13 + status_len + db_len + 1 :]
    return query in (b"BEGIN",) or (len(query) == 9 and query.startswith(b"BEGIN"))  # with or without a CRC32
