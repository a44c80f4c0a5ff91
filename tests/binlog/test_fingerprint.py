"""The fingerprint of a transaction, read from real binlog files of MySQL 8 and MariaDB."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from loader.binlog.files import BinlogFiles
from loader.binlog.fingerprint import Fingerprint, read_fingerprint
from loader.core.errors import LedgerError
from loader.core.positions import Position
from tests.binlog.reference import prepare
from tests.conftest import BINLOG_TESTDATA


def _header_seconds(path: Path, pos: int) -> int:
    return int(struct.unpack_from("<I", path.read_bytes(), pos)[0])


def test_a_mysql_8_gtid_event_gives_its_gtid_and_its_original_commit_time_in_microseconds(
    tmp_path: Path,
) -> None:
    path = prepare(BINLOG_TESTDATA / "mysql-binlog-connector-rust/mysql-bin.000057", tmp_path)
    at = Position(path.name, 197)  # the file's first Gtid event (MySQL 8.0.31)
    found = read_fingerprint(BinlogFiles(tmp_path), at)
    assert found is not None and found.at == at
    sid, gno = found.gtid.split(":")
    assert len(sid.replace("-", "")) == 32 and gno.isdigit()
    # The primary's commit time to the microsecond, in the second the event was written.
    seconds = _header_seconds(path, at.pos)
    assert seconds * 1_000_000 <= found.commit_us < (seconds + 1) * 1_000_000
    assert found.commit_us % 1_000_000 != 0
    # No GTID event there: a Query event, or no event boundary.
    assert read_fingerprint(BinlogFiles(tmp_path), Position(path.name, 274)) is None
    assert read_fingerprint(BinlogFiles(tmp_path), Position(path.name, 275)) is None


def test_a_mariadb_gtid_event_gives_its_gtid_and_its_time(tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / "mariadb-poc/mariadb-repl-bin.000009", tmp_path)
    found = read_fingerprint(BinlogFiles(tmp_path), Position(path.name, 349))
    assert found == Fingerprint(
        Position(path.name, 349), "0-10-292194", _header_seconds(path, 349) * 1_000_000
    )


def test_the_ledger_text_reads_back_and_names_the_transaction() -> None:
    fingerprint = Fingerprint(Position("mysql-bin.000003", 900), "0-1-68", 1_764_179_496_000_000)
    assert fingerprint.text() == "mysql-bin.000003:900 0-1-68 1764179496000000"
    assert Fingerprint.parse(fingerprint.text()) == fingerprint
    assert fingerprint.describe() == "GTID 0-1-68 committed 2025-11-26 17:51:36 UTC (at mysql-bin.000003:900)"
    precise = Fingerprint(Position("binlog.000001", 4), "3e11fa47-71ca-11e1-9e33-c80aa9429562:5", 1_000_001)
    assert precise.describe().startswith(
        "GTID 3e11fa47-71ca-11e1-9e33-c80aa9429562:5 committed 1970-01-01 00:00:01.000001"
    )
    # The same transaction at a replica's position; another one with the same GTID is not.
    assert fingerprint.same_transaction(
        Fingerprint(Position("mysql-bin.000009", 4), "0-1-68", 1_764_179_496_000_000)
    )
    assert not fingerprint.same_transaction(Fingerprint(fingerprint.at, "0-1-68", 1_764_179_497_000_000))
    with pytest.raises(LedgerError, match="is not a transaction fingerprint"):
        Fingerprint.parse("0-1-68")
