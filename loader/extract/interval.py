"""One interval extracted: planned (or a recorded one again), decoded (``decode``), its tables' files
published and its manifest written last, the ledger told. Extracting the same interval again writes
the same bytes.
"""

from __future__ import annotations

import sys
import time

from loader.binlog import gtids, history
from loader.binlog.gtids import GtidSet
from loader.binlog.reader import SourceLog
from loader.core.config import Config
from loader.core.errors import HISTORY_REMEDY, REPORTED, ExtractError, HistoryError, describe
from loader.core.positions import Position
from loader.core.results import ExtractedTable, ExtractSummary
from loader.extract import scratch
from loader.extract.decode import ExtractSettings, Progress, RangeResult, decode_interval
from loader.extract.files import publish_table
from loader.source.connection import check_binlog_settings, connect
from loader.staging import layout
from loader.staging.manifest import Manifest
from loader.staging.stores import Store, open_store
from loader.staging.verify import sha256_hex
from loader.state.ledger import Ledger, moved_from
from loader.state.records import (
    ABANDONED,
    EXTRACTED,
    MATERIALISED,
    Interval,
    awaiting_copy,
    created_before,
    layout_record,
    layouts_before,
    loaded_positions,
    loaded_seqnos,
)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def extract_interval(
    settings: ExtractSettings,
    log: SourceLog,
    store: Store,
    ledger: Ledger,
    interval: Interval,
    progress: Progress = _stderr,
    source_info: dict[str, str] | None = None,
    workers: int = 1,
) -> ExtractSummary:
    """Extract one planned interval, publish its files and manifest, mark it extracted.

    With ``workers`` > 1 and binlog files to read, the interval is cut at transaction starts
    and the pieces are decoded in as many processes; the files are the same whatever the
    number of workers only in their content, not in how rows are split into parts.
    """
    started = time.monotonic()
    start, end = interval.start, interval.end
    # Read once: each is a listing of the store. Loads of an earlier history are all before it.
    intervals, loads = ledger.intervals(), ledger.loads()
    loaded_at = loaded_positions(loads, interval.epoch)
    previous = layouts_before(intervals, loads, interval.id)
    created_earlier = created_before(intervals, interval.id)
    with scratch.folder("extract") as tmp:
        results = decode_interval(settings, log, interval, tmp, progress, workers, loaded_at, previous)
        stopped_at = results[-1].stopped_at
        interval_end = stopped_at or end
        reached = _gtid_reached(interval, results, stopped_at is not None)
        keys = sorted({key for r in results for key in r.tables})
        created = {name: at for r in results for name, at in r.created.items()}
        # Tables are loaded before their changes are applied; those a load has not copied yet
        # are staged for the copy's catch-up (a load recorded while decoding counts).
        loads = ledger.loads()
        loaded = set(loaded_seqnos(loads)) | set(awaiting_copy(loads))
        if loaded:
            _check_loaded(keys, results, loaded, created, created_earlier)
        tables = [
            publish_table(
                store,
                layout.table_dir(settings.source.name, schema_name, table, interval.id),
                schema_name,
                table,
                [r.tables[(schema_name, table)] for r in results if (schema_name, table) in r.tables],
                settings.staging.gzip,
                settings.warehouse_format,
            )
            for schema_name, table in keys
        ]
    seqnos = [r.seqno_min for r in results if r.seqno_min is not None]
    seqno_maxes = [r.seqno_max for r in results if r.seqno_max is not None]
    changes = sum(r.changes for r in results)
    manifest = Manifest(
        interval_id=interval.id,
        source={"name": settings.source.name, **(source_info or {})},
        start=str(start),
        end=str(interval_end),
        seqno_min=min(seqnos) if seqnos else None,
        seqno_max=max(seqno_maxes) if seqno_maxes else None,
        transactions=sum(r.transactions for r in results),
        tables=tables,
    )
    key = layout.manifest_key(settings.source.name, interval.id)
    manifest_bytes = manifest.to_json()
    store.put(key, manifest_bytes)
    if interval.state != MATERIALISED:  # extracting a materialised interval again changes nothing there
        interval.state = EXTRACTED
    interval.extracted_end = interval_end if stopped_at else None
    interval.extracted_end_gtid = reached if stopped_at else None
    if not stopped_at and reached is not None:
        interval.end_gtid = reached  # the state the log itself leads to (the server's may lag)
    # The last transaction before where it ends; before its start when it holds none.
    last = next((r.last_txn.text() for r in reversed(results) if r.last_txn), interval.start_txn)
    if stopped_at:
        interval.extracted_end_txn = last
    else:
        interval.end_txn, interval.extracted_end_txn = last, None
    interval.manifest = key
    interval.manifest_sha256 = sha256_hex(manifest_bytes)
    interval.created_tables = sorted(f"{schema}.{table}" for schema, table in created)
    interval.layouts = [layout_record(t.schema, t.table, t.layouts[-1]) for t in tables if t.layouts]
    interval.changes = changes
    commit_times = [r.commit_ts_max for r in results if r.commit_ts_max is not None]
    interval.last_commit_ts = max(commit_times) if commit_times else None
    interval.error = None
    ledger.save(interval)
    return ExtractSummary(
        interval=interval.id,
        start=str(start),
        end=str(interval_end),
        transactions=manifest.transactions,
        changes=changes,
        seconds=time.monotonic() - started,
        tables=[
            ExtractedTable(f"{t.schema}.{t.table}", t.ops, len(t.files), sum(f.bytes for f in t.files))
            for t in tables
        ],
        manifest=key,
    )


def _gtid_reached(interval: Interval, results: list[RangeResult], stopped: bool) -> str | None:
    """The GTID state the stream's own GTID events lead to from the interval's start (None when
    its start's is unknown). Read through to the end, it must be the one the server reported
    there when the interval was planned: else the log changed in between.

    Raises:
        HistoryError: the stream does not lead to the state recorded at the interval's end.
    """
    if interval.start_gtid is None:
        return None
    mysql = GtidSet()
    for r in results:
        mysql.update(r.mysql_gtids)
    reached = gtids.reached(interval.start_gtid, [g for r in results for g in r.gtids.values()], mysql)
    if not stopped and interval.end_gtid is not None and not _leads_to(reached, interval.end_gtid):
        raise HistoryError(
            f"interval {interval.id}: the binlog read from {interval.start} to {interval.end} leads to GTID "
            f"state {reached or '(empty)'}, but the server had {interval.end_gtid or '(empty)'} at "
            f"{interval.end} when the interval was planned: the log changed in between (reset, restored, "
            f"or another server behind the address). Nothing was staged and the checkpoint stays. {HISTORY_REMEDY}"
        )
    return reached


def _leads_to(reached: str, planned: str) -> bool:
    """Whether the state the stream reached is the one the server reported at the end. A MySQL
    set read without ``performance_schema.log_status`` may lack the GTIDs of transactions still
    committing at the end (``source.connection.mysql_status``): it must be contained in it."""
    if gtids.is_mysql(reached) or gtids.is_mysql(planned):
        return gtids.contains(reached, planned)
    return gtids.same_gtid(reached, planned)


def _check_loaded(
    keys: list[tuple[str, str]],
    results: list[RangeResult],
    loaded: set[tuple[str, str]],
    created: dict[tuple[str, str], str],
    created_before: set[str],
) -> None:
    """Refuse changes to a table the warehouse has not been given the rows of: one neither
    loaded nor created in the log (it started matching the include patterns after the load,
    or came back after a CREATE TABLE IF NOT EXISTS)."""
    for schema, table in keys:
        qualified = f"{schema}.{table}"
        if (schema, table) in loaded or qualified in created_before:
            continue
        first = min(
            (
                Position.parse(p.first_position)
                for r in results
                if (p := r.tables.get((schema, table))) and p.first_position
            ),
            default=None,
        )
        made = created.get((schema, table))
        if made is not None and first is not None and Position.parse(made) < first:
            continue
        raise ExtractError(
            f"{first}: {qualified} has changes but was never loaded (it started matching the "
            "include patterns after the initial load, or was created with CREATE TABLE IF NOT "
            "EXISTS, which may not have made it): its other rows are not in the warehouse; "
            f"load it first: loader initial-load --tables {qualified}"
        )


def run_extract(
    cfg: Config,
    start: Position | None = None,
    end: Position | None = None,
    max_changes: int | None = None,
    progress: Progress | None = None,
    interval_id: str | None = None,
    workers: int = 1,
    allow_gap: bool = False,
) -> ExtractSummary | None:
    """Plan the next interval (or the one given) and extract it. None when there is nothing new.
    A failure once the interval is known is noted on it (``loader status`` shows it).

    ``interval_id`` extracts a recorded interval again, with its recorded boundaries (a rerun
    writes the same files). ``allow_gap``: a ``start`` past where the log has been read is
    planned, and the gap recorded.
    """
    store = open_store(cfg.staging)
    ledger = Ledger(store, cfg.source.name)
    log = SourceLog.of(cfg.source)  # before any work: a decoder asked for and not built stops here
    noted = interval_id  # the interval a failure is noted on, once known
    try:
        conn = connect(log.creds)
        try:
            server = check_binlog_settings(conn)
            source = history.SourceHistory.of(conn, cfg.source, log.creds)
            if interval_id is None:  # a new one ends at the server's position
                interval = ledger.plan(
                    end or source.current(),
                    start=start,
                    max_changes=max_changes,
                    allow_gap=allow_gap,
                    source=source,
                    follow=cfg.source.failover == "follow",
                )
            else:  # a recorded interval keeps its own end
                interval = _recorded(ledger, interval_id, source, cfg.source.name)
        finally:
            conn.close()
        if interval is None:
            return None
        noted = interval.id
        info: dict[str, str] = {k: server[k] for k in ("server_id", "server_uuid", "version") if k in server}
        return extract_interval(
            ExtractSettings.of(cfg), log, store, ledger, interval, progress or _stderr, info, workers
        )
    except REPORTED as exc:
        if noted is not None:
            ledger.record_error(noted, f"extract: {describe(exc)}")
        raise


def _recorded(ledger: Ledger, interval_id: str, source: history.SourceHistory, name: str) -> Interval:
    """A recorded interval to extract again, refused when abandoned or when the server may have
    been replaced since it was planned."""
    interval = ledger.get(interval_id)
    if interval is None:
        raise ExtractError(f"source {name} has no interval {interval_id}")
    if interval.state == ABANDONED:
        raise ExtractError(f"interval {interval_id} was abandoned: {interval.abandoned_reason}")
    interval.extracted_end = None  # a bounded interval stops at the same place again
    what = f"interval {interval_id}'s start"
    problem = moved_from(source, interval.start, interval.start_mark(), what, name)
    if problem:
        raise HistoryError(f"{problem}. Nothing was extracted and the checkpoint stays. {HISTORY_REMEDY}")
    return interval
