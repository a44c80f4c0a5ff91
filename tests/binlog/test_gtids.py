"""GTID states (pure): MariaDB positions advanced along a stream, MySQL sets read from the
server's text and from real binlogs' Previous_gtids and GTID events, and compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from loader.binlog import events as ev
from loader.binlog import gtids
from loader.binlog.files import BinlogFiles
from loader.binlog.gtids import GtidSet
from loader.binlog.history import gtid_of_event
from loader.binlog.parser import BinlogParser
from loader.binlog.transactions import TransactionReader
from loader.core.errors import GtidError, HistoryError
from loader.core.positions import Position
from loader.extract.decode import RangeResult
from loader.extract.interval import _gtid_reached
from loader.state.records import Interval
from tests.binlog.reference import prepare
from tests.conftest import BINLOG_TESTDATA

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
OTHER = "0a000000-0000-0000-0000-000000000001"

# --- MariaDB GTID positions ------------------------------------------------------------------


def test_a_gtid_position_advances_by_the_last_gtid_of_each_domain() -> None:
    assert gtids.advance("", []) == ""
    assert gtids.advance("0-1-8", ["0-1-9", "3-2-1", "0-1-10"]) == "0-1-10,3-2-1"
    assert gtids.advance("3-2-1,0-1-8", ["0-5-9"]) == "0-5-9,3-2-1"  # a new primary in domain 0
    assert gtids.same_gtid("3-2-1,0-1-8", "0-1-8, 3-2-1")
    assert not gtids.same_gtid("0-1-8", "0-1-8,3-2-1")


def test_a_gtid_position_is_behind_another_when_a_domain_is_missing_or_earlier() -> None:
    assert gtids.behind("", "0-1-8")
    assert gtids.behind("0-1-7,3-2-9", "0-1-8")
    assert gtids.behind("0-1-9", "0-1-8,3-2-1")
    assert not gtids.behind("0-2-9,3-2-1", "0-1-8,3-2-1")  # seq numbers grow along a domain
    assert not gtids.behind("0-1-8", "")


# --- MySQL GTID sets -------------------------------------------------------------------------


def test_a_gtid_set_reads_the_servers_text_and_prints_it_canonically() -> None:
    # As SHOW BINARY LOG STATUS prints it: newline after each comma, upper case allowed.
    text = f"{UUID.upper()}:7:1-5,\n{OTHER}:1-3:mytag:2-4:8"
    parsed = GtidSet.parse(text)
    assert parsed.text() == f"{OTHER}:1-3:mytag:2-4:8,{UUID}:1-5:7"
    assert GtidSet.parse(parsed.text()) == parsed
    assert GtidSet.parse("").text() == ""
    assert GtidSet.parse(f"{UUID}:1-3:4-6:5") == GtidSet.parse(f"{UUID}:1-6")  # ranges merge
    assert GtidSet.parse(f"{UUID}:tag:1-2").text() == f"{UUID}:tag:1-2"  # tagged only


@pytest.mark.parametrize(
    "bad", ["0-1-8", f"{UUID}", f"{UUID}:1-x", f"{UUID}:5-3", "nouuid:1-2", f"{UUID}::1"]
)
def test_a_gtid_set_refuses_text_that_is_not_one(bad: str) -> None:
    with pytest.raises(GtidError):
        GtidSet.parse(bad)


def test_same_gtid_compares_mysql_sets_by_their_transactions() -> None:
    assert gtids.same_gtid(f"{UUID}:1-5,{OTHER}:1", f"{OTHER}:1,\n{UUID}:1-3:4-5")
    assert not gtids.same_gtid(f"{UUID}:1-5", f"{UUID}:1-4")
    assert not gtids.same_gtid(f"{UUID}:1-5", "0-1-5")
    assert not gtids.same_gtid(f"{UUID}:1-5", "")


def test_a_stream_reaches_the_start_joined_with_the_gtids_it_read() -> None:
    read = GtidSet()
    for n in (6, 7, 9):
        read.add(f"{UUID}:{n}")
    read.add(f"{OTHER}:mytag:1")
    assert gtids.reached(f"{UUID}:1-5", [], read) == f"{OTHER}:mytag:1,{UUID}:1-7:9"
    assert gtids.reached(f"{UUID}:1-5", [], GtidSet()) == f"{UUID}:1-5"  # nothing read
    assert gtids.reached("", [], read) == f"{OTHER}:mytag:1,{UUID}:6-7:9"
    assert gtids.reached("0-1-8", ["0-1-9"], GtidSet()) == "0-1-9"
    assert gtids.reached("", [], GtidSet()) == ""


# --- MySQL GTIDs in real binlogs -------------------------------------------------------------


def _previous(path: Path) -> str:
    parser = BinlogParser(path.name)
    for raw in BinlogFiles(path).events(Position(path.name, 4), None):
        event = parser.parse(raw.data, raw.pos)
        if isinstance(event.body, ev.PreviousGtids):
            return event.body.gtids
    raise AssertionError(f"{path.name} has no Previous_gtids event")


def test_the_gtids_read_in_one_mysql_binlog_lead_to_the_next_files_previous_gtids(tmp_path: Path) -> None:
    folder = BINLOG_TESTDATA / "percona-server-mysql-operator"  # MySQL 8.4 (Percona), two files
    first = prepare(folder / "binlog.000002", tmp_path)
    second = prepare(folder / "binlog.000003", tmp_path)
    assert _previous(first) == ""
    reader = TransactionReader(strict=False)
    for _ in reader.read(BinlogFiles(first).events(Position(first.name, 4), None)):
        pass
    assert reader.mysql_gtids.text() == "ca3ce93b-9bea-11f1-b808-e608fdb6e3c5:1-2"
    assert gtids.same_gtid(gtids.reached(_previous(first), [], reader.mysql_gtids), _previous(second))


def test_a_tagged_previous_gtids_event_and_tagged_gtids_are_read(tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / "rust_mysql_common/binlog_transaction_with_GTID_TAG.000001", tmp_path)
    sid = "55778904-0299-11f1-b1b8-4ef0c4956feb"
    assert _previous(path) == f"{sid}:1-13:mytag:1-2"  # MySQL 9.6's tagged encoding
    reader = TransactionReader(strict=False)
    for _ in reader.read(BinlogFiles(path).events(Position(path.name, 4), None)):
        pass
    assert gtids.reached(_previous(path), [], reader.mysql_gtids) == f"{sid}:1-13:mytag:1-3"


def test_an_untagged_previous_gtids_event_of_mysql_8_is_read(tmp_path: Path) -> None:
    path = prepare(
        BINLOG_TESTDATA / "rust_mysql_common/binlog_transaction_previous_GTID_no_tag.000001", tmp_path
    )
    assert _previous(path) == "b9b88c66-0755-11f1-9899-4a9da94c4d71:1-2"


def test_a_truncated_previous_gtids_event_is_a_decode_error() -> None:
    parser = BinlogParser("x.000001")
    with pytest.raises(Exception, match="previous GTIDs"):
        parser.parse(_event(35, (1).to_bytes(8, "little") + bytes(16)), 4)


def _event(kind: int, body: bytes) -> bytes:
    size = 19 + len(body)
    header = (0).to_bytes(4, "little") + bytes([kind]) + (1).to_bytes(4, "little")
    return header + size.to_bytes(4, "little") + (4 + size).to_bytes(4, "little") + bytes(2) + body


def test_extract_refuses_a_mysql_stream_that_does_not_lead_to_the_planned_end() -> None:
    interval = Interval(
        "000002",
        Position.parse("binlog.000002:4"),
        Position.parse("binlog.000002:900"),
        start_gtid=f"{UUID}:1-5",
    )
    interval.end_gtid = f"{UUID}:1-7"
    first, second = RangeResult({}), RangeResult({})  # two ranges decoded apart
    first.mysql_gtids.add(f"{UUID}:6")
    second.mysql_gtids.add(f"{UUID}:7")
    assert _gtid_reached(interval, [first, second], stopped=False) == f"{UUID}:1-7"
    with pytest.raises(HistoryError, match=f"leads to GTID state {UUID}:1-6, but the server had {UUID}:1-7"):
        _gtid_reached(interval, [first], stopped=False)
    assert _gtid_reached(interval, [first], stopped=True) == f"{UUID}:1-6"  # a bounded stop: where it got
    # The server's set may lag its position (a transaction written, still committing): the
    # stream reaching more than it reported is no change of the log; another history is.
    interval.end_gtid = f"{UUID}:1-6"
    assert _gtid_reached(interval, [first, second], stopped=False) == f"{UUID}:1-7"
    interval.end_gtid = f"{OTHER}:1-7"
    with pytest.raises(HistoryError, match="the log changed in between"):
        _gtid_reached(interval, [first, second], stopped=False)


# --- finding a GTID state's place in a binlog file (a failover's new server) -----------------


def _file_events(path: Path) -> list[tuple[int, int, str | None]]:
    parser = BinlogParser(path.name)
    out: list[tuple[int, int, str | None]] = []
    for raw in BinlogFiles(path).events(Position(path.name, 4), None):
        body = parser.parse(raw.data, raw.pos).body
        gtid = body.text() if isinstance(body, ev.Gtid) and not body.anonymous else None
        out.append((raw.pos, raw.pos + len(raw.data), gtid))
    return out


def test_the_place_of_a_mysql_gtid_set_in_a_real_binlog(tmp_path: Path) -> None:
    folder = BINLOG_TESTDATA / "percona-server-mysql-operator"
    path = prepare(folder / "binlog.000002", tmp_path)
    events = _file_events(path)
    starts = [pos for pos, _, gtid in events if gtid is not None]
    sid = "ca3ce93b-9bea-11f1-b808-e608fdb6e3c5"
    assert gtids.place_of("", "", events) == starts[0]  # before the first transaction
    assert gtids.place_of(f"{sid}:1", "", events) == starts[1]
    assert gtids.place_of(f"{sid}:1-2", "", events) == events[-1][1]  # where the file ends
    assert gtids.place_of(f"{sid}:2", "", events) is None  # never that state: 1 comes first
    assert gtids.place_of(f"{sid}:1-3", "", events) is None  # not reached in this file
    following = prepare(folder / "binlog.000003", tmp_path)
    begin = _previous(following)
    assert gtids.contains(f"{sid}:1-3", begin) and not gtids.contains(f"{sid}:1", begin)
    assert gtids.place_of(f"{sid}:1-2", begin, _file_events(following)) == _file_events(following)[2][0]


def test_the_place_of_a_mariadb_gtid_position() -> None:
    events = [(4, 100, None), (100, 150, "0-1-8"), (150, 300, None), (300, 340, "0-2-9"), (340, 500, None)]
    assert gtids.place_of("0-1-7", "0-1-7", events) == 100
    assert gtids.place_of("0-1-8", "0-1-7", events) == 300
    assert gtids.place_of("0-2-9", "0-1-7", events) == 500
    assert gtids.place_of("0-1-9", "0-1-7", events) is None
    assert gtids.contains("0-2-9,1-1-1", "0-1-7") and not gtids.contains("0-1-6", "0-1-7")


@pytest.mark.parametrize(
    ("kind", "info", "gtid"),
    [
        ("Gtid", "BEGIN GTID 0-1-5", "0-1-5"),  # MariaDB
        ("Gtid", "GTID 3-2-17 cid=4", "3-2-17"),
        ("Gtid", f"SET @@SESSION.GTID_NEXT= '{UUID}:5'", f"{UUID}:5"),  # MySQL
        ("Gtid_tagged", f"SET @@SESSION.GTID_NEXT= '{UUID}:mytag:2'", f"{UUID}:mytag:2"),
        ("Anonymous_Gtid", "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'", None),
        ("Previous_gtids", f"{UUID}:1-5", None),
        ("Gtid_list", "[0-1-5]", None),
        ("Query", "BEGIN", None),
    ],
)
def test_the_gtid_an_event_starts_is_read_from_its_show_binlog_events_row(
    kind: str, info: str, gtid: str | None
) -> None:
    assert gtid_of_event(kind, info) == gtid
