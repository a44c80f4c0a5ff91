"""Split points of a binlog range: the native walk of event headers finds the transaction starts
the Python walk (its reference) finds, in every real binlog of the shared test data."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from loader._native import transaction_start
from loader.binlog import split
from loader.binlog.constants import HEADER_LEN, EventType
from loader.binlog.files import BinlogFiles
from loader.core.errors import LoaderError
from loader.core.positions import Position
from tests.binlog.reference import prepare
from tests.binlog.test_testdata import FILES
from tests.conftest import BINLOG_TESTDATA


@pytest.mark.parametrize("rel", FILES)
def test_the_native_walk_finds_the_python_walks_transaction_starts(rel: str, tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / rel, tmp_path)
    data = path.read_bytes()
    rng = random.Random(rel)
    first = 4
    if len(data) >= 4 + 19:
        with open(path, "rb") as f:
            first = min(split._after_format_description(f), len(data))
    for _ in range(40):
        # From the first event after the format description, whole or cut short (a walk that
        # needs more bytes), or from a place that is no event's start (damage).
        begin = first if rng.random() < 0.8 else rng.randrange(4, len(data))
        block = data[begin : rng.choice([len(data), rng.randrange(begin, len(data) + 1)])]
        target = rng.randrange(len(block) + 1)
        assert transaction_start(block, target) == split._transaction_start_python(block, target), (
            begin,
            target,
        )


def test_split_points_are_transaction_starts_of_the_events_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the test binlogs of several transactions, each point is an event the reader of files
    reads that begins a transaction, the same with either walk."""
    checked = found = 0
    for n, rel in enumerate(FILES):
        (tmp_path / str(n)).mkdir()
        path = prepare(BINLOG_TESTDATA / rel, tmp_path / str(n))
        files = BinlogFiles(path)
        start, end = Position(path.name, 4), Position(path.name, path.stat().st_size)
        try:
            starts = {
                Position(e.file, e.pos)
                for e in files.events(start, end)
                if split.starts_transaction(
                    e.data[4], e.data[HEADER_LEN:] if e.data[4] == EventType.QUERY else b""
                )
            }
        except LoaderError:  # damaged test files: their walks are compared above
            continue
        if len(starts) < 8:
            continue
        for parts in (2, 3, 7):
            native = split_points_with(files, start, end, parts, monkeypatch, transaction_start)
            python = split_points_with(files, start, end, parts, monkeypatch, split._transaction_start_python)
            assert native == python, (rel, parts)
            assert set(native) <= starts, (rel, parts, native)
            found += len(native)
        checked += 1
    assert checked >= 5 and found >= 20, (checked, found)


def split_points_with(
    files: BinlogFiles,
    start: Position,
    end: Position,
    parts: int,
    monkeypatch: pytest.MonkeyPatch,
    walk: object,
) -> list[Position]:
    monkeypatch.setattr(split, "_walk", walk)
    return split.split_points(files, start, end, parts)
