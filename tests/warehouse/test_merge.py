"""The merge rule (DESIGN.md section 4) on hand-written change sets, run by real Spark."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from loader.core.errors import MergeError
from loader.warehouse.merge import apply_merge, merge_sql

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COLUMNS = ["id", "v", "n", "d", "b"]
KEY = ["id"]
TS = dt.datetime(2024, 1, 1)
CHANGES_SCHEMA = (
    "_loader_op string, _loader_seqno bigint, _loader_row_id int, _loader_commit_ts timestamp, "
    "_loader_interval string, id int, v string, n decimal(10,2), d date, b binary"
)
BASE_SCHEMA = (
    "id int, v string, n decimal(10,2), d date, b binary, _op string, _seqno bigint, _rowno int, "
    "_commit_ts timestamp, _interval string, _loaded_at timestamp"
)


def merge(spark: Any, base: list[tuple[Any, ...]], changes: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The merged rows: (id, v, _seqno, _op)."""
    spark.createDataFrame(base, BASE_SCHEMA).createOrReplaceTempView("base")
    spark.createDataFrame(
        [(op, s, r, TS, "i2", *vals) for op, s, r, vals in changes], CHANGES_SCHEMA
    ).createOrReplaceTempView("changes")
    rows = apply_merge(spark, COLUMNS, KEY, len(changes)).rows.collect()
    return sorted((r.id, r.v, r._seqno, r._op) for r in rows)


def row(i: int, v: str | None) -> tuple[Any, ...]:
    return (i, v, None, None, None)


def based(i: int, v: str | None, seqno: int, op: str = "c") -> tuple[Any, ...]:
    return (*row(i, v), op, seqno, 0, TS, "i1", TS)


def test_insert_update_delete(spark: Any) -> None:
    base = [based(1, "a", 10), based(2, "b", 10), based(3, "c", 10)]
    changes = [
        ("I", 20, 0, row(4, "new")),
        ("D", 21, 0, row(2, "b")),  # an update: its D then its I
        ("I", 21, 1, row(2, "B")),
        ("D", 22, 0, row(3, "c")),
    ]
    assert merge(spark, base, changes) == [(1, "a", 10, "c"), (2, "B", 21, "u"), (4, "new", 20, "c")]


@pytest.mark.parametrize("broadcast_keys", [10, 10**9], ids=["broadcast", "shuffle"])
def test_counts_say_what_the_merge_did(spark: Any, broadcast_keys: int) -> None:
    spark.createDataFrame(
        [based(1, "a", 10), based(2, "b", 10), based(3, "c", 99)], BASE_SCHEMA
    ).createOrReplaceTempView("base")
    changes = [
        ("I", 20, 0, row(4, "new")),
        ("D", 21, 0, row(1, "a")),
        ("I", 21, 1, row(1, "A")),
        ("D", 22, 0, row(2, "b")),
        ("D", 23, 0, row(5, "never there")),
        ("I", 30, 0, row(3, "stale")),
    ]
    spark.createDataFrame(
        [(op, s, r, TS, "i2", *vals) for op, s, r, vals in changes], CHANGES_SCHEMA
    ).createOrReplaceTempView("changes")
    result = apply_merge(spark, COLUMNS, KEY, broadcast_keys)
    assert sorted((r.id, r.v) for r in result.rows.collect()) == [(1, "A"), (3, "c"), (4, "new")]
    assert (result.inserted, result.updated, result.deleted) == (1, 1, 1)
    result.release()


def test_primary_key_change_and_delete_then_reinsert(spark: Any) -> None:
    base = [based(1, "a", 10), based(2, "b", 10)]
    changes = [
        ("D", 20, 0, row(1, "a")),
        ("I", 20, 1, row(100, "a")),  # UPDATE ... SET id = 100
        ("D", 21, 0, row(2, "b")),
        ("I", 22, 0, row(2, "again")),
    ]
    # The key deleted in one transaction and inserted in a later one had no row before it: c.
    assert merge(spark, base, changes) == [(2, "again", 22, "c"), (100, "a", 20, "c")]


def test_the_latest_change_of_a_key_wins_by_seqno_then_row_id(spark: Any) -> None:
    changes = [
        ("I", 20, 0, row(1, "first")),
        ("D", 20, 1, row(1, "first")),
        ("I", 20, 2, row(1, "second")),
        ("D", 30, 0, row(1, "second")),
        ("I", 30, 1, row(1, "third")),
        ("I", 25, 0, row(2, "x")),
        ("D", 26, 0, row(2, "x")),
    ]
    # Inserted in an earlier transaction of the same changes: an update of that row.
    assert merge(spark, [], changes) == [(1, "third", 30, "u")]


def test_stale_changes_leave_newer_base_rows(spark: Any) -> None:
    base = [based(1, "newer", 100), based(2, "newer", 100)]
    changes = [("D", 50, 0, row(1, "old")), ("I", 60, 0, row(2, "old")), ("I", 100, 0, row(3, "same seqno"))]
    assert merge(spark, base, changes) == [
        (1, "newer", 100, "c"),
        (2, "newer", 100, "c"),
        (3, "same seqno", 100, "c"),
    ]
    # A change the row already holds (its seqno) is not applied again: the row stays as the
    # interval that first brought it wrote it (its _interval, its _loaded_at).
    again = [("D", 100, 0, row(1, "newer")), ("I", 100, 1, row(1, "newer"))]
    assert merge(spark, [based(1, "newer", 100, "u")], again) == [(1, "newer", 100, "u")]
    assert [r[0] for r in spark.sql("SELECT _loader_action FROM decided").collect()] == ["stale"]


def test_applying_the_same_changes_twice_gives_the_same_rows(spark: Any) -> None:
    base = [based(1, "a", 10), based(2, "b", 10)]
    changes = [
        ("D", 20, 0, row(1, "a")),
        ("I", 20, 1, row(1, "A")),
        ("D", 21, 0, row(2, "b")),
        ("I", 22, 0, row(3, "c")),
    ]
    once = merge(spark, base, changes)
    twice = merge(spark, [based(i, v, s, op) for i, v, s, op in once], changes)
    assert once == twice == [(1, "A", 20, "u"), (3, "c", 22, "c")]


def test_changes_across_intervals(spark: Any) -> None:
    first = merge(spark, [], [("I", 10, 0, row(1, "a")), ("I", 10, 1, row(2, "b"))])
    second = merge(
        spark,
        [based(i, v, s, op) for i, v, s, op in first],
        [("D", 20, 0, row(1, "a")), ("I", 20, 1, row(1, "a2"))],
    )
    assert second == [(1, "a2", 20, "u"), (2, "b", 10, "c")]


def test_nulls_are_carried_in_every_column(spark: Any) -> None:
    spark.createDataFrame([], BASE_SCHEMA).createOrReplaceTempView("base")
    spark.createDataFrame(
        [
            ("I", 5, 0, TS, "i1", 1, None, None, None, None),
            ("I", 5, 1, TS, "i1", 2, "", Decimal("1.50"), dt.date(2024, 2, 29), b"\x00"),
        ],
        CHANGES_SCHEMA,
    ).createOrReplaceTempView("changes")
    rows = sorted(apply_merge(spark, COLUMNS, KEY, 2).rows.collect(), key=lambda r: r.id)
    assert [(r.v, r.n, r.d, r.b) for r in rows] == [
        (None, None, None, None),
        ("", Decimal("1.50"), dt.date(2024, 2, 29), bytearray(b"\x00")),
    ]


def test_composite_keys_and_odd_names() -> None:
    sql = merge_sql(["order id", "line`no", "x"], ["order id", "line`no"])
    join = "b.`order id` <=> l.`order id` AND b.`line``no` <=> l.`line``no`"
    assert join in sql.decide and join in sql.merge
    assert "PARTITION BY c.`order id`, c.`line``no`" in sql.latest
    with pytest.raises(MergeError, match="'nope'"):
        merge_sql(["a"], ["nope"])


def test_the_key_ranges_of_a_merge_join_adjacent_ones_and_cap_their_number() -> None:
    from loader.warehouse.merge import MAX_KEY_RANGES, key_ranges_sql

    assert key_ranges_sql("t.id", [3, -1, 4, 0, 9], 10) == (
        "((t.id >= -10 AND t.id < 10) OR (t.id >= 30 AND t.id < 50) OR (t.id >= 90 AND t.id < 100))"
    )
    spread = list(range(0, 2 * MAX_KEY_RANGES + 2, 2))
    assert key_ranges_sql("k", spread, 5) == f"((k >= 0 AND k < {(spread[-1] + 1) * 5}))"
    assert key_ranges_sql("k", [], 5) == ""
