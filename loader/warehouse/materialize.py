"""Materialisation: staged intervals merged into partitioned warehouse tables (DESIGN.md §4).

For each table of the intervals being applied:

1. the staged rows of every interval are read (``csvformat.read_staged``), older column layouts
   padded with NULLs, and cast to the warehouse types (``types``);
2. each change gets its partition: key ranges for a single integer key, hash buckets otherwise;
3. only the touched partitions are read, merged (``sql/merge.sql``, ``merge``) and written to a new,
   versioned folder; then the partitions are pointed at their new folders in the catalog,
   ``warehouse.swap_batch`` of them per atomic catalog call (``tables.publish_version``), so
   readers see a partition's old version or its new one, never a mix;
4. superseded versions older than the retention are deleted.

Applying the same intervals again gives the same table (the merge rule is idempotent), so a crash
between two partition swaps is repaired by running again. The ledger marks intervals
materialised, and moves the checkpoint, only after every table is done.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from loader.core.config import Config
from loader.core.errors import CsvValueError, MaterializeError
from loader.core.naming import INVALID_DATES_COLUMN, SOURCE_COLUMN, warehouse_tables
from loader.core.positions import Position, seqno_of
from loader.core.results import TableResult
from loader.core.tables import reload_remedy
from loader.staging import csvformat
from loader.staging.manifest import ColumnSpec, Manifest, TableEntry
from loader.staging.stores import Store, open_store
from loader.staging.verify import verified_manifest
from loader.state.ledger import Ledger
from loader.state.records import (
    ABANDONED,
    EXTRACTED,
    MATERIALISED,
    Checkpoint,
    Interval,
    Load,
    awaiting_copy,
    loaded_seqnos,
)
from loader.warehouse import iceberg, types
from loader.warehouse.catalog import PartitionCatalog
from loader.warehouse.merge import apply_merge, key_ranges_sql, key_values_sql
from loader.warehouse.tables import (
    PART,
    Target,
    empty_rows,
    ensure_database,
    ensure_table,
    has_integer_key,
    legacy_tables,
    partition_expr,
    publish_version,
    quote_identifier,
    source_column_sql,
    source_filter,
    table_name,
)

# The staged meta columns as read (``csvformat.META_READ_AS``) and their types.
OP, SEQNO, ROW_ID, COMMIT_TS = (csvformat.META_READ_AS[m] for m in csvformat.META_COLUMNS)
META_TYPES = {SEQNO: "bigint", ROW_ID: "int"}
INTERVAL = "_loader_interval"  # the interval whose files a change row came from


@dataclass(frozen=True)
class Staged:
    """One table's staged files of one interval."""

    interval: str
    entry: TableEntry


def pending_intervals(ledger: Ledger, intervals: list[Interval] | None = None) -> list[Interval]:
    """Extracted, not yet materialised intervals, in order, of ``intervals`` (the ledger's, read
    here unless given); refuses a gap before them."""
    intervals = ledger.intervals() if intervals is None else intervals
    pending = [i for i in intervals if i.state == EXTRACTED]
    for earlier in intervals:
        if (
            pending
            and earlier.id < pending[0].id
            and earlier.state not in (MATERIALISED, EXTRACTED, ABANDONED)
        ):
            run = (
                f" (Airflow run {earlier.run_id}: clear and rerun its extract task)" if earlier.run_id else ""
            )
            raise MaterializeError(
                f"interval {earlier.id} is {earlier.state}: extract it (loader extract --interval {earlier.id})"
                f"{run} before later intervals can be materialised"
            )
    return pending


# A table whose staged changes of the merge are at most this many rows and bytes (as stored)
# has them read by this process (``csvformat.parse_staged``) and handed to Spark as rows, rather
# than read by Spark's CSV reader: a Spark read costs a job and its planning, and the key ranges
# they touch a few more, most of a small merge's time.
LOCAL_READ_ROWS = 100_000
LOCAL_READ_BYTES = 32 << 20


@dataclass(frozen=True)
class _Read:
    """The staged files of one interval and column layout of a table: read by Spark from
    ``uris``, or already parsed here (``parsed``)."""

    interval: str
    names: list[str]  # the layout's columns, in file order
    uris: list[str]
    parsed: Any = None  # a pyarrow table of all the files' rows (``csvformat.parse_staged``)


def _reads(store: Store, staged: list[Staged], local: bool) -> list[_Read]:
    """One table's staged files by interval and layout, parsed here when ``local``."""
    out = []
    for part in staged:
        entry = part.entry
        for index, layout_columns in enumerate(entry.layouts):
            files = [f.path for f in entry.files if f.layout == index]
            if not files:
                continue
            names = [c.name for c in layout_columns]
            parsed = None
            if local:
                import pyarrow as pa

                parsed = pa.concat_tables([_parsed(store, path, len(names), part.interval) for path in files])
            out.append(_Read(part.interval, names, [store.spark_uri(path) for path in files], parsed))
    return out


def _parsed(store: Store, path: str, columns: int, interval: str) -> Any:
    remedy = f"nothing was applied; extract the interval again: loader extract --interval {interval}"
    data = store.get(path)
    if data is None:  # checked by ``verified_manifest`` moments ago
        raise MaterializeError(f"staging file {path} is missing; {remedy}")
    try:
        return csvformat.parse_staged(data, columns, path)
    except CsvValueError as exc:
        raise MaterializeError(f"{exc}; {remedy}") from None


def _key_filter(reads: list[_Read], column: ColumnSpec, warehouse_type: str, width: int | None) -> str:
    """A predicate on the table's rows (alias ``t``) that the row of every key the changes parsed
    here touch satisfies, of the key's first ``column``: the key ranges of ``width`` (an integer
    key: ``merge.key_range_sql``'s numbers), else its values (``merge.key_values_sql``); a change
    its copy holds may add one more, never one less."""
    texts: set[str] = set()
    for read in reads:
        if column.name not in read.names:
            continue  # a layout from before the column: its rows' key is NULL, which joins nothing
        at = len(csvformat.META_COLUMNS) + read.names.index(column.name)
        texts.update(text for text in read.parsed.column(at).to_pylist() if text is not None)
    target = f"t.{quote_identifier(column.name)}"
    if width is not None:
        return key_ranges_sql(target, [int(text) // width for text in texts], width)
    # Each value as the changes' own cast gives it to the merge's join.
    return key_values_sql(
        target, [_cast_to(types.spark_string(text), column, warehouse_type) for text in sorted(texts)]
    )


def _changes(
    spark: Any,
    reads: list[_Read],
    columns: list[ColumnSpec],
    warehouse_types: dict[str, str],
    copy_seqno: int | None,
) -> Any:
    """Every staged change of one table after ``copy_seqno`` (its latest copy's P0: the copy
    holds the transactions committed up to there), typed as the warehouse table's columns, in
    the table's latest column layout."""
    q = quote_identifier
    frames = []
    for read in reads:
        names = read.names
        if read.parsed is not None:
            frame = csvformat.staged_frame(spark, read.parsed, names)
        else:
            frame = csvformat.read_staged(spark, read.uris, names)
        if copy_seqno is not None:
            frame = frame.where(f"CAST({SEQNO} AS BIGINT) > {copy_seqno}")
        have = set(names)
        select = [
            f"CAST({q(m)} AS {t})" + f" AS {q(m)}"
            if m in META_TYPES
            else f"try_to_timestamp({q(m)}) AS {q(m)}"
            for m, t in (*META_TYPES.items(), (COMMIT_TS, "timestamp"))
        ] + [OP, f"{types.spark_string(read.interval)} AS {INTERVAL}"]
        for c in columns:
            target = warehouse_types[c.name]
            if c.name not in have:
                select.append(f"CAST(NULL AS {target}) AS {q(c.name)}")
                continue
            select.append(f"{_cast_to(q(c.name), c, target)} AS {q(c.name)}")
        dates = [(q(c.name), c.name, c.mysql_type) for c in columns if c.name in have]
        select.append(f"{types.invalid_dates_sql(dates)} AS {INVALID_DATES_COLUMN}")
        frames.append(frame.selectExpr(*select))
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def _cast_to(text: str, column: ColumnSpec, warehouse_type: str) -> str:
    """SQL of the warehouse value of the staged ``text`` (SQL of a string) of ``column``."""
    value = types.cast_sql(text, column.mysql_type)
    if types.spark_type(column.mysql_type) != warehouse_type:  # the warehouse keeps a wider type
        value = f"CAST({value} AS {warehouse_type})"
    return value


def materialize_table(
    spark: Any,
    target: Target,
    store: Store,
    staged: list[Staged],
    run_id: str,
    copy_seqno: int | None = None,
    summary: dict[str, str] | None = None,
    table_now: Mapping[str, str] | None = None,
) -> TableResult:
    """Apply one table's staged changes from several intervals in one pass (those after
    ``copy_seqno``, the seqno of its latest copy: the copy holds the others).

    An Iceberg table gets them in one snapshot whose summary carries ``summary``; ``table_now``
    (the summary of its current snapshot, empty for a table without one; None: not known) says
    with the changes' rows whether its merge is small, and how its files are read then
    (``iceberg.small_merge_conf``).
    """
    started, began = time.monotonic(), time.time()
    entries = [part.entry for part in staged]
    schema, table = entries[0].schema, entries[0].table
    columns = entries[-1].layouts[-1]
    key = entries[-1].primary_key
    statements = [s for entry in entries for s in entry.statements]
    cause = (
        f" (statement at {statements[-1]['position']}: {statements[-1]['query'][:300]})" if statements else ""
    )
    warehouse_types = ensure_table(spark, target, schema, table, columns, key=key, cause=cause)
    names = [c.name for c in columns] + [INVALID_DATES_COLUMN]
    mode = target.tables.mode_of(schema, table)  # the table's: ensure_table refuses another
    files = [f for e in entries for f in e.files]
    local = sum(f.rows for f in files) <= LOCAL_READ_ROWS and sum(f.bytes for f in files) <= LOCAL_READ_BYTES
    reads = _reads(store, staged, local)
    changes = _changes(spark, reads, columns, warehouse_types, copy_seqno)
    if target.warehouse.format == "iceberg":
        table_rows = _rows_of(table_now)
        # the key ranges the changes touch, as Hive's partitions
        width = target.warehouse.partitioning(schema, table)[0] if has_integer_key(columns, key) else None
        by_name = {c.name: c for c in columns}
        own_rows = source_filter(target.source, target.tables, schema, table, alias="t")
        if own_rows:  # a shared table: the source's name on its rows, and only its rows merged
            changes = changes.selectExpr(source_column_sql(target.source), "*")
            names = [SOURCE_COLUMN, *names]
        inserted, updated, deleted, partitions, rows = iceberg.merge_changes(
            spark,
            table_name(target, schema, table),
            changes,
            names,
            key,
            summary or {},
            width,
            own_rows,
            mode,
            small=table_rows is not None
            and table_rows + sum(f.rows for f in files) <= iceberg.SMALL_MERGE_ROWS,
            table_now=table_now,
            key_filter=_key_filter(reads, by_name[key[0]], warehouse_types[key[0]], width) if local else None,
        )
        seconds = time.monotonic() - started
        return TableResult(f"{schema}.{table}", inserted, updated, deleted, partitions, seconds, rows, began)
    part = partition_expr(columns, key, *target.warehouse.partitioning(schema, table))
    changes = changes.selectExpr("*", f"{part} AS {PART}").cache()
    try:
        per_partition = {r[PART]: r["count"] for r in changes.groupBy(PART).count().collect()}
        touched = sorted(per_partition)
        if not touched:
            return TableResult(f"{schema}.{table}", 0, 0, 0, 0, time.monotonic() - started, started=began)
        changes.createOrReplaceTempView("changes")
        # One reading of the table's partitions for the merge and the swap.
        catalog = PartitionCatalog(
            spark, target.warehouse.database, target.tables.warehouse_name(schema, table), PART
        )
        _touched_rows(spark, catalog, touched).createOrReplaceTempView("base")
        effect = apply_merge(spark, names, key, sum(per_partition.values()), mode)
        try:
            merged = effect.rows.selectExpr("*", f"{part} AS {PART}")
            publish_version(spark, target, schema, table, merged, run_id, touched, catalog)
        finally:
            effect.release()
    finally:
        changes.unpersist()
    return TableResult(
        f"{schema}.{table}",
        effect.inserted,
        effect.updated,
        effect.deleted,
        len(touched),
        time.monotonic() - started,
        started=began,
    )


def _touched_rows(spark: Any, catalog: PartitionCatalog, touched: list[int]) -> Any:
    """The rows of the touched partitions, read from the folders the catalog points them at.

    Reading the folders directly spares a partition lookup in the metastore each time the
    merge's statements are planned. Files written before a column was added read it as NULL.
    """
    locations = catalog.locations()
    data_schema = catalog.data_schema()
    paths = [locations[p] for p in touched if p in locations]
    if not paths:
        return empty_rows(spark, data_schema)
    return spark.read.schema(data_schema).parquet(*paths)


def run_materialize(spark: Any, cfg: Config) -> list[TableResult]:
    """Apply every extracted interval, in order; mark them materialised; move the checkpoint.

    Hive-format tables take every pending interval in one pass; Iceberg tables take one interval
    at a time, each in its own snapshot, and the ledger follows each interval.
    """
    store = open_store(cfg.staging)
    ledger = Ledger(store, cfg.source.name)
    intervals = pending_intervals(ledger)
    if not intervals:
        return []
    manifests = [
        verified_manifest(store, i.id, i.manifest or "", i.manifest_sha256, i.changes) for i in intervals
    ]
    ensure_database(spark, cfg.warehouse)
    pending = list(zip(intervals, manifests, strict=True))
    groups = [pending] if cfg.warehouse.format == "hive" else [[p] for p in pending]
    results: dict[str, TableResult] = {}
    for group in groups:
        for result in _materialize_intervals(spark, cfg, store, ledger, group):
            before = results.get(result.table)
            results[result.table] = before.plus(result) if before else result
    return list(results.values())


def _materialize_intervals(
    spark: Any, cfg: Config, store: Store, ledger: Ledger, pending: list[tuple[Interval, Manifest]]
) -> list[TableResult]:
    """Apply these intervals in one pass, mark them materialised and move the checkpoint."""
    intervals = [i for i, _ in pending]
    loads = ledger.loads()
    loaded, awaiting = loaded_seqnos(loads), awaiting_copy(loads)
    by_table: dict[tuple[str, str], list[Staged]] = {}
    waiting: set[tuple[str, str]] = set()
    for interval, m in pending:
        ends_at = Position.parse(m.end)
        for t in m.tables:
            if (t.schema, t.table) in awaiting:  # its copy applies them (``catch_up``)
                waiting.add((t.schema, t.table))
                continue
            since = loaded.get((t.schema, t.table))
            if (
                since is None or seqno_of(ends_at.file, ends_at.pos, interval.epoch) > since
            ):  # else all in the re-load
                by_table.setdefault((t.schema, t.table), []).append(Staged(interval.id, t))
    run_id = f"v{intervals[-1].id}-{uuid.uuid4().hex[:8]}"
    span = intervals[0].id if len(intervals) == 1 else f"{intervals[0].id}-{intervals[-1].id}"
    if waiting:
        names = sorted(f"{s}.{t}" for s, t in waiting)
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        print(
            f"interval {span}: {shown} not merged: {'they wait' if len(names) > 1 else 'it waits'} for "
            "a copy (loader tables shows which load); the copy applies these changes after it",
            file=sys.stderr,
        )
    warehouse_tables(by_table, cfg.tables.route)  # two source tables never share a warehouse table
    legacy = legacy_tables(spark, cfg.warehouse.database, by_table) if cfg.warehouse.format == "hive" else {}
    for (schema, table), old in legacy.items():
        old_name = f"{quote_identifier(cfg.warehouse.database)}.{quote_identifier(old)}"
        raise MaterializeError(
            f"interval {span}: {schema}.{table}: its rows are in the warehouse table {old_name}, the "
            f"name earlier loader versions gave it: rename it to its name now (ALTER TABLE {old_name} "
            f"RENAME TO {table_name(cfg, schema, table)}) or " + reload_remedy((schema, table))
        )
    last = intervals[-1]
    summary = {
        iceberg.SOURCE: cfg.source.name,
        iceberg.INTERVAL: last.id,
        iceberg.END: str(last.effective_end),
    }
    work = [
        functools.partial(
            _merge_table,
            cfg=cfg,
            store=store,
            schema=schema,
            table=table,
            staged=staged,
            run_id=run_id,
            copy_seqno=loaded.get((schema, table)),
            summary=summary,
            last=last.id,
            span=span,
        )
        for (schema, table), staged in sorted(by_table.items())
    ]
    results = []
    counted = []  # [schema, table, rows] of the tables whose rows the merge reports
    for result, count in at_once(spark, cfg.spark.merge_tables_at_once, work):
        results += [result] if result is not None else []
        counted += [count] if count is not None else []
    record_materialised(ledger, intervals, counted)
    return results


def _merge_table(
    spark: Any,
    *,
    cfg: Config,
    store: Store,
    schema: str,
    table: str,
    staged: list[Staged],
    run_id: str,
    copy_seqno: int | None,
    summary: dict[str, str],
    last: str,
    span: str,
) -> tuple[TableResult | None, list[Any] | None]:
    """One table's merge of the intervals: its result (None when it was committed before), and
    ``[schema, table, rows]`` when its row count is known."""
    name = table_name(cfg, schema, table)
    now: dict[str, str] = {}  # a table made by this merge has no snapshot
    if cfg.warehouse.format == "iceberg" and spark.catalog.tableExists(name):
        summaries = iceberg.current_summaries(spark, name)
        now = summaries[0] if summaries else {}
        if iceberg.committed_interval(summaries, cfg.source.name, last):
            # Committed before the ledger heard of it (a crash in between): its count stays.
            rows = _rows_of(now)
            return None, [schema, table, rows] if rows is not None else None
    try:
        result = materialize_table(
            spark, Target.of(cfg), store, staged, run_id, copy_seqno, summary=summary, table_now=now
        )
    except MaterializeError as exc:
        raise MaterializeError(f"interval {span}: {exc}") from None
    return result, [schema, table, result.data_file_rows] if result.data_file_rows is not None else None


def _rows_of(now: Mapping[str, str] | None) -> int | None:
    """The rows a table's data files hold, from the summary of its current snapshot (empty: no
    snapshot, none); None when not known or the summary does not say."""
    if now is None:
        return None
    return iceberg.total_records(now) if now else 0


def _table_now(spark: Any, name: str, table_format: str) -> dict[str, str] | None:
    """The summary of the Iceberg table ``name``'s current snapshot (the table exists; empty
    when it has none); None for another format."""
    if table_format != "iceberg":
        return None
    summaries = iceberg.current_summaries(spark, name)
    return summaries[0] if summaries else {}


T = TypeVar("T")


def at_once(spark: Any, most: int, work: Sequence[Callable[[Any], T]]) -> list[T]:
    """Each piece of ``work`` given a Spark session, up to ``most`` at once, each thread then with
    a session of its own (``own_session``) for the pieces it runs one after another; their
    results in order. Every piece runs to its end (none is stopped halfway by another's
    failure); then the first failure in order is raised, as running them one after another
    would have raised it."""
    if most <= 1 or len(work) <= 1:
        return [piece(spark) for piece in work]
    # A session per thread, not per piece: making one copies every setting, a tenth of a
    # second or more of the driver's time, which a table of few changes would pay again each.
    mine = threading.local()

    def run(piece: Callable[[Any], T]) -> T:
        if not hasattr(mine, "session"):
            mine.session = own_session(spark)
        return piece(mine.session)

    with ThreadPoolExecutor(min(most, len(work)), thread_name_prefix="loader-merge") as pool:
        futures = [pool.submit(run, piece) for piece in work]
    # Leaving the block waited for every piece.
    return [f.result() for f in futures]


def own_session(spark: Any) -> Any:
    """A session of ``spark``'s application with the settings it has now (those set after it
    started too: a catalog's) but its own temporary views and settings: merges at once each set
    their snapshot properties and name their views in their own."""
    session = spark.newSession()
    mine, theirs = spark.conf.getAll, session.conf.getAll
    for key, value in mine.items():
        if theirs.get(key) != value:
            session.conf.set(key, value)
    for key in theirs.keys() - mine.keys():
        session.conf.unset(key)
    return session


def catch_up(
    spark: Any, cfg: Config, store: Store, ledger: Ledger, load: Load, schema: str, table: str
) -> int:
    """After the copy of one table at ``load``'s P0 committed: apply its changes past P0 from the
    intervals materialised since (the merges passed the table over while its copy was pending);
    the changes of the intervals not materialised yet are the next merge's. Run under the
    source's lease, before the copy is recorded, so that no merge comes in between. Returns the
    number of intervals applied.

    Iceberg tables take them an interval per snapshot, as a merge would (a rollback or a read as
    of one of them finds its state); Hive-format tables all in one pass.
    """
    staged: list[tuple[Interval, Staged]] = []
    for interval in ledger.intervals():
        if interval.state != MATERIALISED or interval.end_seqno <= load.seqno:
            continue
        manifest = verified_manifest(
            store, interval.id, interval.manifest or "", interval.manifest_sha256, interval.changes
        )
        for entry in manifest.tables:
            if (entry.schema, entry.table) == (schema, table):
                staged.append((interval, Staged(interval.id, entry)))
    target = Target.of(cfg)
    if not staged:
        return 0
    groups = [[s] for s in staged] if cfg.warehouse.format == "iceberg" else [staged]
    for group in groups:
        last = group[-1][0]
        summary = {
            iceberg.SOURCE: cfg.source.name,
            iceberg.INTERVAL: last.id,
            iceberg.END: str(last.effective_end),
        }
        try:
            materialize_table(
                spark,
                target,
                store,
                [s for _, s in group],
                f"v{last.id}-{uuid.uuid4().hex[:8]}",
                load.seqno,
                summary,
                table_now=_table_now(spark, table_name(cfg, schema, table), cfg.warehouse.format),
            )
        except MaterializeError as exc:
            raise MaterializeError(
                f"{load.id}: catching {schema}.{table} up with interval {last.id}: {exc}"
            ) from None
    return len(staged)


def record_materialised(ledger: Ledger, intervals: list[Interval], counted: list[list[Any]]) -> None:
    """Mark ``intervals`` (applied, in order) materialised, with ``counted`` ([schema, table,
    rows] of the tables the merge reported) on the last, and move the checkpoint to its end.
    An error an earlier attempt noted on them is cleared: they are applied now."""
    last = intervals[-1]
    last.table_rows = counted
    for interval in intervals:
        interval.state = MATERIALISED
        interval.error = None
        ledger.save(interval)
    current = ledger.checkpoint()
    commit_times = [i.last_commit_ts for i in intervals if i.last_commit_ts is not None]
    if current is None or current.position < last.effective_end:  # never backwards
        previous = current.commit_ts if current else None
        commit_ts = max([*commit_times, *([previous] if previous else [])], default=None)
        end = last.end_mark()
        ledger.set_checkpoint(
            Checkpoint(
                last.effective_end,
                last.id,
                commit_ts,
                end.server,
                end.gtid,
                epoch=last.epoch,  # a followed server's history continues there
                txn=end.txn,
            )
        )


def apply_unchanged(ledger: Ledger, intervals: list[Interval]) -> bool:
    """Apply the pending ones of ``intervals`` (the ledger's) without Spark when none of them
    changed a selected table (the binlog moved for other tables, or for none): there is nothing
    to merge, so they are marked materialised and the checkpoint moves, as the job would do;
    True when done (or nothing was pending). False when one of them changed a table: the job
    applies them. Their manifests are verified first, as the job does."""
    pending = pending_intervals(ledger, intervals)
    if not pending:
        return True
    if any(i.changes or i.layouts for i in pending):  # known to change a table: no need to read
        return False
    manifests = [
        verified_manifest(ledger.store, i.id, i.manifest or "", i.manifest_sha256, i.changes) for i in pending
    ]
    if any(m.tables for m in manifests):
        return False
    record_materialised(ledger, pending, [])
    return True
