"""The ``loader`` command line: argument parsing and output around ``loader.app.steps``, for on-call
work outside Airflow.

Exit codes:
    0  success
    1  a terminal error: bad input, bad config, a source that cannot be loaded (do not retry)
    2  the command line itself is wrong
    3  a transient error: network or storage (retrying may help)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from loader import __version__
from loader.app import steps
from loader.app.dag_state import delta_dag_state
from loader.core.config import ENV_SOURCE, Config, Deployment, load_config, load_deployment
from loader.core.errors import EXIT_ERROR, EXIT_OK, EXIT_TRANSIENT, REPORTED, ConfigError, describe, exit_code
from loader.core.positions import Position
from loader.core.results import ExtractSummary, IntervalRecord, TableMapping, to_dict
from loader.core.tables import table_list
from loader.warehouse.checks import comparison_text
from loader.warehouse.submit import SparkJob, launch_subprocess
from loader.warehouse.tables import ICEBERG_CATALOG

Command = Callable[[argparse.Namespace, Config], int]

ALLOW_GAP_HELP = (
    "let --from start past where the log has been read: the changes in between are skipped for good "
    "(recorded in the ledger; loader status shows the gap)"
)


def _emit(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    if args.output == "json":
        print(json.dumps(data, default=str, sort_keys=True))
    else:
        print(text)


def cmd_config(args: argparse.Namespace, cfg: Config) -> int:
    """Print the configuration as validated, with overrides applied (no secrets in it)."""
    data = dataclasses.asdict(cfg)
    _emit(args, data, json.dumps(data, indent=2, default=str))
    return EXIT_OK


def cmd_check(args: argparse.Namespace, cfg: Config) -> int:
    """Connect to the source, verify its binlog settings and print its current position."""
    from loader.source import connection as source
    from loader.source import tls

    creds = source.credentials(cfg.source)
    conn = source.connect(creds)
    try:
        connected = tls.got(conn, creds.tls)
        settings = source.check_binlog_settings(conn)
        pos = source.current_position(conn)
        warnings = source.privilege_warnings(conn, settings.get("version", ""))
    finally:
        conn.close()
    unverified = tls.warning(creds.tls, connected, creds.where)
    warnings = [unverified, *warnings] if unverified else warnings
    data = {
        "source": cfg.source.name,
        "position": str(pos),
        "tls": {"mode": creds.tls.mode, **dataclasses.asdict(connected)},
        "settings": settings,
        "warnings": warnings,
    }
    text = "\n".join(
        [f"source {cfg.source.name}: {creds.host}:{creds.port}, current position {pos}"]
        + [f"  tls: {connected.text()} (tls = {creds.tls.mode})"]
        + [f"  {k} = {v}" for k, v in sorted(settings.items())]
        + [f"WARNING: {w}" for w in warnings]
    )
    _emit(args, data, text)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace, cfg: Config) -> int:
    """Write the demo workload to the source and report the binlog range it produced."""
    from loader.app import demo
    from loader.source import connection as source

    creds = source.credentials(cfg.source)
    conn = source.connect(dataclasses.replace(creds, user=args.writer))
    try:
        settings = source.check_binlog_settings(conn)
        print(
            f"demo: source {cfg.source.host}:{cfg.source.port} ({settings.get('version', '?')}), "
            f"binlog_format={settings['binlog_format']} binlog_row_image={settings['binlog_row_image']} "
            f"binlog_row_metadata={settings.get('binlog_row_metadata', '?')}"
        )
        demo.create_schema(conn)
        print(f"demo: schema {demo.DEMO_SCHEMA} ready: {', '.join(demo.DEMO_TABLES)}")
        summary = demo.write_changes(conn, seed=args.seed, rows=args.rows)
    finally:
        conn.close()
    decoded = _decode_counts(cfg, summary.start, summary.end)
    data = {f.name: getattr(summary, f.name) for f in dataclasses.fields(summary)}
    data.update(start=str(summary.start), end=str(summary.end), decoded=decoded)
    lines = [
        f"demo: wrote {summary.inserts} inserts, {summary.updates} updates, {summary.deletes} deletes "
        f"in {summary.transactions} transactions (and one rolled back)",
        f"demo: binlog range [{summary.start}, {summary.end})",
        f"demo: read back from the binlog ({cfg.source.transport}):",
    ]
    lines += [
        f"  {table:<20} " + "  ".join(f"{op}={n}" for op, n in sorted(ops.items()))
        for table, ops in decoded.items()
    ]
    if args.extract:
        extracted = steps.extract(cfg, start=summary.start, end=summary.end)
        if extracted is not None:
            data["extract"] = to_dict(extracted)
            lines.append(
                f"demo: extracted into {cfg.staging.uri} as interval {extracted.interval}: "
                f"{extracted.changes} change rows, manifest {extracted.manifest}"
            )
            lines += [
                f"  {t.table:<20} "
                + "  ".join(f"{op}={n}" for op, n in sorted(t.ops.items()))
                + f"  files={t.files}"
                for t in extracted.tables
            ]
    _emit(args, data, "\n".join(lines))
    return EXIT_OK


def _decode_counts(cfg: Config, start: Position, end: Position) -> dict[str, dict[str, int]]:
    """Row changes per table and op in a binlog range, as the reader decodes them."""
    from loader.binlog.reader import open_transport, read_transactions, source_schema
    from loader.core.tables import TableSelector
    from loader.source.connection import credentials

    counts: dict[str, dict[str, int]] = {}
    selector = TableSelector(cfg.tables.include, cfg.tables.exclude)
    with source_schema(credentials(cfg.source)) as schema:
        for tx in read_transactions(open_transport(cfg.source), start, end, selector, schema):
            for batch in tx.batches:
                ops = counts.setdefault(batch.table.qualified, {})
                ops[batch.op] = ops.get(batch.op, 0) + len(batch.rows)
    return counts


def _binlog_range(args: argparse.Namespace, cfg: Config, transport: object) -> tuple[Position, Position]:
    """The start and end positions a binlog command was asked for, with their defaults."""
    from loader.binlog.files import BinlogFiles
    from loader.source import connection as source

    if isinstance(transport, BinlogFiles):
        first, last = transport.first_position(), transport.end_position()
    else:
        conn = source.connect(source.credentials(cfg.source))
        try:
            last = source.current_position(conn)
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                first = Position(str(cur.fetchone()[0]), 4)
        finally:
            conn.close()
    start = first
    if args.start:
        start = Position.parse(args.start)
    elif args.lognum is not None:
        start = Position.from_lognum(first.file.rsplit(".", 1)[0], args.lognum, args.logpos or 4)
    elif args.logpos is not None:
        raise ConfigError("--logpos needs --lognum")
    end = Position.parse(args.end) if args.end else last
    return start, end


def cmd_binlog_show(args: argparse.Namespace, cfg: Config) -> int:
    """Print the decoded changes between two positions, from files or from the server."""
    from loader.binlog import show
    from loader.binlog.reader import native_decoder, open_transport, read_transactions, source_schema
    from loader.binlog.server import BinlogServer
    from loader.binlog.transactions import NativeRun, Transaction
    from loader.core.tables import TableSelector
    from loader.source.connection import credentials

    transport = open_transport(cfg.source, args.file)
    start, end = _binlog_range(args, cfg, transport)
    if args.tables:
        selector = TableSelector(tuple(args.tables))
    elif args.config or os.environ.get("LOADER_CONFIG"):
        selector = TableSelector(cfg.tables.include, cfg.tables.exclude)
    else:
        selector = TableSelector()
    render = show.jsonl if args.format == "jsonl" else show.text
    write = _bytes_out()
    started = time.monotonic()
    txs = changes = 0
    with contextlib.ExitStack() as stack:
        schema = None
        if isinstance(transport, BinlogServer):
            schema = stack.enter_context(source_schema(credentials(cfg.source)))
        # JSON lines straight from the native reader, where it takes whole transactions.
        native = args.format == "jsonl" and native_decoder(cfg.source)
        for tx in read_transactions(
            transport,
            start,
            end,
            selector,
            schema,
            strict=schema is not None,
            allow_partial_end=True,
            native=native,
            native_json=native,
            runs=native,
        ):
            # Written piece by piece (a rows event's lines, a run's), JSON lines as the UTF-8
            # bytes they are made as: a large transaction's text is never held whole twice.
            if isinstance(tx, NativeRun):
                txs += tx.result.transactions
                changes += tx.changes
                write(tx.result.json)
            elif isinstance(tx, Transaction):
                txs += 1
                changes += tx.change_count
                for piece in render(tx):
                    if args.format == "jsonl":
                        write(f"{piece}\n".encode())
                    else:
                        sys.stdout.write(f"{piece}\n")
    print(
        f"binlog show: [{start}, {end}): {txs} transactions, {changes} change rows, "
        f"{time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )
    return EXIT_OK


def _bytes_out() -> Callable[[bytes], object]:
    """A writer of UTF-8 bytes to standard output (its binary buffer when it has one)."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        return lambda data: sys.stdout.write(data.decode())
    sys.stdout.flush()
    return buffer.write


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _launch(job: SparkJob) -> str | None:
    """Spark jobs run with the local spark-submit; their progress shows on stderr."""
    return launch_subprocess(job, _progress)


def _extract_lines(summary: ExtractSummary) -> list[str]:
    lines = [
        f"extract: interval {summary.interval} [{summary.start}, {summary.end}): {summary.changes:,} changes "
        f"in {summary.transactions:,} transactions, {summary.seconds:.1f} s",
    ]
    for t in summary.tables:
        ops = "  ".join(f"{op}={n:,}" for op, n in sorted(t.ops.items()))
        lines.append(f"  {t.table:<30} {ops}  files={t.files}  bytes={t.bytes:,}")
    lines.append(f"  manifest {summary.manifest}")
    return lines


def cmd_extract(args: argparse.Namespace, cfg: Config) -> int:
    """Extract one interval into staging: from the checkpoint (or --from) to now (or --to)."""
    summary = steps.extract(
        cfg,
        args.interval,
        start=Position.parse(args.start) if args.start else None,
        end=Position.parse(args.end) if args.end else None,
        max_changes=args.max_changes,
        workers=args.workers,
        allow_gap=args.allow_gap,
    )
    if summary is None:
        _emit(args, {"interval": None}, "extract: nothing new since the last interval")
    else:
        _emit(args, to_dict(summary), "\n".join(_extract_lines(summary)))
    return EXIT_OK


def cmd_materialize(args: argparse.Namespace, cfg: Config) -> int:
    """Apply every extracted interval to the warehouse with spark-submit; print a table summary."""
    started = time.monotonic()
    done = steps.materialize(cfg, _launch)
    _emit(
        args,
        {"tables": to_dict(done.tables), "intervals": to_dict(done.intervals)},
        done.text(time.monotonic() - started),
    )
    return EXIT_OK


def cmd_initial_load(args: argparse.Namespace, cfg: Config) -> int:
    """Copy the selected tables at a recorded position (spark-submit); print a table summary. With
    ``--from-now``: start the deltas at the source's position, copying nothing (no Spark)."""
    tables = table_list(args.tables)
    if args.from_now:
        if tables:
            raise ConfigError("--from-now starts every table waiting for its copy: give no --tables")
        lines: list[str] = []
        started = steps.start_load(cfg, None, lines.append, from_now=True)
        _emit(args, to_dict(started), "\n".join(lines))
        return EXIT_OK
    summary = steps.run_initial_load(cfg, _launch, tables, args.parallelism)
    total = sum(t.rows for t in summary.tables)
    text = [
        f"initial load {summary.load_id}: {len(summary.tables)} tables, {total:,} rows "
        f"in {summary.seconds:.1f} s from P0 = {summary.p0}"
    ]
    text += [
        f"  {t.table:<30} rows={t.rows:,} seconds={t.seconds:.1f} "
        f"rows/s={t.rows / t.seconds if t.seconds else 0:,.0f}"
        for t in summary.tables
    ]
    if not summary.first:
        text.append("  re-load: the next delta runs apply the changes since P0 to these tables")
    else:
        text.append(f"  checkpoint set to P0 = {summary.p0}; delta runs continue from there")
    _emit(args, to_dict(summary), "\n".join(text))
    return EXIT_OK


def cmd_status(args: argparse.Namespace, cfg: Config) -> int:
    """Source position, checkpoint, lag, intervals by state, last error."""
    _emit(args, *_status_of(cfg))
    return EXIT_OK


def _status_of(cfg: Config) -> tuple[dict[str, Any], str]:
    result = steps.status(cfg)
    result.delta_dag = delta_dag_state(cfg.source.name)  # where Airflow is configured here
    return to_dict(result), result.text()


def cmd_tables(args: argparse.Namespace, cfg: Config) -> int:
    """The selected source tables and their warehouse tables."""
    _emit(args, *_tables_of(cfg))
    return EXIT_OK


def _tables_of(cfg: Config) -> tuple[dict[str, Any], str]:
    mappings = steps.tables(cfg)
    wh = cfg.warehouse
    # As Spark SQL finds them: Iceberg tables are in the catalog named "iceberg".
    shown = f"{ICEBERG_CATALOG}.{wh.database}" if wh.format == "iceberg" else wh.database
    data = {"database": wh.database, "format": wh.format, "tables": [to_dict(m) for m in mappings]}
    return data, TableMapping.text(mappings, shown)


# Commands that show every source of a deployment of several when none is chosen.
OVERVIEWS: dict[str, Callable[[Config], tuple[dict[str, Any], str]]] = {
    "status": _status_of,
    "tables": _tables_of,
}


def overview(args: argparse.Namespace, deployment: Deployment) -> int:
    """``args.command`` for every source of the deployment, one after another: a source whose
    step fails, or whose file is broken, is shown with its error and does not hide the others.
    Exits 1 when one did (the last line says which)."""
    shown: dict[str, Any] = {}
    texts = []
    failed = []
    for name, cfg in deployment.sources.items():
        try:
            data, text = OVERVIEWS[args.command](cfg)
            text = text if args.command == "status" else f"source {name}:\n{text}"
        except REPORTED as exc:
            data, text = {"error": describe(exc)}, f"source {name}: error: {describe(exc)}"
            failed.append(name)
        shown[name] = data
        texts.append(text)
    texts += _shared_tables(shown) if args.command == "tables" else []
    texts += [f"broken source file: {error}" for error in deployment.broken.values()]
    trouble = failed + [os.path.basename(file) for file in deployment.broken]
    summary = f"{len(deployment.sources) + len(deployment.broken)} sources in {deployment.path}" + (
        f"; look at: {', '.join(trouble)}" if trouble else ""
    )
    _emit(args, {"sources": shown, "broken": dict(deployment.broken)}, "\n\n".join([*texts, summary]))
    return EXIT_ERROR if trouble else EXIT_OK


def _shared_tables(shown: dict[str, Any]) -> list[str]:
    """For ``loader tables`` over a deployment: each table shards share and the sources routed
    into it."""
    sources: dict[str, list[str]] = {}
    for name, data in shown.items():
        for table in data.get("tables", []):
            if table["shared"]:
                sources.setdefault(f"{data['database']}.{table['warehouse_table']}", []).append(name)
    return [f"shared table {table}: sources {', '.join(names)}" for table, names in sorted(sources.items())]


def cmd_intervals(args: argparse.Namespace, cfg: Config) -> int:
    """The ledger's intervals, newest last."""
    records, total = steps.intervals(cfg, args.last)
    _emit(args, {"total": total, "intervals": to_dict(records)}, IntervalRecord.text(records, total))
    return EXIT_OK


def cmd_interval_abandon(args: argparse.Namespace, cfg: Config) -> int:
    """Give up an interval that cannot be extracted or materialised; the next run plans again."""
    abandoned = steps.abandon(cfg, args.interval, args.reason)
    text = "\n".join(
        [
            f"abandoned {len(abandoned)} interval{'s' if len(abandoned) != 1 else ''}: "
            + ", ".join(r.id for r in abandoned),
            f"the next run plans again from {steps.next_start(cfg)}",
        ]
    )
    _emit(args, {"abandoned": to_dict(abandoned)}, text)
    return EXIT_OK


def cmd_run_once(args: argparse.Namespace, cfg: Config) -> int:
    """One delta run without Airflow: plan, extract, materialise."""
    start = Position.parse(args.start) if args.start else None
    if args.dry_run:
        planned = steps.plan(
            cfg,
            start,
            max_changes=args.max_changes,
            dry_run=True,
            start_lognum=args.lognum,
            start_logpos=args.logpos,
            allow_gap=args.allow_gap,
        )
        size = f", {planned.bytes:,} bytes of binlog" if planned.bytes is not None else ""
        gap = f"; would skip [{planned.skipped_from}, {planned.start})" if planned.skipped_from else ""
        would = (
            f"would extract [{planned.start}, {planned.end}){size}{gap}"
            if planned.start != planned.end
            else f"nothing new up to {planned.end}"
        )
        _emit(args, to_dict(planned), f"run-once (dry run): {would}")
        return EXIT_OK
    run = steps.run_once(
        cfg, _launch, start, args.max_changes, args.lognum, args.logpos, _progress, args.allow_gap
    )
    _emit(args, to_dict(run), run.text())
    return EXIT_OK


def cmd_rollback(args: argparse.Namespace, cfg: Config) -> int:
    """Return the warehouse tables and the checkpoint to the state after one interval (spark-submit)."""
    result = steps.rollback(cfg, _launch, args.to_interval)
    _emit(args, to_dict(result), result.text())
    return EXIT_OK


def cmd_maintain(args: argparse.Namespace, cfg: Config) -> int:
    """Compact the Iceberg tables and expire their old snapshots (spark-submit): the tables of
    every source of the deployment, or with ``--source`` those that source writes to. Exits 3
    (try again) when a table was skipped because a source writing to it was busy."""
    result = steps.maintain(cfg, _launch, every_source=args.every_source)
    _emit(args, to_dict(result), result.text())
    return EXIT_TRANSIENT if result.skipped else EXIT_OK


def cmd_compare(args: argparse.Namespace, cfg: Config) -> int:
    """The warehouse tables next to the source's (spark-submit): counts, equality, a few rows."""
    tables = steps.verify(cfg, _launch, rows=args.rows, as_of=args.as_of)
    _emit(args, {"tables": to_dict(tables)}, comparison_text(tables))
    return EXIT_OK if all(t.equal or t.not_loaded for t in tables) else EXIT_ERROR


def cmd_checksum(args: argparse.Namespace, cfg: Config) -> int:
    """Row counts and checksums per key range, source against warehouse at one position."""
    only = table_list(args.tables)
    report = steps.checksum(cfg, _launch, only, args.range_rows, _progress)
    _emit(args, to_dict(report), report.text(show=args.show))
    return EXIT_OK if report.equal else EXIT_ERROR


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; one sub-parser per subcommand."""
    parser = argparse.ArgumentParser(
        prog="loader",
        description="Load MySQL/MariaDB binlog changes into Spark warehouse tables.",
        epilog="Exit codes: 0 ok, 1 error (do not retry), 2 bad command line, 3 transient error (retry).",
    )
    parser.add_argument("--version", action="version", version=f"loader {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help="TOML config file (default: $LOADER_CONFIG)")
    common.add_argument(
        "--source",
        help="the source to use, when the config is a deployment of several (default: $LOADER_SOURCE; "
        "status and tables without one show every source)",
    )
    common.add_argument("--output", choices=("text", "json"), default="text", help="output format")
    common.add_argument("--debug", action="store_true", help="print tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, func: Command, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    add("config", cmd_config, "print the validated configuration")
    add("check", cmd_check, "check the source's binlog settings and print its current position")
    p = add("demo", cmd_demo, "write the demo workload to the source and print its binlog range")
    p.add_argument("--seed", type=int, default=1, help="seed of this round of writes")
    p.add_argument("--rows", type=int, default=20, help="rows inserted per table and round")
    p.add_argument("--writer", default="app", help="account that writes the demo data (same password)")
    p.add_argument("--extract", action="store_true", help="also extract the range into staging")

    p = add("extract", cmd_extract, "extract the next interval of changes into staging")
    p.add_argument(
        "--from", dest="start", metavar="FILE:POS", help="start here (default: where the last interval ended)"
    )
    p.add_argument(
        "--to", dest="end", metavar="FILE:POS", help="end here (default: the server's current position)"
    )
    p.add_argument(
        "--max-changes", type=int, help="end the interval at the first transaction past this many changes"
    )
    p.add_argument(
        "--interval", metavar="ID", help="extract this recorded interval again (same boundaries, same files)"
    )
    p.add_argument("--allow-gap", action="store_true", help=ALLOW_GAP_HELP)
    p.add_argument("--workers", type=int, help="decoding processes (default: one per core, up to 8)")

    add(
        "materialize", cmd_materialize, "apply the extracted intervals to the warehouse tables (spark-submit)"
    )
    p = add("compare", cmd_compare, "show the warehouse tables next to the source tables (spark-submit)")
    p.add_argument(
        "--rows",
        type=int,
        default=3,
        help="rows of each table to show: an equal table's first, a different one's first differing (default 3)",
    )
    p.add_argument(
        "--as-of",
        metavar="ID",
        help="Iceberg tables: the warehouse as it was right after this materialised interval "
        "(the source is read as it is now)",
    )
    p = add(
        "checksum",
        cmd_checksum,
        "compare row counts and checksums per key range, source against warehouse at one position",
    )
    p.add_argument("--tables", help="a comma-separated subset of the selected tables (schema.table)")
    p.add_argument(
        "--range-rows",
        type=int,
        default=steps.DEFAULT_RANGE_ROWS,
        help=f"rows per key range (default {steps.DEFAULT_RANGE_ROWS:,}; at most 1,000 ranges per table)",
    )
    p.add_argument("--show", type=int, default=10, help="differing ranges shown per table (default 10)")
    add("status", cmd_status, "show the source position, checkpoint, lag, intervals and last error")
    add("tables", cmd_tables, "list the selected source tables, their warehouse tables and load positions")
    p = add("intervals", cmd_intervals, "list the ledger's intervals: boundaries, state, failures")
    p.add_argument("--last", type=int, default=20, help="show the last N intervals (default 20; 0: all)")
    interval = sub.add_parser("interval", help="act on one interval of the ledger")
    interval_sub = interval.add_subparsers(dest="interval_command", metavar="COMMAND", required=True)
    p = interval_sub.add_parser(
        "abandon",
        parents=[common],
        help="give up an interval that is not materialised (and the ones after it)",
        description=(
            "Give up an interval that is not materialised, and every later one: they are never "
            "materialised, and the next run plans again from where the log was read before it. "
            "The reason is kept in the ledger."
        ),
    )
    p.set_defaults(func=cmd_interval_abandon)
    p.add_argument("interval", metavar="ID", help="the interval (loader intervals lists them)")
    p.add_argument("--reason", required=True, help="why, for the ledger and the next person on call")
    p = add(
        "rollback",
        cmd_rollback,
        "return the warehouse tables and the checkpoint to the state after an interval (Iceberg tables)",
    )
    p.add_argument(
        "--to-interval",
        required=True,
        metavar="ID",
        help="a materialised interval (loader intervals lists them): the later ones are applied again "
        "by the next materialise",
    )
    p = add(
        "maintain",
        cmd_maintain,
        "compact the Iceberg tables of every source (--source: those it writes to) and expire old "
        "snapshots, each table while none of its sources merges ([maintenance] settings; spark-submit)",
    )
    p.set_defaults(every_source=False)  # main sets it when no source is chosen
    p = add("run-once", cmd_run_once, "one delta run without Airflow: plan, extract, materialise")
    p.add_argument(
        "--from", dest="start", metavar="FILE:POS", help="backfill: replay from here to the present end"
    )
    p.add_argument("--lognum", type=int, help="backfill: binlog file number to replay from (with --logpos)")
    p.add_argument("--logpos", type=int, help="backfill: byte offset in that file")
    p.add_argument(
        "--max-changes", type=int, help="end the interval at the first transaction past this many changes"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="plan and report the interval without writing anything"
    )
    p.add_argument("--allow-gap", action="store_true", help=ALLOW_GAP_HELP)
    p = add(
        "initial-load",
        cmd_initial_load,
        "copy the selected tables into the warehouse at a recorded binlog position (spark-submit)",
    )
    p.add_argument(
        "--tables",
        metavar="SCHEMA.TABLE,...",
        help="re-load only these tables (deltas keep running; default: every table the config selects)",
    )
    p.add_argument(
        "--parallelism", type=int, help="key ranges per table read at once (default: load.parallelism)"
    )
    p.add_argument(
        "--from-now",
        action="store_true",
        help="start the deltas at the source's current position with no copy (a source never loaded, "
        "whose binlog keeps less than a load takes); then copy tables one by one with --tables",
    )

    binlog = sub.add_parser("binlog", help="read the binlog")
    binlog_sub = binlog.add_subparsers(dest="binlog_command", metavar="COMMAND", required=True)
    p = binlog_sub.add_parser(
        "show",
        parents=[common],
        help="print decoded changes between two positions",
        description="Print decoded row changes like mysqlbinlog -v, from binlog files or the source server.",
    )
    p.set_defaults(func=cmd_binlog_show)
    p.add_argument(
        "--file", help="a binlog file, the folder holding them, or their .index (default: the source)"
    )
    p.add_argument("--from", dest="start", metavar="FILE:POS", help="start position (default: the oldest)")
    p.add_argument("--to", dest="end", metavar="FILE:POS", help="end position (default: the current end)")
    p.add_argument("--lognum", type=int, help="start file number (with --logpos)")
    p.add_argument("--logpos", type=int, help="start offset in that file (default 4)")
    p.add_argument("--format", choices=("text", "jsonl"), default="text", help="output format")
    p.add_argument(
        "--tables", nargs="+", metavar="PATTERN", help="schema.table patterns (default: the config's)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command in OVERVIEWS and not (args.source or os.environ.get(ENV_SOURCE)):
            deployment = load_deployment(args.config)
            if deployment.many:
                return overview(args, deployment)
        if args.command == "maintain" and not (args.source or os.environ.get(ENV_SOURCE)):
            args.every_source = True  # maintenance is per warehouse table, whichever sources write it
            return int(args.func(args, load_deployment(args.config).shared_settings()))
        cfg = load_config(args.config, source=args.source)
        return int(args.func(args, cfg))
    except BrokenPipeError:
        # The reader of our output went away (| head): not an error of ours.
        sys.stderr.close()
        return EXIT_OK
    except REPORTED as exc:
        if args.debug:
            traceback.print_exc()
        print(f"loader {args.command}: error: {describe(exc)}", file=sys.stderr)
        return exit_code(exc)
    except KeyboardInterrupt:
        print(f"loader {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
