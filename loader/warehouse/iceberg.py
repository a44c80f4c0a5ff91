"""Iceberg warehouse tables: a copy replaces a table in one snapshot, an interval's changes are
merged in one snapshot (``MERGE INTO``, merge-on-read), and each snapshot's summary says what
the loader committed in it, so that a rerun finds an interval already there.

The summary properties (beside Iceberg's own):

- ``loader.source``: the source (config ``[source] name``);
- ``loader.interval`` and ``loader.end``: the interval merged and its end position;
- ``loader.load``: the initial load whose copy replaced the table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from loader import crashpoints
from loader.warehouse.merge import merge_into_sql

# A session setting per summary property: Iceberg adds them to every snapshot the session commits.
SNAPSHOT_PROPERTY = "spark.sql.iceberg.snapshot-property."
SOURCE, INTERVAL, END, LOAD = "loader.source", "loader.interval", "loader.end", "loader.load"
# What Spark's MERGE INTO reports in the snapshot's summary (Spark 4.1 and later).
_MERGED = "spark.merge-into.num-target-rows-"


@contextmanager
def snapshot_summary(spark: Any, properties: Mapping[str, str]) -> Iterator[None]:
    """Add ``properties`` to the summary of the snapshots committed inside the block."""
    for key, value in properties.items():
        spark.conf.set(SNAPSHOT_PROPERTY + key, value)
    try:
        yield
    finally:
        for key in properties:
            spark.conf.unset(SNAPSHOT_PROPERTY + key)


def current_summaries(spark: Any, name: str) -> list[dict[str, str]]:
    """The summaries of the table's current snapshot and its ancestors, newest first (a snapshot a
    rollback or a replacement left behind is not among them)."""
    rows = spark.sql(
        f"SELECT s.summary FROM {name}.history h JOIN {name}.snapshots s ON h.snapshot_id = s.snapshot_id "
        "WHERE h.is_current_ancestor ORDER BY h.made_current_at DESC, s.committed_at DESC"
    ).collect()
    return [dict(r.summary or {}) for r in rows]


def committed_interval(spark: Any, name: str, source: str, interval: str) -> bool:
    """Whether the table's current state holds the merge of this interval of this source."""
    for summary in current_summaries(spark, name):
        if summary.get(SOURCE) == source and LOAD in summary:
            return False  # a copy replaced the table after any earlier merge
        if summary.get(SOURCE) == source and summary.get(INTERVAL) == interval:
            return True
    return False


def merge_changes(
    spark: Any,
    name: str,
    changes: Any,
    columns: list[str],
    key: list[str],
    summary: Mapping[str, str],
) -> tuple[int, int, int, int]:
    """Merge the change rows ``changes`` into the Iceberg table ``name`` in one snapshot whose
    summary carries ``summary``.

    Returns:
        Rows inserted, updated and deleted, and the partitions the snapshot changed.
    """
    latest, merge = merge_into_sql(name, columns, key)
    changes.createOrReplaceTempView("changes")
    spark.sql(latest).createOrReplaceTempView("latest")
    with snapshot_summary(spark, summary):
        spark.sql(merge)
    crashpoints.reached("after snapshot committed")
    now = current_summaries(spark, name)[0]

    def count(field: str) -> int:
        return int(now.get(field, 0))

    return (
        count(_MERGED + "inserted"),
        count(_MERGED + "matched-updated"),
        count(_MERGED + "matched-deleted"),
        count("changed-partition-count"),
    )


def replace_table(
    spark: Any, name: str, rows: Any, partitioning: str, properties: str, summary: Mapping[str, str]
) -> None:
    """Make ``rows`` the table's rows and columns in one snapshot (created if it is missing);
    readers see the old rows until it commits, and the table's history keeps them."""
    rows.createOrReplaceTempView("loader_copy")
    with snapshot_summary(spark, summary):
        spark.sql(
            f"CREATE OR REPLACE TABLE {name} USING iceberg PARTITIONED BY ({partitioning}) {properties} "
            "AS SELECT * FROM loader_copy"
        )
