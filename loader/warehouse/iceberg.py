"""Iceberg warehouse tables: a copy replaces a table in one snapshot, an interval's changes are
merged in one snapshot (``MERGE INTO``, merge-on-read), and each snapshot's summary says what
the loader committed in it, so that a rerun finds an interval already there.

The summary properties (beside Iceberg's own):

- ``loader.source``: the source (config ``[source] name``);
- ``loader.interval`` and ``loader.end``: the interval merged and its end position;
- ``loader.load``: the initial load whose copy replaced the table;
- ``loader.rollback``: the interval a rollback emptied the table back to (a table whose rows all
  came from later intervals): the snapshots before it are undone;
- ``loader.restored``: the interval whose state a rollback gave back to one source's rows of a
  shared table (``tables.routes``), in a snapshot of its own: the other sources' commits stay,
  so the snapshots before it stay in the ancestry, and those after the interval are undone for
  that source;
- ``loader.maintenance`` and ``loader.compacts``: a compaction (the same rows as its parent, in
  other files) and the interval (or ``load <id>``) whose rows it holds.

A rollback to a snapshot of the table's ancestry makes that snapshot current again; the
snapshots after it leave the ancestry, so their intervals are merged again.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from loader.core import crashpoints, modes
from loader.core.errors import SnapshotError
from loader.core.naming import SOURCE_COLUMN
from loader.warehouse.merge import (
    history_changes_sql,
    history_merge_into_sql,
    key_range_sql,
    key_ranges_sql,
    merge_into_sql,
    ranked_sql,
)
from loader.warehouse.tables import SHARED_PROPERTY, quote_identifier, rows_of_source

# A session setting per summary property: Iceberg adds them to every snapshot the session commits.
SNAPSHOT_PROPERTY = "spark.sql.iceberg.snapshot-property."
SOURCE, INTERVAL, END, LOAD = "loader.source", "loader.interval", "loader.end", "loader.load"
ROLLBACK = "loader.rollback"
RESTORED = "loader.restored"
MAINTENANCE = "loader.maintenance"
COMPACTS = "loader.compacts"  # the interval id, or "load <id>", whose rows a compaction holds
# What Spark's MERGE INTO reports in the snapshot's summary (Spark 4.1 and later).
_MERGED = "spark.merge-into.num-target-rows-"


# The MERGE's join (the table right-outer-joined to its changes) gets a bloom filter of the
# changed keys on the table's side. Spark injects one only into a join it would shuffle, on a
# table of at least the application threshold, from a side under the creation threshold; a
# dynamic partition pruning filter on the same key (never executed here: MERGE's join is not
# broadcast) would stand in its place.
KEY_FILTER_CONF = {
    "spark.sql.optimizer.runtime.bloomFilter.enabled": "true",
    "spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold": "64MB",
    "spark.sql.optimizer.runtime.bloomFilter.creationSideThreshold": "256MB",
    "spark.sql.optimizer.dynamicPartitionPruning.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}


# A merge whose table and changes together are at most this many rows runs each statement as
# one Spark job of a few tasks (``small_merge_conf``).
SMALL_MERGE_ROWS = 1_000_000
SMALL_MERGE_PARTITIONS = 8  # a few hundred thousand rows a task at most
# Iceberg's session setting of a scan's split size, and the weight its planning gives a file at
# least (``read.split.open-file-cost``'s default).
SPLIT_SIZE = "spark.sql.iceberg.read.split-size"
OPEN_FILE_BYTES = 4 << 20
TASK_BYTES = 16 << 20  # of a small merge's scan task (the floor of Iceberg's adaptive split size)


def small_merge_conf(spark: Any, table_now: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings of a small merge: adaptive execution off, as many shuffle partitions as the
    application has cores, at most ``SMALL_MERGE_PARTITIONS``; with ``table_now`` (the summary of
    the table's current snapshot), a split size that reads the table in as many scan tasks at
    most, fewer for fewer bytes (``scan_split_bytes``), unless the config sets one.

    Adaptive execution plans 200 shuffle partitions and coalesces them once each shuffle has
    run, which makes every shuffle a job of its own and plans again between them: for a table of
    a few thousand rows that bookkeeping, not the rows, was most of its merge's time (a bare
    MERGE of 1,500 changes into 2,000 rows: 0.7 s with it, 0.4 s without, on two cores). Rows
    that fit in memory need no coalescing, nor a task per core of a large cluster."""
    tasks = min(max(1, spark.sparkContext.defaultParallelism), SMALL_MERGE_PARTITIONS)
    conf = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": str(tasks)}
    split = scan_split_bytes(table_now or {}, tasks)
    if split is not None and spark.conf.get(SPLIT_SIZE, None) is None:
        conf[SPLIT_SIZE] = str(split)
    return conf


def scan_split_bytes(table_now: Mapping[str, str], most: int) -> int | None:
    """A split size that reads the files of a table whose current snapshot's summary is
    ``table_now`` in a scan task per ``TASK_BYTES`` of them, at most ``most`` tasks; None when
    the summary does not say its files.

    Iceberg packs files into tasks by weight: a file weighs its bytes with its delete files',
    at least ``OPEN_FILE_BYTES`` for each. A table merged a few dozen times, each merge leaving
    a small data file and deletion vectors, weighs 4-8 MB a file for a few KB of rows, and its
    adaptive split size (never below 16 MB) read it in a task per two to four files: 19 tasks
    for 2,000 rows, each with its cost, beside another merge on two cores. Measured on two
    cores, 20 such tables 12 to 18 merges in, 300 changes each: the merges' time 0.90x (six
    alternating pairs); a 900,000-row table of four 14 MB files 0.98x (six pairs), where one
    task for it, without the 16 MB a task, was 1.15x.
    """
    try:
        size = int(table_now["total-files-size"])
        files = int(table_now["total-data-files"]) + int(table_now.get("total-delete-files", 0))
    except (KeyError, ValueError):
        return None
    tasks = min(max(1, most), max(1, -(-size // TASK_BYTES)))
    return max(1, -(-(size + files * OPEN_FILE_BYTES) // tasks))


@contextmanager
def session_conf(spark: Any, settings: Mapping[str, str]) -> Iterator[None]:
    """Spark settings for the block only; the session's own come back after it."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def snapshot_summary(properties: Mapping[str, str]) -> dict[str, str]:
    """The session settings that add ``properties`` to the summary of the snapshots committed
    while they are set (``session_conf``)."""
    return {SNAPSHOT_PROPERTY + key: value for key, value in properties.items()}


@dataclass(frozen=True)
class Snapshot:
    """One snapshot of a table's current ancestry."""

    id: int
    parent: int | None
    summary: dict[str, str]

    def label(self, source: str) -> str:
        """What the loader committed in it, for people."""
        if self.summary.get(SOURCE) != source:
            return f"snapshot {self.id} (not the loader's: {self.summary.get('operation', '?')})"
        if INTERVAL in self.summary:
            return f"interval {self.summary[INTERVAL]}"
        if LOAD in self.summary:
            return f"load {self.summary[LOAD]}"
        if ROLLBACK in self.summary:
            return f"emptied back to interval {self.summary[ROLLBACK]}"
        if RESTORED in self.summary:
            return f"interval {self.summary[RESTORED]} (restored)"
        if MAINTENANCE in self.summary:
            compacts = self.summary.get(COMPACTS, "")
            state = compacts if compacts.startswith("load ") else f"interval {compacts}"
            return f"{state} (compacted)" if compacts else "a compaction"
        return f"snapshot {self.id}"


def load_table(spark: Any, name: str) -> Any:
    """The Iceberg table ``name`` (as Spark SQL names it) through Iceberg's Java API, as committed
    now (the loader's catalogs cache no tables)."""
    return spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)


# py4j hands a reply of more than 8 KB over its socket about 40 ms late (the JVM's side holds the
# rest of the reply until the Python side acknowledges its first part, which Linux delays): a
# table's metadata of 29 KB took 44 ms, in pieces of 7,000 characters 0.8 ms.
_REPLY_CHARS = 7_000


def metadata_json(spark: Any, metadata: Any) -> str:
    """``TableMetadataParser.toJson(metadata)`` (a JVM ``TableMetadata``), fetched in pieces small
    enough for py4j to hand over at once: written as ASCII (other characters escaped, so that no
    piece ends inside one)."""
    jvm = spark._jvm
    writer = jvm.java.io.StringWriter()
    generator = jvm.org.apache.iceberg.util.JsonUtil.factory().createGenerator(writer)
    feature = getattr(jvm.org.apache.iceberg.shaded.com.fasterxml.jackson.core, "JsonGenerator$Feature")
    generator.enable(feature.ESCAPE_NON_ASCII)
    jvm.org.apache.iceberg.TableMetadataParser.toJson(metadata, generator)
    generator.flush()
    text = writer.getBuffer()
    size = text.length()
    return "".join(text.substring(at, min(size, at + _REPLY_CHARS)) for at in range(0, size, _REPLY_CHARS))


def current_ancestry(spark: Any, name: str) -> list[Snapshot]:
    """The table's current snapshot and its ancestors, newest first (a snapshot a rollback or a
    replacement left behind is not among them), as far back as they are kept.

    Read from the table's metadata in one call: a query of its ``history`` and ``snapshots``
    tables would plan and run a Spark job, seconds at each merge's start.
    """
    parsed = json.loads(metadata_json(spark, load_table(spark, name).operations().current()))
    kept = {s["snapshot-id"]: s for s in parsed.get("snapshots", [])}
    out = []
    at = parsed.get("current-snapshot-id")
    while at in kept:
        snapshot = kept[at]
        parent = snapshot.get("parent-snapshot-id")
        out.append(Snapshot(at, parent, dict(snapshot.get("summary") or {})))
        at = parent
    return out


def current_summaries(spark: Any, name: str) -> list[dict[str, str]]:
    """The summaries of ``current_ancestry``."""
    return [s.summary for s in current_ancestry(spark, name)]


def total_records(summary: Mapping[str, str]) -> int | None:
    """The rows a snapshot's data files hold (what a scan reads: merge-on-read keeps a changed
    row's old version until compaction); None when its summary does not say."""
    return int(summary["total-records"]) if "total-records" in summary else None


def committed_interval(summaries: list[dict[str, str]], source: str, interval: str) -> bool:
    """Whether a table's current state, whose ancestry's summaries are ``summaries``
    (``current_summaries``, newest first), holds the merge of this interval of this source."""
    for summary in summaries:
        if summary.get(SOURCE) == source and (LOAD in summary or ROLLBACK in summary or RESTORED in summary):
            return False  # a copy or a rollback replaced the source's rows after any earlier merge
        if summary.get(SOURCE) == source and summary.get(INTERVAL) == interval:
            return True
    return False


@dataclass(frozen=True)
class RollbackTarget:
    """Where a rollback takes one table: ``snapshot`` (None: it stays), or ``empty``."""

    current: Snapshot
    snapshot: Snapshot | None
    empty: bool = False


def rollback_target(ancestry: list[Snapshot], source: str, interval: str) -> RollbackTarget | None:
    """The table's state right after ``interval`` of ``source`` (ids sort in log order): the newest
    snapshot of its ancestry the loader committed for that interval or an earlier one, or a load
    (re-loads after the interval are refused before), or empty when every row came later.

    Returns None for a table the source never committed to.

    Raises:
        ValueError: saying why the state after ``interval`` is no longer there (expired snapshots).
    """
    if not any(s.summary.get(SOURCE) == source for s in ancestry):
        return None
    current = ancestry[0]
    same_rows: Snapshot | None = None  # the newest of the compactions right above this snapshot
    for snapshot in ancestry:
        summary = snapshot.summary
        if summary.get(SOURCE) != source:
            same_rows = None
            continue  # another writer: the loader's snapshot before it decides
        if MAINTENANCE in summary:
            same_rows = same_rows or snapshot
            continue
        if LOAD in summary:
            holds = True
        elif INTERVAL in summary:
            holds = summary[INTERVAL] <= interval
        elif ROLLBACK in summary:
            if summary[ROLLBACK] > interval:
                return RollbackTarget(current, None, empty=True)  # what is older was undone
            holds = True
        elif RESTORED in summary:  # the snapshots before it still hold the older states
            holds = summary[RESTORED] <= interval
        else:
            same_rows = None
            continue
        if holds:  # a compaction of it holds its rows in fewer files: the newer the better
            chosen = same_rows or snapshot
            return RollbackTarget(current, None if chosen is current else chosen)
        same_rows = None
    if same_rows is not None:  # the oldest snapshots kept are compactions: of which state?
        compacts = same_rows.summary.get(COMPACTS, "")
        if compacts and (compacts.startswith("load ") or compacts <= interval):
            return RollbackTarget(current, None if same_rows is current else same_rows)
    if ancestry[-1].parent is not None:
        raise ValueError(
            f"its snapshots from interval {interval} and before were expired; the oldest state it "
            f"keeps is after {ancestry[-1].label(source)}"
        )
    # Every row came from later intervals (the table was created empty): it goes back to empty.
    return RollbackTarget(current, None, empty=True)


def rows_of(ancestry: list[Snapshot], source: str) -> str | None:
    """Whose rows the current snapshot holds: the interval id, or ``load <id>``; None when
    another writer's snapshot, or a rollback that emptied the table, comes first."""
    for snapshot in ancestry:
        summary = snapshot.summary
        if summary.get(SOURCE) != source or ROLLBACK in summary:
            return None
        if INTERVAL in summary:
            return summary[INTERVAL]
        if LOAD in summary:
            return f"load {summary[LOAD]}"
        if RESTORED in summary:
            return summary[RESTORED]
        if summary.get(COMPACTS):
            return summary[COMPACTS]
    return None


def committed_tables(spark: Any, database: str, sources: Collection[str]) -> list[tuple[str, list[Snapshot]]]:
    """The tables of ``database`` (as Spark SQL names it) whose current ancestry holds a snapshot
    one of ``sources`` committed, as Spark SQL names them, with that ancestry."""
    if not spark.catalog.databaseExists(database):
        return []
    out = []
    for row in spark.sql(f"SHOW TABLES IN {database}").collect():
        if row.isTemporary:
            continue
        name = f"{database}.{quote_identifier(row.tableName)}"
        ancestry = current_ancestry(spark, name)
        if any(s.summary.get(SOURCE) in sources for s in ancestry):
            out.append((name, ancestry))
    return sorted(out, key=lambda t: t[0])


def target_after(name: str, ancestry: list[Snapshot], source: str, interval: str) -> RollbackTarget | None:
    """``rollback_target`` of the table ``name`` with this ancestry.

    Raises:
        SnapshotError: its snapshots from the interval and before were expired.
    """
    try:
        return rollback_target(ancestry, source, interval)
    except ValueError as exc:
        raise SnapshotError(
            f"{name} cannot return to the state after interval {interval}: {exc}. Choose a later "
            "interval, or re-load the table (loader initial-load --tables ...)"
        ) from None


def snapshot_after(spark: Any, name: str, source: str, interval: str) -> int | None:
    """The snapshot holding the table's rows right after ``interval``; None when it had none."""
    target = target_after(name, current_ancestry(spark, name), source, interval)
    if target is None or target.empty:
        return None
    return (target.snapshot or target.current).id


def is_shared(spark: Any, name: str) -> bool:
    """Whether the table holds the rows of the sources routed into it (``tables.routes``)."""
    return bool(load_table(spark, name).properties().containsKey(SHARED_PROPERTY))


def roll_back(spark: Any, name: str, target: RollbackTarget, source: str, interval: str) -> None:
    """Take the table to ``target``: one metadata change, or one snapshot deleting every row.

    In a shared table only the source's rows go back, in one snapshot: those the target snapshot
    held replace them (or none: they are deleted); the other sources' rows stay as they are."""
    shared = is_shared(spark, name)
    if target.snapshot is not None and shared:
        own = rows_of_source(source)
        rows = spark.sql(f"SELECT * FROM {name} VERSION AS OF {target.snapshot.id} WHERE {own}")
        overwrite_rows(spark, name, rows, own, {SOURCE: source, RESTORED: interval})
    elif target.snapshot is not None:
        catalog, table = name.split(".", 1)  # the procedure takes the name inside its catalog
        literal = table.replace("\\", "\\\\").replace("'", "\\'")
        spark.sql(
            f"CALL {catalog}.system.rollback_to_snapshot(table => '{literal}', "
            f"snapshot_id => {target.snapshot.id})"
        )
    elif target.empty:
        # Through Iceberg's API: SQL's DELETE of every row is a metadata-only delete, which does
        # not take the session's snapshot properties, and the marker must be in the summary.
        expressions = spark._jvm.org.apache.iceberg.expressions.Expressions
        rows = expressions.equal(SOURCE_COLUMN, source) if shared else expressions.alwaysTrue()
        delete = load_table(spark, name).newDelete().deleteFromRowFilter(rows)
        delete.set(SOURCE, source).set(ROLLBACK, interval).commit()


def merge_changes(
    spark: Any,
    name: str,
    changes: Any,
    columns: list[str],
    key: list[str],
    summary: Mapping[str, str],
    range_width: int | None = None,
    own_rows: str = "",
    mode: str = modes.MIRROR,
    small: bool = False,
    key_filter: str | None = None,
    table_now: Mapping[str, str] | None = None,
) -> tuple[int, int, int, int, int | None]:
    """Merge the change rows ``changes`` into the Iceberg table ``name`` in one snapshot whose
    summary carries ``summary``, as the table's ``mode`` keeps them.

    With ``range_width`` (a table keyed by one integer column), the merge reads only the key
    ranges of that width its changes touch (``merge_into_sql``'s ``target_filter``). ``own_rows``
    (a predicate on the table's rows, alias ``t``) keeps the merge to the rows of one source of a
    shared table: it reads and changes only that source's partitions, so that another source's
    merge committing at the same time does not conflict with it (Iceberg retries the commit).
    ``small``: the table and the changes are small enough for ``small_merge_conf`` (which
    ``table_now``, the summary of the table's current snapshot, sizes the scan tasks of).
    ``key_filter``: a predicate on the table's rows (alias ``t``) that every changed key's row
    satisfies, when the caller knows one (changes it read itself, rows held by the driver,
    which need no cache; empty: none); without it, the key ranges of ``range_width`` the changes
    touch are collected from them, kept in Spark's cache.

    Returns:
        Rows inserted, updated and deleted, the partitions the snapshot changed, and the table's
        ``total_records`` after it.
    """
    with session_conf(spark, small_merge_conf(spark, table_now) if small else {}):
        changes.createOrReplaceTempView("changes")
        # Kept, the changes are a filter over a relation of known size: what Spark's runtime bloom
        # filter needs to drop, while the table is read, the rows of keys that did not change,
        # before they are shuffled for the join. A mirror's or soft_delete's merge takes each key's
        # latest change (ranked); a history's, what the changes do to the key's versions, which
        # needs the table's state and is kept too, so that the table is read for it before the
        # merge writes.
        history = mode == modes.HISTORY
        kept = changes if history else spark.sql(ranked_sql(columns, key))
        if key_filter is None:
            kept = kept.cache()
        steps = None
        try:
            ranges = _touched_ranges(kept, key, range_width) if key_filter is None else key_filter
            target_filter = " AND ".join(p for p in (own_rows, ranges) if p)
            if history:
                with session_conf(spark, KEY_FILTER_CONF):
                    steps = spark.sql(history_changes_sql(key, name, target_filter)).cache()
                    steps.createOrReplaceTempView("history")
                    steps.count()
                merge = history_merge_into_sql(name, columns, key, target_filter)
            else:
                kept.where("_loader_rank = 1").createOrReplaceTempView("latest")
                merge = merge_into_sql(name, columns, key, target_filter, mode)
            with session_conf(spark, {**snapshot_summary(summary), **KEY_FILTER_CONF}):
                spark.sql(merge)
        finally:
            if steps is not None:
                steps.unpersist()
            kept.unpersist()
    crashpoints.reached("after snapshot committed")
    # This merge's snapshot: another source of a shared table may have committed after it.
    summaries = current_summaries(spark, name)
    now = next((s for s in summaries if summary.items() <= s.items()), summaries[0])

    def count(field: str) -> int:
        return int(now.get(field, 0))

    return (
        count(_MERGED + "inserted"),
        count(_MERGED + "matched-updated"),
        count(_MERGED + "matched-deleted"),
        count("changed-partition-count"),
        total_records(now),
    )


def _touched_ranges(changes: Any, key: list[str], range_width: int | None) -> str:
    """The predicate on the table's rows (alias ``t``) of the key ranges of ``range_width`` that
    ``changes`` (a cached frame) touch; empty without a width (the frame is counted, so that it
    is cached either way)."""
    if range_width is None:
        changes.count()
        return ""
    column = quote_identifier(key[0])
    touched = changes.selectExpr(key_range_sql(column, range_width)).distinct().collect()
    return key_ranges_sql(f"t.{column}", [int(r[0]) for r in touched], range_width)


# How Iceberg hands a write's rows to its tasks (the table's ``write.distribution-mode`` unless
# the session sets it).
DISTRIBUTION_MODE = "spark.sql.iceberg.distribution-mode"


def write_settings(spark: Any, summary: Mapping[str, str], as_read: bool) -> dict[str, str]:
    """The session settings of a write whose snapshot's summary carries ``summary``.

    ``as_read``: rows read in key ranges that follow the table's partitions (a copy of a table
    partitioned by key range) are written by the tasks that read them, without the shuffle that
    would gather each partition's rows into one task (a partition of a table of up to a million
    rows is the whole table: one task would write it, the other cores idle). Each task writes a
    file per partition its range covers. A session that chose a distribution keeps it.
    """
    settings = snapshot_summary(summary)
    if as_read and spark.conf.get(DISTRIBUTION_MODE, None) is None:
        settings[DISTRIBUTION_MODE] = "none"
    return settings


def replace_table(
    spark: Any,
    name: str,
    rows: Any,
    partitioning: str,
    properties: str,
    summary: Mapping[str, str],
    as_read: bool = False,
) -> None:
    """Make ``rows`` the table's rows and columns in one snapshot (created if it is missing);
    readers see the old rows until it commits, and the table's history keeps them. ``as_read``:
    see ``write_settings``."""
    rows.createOrReplaceTempView("loader_copy")
    with session_conf(spark, write_settings(spark, summary, as_read)):
        spark.sql(
            f"CREATE OR REPLACE TABLE {name} USING iceberg PARTITIONED BY ({partitioning}) {properties} "
            "AS SELECT * FROM loader_copy"
        )


def overwrite_rows(
    spark: Any, name: str, rows: Any, condition: str, summary: Mapping[str, str], as_read: bool = False
) -> None:
    """Make ``rows`` the rows of the table ``name`` that satisfy ``condition`` (a source's rows
    of a shared table, whose partitions start with the source), in one snapshot whose summary
    carries ``summary``; the table's other rows and its columns stay. Columns are matched by
    name: a table column ``rows`` lack (one a shard has not added yet) is NULL in them.
    ``as_read``: see ``write_settings``."""
    from pyspark.sql import functions as F

    with session_conf(spark, write_settings(spark, summary, as_read)):
        rows.writeTo(name).overwrite(F.expr(condition))
