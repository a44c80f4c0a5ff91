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
from loader.core.errors import LoaderError
from loader.core.positions import Position
from tests.binlog.reference import prepare
from tests.binlog.test_native_rows import staged
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


@pytest.mark.integration
@pytest.mark.parametrize("checksum", ["CRC32", "NONE"])
def test_the_native_reader_reads_damaged_files_as_the_python_reader_does(
    mariadb: Any, tmp_path: Path, checksum: str
) -> None:
    """Bit flips, random bytes and cuts in a MariaDB binlog of single-row transactions: the
    native reader stages the same rows as the Python reader up to the same error (with
    checksums, damage stops both at the event; without, it reaches the row images)."""
    import shutil

    mariadb.execute(
        "DROP DATABASE IF EXISTS fz",
        "CREATE DATABASE fz",
        "CREATE TABLE fz.t (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(8,3), ts DATETIME(6), b BLOB, "
        "e ENUM('x','y'), f FLOAT) DEFAULT CHARSET=utf8mb4",
        f"SET GLOBAL binlog_checksum = {checksum}",
        "FLUSH BINARY LOGS",
    )
    try:
        file = mariadb.execute().file
        for i in range(40):
            mariadb.execute(
                f"INSERT INTO fz.t VALUES ({i}, 'v{i}\"', {i}.125, '2024-01-02 03:04:05.{i:06d}', x'00{i:02x}', "
                f"'{'xy'[i % 2]}', {i}.5)",
                *([f"UPDATE fz.t SET v = 'u{i}' WHERE id = {i // 2}"] if i % 3 == 0 else []),
                *([f"DELETE FROM fz.t WHERE id = {i - 5}"] if i % 7 == 0 and i > 5 else []),
            )
        mariadb.execute("FLUSH BINARY LOGS")
    finally:
        mariadb.execute("SET GLOBAL binlog_checksum = CRC32")
    path = tmp_path / file
    shutil.copy(mariadb.binlog_dir / file, path)
    whole = staged(path, native=True)
    assert whole[0] == "" and whole[4] >= 40 and whole[:4] == staged(path, native=False)[:4]
    _damaged_alike(path, random.Random(checksum), 150)


@pytest.mark.parametrize(
    "rel",
    [
        "mysql-binlog-connector-java/mysql-bin.checksum-crc32",
        "mysql-cdc-rs/binlog.000733",
    ],
)
def test_the_native_reader_reads_damaged_mysql_files_as_the_python_reader_does(
    rel: str, tmp_path: Path
) -> None:
    path = prepare(BINLOG_TESTDATA / rel, tmp_path)
    assert staged(path, native=True)[4] > 0  # MySQL's transactions the native reader takes whole
    _damaged_alike(path, random.Random(rel), 100)


def _damaged_alike(path: Path, rnd: random.Random, times: int) -> None:
    """Bit flips, random bytes or a cut, ``times`` over: both readers stage the same rows up to
    the same error."""
    original = path.read_bytes()
    for n in range(times):
        data = bytearray(original)
        what = rnd.choice(["flip", "bytes", "cut"])
        if what == "cut":
            data = data[: rnd.randrange(4, len(data))]
        for _ in range(rnd.randrange(1, 4) if what != "cut" else 0):
            i = rnd.randrange(4, len(data))
            data[i] = data[i] ^ 1 << rnd.randrange(8) if what == "flip" else rnd.randrange(256)
        path.write_bytes(data)
        assert staged(path, native=True)[:4] == staged(path, native=False)[:4], (n, what)
