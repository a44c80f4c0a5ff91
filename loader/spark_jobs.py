"""The loader's Spark jobs: what ``spark-submit`` runs.

    spark-submit loader/spark_jobs.py materialize --config loader.toml
    spark-submit loader/spark_jobs.py initial-load --config loader.toml [--tables s.t,...] [--parallelism N]
    spark-submit loader/spark_jobs.py compare --config loader.toml [--rows N]

Progress goes to stderr; the last stdout line is the job's summary as JSON after ``SUMMARY_PREFIX``
(the ``loader`` command and the Airflow tasks read it). Exit 1 on a loader error, with its text;
3 on a transient one (worth retrying).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any

from loader.config import load_config
from loader.errors import LoaderError, TransientError

SUMMARY_PREFIX = "LOADER-JOB-SUMMARY "
PROGRESS_PREFIX = "LOADER-JOB-PROGRESS "  # tells the job's progress apart from Spark's own logs


def _stderr(message: str) -> None:
    print(PROGRESS_PREFIX + message, file=sys.stderr, flush=True)


def _materialize(spark: Any, cfg: Any, args: argparse.Namespace) -> Any:
    from loader import pipeline
    from loader.materialize import run_materialize

    try:
        results = run_materialize(spark, cfg)
    except LoaderError as exc:
        pipeline.note_materialize_error(cfg, str(exc))
        raise
    pipeline.clear_materialize_errors(cfg)
    return [dataclasses.asdict(r) for r in results]


def _initial_load(spark: Any, cfg: Any, args: argparse.Namespace) -> Any:
    from loader.initial_load import run_initial_load

    if args.parallelism:
        cfg = dataclasses.replace(cfg, load=dataclasses.replace(cfg.load, parallelism=args.parallelism))
    only = [t.strip() for t in args.tables.split(",") if t.strip()] if args.tables else None
    if args.load_id:  # one step of a load the orchestrator started (P0 recorded already)
        from loader.initial_load import copy_tables

        return [dataclasses.asdict(r) for r in copy_tables(spark, cfg, args.load_id, only, progress=_stderr)]
    summary = run_initial_load(spark, cfg, only, progress=_stderr)
    return dataclasses.asdict(summary)


def _compare(spark: Any, cfg: Any, args: argparse.Namespace) -> Any:
    from loader.compare import compare_tables

    return compare_tables(spark, cfg, sample=args.rows)


JOBS = {"materialize": _materialize, "initial-load": _initial_load, "compare": _compare}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark_jobs")
    parser.add_argument("job", choices=sorted(JOBS))
    parser.add_argument("--config", help="TOML config file (default: $LOADER_CONFIG)")
    parser.add_argument("--tables", help="initial-load: a comma-separated subset of the selected tables")
    parser.add_argument("--parallelism", type=int, help="initial-load: key ranges per table read at once")
    parser.add_argument("--load-id", help="initial-load: copy the tables of this started load only")
    parser.add_argument("--rows", type=int, default=3, help="compare: rows of each table to show")
    args = parser.parse_args(argv)
    from loader.spark import build_session

    try:
        cfg = load_config(args.config)
        spark = build_session(cfg, app_name=f"loader-{args.job}-{cfg.source.name}")
        spark.sparkContext.setLogLevel("WARN")
        summary = JOBS[args.job](spark, cfg, args)
    except LoaderError as exc:
        print(f"{PROGRESS_PREFIX}{args.job}: error: {exc}", file=sys.stderr, flush=True)
        return 3 if isinstance(exc, TransientError) else 1
    print(SUMMARY_PREFIX + json.dumps(summary), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
