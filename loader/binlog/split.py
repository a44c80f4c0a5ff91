"""Splitting a range of binlog files at transaction starts, for decoding it in parallel.

Only event headers are read (and the few bytes of a Query event that say BEGIN), walked by the
native module in blocks of the file (``transaction_start``; this module's own walk, its
reference, where the module is not built), so finding the split points costs a small part of
decoding the range. Each transaction carries its own table maps, so any transaction start is a
place a decoder can begin.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import BinaryIO

from loader.binlog.constants import HEADER_LEN, EventType
from loader.binlog.files import BinlogFiles
from loader.core.positions import Position

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
            while targets and targets[0] < done + last - first:
                # The first transaction start at or after the target (never the range's start:
                # every target is past it) and before the range's end.
                found = _first_start(f, pos, last, first + targets[0] - done)
                if found is None:
                    break
                out.append(Position(name, found))
                while targets and targets[0] <= done + found - first:
                    targets.pop(0)
                pos = found
        done += max(0, last - first)
    return out


_BLOCK = 1 << 20
_NEEDS_MORE, FOUND = 0, 1  # what ``transaction_start`` says (2: a damaged header)


def _first_start(f: BinaryIO, pos: int, last: int, at: int) -> int | None:
    """The position of the first event starting a transaction at or after ``at`` and before
    ``last``, event headers walked from ``pos`` (an event's start); None when there is none (or
    a damaged header comes first)."""
    while pos < last:
        f.seek(pos)
        block = f.read(_BLOCK)
        off, status = transaction_start(block, at - pos)
        if status == FOUND:
            return pos + off if pos + off < last else None
        if status != _NEEDS_MORE or off == 0:  # damaged, or the file ends inside an event
            return None
        pos += off
    return None


def _transaction_start_python(data: bytes, target: int) -> tuple[int, int]:
    """``loader._native.transaction_start``: ``(offset, status)`` of the first transaction start
    at or after ``target`` in ``data``, event headers walked from its start (status 1 found, 0
    the walk needs the bytes from ``offset`` on, 2 a damaged header at ``offset``)."""
    off = 0
    while off + HEADER_LEN <= len(data):
        _ts, typ, _sid, size, _lp, _fl = _HEADER.unpack_from(data, off)
        if size < HEADER_LEN:
            return off, 2
        if off >= target:
            if typ == EventType.QUERY and size <= _BEGIN_MAX:
                if off + size > len(data):
                    return off, _NEEDS_MORE
                if starts_transaction(typ, data[off + HEADER_LEN : off + size]):
                    return off, FOUND
            elif starts_transaction(typ, b""):
                return off, FOUND
        off += size
    return off, _NEEDS_MORE


def _native_walk() -> Callable[[bytes, int], tuple[int, int]]:
    try:
        from loader._native import transaction_start
    except ImportError:  # the module is not built: the Python decoder's set-up needs no Rust
        return _transaction_start_python
    return transaction_start


def _after_format_description(f: BinaryIO) -> int:
    f.seek(4)
    head = f.read(HEADER_LEN)
    return 4 + int(_HEADER.unpack_from(head, 0)[3])


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


_walk = _native_walk()


def transaction_start(data: bytes, target: int) -> tuple[int, int]:
    """``(offset, status)`` of the first transaction start at or after ``target`` in a block of
    whole or cut events (``_transaction_start_python``); a target before the block (one the walk
    of a stream has passed already) is any start in it."""
    return _walk(data, max(0, target))
