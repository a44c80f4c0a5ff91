"""The reference of the warehouse modes (``loader.core.modes``): one key's rows through an insert, two
updates, a delete and a re-insert in each mode, and random workloads whose tables each mode must
explain: the mirror is the source, the soft-deleted table's live rows are, and the history's
versions valid at any commit are the source as it was then."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from loader.core import modes
from loader.core.modes import Change, Copy


def _tx(seqno: int, interval: str, *ops: tuple[str, dict[str, Any]]) -> list[Change]:
    """One transaction's change rows, as the extractor stages them (an update is D then I)."""
    return [Change(op, seqno, i, f"t{seqno}", interval, values) for i, (op, values) in enumerate(ops)]


ONE_KEY = [
    *_tx(10, "i1", ("I", {"id": 1, "v": "a"})),
    *_tx(20, "i1", ("D", {"id": 1, "v": "a"}), ("I", {"id": 1, "v": "b"})),
    *_tx(30, "i2", ("D", {"id": 1, "v": "b"}), ("I", {"id": 1, "v": "c"})),
    *_tx(40, "i2", ("D", {"id": 1, "v": "c"})),
    *_tx(50, "i3", ("I", {"id": 1, "v": "d"})),
]


def _meta(op: str, seqno: int, row_id: int | None, interval: str) -> dict[str, Any]:
    return {"_op": op, "_seqno": seqno, "_rowno": row_id, "_commit_ts": f"t{seqno}", "_interval": interval}


def test_one_key_through_insert_two_updates_delete_and_reinsert_in_each_mode() -> None:
    assert modes.apply("mirror", ["id"], ONE_KEY) == [{"id": 1, "v": "d", **_meta("c", 50, 0, "i3")}]
    # Deleted at 40, then revived: the row is live again, as the insert wrote it.
    assert modes.apply("soft_delete", ["id"], ONE_KEY[:6]) == [
        {"id": 1, "v": "c", **_meta("d", 40, 0, "i2"), "_is_deleted": True, "_deleted_at": "t40"}
    ]
    assert modes.apply("soft_delete", ["id"], ONE_KEY) == [
        {"id": 1, "v": "d", **_meta("c", 50, 0, "i3"), "_is_deleted": False, "_deleted_at": None}
    ]

    def version(v: str, op: str, start: int, row_id: int, interval: str, end: int | None) -> dict[str, Any]:
        return {
            "id": 1,
            "v": v,
            **_meta(op, start, row_id, interval),
            "_valid_from": f"t{start}",
            "_valid_to": None if end is None else f"t{end}",
            "_valid_from_seqno": start,
            "_valid_to_seqno": end,
            "_is_current": end is None,
        }

    assert modes.apply("history", ["id"], ONE_KEY) == [
        version("a", "c", 10, 0, "i1", 20),
        version("b", "u", 20, 1, "i1", 30),
        version("c", "u", 30, 1, "i2", 40),  # the delete closes it: no version after it
        version("d", "c", 50, 0, "i3", None),
    ]


def test_a_replay_changes_nothing_and_the_interval_is_the_one_that_first_brought_the_change() -> None:
    replayed = [*ONE_KEY[:3], *ONE_KEY, *[dataclasses.replace(c, interval="backfill") for c in ONE_KEY]]
    for mode in modes.MODES:
        assert modes.apply(mode, ["id"], replayed) == modes.apply(mode, ["id"], ONE_KEY)


def test_a_transaction_is_one_step_and_a_key_change_moves_the_row() -> None:
    events = [
        *_tx(10, "i1", ("I", {"id": 1, "v": "a"})),
        # Updated twice in one transaction: one version; then its key changes from 1 to 2.
        *_tx(
            20,
            "i1",
            ("D", {"id": 1, "v": "a"}),
            ("I", {"id": 1, "v": "x"}),
            ("D", {"id": 1, "v": "x"}),
            ("I", {"id": 1, "v": "b"}),
        ),
        *_tx(30, "i2", ("D", {"id": 1, "v": "b"}), ("I", {"id": 2, "v": "b"})),
        *_tx(40, "i2", ("I", {"id": 3, "v": "gone"}), ("D", {"id": 3, "v": "gone"})),
    ]
    history = modes.apply("history", ["id"], events)
    assert [(r["id"], r["v"], r["_op"], r["_valid_from_seqno"], r["_valid_to_seqno"]) for r in history] == [
        (1, "a", "c", 10, 20),
        (1, "b", "u", 20, 30),
        (2, "b", "c", 30, None),
    ]
    assert [(r["id"], r["v"], r["_op"]) for r in modes.apply("mirror", ["id"], events)] == [(2, "b", "c")]
    # soft_delete keeps the old key, deleted, and the key a transaction inserted and deleted.
    soft = modes.apply("soft_delete", ["id"], events)
    assert [(r["id"], r["v"], r["_is_deleted"]) for r in soft] == [
        (1, "b", True),
        (2, "b", False),
        (3, "gone", True),
    ]


def test_a_copy_resyncs_each_mode_at_its_position() -> None:
    before = [
        *_tx(10, "i1", ("I", {"id": 1, "v": "a"}), ("I", {"id": 2, "v": "a"}), ("I", {"id": 3, "v": "a"})),
        *_tx(20, "i1", ("D", {"id": 2, "v": "a"}), ("I", {"id": 2, "v": "b"})),  # the copy holds it
    ]
    # The re-load at seqno 20 finds 1 and 2 unchanged, 3 gone and 4 new (changes it missed).
    copy = Copy(20, "load-2", "l20", [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 4, "v": "a"}])
    after = _tx(30, "i2", ("D", {"id": 4, "v": "a"}), ("I", {"id": 4, "v": "z"}))
    events = [*before, copy, *after]
    mirror = modes.apply("mirror", ["id"], events)
    assert [(r["id"], r["v"], r["_op"], r["_interval"]) for r in mirror] == [
        (1, "a", "r", "load-2"),
        (2, "b", "r", "load-2"),
        (4, "z", "u", "i2"),
    ]
    soft = modes.apply("soft_delete", ["id"], events)
    assert [(r["id"], r["_op"], r["_is_deleted"], r["_deleted_at"]) for r in soft] == [
        (1, "r", False, None),
        (2, "r", False, None),
        (3, "d", True, "l20"),
        (4, "u", False, None),
    ]
    history = modes.apply("history", ["id"], events)
    assert [(r["id"], r["v"], r["_op"], r["_valid_from_seqno"], r["_valid_to_seqno"]) for r in history] == [
        (1, "a", "c", 10, None),  # unchanged by the copy: its version stays
        (2, "a", "c", 10, 20),
        (2, "b", "u", 20, None),
        (3, "a", "c", 10, 20),
        (4, "a", "r", 20, 30),
        (4, "z", "u", 30, None),
    ]
    # The copy's place is its position, whenever it was applied.
    assert modes.apply("history", ["id"], [*before, *after, copy]) == history
    # A change the table had not taken before the copy is the copy's (a re-load's table takes
    # no older change): the key is closed, or deleted, at the copy's position.
    late = [*before[:3], copy, *before[3:], *after]
    assert [(r["id"], r["v"], r["_op"], r["_seqno"]) for r in modes.apply("history", ["id"], late)][1:3] == [
        (2, "a", "c", 10),
        (2, "b", "r", 20),
    ]
    assert modes.apply("history", ["id"], late)[1]["_valid_to_seqno"] == 20


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="no mode 'scd2' \\(modes: mirror, soft_delete, history\\)"):
        modes.apply("scd2", ["id"], [])


def _workload(
    rng: random.Random,
) -> tuple[list[Change | Copy], dict[int, dict[int, dict[str, Any]]], set[int]]:
    """Random transactions on a source table (inserts, updates with key changes, deletes,
    re-inserts), cut into intervals, some applied again, a copy at one point; the source's
    rows after each transaction, by its seqno; and the seqnos the copy holds that were not
    applied before it (the table learns of them only through the copy)."""
    state: dict[int, dict[str, Any]] = {}
    states: dict[int, dict[int, dict[str, Any]]] = {}
    events: list[Change | Copy] = []
    intervals: list[list[Change]] = [[]]
    seqno = 0
    copy_at = rng.randrange(10, 40)
    for t in range(60):
        seqno += rng.randrange(1, 5)
        rows: list[tuple[str, dict[str, Any]]] = []
        for _ in range(rng.randrange(1, 4)):
            k = rng.randrange(8)
            if k not in state:
                state[k] = {"id": k, "v": rng.randrange(100)}
                rows.append(("I", state[k]))
            elif rng.random() < 0.3:
                rows.append(("D", state.pop(k)))
            else:
                new_key = k if rng.random() < 0.7 else rng.randrange(8, 12)
                if new_key != k and new_key in state:
                    new_key = k
                rows.append(("D", state.pop(k)))
                state[new_key] = {"id": new_key, "v": rng.randrange(100)}
                rows.append(("I", state[new_key]))
        interval = f"i{len(intervals):03d}"
        intervals[-1] += _tx(seqno, interval, *rows)
        states[seqno] = {k: dict(v) for k, v in state.items()}
        if rng.random() < 0.25:
            events += intervals[-1]
            if rng.random() < 0.3:  # a rerun or a backfill applies some earlier interval again
                events += rng.choice(intervals)
            intervals.append([])
        if t == copy_at:
            events.append(Copy(seqno, "load-1", f"t{seqno}", [dict(v) for v in state.values()]))
            unseen = {c.seqno for c in intervals[-1]}
    events += intervals[-1]
    return events, states, unseen


def _data(row: dict[str, Any]) -> dict[str, Any]:
    return {c: v for c, v in row.items() if not c.startswith("_")}


@pytest.mark.parametrize("seed", range(40))
def test_each_mode_explains_a_random_workload_replays_and_a_copy_included(seed: int) -> None:
    events, states, unseen = _workload(random.Random(seed))
    final = sorted(states.items())[-1][1]
    mirror = modes.apply("mirror", ["id"], events)
    assert [_data(r) for r in mirror] == [final[k] for k in sorted(final)]
    soft = modes.apply("soft_delete", ["id"], events)
    assert [_data(r) for r in soft if not r["_is_deleted"]] == [final[k] for k in sorted(final)]
    assert all(r["_deleted_at"] == r["_commit_ts"] and r["_op"] == "d" for r in soft if r["_is_deleted"])
    history = modes.apply("history", ["id"], events)
    for seqno, state in states.items():  # the versions valid at each commit are the source then
        if seqno in unseen:
            continue  # (those the copy holds: the table learnt of them at the copy)
        valid = [
            _data(r)
            for r in history
            if r["_valid_from_seqno"] <= seqno
            and (r["_valid_to_seqno"] is None or seqno < r["_valid_to_seqno"])
        ]
        assert valid == [state[k] for k in sorted(state)], seqno
    assert sorted(r["id"] for r in history if r["_is_current"]) == sorted(final)
    # Applied in another order of replays (each interval once, in order), the rows are the same.
    once = [e for i, e in enumerate(events) if e not in events[:i]]
    for mode in modes.MODES:
        assert modes.apply(mode, ["id"], once) == modes.apply(mode, ["id"], events)
