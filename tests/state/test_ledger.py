"""The ledger on a local store: planning, reruns, a competing run, errors, checkpoint and loads."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from itertools import pairwise
from pathlib import Path

import pytest

from loader.binlog.history import Mark
from loader.core.config import load_config
from loader.core.errors import HistoryError, LedgerError
from loader.core.positions import Position, seqno_of
from loader.staging import layout
from loader.staging.manifest import ColumnSpec
from loader.staging.stores import LocalStore
from loader.state.ledger import Ledger
from loader.state.records import (
    ABANDONED,
    ERROR_TIME_FORMAT,
    EXTRACTED,
    LEDGER_VERSION,
    MATERIALISED,
    PLANNED,
    Checkpoint,
    Interval,
    Load,
    last_changes,
    layout_record,
    layouts_before,
    table_rows,
)


def P(text: str | Position) -> Position:
    """A position from its text (one already parsed is itself)."""
    return text if isinstance(text, Position) else Position.parse(text)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    cfg = load_config(None, env={"LOADER__STAGING__URI": str(tmp_path / "staging")})
    return Ledger.of(cfg)


def extracted(ledger: Ledger, end: str, start: str | None = None) -> str:
    """Plan an interval up to ``end`` and mark it extracted; its id."""
    interval = ledger.plan(P(end), start=P(start) if start else None)
    assert interval is not None
    interval.state = EXTRACTED
    ledger.save(interval)
    return interval.id


def test_the_first_interval_starts_at_the_checkpoint(ledger: Ledger) -> None:
    ledger.set_checkpoint(Checkpoint(P("binlog.000003:120"), "initial"))
    interval = ledger.plan(P("binlog.000004:500"))
    assert interval is not None
    assert (interval.id, interval.start, interval.end, interval.state) == (
        "0000000001",
        P("binlog.000003:120"),
        P("binlog.000004:500"),
        PLANNED,
    )
    assert ledger.get(interval.id) == interval  # recorded before anything is extracted


def test_planning_without_checkpoint_or_start_asks_for_the_initial_load(ledger: Ledger) -> None:
    with pytest.raises(LedgerError, match=r"source demo has no checkpoint: run the initial load first"):
        ledger.plan(P("binlog.000001:500"))
    with pytest.raises(LedgerError, match="run the initial load"):
        ledger.next_start()
    assert ledger.intervals() == []


def test_nothing_is_planned_when_start_is_not_before_end(ledger: Ledger) -> None:
    ledger.set_checkpoint(Checkpoint(P("binlog.000002:100"), "initial"))
    assert ledger.plan(P("binlog.000002:100")) is None
    assert ledger.plan(P("binlog.000001:999999")) is None  # an earlier file, whatever its offset
    assert ledger.intervals() == []


def test_positions_compare_by_log_number_past_six_digits(ledger: Ledger) -> None:
    interval = ledger.plan(P("mysql-bin.1000000:4"), start=P("mysql-bin.999999:500"))
    assert interval is not None and interval.end == P("mysql-bin.1000000:4")


def test_a_planned_interval_is_planned_again_until_it_is_extracted(ledger: Ledger) -> None:
    first = ledger.plan(P("binlog.000001:4000"), start=P("binlog.000001:4"))
    assert first is not None
    assert ledger.next_start() == P("binlog.000001:4")  # it is extracted again from its start
    again = ledger.plan(P("binlog.000009:1"))  # the server moved on meanwhile
    assert again == first
    assert [i.id for i in ledger.intervals()] == [first.id]


def test_a_rerun_with_the_same_run_id_gets_the_same_interval(ledger: Ledger) -> None:
    first = ledger.plan(P("binlog.000001:4000"), start=P("binlog.000001:4"), run_id="run-1")
    assert first is not None
    first.state = EXTRACTED
    ledger.save(first)
    rerun = ledger.plan(P("binlog.000002:800"), run_id="run-1")
    assert rerun is not None
    assert (rerun.id, rerun.start, rerun.end) == (first.id, first.start, first.end)
    other = ledger.plan(P("binlog.000002:800"), run_id="run-2")
    assert other is not None
    assert (other.id, other.start, other.run_id) == ("0000000002", first.end, "run-2")


def test_interval_ids_are_zero_padded_increase_and_follow_each_other(ledger: Ledger) -> None:
    ledger.set_checkpoint(Checkpoint(P("binlog.000001:4"), "initial"))
    ids = [extracted(ledger, f"binlog.000001:{n * 100}") for n in range(1, 12)]
    assert ids == [f"{n:010d}" for n in range(1, 12)]
    intervals = ledger.intervals()
    assert [i.id for i in intervals] == ids  # "0000000010" after "0000000009"
    assert all(b.start == a.end for a, b in pairwise(intervals))


def test_after_a_bounded_interval_the_next_starts_where_it_stopped(ledger: Ledger) -> None:
    interval = ledger.plan(P("binlog.000001:9000"), start=P("binlog.000001:4"), max_changes=10)
    assert interval is not None and interval.max_changes == 10
    interval.state = EXTRACTED
    interval.extracted_end = P("binlog.000001:2500")  # stopped at a transaction boundary
    ledger.save(interval)
    assert ledger.next_start() == P("binlog.000001:2500")
    following = ledger.plan(P("binlog.000001:9000"))
    assert following is not None and following.start == P("binlog.000001:2500")


class RivalFirstStore(LocalStore):
    """A local store where another run plans, through ``rival``, just before this run's create."""

    rival: Ledger | None = None

    def create(self, key: str, data: bytes) -> bool:
        if self.rival is not None:
            rival, self.rival = self.rival, None
            assert rival.plan(P("binlog.000001:7000")) is not None
        return super().create(key, data)


def test_a_run_that_loses_the_race_to_plan_an_interval_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "staging")
    Ledger(LocalStore(uri), "demo").set_checkpoint(Checkpoint(P("binlog.000001:4"), "initial"))
    store = RivalFirstStore(uri)
    store.rival = Ledger(LocalStore(uri), "demo")
    mine = Ledger(store, "demo")
    with pytest.raises(LedgerError, match="interval 0000000001 of demo was planned by another run meanwhile"):
        mine.plan(P("binlog.000001:5000"))
    [kept] = mine.intervals()
    assert kept.end == P("binlog.000001:7000")  # the winner's interval, untouched
    assert mine.plan(P("binlog.000001:5000")) == kept  # the loser's next try takes it up


def test_last_error_is_the_latest_failure(ledger: Ledger) -> None:
    ledger.set_checkpoint(Checkpoint(P("binlog.000001:4"), "initial"))
    old, new = extracted(ledger, P("binlog.000001:100")), extracted(ledger, P("binlog.000001:200"))
    assert ledger.last_error() is None
    hour_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    stale = ledger.get(old)
    assert stale is not None
    stale.error, stale.error_at = "materialize: disk full", hour_ago.strftime(ERROR_TIME_FORMAT)
    ledger.save(stale)
    assert ledger.last_error() == stale
    ledger.record_error(new, "materialize: column c changed type")
    failed = ledger.last_error()
    assert failed is not None and (failed.id, failed.error) == (new, "materialize: column c changed type")
    ledger.record_error("0000000099", "no such interval")  # noted nowhere, created nowhere
    assert ledger.get("0000000099") is None


def test_a_ledger_written_before_records_had_versions_reads_the_same(ledger: Ledger) -> None:
    """Version 1 records (no version field), as the previous loader wrote them."""
    prefix = layout.ledger_prefix("demo")
    ledger.store.put(
        f"{prefix}/checkpoint.json",
        b'{\n "position": "binlog.000002:4",\n "interval": "0000000001",\n "commit_ts": 1700000000000000\n}',
    )
    ledger.store.put(
        f"{prefix}/intervals/0000000001.json",
        json.dumps(
            {"id": "0000000001", "start": "binlog.000001:4", "end": "binlog.000002:4", "max_changes": None,
             "state": "materialised", "extracted_end": None, "manifest": "demo/_intervals/0000000001.json",
             "changes": 12, "last_commit_ts": 1700000000000000, "run_id": None, "error": None, "error_at": None},
            indent=1, sort_keys=True,
        ).encode(),
    )  # fmt: skip
    assert ledger.checkpoint() == Checkpoint(P("binlog.000002:4"), "0000000001", 1_700_000_000_000_000)
    (old,) = ledger.intervals()
    assert (old.state, old.changes, old.effective_end) == (
        "materialised",
        12,
        Position.parse("binlog.000002:4"),
    )
    # The next interval continues it, and what this loader writes carries its version.
    planned = ledger.plan(Position.parse("binlog.000002:500"))
    assert planned is not None and planned.start == P("binlog.000002:4")
    assert (
        json.loads(ledger.store.get(f"{prefix}/intervals/{planned.id}.json") or b"")["version"]
        == LEDGER_VERSION
    )


def test_a_record_from_a_newer_loader_or_not_a_record_is_refused_by_name(ledger: Ledger) -> None:
    key = f"{layout.ledger_prefix('demo')}/checkpoint.json"
    ledger.store.put(key, b'{"position": "binlog.000002:4", "interval": "1", "version": 99}')
    with pytest.raises(
        LedgerError, match=f"ledger record {key} has version 99, newer than this loader reads"
    ):
        ledger.checkpoint()
    ledger.store.put(key, b"op,seqno\nI,1\n")
    with pytest.raises(LedgerError, match=f"ledger record {key} is not JSON"):
        ledger.checkpoint()
    ledger.store.put(key, b'{"position": "binlog.000002:4"}')
    with pytest.raises(LedgerError, match=f"ledger record {key} does not hold a checkpoint"):
        ledger.checkpoint()
    ledger.store.put(key, b'{"position": "binlog.000002", "interval": "1"}')
    with pytest.raises(
        LedgerError, match=f"ledger record {key}: position 'binlog.000002' is not of the form"
    ):
        ledger.checkpoint()


def test_records_hold_positions_and_their_files_hold_the_positions_text(ledger: Ledger) -> None:
    """Parsed once when a record is read; written back as ``FILE:POS``, as every loader wrote them."""
    ledger.set_checkpoint(Checkpoint(P("binlog.000001:4"), "initial"))
    planned = ledger.plan(P("binlog.000002:900"), max_changes=5)
    assert planned is not None
    planned.extracted_end = P("binlog.000001:800")
    ledger.save(planned)
    prefix = layout.ledger_prefix("demo")
    stored = json.loads(ledger.store.get(f"{prefix}/intervals/{planned.id}.json") or b"")
    assert (stored["start"], stored["end"], stored["extracted_end"]) == (
        "binlog.000001:4",
        "binlog.000002:900",
        "binlog.000001:800",
    )
    assert json.loads(ledger.store.get(f"{prefix}/checkpoint.json") or b"")["position"] == "binlog.000001:4"
    (read,) = ledger.intervals()
    assert (read.start, read.effective_end) == (Position("binlog.000001", 4), Position("binlog.000001", 800))
    assert ledger.checkpoint() == Checkpoint(Position("binlog.000001", 4), "initial")


def test_the_checkpoint_round_trips_through_the_store(ledger: Ledger) -> None:
    assert ledger.checkpoint() is None
    checkpoint = Checkpoint(P("binlog.000007:4242"), layout.interval_id(3), commit_ts=1_700_000_000_123_456)
    ledger.set_checkpoint(checkpoint)
    assert Ledger(LocalStore(ledger.store.uri), "demo").checkpoint() == checkpoint
    moved = Checkpoint(P("binlog.000008:4"), layout.interval_id(4))
    ledger.set_checkpoint(moved)
    assert ledger.checkpoint() == moved


def test_a_loads_tables_keep_schema_and_table_apart_whatever_dots_they_hold(ledger: Ledger) -> None:
    dotted = Load(
        "load-20240103T000000-cccccc",
        P("binlog.000003:4"),
        ["a.b.c", "a.b.c"],
        state="complete",
        names=[["a.b", "c"], ["a", "b.c"]],
    )
    ledger.save_load(dotted)
    position = Position.parse("binlog.000003:4")
    assert ledger.loaded_at() == {("a.b", "c"): position, ("a", "b.c"): position}
    # A load recorded before version 4 has only the text: split at its first dot, as then.
    prefix = layout.ledger_prefix("demo")
    ledger.store.put(
        f"{prefix}/loads/load-20240101T000000-aaaaaa.json",
        json.dumps(
            {
                "version": 3,
                "id": "load-20240101T000000-aaaaaa",
                "p0": "binlog.000001:4",
                "tables": ["shop.orders"],
                "state": "complete",
            }
        ).encode(),
    )
    assert ledger.loaded_at()[("shop", "orders")] == Position.parse("binlog.000001:4")


def test_loads_are_listed_oldest_first_and_a_resave_replaces(ledger: Ledger) -> None:
    later = Load("load-20240102T000000-bbbbbb", P("binlog.000002:4"), ["shop.orders"], first=False)
    earlier = Load("load-20240101T000000-aaaaaa", P("binlog.000001:4"), ["shop.orders", "shop.items"])
    ledger.save_load(later)
    ledger.save_load(earlier)
    assert ledger.loads() == [earlier, later]
    earlier.state, earlier.rows = "complete", {"shop.orders": 3, "shop.items": 5}
    ledger.save_load(earlier)
    assert ledger.loads() == [earlier, later]


def test_a_tables_columns_before_an_interval_are_the_latest_of_its_intervals_and_loads() -> None:
    def cols(*names: str) -> list[ColumnSpec]:
        return [ColumnSpec(n, "int") for n in names]

    def interval(number: int, end: str, tables: dict[str, list[ColumnSpec]] | None) -> Interval:
        recorded = None if tables is None else [layout_record("s", t, c) for t, c in tables.items()]
        return Interval(
            layout.interval_id(number), P("binlog.000001:4"), end, state=EXTRACTED, layouts=recorded
        )

    def load(p0: str, tables: dict[str, list[ColumnSpec]] | None) -> Load:
        names = [["s", t] for t in tables or {"t": []}]
        recorded = None if tables is None else [layout_record("s", t, c) for t, c in tables.items()]
        return Load(f"load-{p0}", p0, [f"s.{n}" for _, n in names], "complete", names=names, layouts=recorded)

    first_load = load(P("binlog.000001:4"), {"t": cols("id"), "u": cols("id")})
    intervals = [
        interval(1, P("binlog.000001:100"), {"t": cols("id", "a")}),
        interval(2, P("binlog.000001:200"), {"u": cols("id", "b")}),
        interval(3, P("binlog.000001:300"), {"t": cols("id", "a", "c")}),
    ]
    before = layouts_before(intervals, [first_load], layout.interval_id(3))
    assert before == {("s", "t"): cols("id", "a"), ("s", "u"): cols("id", "b")}
    # Re-extracting an old interval compares with what came before it, not after.
    assert layouts_before(intervals, [first_load], layout.interval_id(1)) == {
        ("s", "t"): cols("id"),
        ("s", "u"): cols("id"),
    }
    # A re-load at an interval's end copied what the interval staged: the load is the later.
    reload = load(P("binlog.000001:200"), {"u": cols("id", "b", "x")})
    assert layouts_before(intervals, [first_load, reload], layout.interval_id(3))[("s", "u")] == cols(
        "id", "b", "x"
    )
    # Planned intervals hold nothing yet; records from loaders that kept no columns are unknown.
    intervals[1].state = PLANNED
    assert layouts_before(intervals, [first_load], layout.interval_id(3))[("s", "u")] == cols("id")
    intervals[1].state, intervals[1].layouts = EXTRACTED, None
    assert layouts_before(intervals, [first_load], layout.interval_id(3)) == {}
    assert layouts_before(intervals[:1], [load(P("binlog.000001:150"), None)], layout.interval_id(2)) == {}


def test_a_tables_last_change_is_the_last_materialised_interval_with_rows_of_it() -> None:
    def interval(
        number: int, end: str, tables: list[str], state: str = MATERIALISED, epoch: int = 0
    ) -> Interval:
        layouts: list[list[object]] = [["s", t, [["id", "int"]]] for t in tables]
        return Interval(
            layout.interval_id(number), P("binlog.000001:4"), end, state=state, layouts=layouts, epoch=epoch
        )

    intervals = [
        interval(1, P("binlog.000001:100"), ["t", "u"]),
        interval(2, P("binlog.000001:200"), ["t"]),
        interval(3, P("binlog.000001:300"), ["u"], state=EXTRACTED),  # not in the warehouse yet
        interval(4, P("binlog.000001:400"), ["v"], state=ABANDONED),
        # A later history (a re-load from another server): its positions are lower, yet later.
        interval(5, P("binlog.000001:50"), ["w"], epoch=1),
        interval(6, P("binlog.000001:150"), ["w", "t"], epoch=1),
    ]
    # Listed in id order or not: the log's order decides.
    last = last_changes(intervals[::-1])
    assert {name: i.id for name, i in last.items()} == {
        ("s", "t"): layout.interval_id(6),
        ("s", "u"): layout.interval_id(1),
        ("s", "w"): layout.interval_id(6),
    }


def test_a_tables_rows_are_the_last_recorded_by_a_materialised_interval_or_a_load() -> None:
    def interval(number: int, end: str, counted: list[list[object]], state: str = MATERIALISED) -> Interval:
        return Interval(
            layout.interval_id(number), P("binlog.000001:4"), end, state=state, table_rows=counted
        )

    loads = [
        Load(
            "load-1",
            P("binlog.000001:4"),
            ["s.t", "s.u", "s.v"],
            "complete",
            rows={"s.t": 1000, "s.u": 50},  # s.v: a loader that did not count it
            names=[["s", "t"], ["s", "u"], ["s", "v"]],
        ),
        # A re-load under way: s.u's copy is recorded (it counts), s.t's is not yet.
        Load(
            "load-2",
            P("binlog.000001:250"),
            ["s.u", "s.t"],
            "started",
            rows={"s.u": 9},
            names=[["s", "u"], ["s", "t"]],
        ),
    ]
    intervals = [
        interval(1, P("binlog.000001:100"), [["s", "t", 1200]]),
        interval(2, P("binlog.000001:200"), [["s", "t", 1300], ["s", "u", 70]]),
        interval(3, P("binlog.000001:300"), [["s", "t", 99_999]], state=EXTRACTED),  # not merged yet
    ]
    assert table_rows(intervals, loads) == {("s", "t"): 1300, ("s", "u"): 9}
    assert table_rows(intervals, loads[:1]) == {("s", "t"): 1300, ("s", "u"): 70}
    # A re-load after the intervals counted the table anew; one before them did not.
    reload = Load("load-3", P("binlog.000001:220"), ["s.t"], "complete", rows={"s.t": 10}, names=[["s", "t"]])
    assert table_rows(intervals, [*loads, reload])[("s", "t")] == 10
    early = dataclasses.replace(reload, id="load-0", p0=P("binlog.000001:50"))
    assert table_rows(intervals, [*loads, early])[("s", "t")] == 1300
    # Records of loaders that kept no counts: the load's only.
    assert table_rows([interval(1, P("binlog.000001:100"), [])], loads[:1]) == {
        ("s", "t"): 1000,
        ("s", "u"): 50,
    }


class Server:
    """The questions planning asks a server (``ledger.SourceView``), answered from what a test
    sets: the files it purged and the GTID state at each position. The live answers are tested
    in tests/binlog/test_history.py."""

    def __init__(self, server: str = "server_id=1 gtid_domain_id=0") -> None:
        self.server = server
        self.purged: set[str] = set()
        self.gtids: dict[str, str] = {}

    def start_problem(self, start: Position, end: Position) -> str | None:
        return f"binlog file {start.file} is gone" if start.file in self.purged else None

    def problem(self, at: Position, recorded: Mark, what: str) -> str | None:
        now = self.gtids.get(str(at))
        if recorded.gtid is None or now == recorded.gtid:
            return None
        return f"at {what} {at} the ledger recorded GTID {recorded.gtid}, the server has {now}"

    def gtid_at(self, at: Position) -> str | None:
        return self.gtids.get(str(at))

    def follow(self, recorded: Mark) -> tuple[Position, Mark] | None:
        return next(
            ((P(at), Mark(self.server, gtid)) for at, gtid in self.gtids.items() if gtid == recorded.gtid),
            None,
        )


def test_a_start_the_check_refuses_records_nothing_and_names_the_way_out(ledger: Ledger) -> None:
    ledger.set_checkpoint(Checkpoint(P("binlog.000001:4"), "initial"))
    server = Server()
    purged = server.purged
    purged.add("binlog.000001")
    check = server

    with pytest.raises(LedgerError, match=r"changes continue at binlog.000001:4, but binlog file .* is gone"):
        ledger.plan(P("binlog.000002:900"), source=check)
    with pytest.raises(
        LedgerError, match=r"cannot start at binlog.000001:50: binlog file binlog.000001 is gone"
    ):
        ledger.plan(P("binlog.000002:900"), start=P("binlog.000001:50"), source=check)
    assert ledger.intervals() == []

    # A dry run returns what would be planned, and records nothing.
    purged.clear()
    dry = ledger.plan(P("binlog.000002:900"), source=check, dry_run=True)
    assert dry is not None and (dry.start, dry.end) == (P("binlog.000001:4"), P("binlog.000002:900"))
    assert ledger.intervals() == []

    # A planned interval whose log went away is named, with the way out.
    planned = ledger.plan(P("binlog.000002:900"), source=check)
    assert planned is not None
    purged.add("binlog.000001")
    with pytest.raises(LedgerError) as stuck:
        ledger.plan(P("binlog.000003:4"), source=check)
    assert str(stuck.value).startswith(
        f"interval {planned.id} cannot be extracted: binlog file binlog.000001"
    )
    assert f"loader interval abandon {planned.id} --reason" in str(stuck.value)


def test_abandoning_an_interval_gives_up_the_later_ones_and_plans_again_from_before_it(
    ledger: Ledger,
) -> None:
    ledger.set_checkpoint(Checkpoint(P("binlog.000001:4"), "initial"))
    done = ledger.plan(P("binlog.000001:100"))
    assert done is not None
    done.state = MATERIALISED
    ledger.save(done)
    ledger.set_checkpoint(Checkpoint(done.end, done.id))
    second = extracted(ledger, P("binlog.000001:200"))
    third = extracted(ledger, P("binlog.000001:300"))

    with pytest.raises(LedgerError, match="say why"):
        ledger.abandon(second, "  ")
    with pytest.raises(LedgerError, match="has no interval 0000000009"):
        ledger.abandon("0000000009", "typo")
    with pytest.raises(LedgerError, match=f"interval {done.id} is materialised"):
        ledger.abandon(done.id, "too late")

    gone = ledger.abandon(second, "staging lost")
    assert [(i.id, i.state) for i in gone] == [(second, ABANDONED), (third, ABANDONED)]
    assert [i.abandoned_reason for i in gone] == [
        "staging lost",
        f"staging lost (it follows interval {second})",
    ]
    assert ledger.next_start() == P("binlog.000001:100")
    with pytest.raises(LedgerError, match="was abandoned already: staging lost"):
        ledger.abandon(second, "again")
    again = ledger.plan(P("binlog.000001:400"))
    assert again is not None and (again.id, again.start) == ("0000000004", P("binlog.000001:100"))


def test_a_reload_of_every_table_past_the_checkpoint_supersedes_what_waits(ledger: Ledger) -> None:
    ledger.set_checkpoint(Checkpoint(P("binlog.000001:4"), "initial"))
    waiting = extracted(ledger, P("binlog.000001:200"))
    some = Load("load-b", P("binlog.000001:300"), ["s.t"], state="complete", first=False)
    assert ledger.supersede(some, 1) == []  # a re-load of some tables: the others still need it
    every = Load(
        "load-c", P("binlog.000001:300"), ["s.t", "s.u"], state="complete", first=False, every_table=True
    )
    [gone] = ledger.supersede(every, 1)
    assert (gone.id, gone.state) == (waiting, ABANDONED)
    assert gone.abandoned_reason == "superseded by the re-load load-c of every table at binlog.000001:300"
    assert ledger.checkpoint() == Checkpoint(P("binlog.000001:300"), "load-c", 1)
    assert ledger.next_start() == P("binlog.000001:300")
    assert ledger.supersede(every, 1) == []  # once: the checkpoint is there now


def test_a_table_counts_as_loaded_from_its_copys_record_and_awaits_the_latest_load_listing_it(
    ledger: Ledger,
) -> None:
    t, u, v = ("s", "t"), ("s", "u"), ("s", "v")
    tables, names = ["s.t", "s.u", "s.v"], [["s", "t"], ["s", "u"], ["s", "v"]]
    # Started from now: the checkpoint at P0, no table copied, every one awaiting its copy.
    now = Load(
        "load-1",
        P("binlog.000001:100"),
        tables,
        "complete",
        first=True,
        every_table=True,
        names=names,
        from_now=True,
    )
    ledger.save_load(now)
    ledger.supersede(now, 1)
    assert ledger.checkpoint() == Checkpoint(P("binlog.000001:100"), "load-1", 1)
    assert ledger.loaded_seqnos() == {} and set(ledger.awaiting_copy()) == {t, u, v}
    assert (
        ledger.not_loaded()[t] == "not loaded yet: load-1 has not copied it (its changes wait for the copy)"
    )
    # A re-load of two of them under way: s.t's copy recorded counts at once; s.u's still waits.
    reload = Load(
        "load-2", P("binlog.000001:300"), ["s.t", "s.u"], names=names[:2], rows={"s.t": 5}, first=False
    )
    ledger.save_load(reload)
    seqno = seqno_of("binlog.000001", 300)
    assert reload.seqno == seqno and ledger.loaded_seqnos() == {t: seqno}
    assert ledger.loaded_at() == {t: P("binlog.000001:300")}
    assert {n: load.id for n, load in ledger.awaiting_copy().items()} == {u: "load-2", v: "load-1"}
    # Copied, then a later re-load of s.t starts: its older copy still counts, and it waits.
    reload.rows["s.u"] = 7
    ledger.save_load(reload)
    ledger.save_load(Load("load-3", P("binlog.000001:500"), ["s.t"], names=names[:1], first=False))
    assert ledger.loaded_seqnos() == {t: seqno, u: seqno}
    assert {n: load.id for n, load in ledger.awaiting_copy().items()} == {t: "load-3", v: "load-1"}
    assert (
        ledger.not_loaded()[t] == "its re-load load-3 has not copied it yet (its changes wait for the copy)"
    )


def test_every_position_planned_carries_the_server_and_its_gtid_state(ledger: Ledger) -> None:
    server = Server()
    server.gtids = {"binlog.000001:4": "0-1-7", "binlog.000001:900": "0-1-9", "binlog.000002:300": "0-1-12"}
    ledger.set_checkpoint(Checkpoint(P("binlog.000001:4"), "initial", server=server.server, gtid="0-1-7"))
    first = ledger.plan(P("binlog.000001:900"), source=server)
    assert first is not None
    assert (first.server, first.start_gtid, first.end_gtid) == (server.server, "0-1-7", "0-1-9")
    first.state = EXTRACTED
    ledger.save(first)
    second = ledger.plan(P("binlog.000002:300"), source=server)
    assert second is not None and (second.start_gtid, second.end_gtid) == ("0-1-9", "0-1-12")
    assert ledger.get(second.id) == second


def test_a_server_without_the_history_read_so_far_is_refused_before_anything_is_recorded(
    ledger: Ledger,
) -> None:
    server = Server()
    server.gtids = {"binlog.000001:4": "0-1-7"}
    ledger.set_checkpoint(Checkpoint(P("binlog.000001:4"), "initial", server=server.server, gtid="0-1-7"))
    done = ledger.plan(P("binlog.000001:900"), source=server)
    assert done is not None
    done.state, done.end_gtid = EXTRACTED, "0-1-9"
    ledger.save(done)

    # The server was reset: what it has at the end read so far is not what was read there.
    server.gtids = {"binlog.000001:900": "0-1-2"}
    for start in (None, P("binlog.000001:4")):  # continuing, and a backfill
        with pytest.raises(HistoryError) as refused:
            ledger.plan(P("binlog.000001:5000"), start=start, source=server)
        assert str(refused.value).startswith(
            f"at the end of interval {done.id} binlog.000001:900 the ledger recorded GTID 0-1-9, the server has 0-1-2"
        )
        assert "Nothing was planned and the checkpoint stays" in str(refused.value)
        assert "re-load every table (loader initial-load)" in str(refused.value)
    assert [i.id for i in ledger.intervals()] == [done.id]

    # A planned interval is checked at its own start before it is extracted again.
    server.gtids = {"binlog.000001:900": "0-1-9", "binlog.000002:4": "0-1-10"}
    planned = ledger.plan(P("binlog.000002:4"), source=server)
    assert planned is not None and planned.start_gtid == "0-1-9"
    server.gtids = {}
    with pytest.raises(HistoryError, match=f"at interval {planned.id}'s start binlog.000001:900"):
        ledger.plan(P("binlog.000003:4"), source=server)

    # Marks from loaders that did not record them are unknown, never a refusal.
    planned.start_gtid = None
    ledger.save(planned)
    assert ledger.plan(P("binlog.000003:4"), source=server) == planned


def test_a_reload_from_another_history_supersedes_the_one_before_whatever_its_positions(
    ledger: Ledger,
) -> None:
    ledger.set_checkpoint(Checkpoint(P("binlog.000007:500"), "initial", gtid="0-1-90"))
    old_load = Load("load-1", P("binlog.000002:4"), ["s.t"], state="complete", names=[["s", "t"]])
    ledger.save_load(old_load)
    waiting = extracted(ledger, P("binlog.000008:100"))
    assert ledger.loaded_at() == {("s", "t"): P("binlog.000002:4")}

    # RESET MASTER: the new history's positions are all before the old ones.
    reload = Load(
        "load-2", P("binlog.000001:400"), ["s.t"], names=[["s", "t"]], first=False, every_table=True, epoch=1
    )
    ledger.save_load(reload)
    assert [i.id for i in ledger.supersede(reload, 1_700_000_000_000_000)] == [waiting]
    reload.state = "complete"
    ledger.save_load(reload)
    checkpoint = ledger.checkpoint()
    assert checkpoint is not None and (checkpoint.position, checkpoint.epoch) == (P("binlog.000001:400"), 1)
    # The old history's load and intervals no longer count: a table's copy is the new load's.
    assert ledger.loaded_at() == {("s", "t"): P("binlog.000001:400")}
    assert ledger.next_start() == P("binlog.000001:400")
    interval = ledger.plan(P("binlog.000001:900"))
    assert interval is not None and (interval.start, interval.epoch) == (P("binlog.000001:400"), 1)


def test_a_server_holding_the_history_read_so_far_is_followed_from_where_its_gtids_match(
    ledger: Ledger,
) -> None:
    old = Server()
    old.gtids = {"binlog.000007:500": "0-1-90"}
    ledger.set_checkpoint(Checkpoint(P("binlog.000007:500"), "initial", server=old.server, gtid="0-1-90"))
    left = ledger.plan(P("binlog.000007:900"), source=old)  # planned, not extracted, then the failover
    assert left is not None
    ledger.save_load(Load("load-1", P("binlog.000002:4"), ["s.t"], state="complete", names=[["s", "t"]]))

    # The promoted replica logged the same transactions at its own positions.
    new = Server("server_id=2 gtid_domain_id=0")
    new.gtids = {"binlog.000001:300": "0-1-90", "binlog.000001:800": "0-1-95"}
    with pytest.raises(HistoryError, match=r'the server has None\. .* \(source.failover = "stop": a server'):
        ledger.plan(P("binlog.000001:800"), source=new)
    with pytest.raises(
        HistoryError, match="A backfill start names a position of the server the log was read from"
    ):
        ledger.plan(P("binlog.000001:800"), start=P("binlog.000001:300"), source=new, follow=True)
    dry = ledger.plan(P("binlog.000001:800"), source=new, follow=True, dry_run=True)
    assert dry is not None and ledger.get(left.id) == left  # a dry run changes nothing
    followed = ledger.plan(P("binlog.000001:800"), source=new, follow=True)
    assert followed is not None
    assert (followed.start, followed.end, followed.epoch) == (
        P("binlog.000001:300"),
        P("binlog.000001:800"),
        1,
    )
    assert (followed.server, followed.start_gtid, followed.end_gtid) == (new.server, "0-1-90", "0-1-95")
    assert followed.followed_from == f"binlog.000007:500 of {old.server} (GTID 0-1-90)"
    abandoned = ledger.get(left.id)
    assert abandoned is not None and abandoned.state == ABANDONED
    assert abandoned.abandoned_reason == f"its start is not on {new.server}, the server followed to"

    # The new history's positions continue from its own; its changes order after every older one.
    followed.state = EXTRACTED
    ledger.save(followed)
    assert ledger.next_start() == P("binlog.000001:800")
    assert ledger.plan(P("binlog.000001:800"), source=new, follow=True) is None
    assert ledger.loaded_seqnos()[("s", "t")] < seqno_of("binlog.000001", 300, 1)


def test_a_server_that_does_not_reach_the_history_read_so_far_is_not_followed(ledger: Ledger) -> None:
    ledger.set_checkpoint(Checkpoint(P("binlog.000007:500"), "initial", gtid="0-1-90"))
    stranger = Server("server_id=3 gtid_domain_id=0")
    stranger.gtids = {"binlog.000001:300": "0-3-12"}
    with pytest.raises(
        HistoryError, match=r"its GTID history does not reach the state read so far \(GTID 0-1-90\)"
    ):
        ledger.plan(P("binlog.000001:800"), source=stranger, follow=True)
    # A re-load of some tables past where the log was read has a P0 of the old server's log.
    ledger.save_load(Load("load-9", P("binlog.000008:4"), ["s.t"], state="complete", names=[["s", "t"]]))
    stranger.gtids["binlog.000001:200"] = "0-1-90"
    with pytest.raises(
        HistoryError, match=r"the re-load load-9 at binlog\.000008:4 lies past where the log was read"
    ):
        ledger.plan(P("binlog.000001:800"), source=stranger, follow=True)
    assert ledger.intervals() == []


def test_another_server_with_the_same_gtid_state_at_the_same_position_is_a_switch_too(ledger: Ledger) -> None:
    old = Server()
    old.gtids = {"binlog.000002:500": "0-1-90"}
    ledger.set_checkpoint(Checkpoint(P("binlog.000002:500"), "initial", server=old.server, gtid="0-1-90"))
    copy = Server("server_id=2 gtid_domain_id=0")  # its binlog is laid out as the old one's
    copy.gtids = dict(old.gtids)
    with pytest.raises(
        HistoryError, match=r"is another server \(server_id=2 gtid_domain_id=0\) than the one"
    ):
        ledger.plan(P("binlog.000002:900"), source=copy)
    followed = ledger.plan(P("binlog.000002:900"), source=copy, follow=True)
    assert followed is not None and (followed.start, followed.epoch) == (P("binlog.000002:500"), 1)
    assert followed.followed_from == f"binlog.000002:500 of {old.server} (GTID 0-1-90)"
