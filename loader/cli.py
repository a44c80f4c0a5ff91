"""The ``loader`` command line: the pipeline's steps for on-call work outside Airflow.

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
import datetime as dt
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import pymysql

from loader import __version__
from loader.config import Config, load_config
from loader.errors import ConfigError, LoaderError
from loader.positions import Position

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TRANSIENT = 0, 1, 2, 3

# Lost or refused connections and lock waits: worth a retry.
_TRANSIENT_MYSQL_CODES = frozenset({1205, 1213, 2003, 2006, 2013})

Command = Callable[[argparse.Namespace, Config], int]


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
    from loader import source

    conn = source.connect(source.credentials(cfg.source))
    try:
        settings = source.check_binlog_settings(conn)
        pos = source.current_position(conn)
    finally:
        conn.close()
    data = {"source": cfg.source.name, "position": str(pos), "settings": settings}
    text = "\n".join(
        [f"source {cfg.source.name}: {cfg.source.host}:{cfg.source.port}, current position {pos}"]
        + [f"  {k} = {v}" for k, v in sorted(settings.items())]
    )
    _emit(args, data, text)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace, cfg: Config) -> int:
    """Write the demo workload to the source and report the binlog range it produced."""
    from loader import demo, source

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
        from loader.extract import run_extract

        extracted = run_extract(cfg, summary.start, summary.end)
        if extracted is not None:
            data["extract"] = dataclasses.asdict(extracted)
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
    from loader.source import credentials
    from loader.tables import TableSelector

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
    from loader import source
    from loader.binlog.files import BinlogFiles

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
    from loader.binlog.reader import open_transport, read_transactions, source_schema
    from loader.binlog.server import BinlogServer
    from loader.source import credentials
    from loader.tables import TableSelector

    transport = open_transport(cfg.source, args.file)
    start, end = _binlog_range(args, cfg, transport)
    if args.tables:
        selector = TableSelector(tuple(args.tables))
    elif args.config or os.environ.get("LOADER_CONFIG"):
        selector = TableSelector(cfg.tables.include, cfg.tables.exclude)
    else:
        selector = TableSelector()
    render = show.jsonl if args.format == "jsonl" else show.text
    started = time.monotonic()
    txs = changes = 0
    with contextlib.ExitStack() as stack:
        schema = None
        if isinstance(transport, BinlogServer):
            schema = stack.enter_context(source_schema(credentials(cfg.source)))
        for tx in read_transactions(
            transport, start, end, selector, schema, strict=schema is not None, allow_partial_end=True
        ):
            txs += 1
            changes += tx.change_count
            for line in render(tx):
                print(line)
    print(
        f"binlog show: [{start}, {end}): {txs} transactions, {changes} change rows, "
        f"{time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )
    return EXIT_OK


def cmd_extract(args: argparse.Namespace, cfg: Config) -> int:
    """Extract one interval into staging: from the checkpoint (or --from) to now (or --to)."""
    from loader.extract import run_extract

    start = Position.parse(args.start) if args.start else None
    end = Position.parse(args.end) if args.end else None
    workers = args.workers or (min(8, os.cpu_count() or 1) if cfg.source.transport == "files" else 1)
    summary = run_extract(cfg, start, end, args.max_changes, interval_id=args.interval, workers=workers)
    if summary is None:
        _emit(args, {"interval": None}, "extract: nothing new since the last interval")
        return EXIT_OK
    data = dataclasses.asdict(summary)
    lines = [
        f"extract: interval {summary.interval} [{summary.start}, {summary.end}): {summary.changes:,} changes "
        f"in {summary.transactions:,} transactions, {summary.seconds:.1f} s",
    ]
    for t in summary.tables:
        ops = "  ".join(f"{op}={n:,}" for op, n in sorted(t.ops.items()))
        lines.append(f"  {t.table:<30} {ops}  files={t.files}  bytes={t.bytes:,}")
    lines.append(f"  manifest {summary.manifest}")
    _emit(args, data, "\n".join(lines))
    return EXIT_OK


def run_spark_job(cfg: Config, job: str, extra: list[str]) -> Any:
    """Run one of ``loader/spark_jobs.py`` with spark-submit; show its progress; return its summary.

    Raises:
        LoaderError: with the job's own error text when it fails.
    """
    import subprocess
    from pathlib import Path

    from loader import spark_jobs
    from loader.spark import spark_submit_command

    if not cfg.path:
        raise ConfigError(f"loader {job} needs --config (or LOADER_CONFIG): the Spark job reads it too")
    command = spark_submit_command(
        cfg, str(Path(spark_jobs.__file__)), [job, "--config", str(Path(cfg.path).resolve()), *extra]
    )
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    tail: list[str] = []
    summaries: list[str] = []
    # spark-submit runs the Python driver with its stderr merged into stdout: the job's progress
    # and summary come on stdout; Spark's own logs on stderr go to a file.
    with (
        tempfile.TemporaryFile("w+") as stderr,
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env) as proc,
    ):
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(spark_jobs.PROGRESS_PREFIX):
                message = line[len(spark_jobs.PROGRESS_PREFIX) :].rstrip("\n")
                print(message, file=sys.stderr, flush=True)
                tail.append(message)
            elif line.startswith(spark_jobs.SUMMARY_PREFIX):
                summaries.append(line)
        proc.wait()
        stderr.seek(0)
        tail += [x.strip() for x in stderr if "error" in x.lower() or "exception" in x.lower()]
    if proc.returncode != 0 or not summaries:
        errors = [x for x in tail if "error" in x.lower()][-3:] or tail[-3:]
        raise LoaderError(
            f"the {job} job failed (exit {proc.returncode}): " + (" | ".join(errors) or "no output")
        )
    return json.loads(summaries[-1][len(spark_jobs.SUMMARY_PREFIX) :])


def cmd_materialize(args: argparse.Namespace, cfg: Config) -> int:
    """Apply every extracted interval to the warehouse with spark-submit; print a table summary."""
    started = time.monotonic()
    results = run_spark_job(cfg, "materialize", [])
    text = [f"materialize: {len(results)} tables in {time.monotonic() - started:.1f} s"]
    text += [
        f"  {r['table']:<30} inserted={r['inserted']:,} updated={r['updated']:,} deleted={r['deleted']:,} "
        f"partitions={r['partitions']} seconds={r['seconds']:.1f}"
        for r in results
    ]
    if not results:
        text = ["materialize: no extracted intervals to apply"]
    _emit(args, {"tables": results}, "\n".join(text))
    return EXIT_OK


def cmd_initial_load(args: argparse.Namespace, cfg: Config) -> int:
    """Copy the selected tables at a recorded position (spark-submit); print a table summary."""
    extra = []
    if args.tables:
        extra += ["--tables", args.tables]
    if args.parallelism:
        extra += ["--parallelism", str(args.parallelism)]
    summary = run_spark_job(cfg, "initial-load", extra)
    total = sum(t["rows"] for t in summary["tables"])
    text = [
        f"initial load {summary['load_id']}: {len(summary['tables'])} tables, {total:,} rows "
        f"in {summary['seconds']:.1f} s from P0 = {summary['p0']}"
    ]
    text += [
        f"  {t['table']:<30} rows={t['rows']:,} seconds={t['seconds']:.1f} "
        f"rows/s={t['rows'] / t['seconds'] if t['seconds'] else 0:,.0f}"
        for t in summary["tables"]
    ]
    if not summary["first"]:
        text.append("  re-load: the next delta runs apply the changes since P0 to these tables")
    else:
        text.append(f"  checkpoint set to P0 = {summary['p0']}; delta runs continue from there")
    _emit(args, summary, "\n".join(text))
    return EXIT_OK


def cmd_status(args: argparse.Namespace, cfg: Config) -> int:
    """Source position, checkpoint, lag, intervals by state, last error."""
    from loader.pipeline import status, status_text

    data = status(cfg)
    _emit(args, data, status_text(data))
    return EXIT_OK


def cmd_run_once(args: argparse.Namespace, cfg: Config) -> int:
    """One delta run without Airflow: plan, extract, materialise."""
    from loader import pipeline

    start = Position.parse(args.start) if args.start else None
    planned = pipeline.plan_interval(
        cfg, start, args.max_changes, dry_run=args.dry_run, start_lognum=args.lognum, start_logpos=args.logpos
    )
    if args.dry_run:
        size = f", {planned['bytes']:,} bytes of binlog" if planned["bytes"] is not None else ""
        _emit(
            args, planned, f"run-once (dry run): would extract [{planned['start']}, {planned['end']}){size}"
        )
        return EXIT_OK
    extracted: dict[str, Any] = {}
    if planned["interval"] is not None:
        extracted = pipeline.extract_planned(
            cfg, planned["interval"], progress=lambda m: print(m, file=sys.stderr)
        )
    started = time.monotonic()
    job_started = dt.datetime.now(dt.UTC)
    try:
        tables = run_spark_job(cfg, "materialize", [])
    except LoaderError as exc:
        # The job notes its own errors; this notes a job that died without a word.
        pipeline.materialize_failure(cfg, str(exc), job_started)
        raise
    data = {"planned": planned, "extracted": extracted, "materialized": tables}
    lines = [
        f"run-once: interval {planned['interval'] or '(nothing new)'} [{planned['start']}, {planned['end']}), "
        f"{extracted.get('changes', 0):,} changes extracted; {len(tables)} tables materialised "
        f"in {time.monotonic() - started:.1f} s"
    ]
    lines += [
        f"  {r['table']:<30} inserted={r['inserted']:,} updated={r['updated']:,} deleted={r['deleted']:,}"
        for r in tables
    ]
    _emit(args, data, "\n".join(lines))
    return EXIT_OK


def cmd_compare(args: argparse.Namespace, cfg: Config) -> int:
    """The warehouse tables next to the source's (spark-submit): counts, equality, a few rows."""
    tables = run_spark_job(cfg, "compare", ["--rows", str(args.rows)])
    lines = []
    for t in tables:
        verdict = "equal" if t["equal"] else "DIFFERENT"
        lines.append(
            f"{t['table']} → {t['warehouse_table']}: source {t['source_rows']:,} rows, "
            f"warehouse {t['warehouse_rows']:,} rows, {verdict}"
        )
        for side in ("source", "warehouse"):
            for row in t[f"{side}_sample"]:
                lines.append(
                    f"  {side:<9} " + ", ".join(f"{c}={v!r}" for c, v in zip(t["columns"], row, strict=False))
                )
    _emit(args, {"tables": tables}, "\n".join(lines))
    return EXIT_OK if all(t["equal"] for t in tables) else EXIT_ERROR


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
    p.add_argument(
        "--workers", type=int, help="decoding processes (default: one per core reading binlog files, else 1)"
    )

    add(
        "materialize", cmd_materialize, "apply the extracted intervals to the warehouse tables (spark-submit)"
    )
    p = add("compare", cmd_compare, "show the warehouse tables next to the source tables (spark-submit)")
    p.add_argument("--rows", type=int, default=3, help="rows of each table to show (default 3)")
    add("status", cmd_status, "show the source position, checkpoint, lag, intervals and last error")
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
        cfg = load_config(args.config)
        return int(args.func(args, cfg))
    except LoaderError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"loader {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_TRANSIENT if exc.transient else EXIT_ERROR
    except pymysql.err.Error as exc:
        if args.debug:
            traceback.print_exc()
        code = exc.args[0] if exc.args else 0
        print(f"loader {args.command}: source error: {exc.args[-1] if exc.args else exc}", file=sys.stderr)
        return EXIT_TRANSIENT if code in _TRANSIENT_MYSQL_CODES else EXIT_ERROR
    except BrokenPipeError:
        # The reader of our output went away (| head): not an error of ours.
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        print(f"loader {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
