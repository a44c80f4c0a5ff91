"""Where a rollback takes one Iceberg table, decided from its snapshots' summaries alone."""

from __future__ import annotations

import pytest

from loader.warehouse.iceberg import (
    COMPACTS,
    INTERVAL,
    LOAD,
    MAINTENANCE,
    RESTORED,
    ROLLBACK,
    SOURCE,
    Snapshot,
    committed_interval,
    rollback_target,
    rows_of,
)


def chain(*summaries: dict[str, str], first_parent: int | None = None) -> list[Snapshot]:
    """Snapshots 1, 2, … each the child of the one before, newest first (as the ancestry reads)."""
    out = [
        Snapshot(n, (n - 1 if n > 1 else first_parent), summary)
        for n, summary in enumerate(summaries, start=1)
    ]
    return out[::-1]


def merged(interval: str, source: str = "src") -> dict[str, str]:
    return {SOURCE: source, INTERVAL: interval}


LOADED = {SOURCE: "src", LOAD: "20260101T000000"}
COMPACTED = {"operation": "replace"}  # maintenance: no loader properties


def test_the_newest_snapshot_of_the_interval_or_before_is_the_target() -> None:
    ancestry = chain(LOADED, merged("01"), COMPACTED, merged("03"), merged("04"))
    target = rollback_target(ancestry, "src", "02")
    assert target is not None and target.snapshot is not None
    assert target.snapshot.id == 2 and target.current.id == 5 and not target.empty
    at_four = rollback_target(ancestry, "src", "04")
    assert at_four is not None and at_four.snapshot is None and not at_four.empty  # stays


def test_a_table_whose_rows_all_came_later_goes_back_to_empty() -> None:
    target = rollback_target(chain(merged("03"), merged("04")), "src", "02")
    assert target is not None and target.empty and target.snapshot is None
    # Emptied back to 02 already: a rerun leaves it; a rollback further back empties it again.
    emptied = chain(merged("03"), merged("04"), {SOURCE: "src", ROLLBACK: "02"})
    again = rollback_target(emptied, "src", "02")
    assert again is not None and not again.empty and again.snapshot is None
    after = chain(merged("03"), merged("04"), {SOURCE: "src", ROLLBACK: "02"}, merged("03"))
    back = rollback_target(after, "src", "01")
    assert back is not None and back.empty  # what was merged before the marker was undone


def test_another_sources_snapshots_do_not_count() -> None:
    assert rollback_target(chain(merged("01", "other")), "src", "01") is None
    mixed = chain(merged("01"), merged("05", "other"), merged("02"))
    target = rollback_target(mixed, "src", "01")
    assert target is not None and target.snapshot is not None and target.snapshot.id == 1


def test_expired_snapshots_are_refused_naming_the_oldest_state_kept() -> None:
    expired = chain(merged("05"), merged("06"), first_parent=99)  # its parent 99 is gone
    with pytest.raises(ValueError, match="expired; the oldest state it keeps is after interval 05"):
        rollback_target(expired, "src", "03")


def test_a_compaction_above_the_target_is_kept_and_one_below_does_not_count() -> None:
    compacted = {SOURCE: "src", MAINTENANCE: "rewrite"}
    ancestry = chain(LOADED, merged("01"), compacted, merged("02"), compacted, compacted)
    at_two = rollback_target(ancestry, "src", "02")
    assert at_two is not None and at_two.snapshot is None  # the newest compaction of 02: stays
    at_one = rollback_target(ancestry, "src", "01")
    assert at_one is not None and at_one.snapshot is not None and at_one.snapshot.id == 3
    # Another writer's snapshot between them: its rows are not the interval's.
    foreign = chain(merged("01"), COMPACTED, merged("02"))
    back = rollback_target(foreign, "src", "01")
    assert back is not None and back.snapshot is not None and back.snapshot.id == 1


def test_after_expiry_a_compaction_stands_for_the_interval_it_holds() -> None:
    kept = chain({SOURCE: "src", MAINTENANCE: "rewrite", COMPACTS: "04"}, merged("05"), first_parent=99)
    at_four = rollback_target(kept, "src", "04")
    assert at_four is not None and at_four.snapshot is not None and at_four.snapshot.id == 1
    with pytest.raises(ValueError, match=r"the oldest state it keeps is after interval 04 \(compacted\)"):
        rollback_target(kept, "src", "03")
    assert rows_of(kept, "src") == "05" and rows_of(kept[1:], "src") == "04"
    assert rows_of(chain(LOADED), "src") == "load 20260101T000000"
    assert rows_of(chain(merged("01"), COMPACTED), "src") is None


def test_in_a_shared_table_a_restored_snapshot_holds_its_interval_and_the_older_ones_stay() -> None:
    # src merged 01..03 between another shard's commits, was rolled back to 01 (its rows alone,
    # in a snapshot of its own), then merged 02 again.
    ancestry = chain(
        merged("01"),
        merged("07", "shard"),
        merged("02"),
        merged("03"),
        merged("08", "shard"),
        {SOURCE: "src", RESTORED: "01"},
        merged("02"),
    )
    assert rows_of(ancestry, "src") == "02"
    at_two = rollback_target(ancestry, "src", "02")
    assert at_two is not None and at_two.snapshot is None  # the current state: stays
    at_one = rollback_target(ancestry, "src", "01")
    assert at_one is not None and at_one.snapshot is not None and at_one.snapshot.id == 6
    before = rollback_target(ancestry[1:], "src", "00")  # older than the restored state
    assert before is not None and before.empty
    # The merges of 02 and 03 before the marker were undone: they are merged again.
    assert not committed_interval([s.summary for s in ancestry[1:]], "src", "03")
    assert committed_interval([s.summary for s in ancestry], "src", "02")
