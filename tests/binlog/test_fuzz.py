"""Damaged binlogs: truncated or bit-flipped events give a decode error, never another exception
and never wrong rows."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path
from typing import Any

import pytest

from loader.binlog.files import BinlogFiles
from loader.binlog.transactions import TransactionReader
from loader.errors import LoaderError
from loader.positions import Position
from tests.binlog.reference import prepare
from tests.conftest import BINLOG_TESTDATA

CRC_FILES = [
    "mysql-binlog-connector-java/mysql-bin.checksum-crc32",
    "MySqlCdc/mysql-bin.000001",
    "rust_mysql_common/json-opaque.binlog",
    "mysql-binlog-connector-java/mysql-bin.compressed",
    "rust_mysql_common/mariadb-bin.000001",
]
NO_CRC_FILES = [
    "mysql-binlog-connector-java/mysql-bin.checksum-none",
    "go-mysql/tcb-eval002c-bin.003320",
    "binlog-parser/mysql-bin.07",
]


def summary(path: Path) -> list[Any]:
    reader = TransactionReader(strict=False)
    out = []
    for tx in reader.read(BinlogFiles(path).events(Position(path.name, 4), None)):
        out.append((tx.start, tx.end, tx.gtid, [(b.table.qualified, b.op, b.rows) for b in tx.batches]))
    return out


@pytest.mark.parametrize("rel", CRC_FILES)
def test_bit_flips_in_checksummed_files_are_caught(rel: str, tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / rel, tmp_path)
    original = path.read_bytes()
    expected = summary(path)
    rnd = random.Random(rel)
    caught = 0
    for _ in range(150):
        data = bytearray(original)
        i = rnd.randrange(4, len(data))
        data[i] ^= 1 << rnd.randrange(8)
        path.write_bytes(data)
        try:
            got = summary(path)
        except LoaderError:
            caught += 1
            continue
        # A flip the checksum cannot see (the FDE's in-use flag) must not change any row.
        assert got == expected, f"flip at byte {i} changed the decoded rows"
    assert caught >= 140


@pytest.mark.parametrize("rel", CRC_FILES + NO_CRC_FILES)
def test_truncated_files_give_an_error_or_a_prefix(rel: str, tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / rel, tmp_path)
    original = path.read_bytes()
    expected = summary(path)
    rnd = random.Random(rel + "cut")
    for _ in range(60):
        cut = rnd.randrange(0, len(original))
        path.write_bytes(original[:cut])
        try:
            got = summary(path)
        except LoaderError:
            continue
        assert got == expected[: len(got)], f"cut at {cut} gave rows that are not a prefix"


@pytest.mark.parametrize("rel", NO_CRC_FILES)
def test_random_damage_without_checksums_raises_only_decode_errors(rel: str, tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / rel, tmp_path)
    original = path.read_bytes()
    rnd = random.Random(rel + "bytes")
    for _ in range(200):
        data = bytearray(original)
        for _ in range(rnd.randrange(1, 4)):
            data[rnd.randrange(4, len(data))] = rnd.randrange(256)
        path.write_bytes(data)
        with contextlib.suppress(LoaderError):  # the only acceptable failure
            summary(path)
