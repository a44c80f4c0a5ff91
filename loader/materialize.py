"""Materialisation: staged intervals merged into partitioned warehouse tables (DESIGN.md §4).

For each table of the intervals being applied:

1. the staged rows of every interval are read (``csvformat.read_staged``), older column layouts
   padded with NULLs, and cast to the warehouse types (``types``);
2. each change gets its partition: key ranges for a single integer key, hash buckets otherwise;
3. only the touched partitions are read, merged (``sql/merge.sql``) and written to a new,
   versioned folder; then the partitions are pointed at their new folders in the catalog,
   ``warehouse.swap_batch`` of them per atomic catalog call (``catalog.PartitionCatalog``), so
   readers see a partition's old version or its new one, never a mix;
4. superseded versions older than the retention are deleted.

Applying the same intervals again gives the same table (the merge rule is idempotent), so a crash
between two partition swaps is repaired by running again. The ledger marks intervals
materialised, and moves the checkpoint, only after every table is done.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

from loader import types
from loader.catalog import PartitionCatalog
from loader.config import Config
from loader.errors import LoaderError
from loader.ledger import EXTRACTED, MATERIALISED, Checkpoint, Interval, Ledger
from loader.merge import apply_merge, quote_identifier
from loader.positions import Position
from loader.staging import csvformat
from loader.staging.manifest import ColumnSpec, Manifest, TableEntry
from loader.staging.stores import Store, open_store

META_TYPES = {"seqno": "bigint", "row_id": "int"}
# The partition column. Not "_part": the Hive metastore's partition filter parser refuses names
# that start with an underscore.
PART = "loader_partition"
INTEGER_KEY_TYPES = {"tinyint", "smallint", "mediumint", "int", "bigint"}
# Fault injection for the crash-safety test: exit right after this many swap calls (each swaps
# up to warehouse.swap_batch partitions).
CRASH_AFTER_SWAPS_ENV = "LOADER_TEST_CRASH_AFTER_SWAPS"


class MaterializeError(LoaderError):
    """A table cannot be materialised (an interval out of order, a change the table cannot take)."""


@dataclass
class TableResult:
    table: str
    inserted: int
    updated: int
    deleted: int
    partitions: int
    seconds: float


def pending_intervals(ledger: Ledger) -> list[Interval]:
    """Extracted, not yet materialised intervals, in order; refuses a gap before them."""
    intervals = ledger.intervals()
    pending = [i for i in intervals if i.state == EXTRACTED]
    for earlier in intervals:
        if pending and earlier.id < pending[0].id and earlier.state not in (MATERIALISED, EXTRACTED):
            run = (
                f" (Airflow run {earlier.run_id}: clear and rerun its extract task)" if earlier.run_id else ""
            )
            raise MaterializeError(
                f"interval {earlier.id} is {earlier.state}: extract it (loader extract --interval {earlier.id})"
                f"{run} before later intervals can be materialised"
            )
    return pending


def has_integer_key(columns: list[ColumnSpec], key: list[str]) -> bool:
    """A single integer key column: the table is split by key ranges (else by hash buckets)."""
    types_by_name = {c.name: c.mysql_type for c in columns}
    return len(key) == 1 and types_by_name[key[0]].split()[0] in INTEGER_KEY_TYPES


def partition_expr(columns: list[ColumnSpec], key: list[str], partition_rows: int, buckets: int) -> str:
    """The SQL expression of a row's partition: its key range, or its key's hash bucket."""
    q = quote_identifier
    if has_integer_key(columns, key):
        return f"CAST(floor({q(key[0])} / {partition_rows}) AS BIGINT)"
    return f"CAST(pmod(xxhash64({', '.join(q(k) for k in key)}), {buckets}) AS BIGINT)"


def warehouse_table(schema: str, table: str) -> str:
    """A source table's name in the warehouse database: ``<schema>__<table>``."""
    return f"{schema}__{table}"


def table_name(cfg: Config, schema: str, table: str) -> str:
    return f"{quote_identifier(cfg.warehouse.database)}.{quote_identifier(warehouse_table(schema, table))}"


def ensure_table(spark: Any, cfg: Config, schema: str, table: str, columns: list[ColumnSpec]) -> None:
    """Create the table on first sight; add columns that appeared at the end of the source's."""
    q = quote_identifier
    name = table_name(cfg, schema, table)
    if not spark.catalog.tableExists(name):
        cols = ", ".join(f"{q(c.name)} {types.spark_type(c.mysql_type)}" for c in columns)
        spark.sql(
            f"CREATE TABLE {name} ({cols}, _seqno BIGINT, _commit_ts TIMESTAMP, {PART} BIGINT) "
            f"USING parquet PARTITIONED BY ({PART})"
        )
        return
    existing = [
        f.name for f in spark.table(name).schema.fields if f.name not in ("_seqno", "_commit_ts", PART)
    ]
    wanted = [c.name for c in columns]
    if wanted[: len(existing)] != existing:
        raise MaterializeError(
            f"{name}: the source's columns {wanted} do not continue the warehouse's {existing}; "
            "only columns added at the end can be applied"
        )
    added = columns[len(existing) :]
    if added:
        spark.sql(
            f"ALTER TABLE {name} ADD COLUMNS ("
            + ", ".join(f"{q(c.name)} {types.spark_type(c.mysql_type)}" for c in added)
            + ")"
        )


def _changes(spark: Any, store: Store, entries: list[TableEntry], columns: list[ColumnSpec]) -> Any:
    """Every staged change of one table, typed, in the table's latest column layout."""
    q = quote_identifier
    frames = []
    for entry in entries:
        for index, layout_columns in enumerate(entry.layouts):
            paths = [store.spark_uri(f.path) for f in entry.files if f.layout == index]
            if not paths:
                continue
            names = [c.name for c in layout_columns]
            frame = csvformat.read_staged(spark, paths, names)
            have = set(names)
            select = [
                f"CAST({q(m)} AS {t})" + f" AS {q(m)}"
                if m in META_TYPES
                else f"try_to_timestamp({q(m)}) AS {q(m)}"
                for m, t in (*META_TYPES.items(), ("commit_ts", "timestamp"))
            ] + ["op"]
            for c in columns:
                if c.name in have:
                    select.append(f"{types.cast_sql(q(c.name), c.mysql_type)} AS {q(c.name)}")
                else:
                    select.append(f"CAST(NULL AS {types.spark_type(c.mysql_type)}) AS {q(c.name)}")
            frames.append(frame.selectExpr(*select))
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def materialize_table(
    spark: Any, cfg: Config, store: Store, entries: list[TableEntry], run_id: str
) -> TableResult:
    """Apply one table's staged changes from several intervals in one pass."""
    started = time.monotonic()
    schema, table = entries[0].schema, entries[0].table
    columns = entries[-1].layouts[-1]
    key = entries[-1].primary_key
    ensure_table(spark, cfg, schema, table, columns)
    part = partition_expr(columns, key, *cfg.warehouse.partitioning(schema, table))
    changes = _changes(spark, store, entries, columns).selectExpr("*", f"{part} AS {PART}").cache()
    per_partition = {r[PART]: r["count"] for r in changes.groupBy(PART).count().collect()}
    touched = sorted(per_partition)
    if not touched:
        changes.unpersist()
        return TableResult(f"{schema}.{table}", 0, 0, 0, 0, time.monotonic() - started)
    changes.createOrReplaceTempView("changes")
    _touched_rows(spark, cfg, schema, table, touched).createOrReplaceTempView("base")
    effect = apply_merge(spark, [c.name for c in columns], key, sum(per_partition.values()))
    merged = effect.rows.selectExpr("*", f"{part} AS {PART}")
    publish_version(spark, cfg, schema, table, merged, run_id, touched)
    effect.release()
    changes.unpersist()
    return TableResult(
        f"{schema}.{table}",
        effect.inserted,
        effect.updated,
        effect.deleted,
        len(touched),
        time.monotonic() - started,
    )


def _touched_rows(spark: Any, cfg: Config, schema: str, table: str, touched: list[int]) -> Any:
    """The rows of the touched partitions, read from the folders the catalog points them at.

    Reading the folders directly spares a partition lookup in the metastore each time the
    merge's statements are planned. Files written before a column was added read it as NULL.
    """
    locations = PartitionCatalog(
        spark, cfg.warehouse.database, warehouse_table(schema, table), PART
    ).locations()
    data_schema = spark.table(table_name(cfg, schema, table)).drop(PART).schema
    paths = [locations[p] for p in touched if p in locations]
    if not paths:
        return spark.createDataFrame([], data_schema)
    return spark.read.schema(data_schema).parquet(*paths)


def publish_version(
    spark: Any, cfg: Config, schema: str, table: str, rows: Any, version: str, partitions: list[int] | None
) -> None:
    """Write ``rows`` (with their partition column) as a new version of the table, swap it in, and
    delete superseded versions past the retention.

    ``partitions``: the ones to swap; None replaces the whole table (every partition it has or
    the write made).
    """
    name = table_name(cfg, schema, table)
    location = table_location(spark, name)
    version_root = f"{location}/_versions/{version}"
    rows.write.mode("overwrite").partitionBy(PART).parquet(version_root)
    catalog = PartitionCatalog(spark, cfg.warehouse.database, warehouse_table(schema, table), PART)
    swap_in(spark, catalog, version_root, partitions, rows.drop(PART).schema, cfg.warehouse.swap_batch)
    spark.catalog.refreshTable(name)
    delete_old_versions(spark, catalog, location, cfg.warehouse.retention_hours)


def swap_in(
    spark: Any,
    catalog: PartitionCatalog,
    version_root: str,
    partitions: list[int] | None,
    row_schema: Any,
    batch: int,
) -> None:
    """Point each partition at its folder under ``version_root``, ``batch`` partitions per atomic
    catalog call.

    A partition the write left no folder for (all its rows went) gets an empty version; None
    swaps every partition the table has or the write made.
    """
    written = set(written_partitions(spark, version_root))
    if partitions is None:
        partitions = sorted(written | set(catalog.locations()))
    for p in partitions:
        if p not in written:
            spark.createDataFrame([], row_schema).write.mode("overwrite").parquet(
                f"{version_root}/{PART}={p}"
            )
    crash_after = int(os.environ.get(CRASH_AFTER_SWAPS_ENV, "0") or 0)
    for n, start in enumerate(range(0, len(partitions), batch), start=1):
        catalog.point({p: f"{version_root}/{PART}={p}" for p in partitions[start : start + batch]})
        if crash_after and n >= crash_after:
            os._exit(137)


def table_location(spark: Any, name: str) -> str:
    """The table's root location as the catalog has it (a URI such as ``file:/...``)."""
    for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect():
        if r.col_name == "Location":
            return str(r.data_type).rstrip("/")
    raise MaterializeError(f"{name} has no location in the catalog")


def _filesystem(spark: Any, uri: str) -> tuple[Any, Any]:
    """Hadoop's FileSystem for a location (file:, hdfs:, s3a:, ...) and the location as a Path."""
    path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def written_partitions(spark: Any, root: str) -> list[int]:
    """The partition values a partitioned write created folders for."""
    fs, path = _filesystem(spark, root)
    out = []
    for status in fs.listStatus(path):
        name = status.getPath().getName()
        if status.isDirectory() and name.startswith(f"{PART}="):
            out.append(int(name.split("=", 1)[1]))
    return out


def delete_old_versions(
    spark: Any, catalog: PartitionCatalog, location: str, retention_hours: float
) -> list[str]:
    """Delete the table's version folders no partition points at, once older than the retention.

    Returns the deleted folders. The retention keeps superseded versions for readers that
    planned their query before a swap (and for looking back after a bad run).
    """
    fs, root = _filesystem(spark, f"{location}/_versions")
    if not fs.exists(root):
        return []
    cutoff_ms = (time.time() - retention_hours * 3600) * 1000
    live = [_without_scheme(p) + "/" for p in catalog.locations().values()]
    deleted = []
    for status in fs.listStatus(root):
        folder = status.getPath()
        path = _without_scheme(str(folder.toString())) + "/"
        if status.getModificationTime() > cutoff_ms or any(loc.startswith(path) for loc in live):
            continue
        fs.delete(folder, True)
        deleted.append(str(folder.toString()))
    return deleted


def _without_scheme(uri: str) -> str:
    """A location without ``file:`` (Hadoop writes local paths as file:/x or file:///x)."""
    if uri.startswith("file://"):
        return uri[len("file://") :]
    return uri[len("file:") :] if uri.startswith("file:") else uri


def run_materialize(spark: Any, cfg: Config) -> list[TableResult]:
    """Apply every extracted interval, in order; mark them materialised; move the checkpoint."""
    store = open_store(cfg.staging)
    ledger = Ledger(store, cfg.source.name)
    intervals = pending_intervals(ledger)
    if not intervals:
        return []
    manifests = [Manifest.from_json(store.get(i.manifest or "") or b"") for i in intervals]
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote_identifier(cfg.warehouse.database)}")
    by_table: dict[tuple[str, str], list[TableEntry]] = {}
    for m in manifests:
        for t in m.tables:
            by_table.setdefault((t.schema, t.table), []).append(t)
    run_id = f"v{intervals[-1].id}-{uuid.uuid4().hex[:8]}"
    results = [
        materialize_table(spark, cfg, store, entries, run_id) for _, entries in sorted(by_table.items())
    ]
    for interval in intervals:
        interval.state = MATERIALISED
        ledger.save(interval)
    last = intervals[-1]
    current = ledger.checkpoint()
    commit_times = [i.last_commit_ts for i in intervals if i.last_commit_ts is not None]
    if current is None or Position.parse(current.position) < last.effective_end:  # never backwards
        previous = current.commit_ts if current else None
        commit_ts = max([*commit_times, *([previous] if previous else [])], default=None)
        ledger.set_checkpoint(Checkpoint(str(last.effective_end), last.id, commit_ts))
    return results
