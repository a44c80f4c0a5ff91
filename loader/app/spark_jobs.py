"""The loader's Spark jobs: the application ``spark-submit`` runs (built by ``warehouse.submit``).

    spark-submit loader/app/spark_jobs.py materialize --config loader.toml
    spark-submit loader/app/spark_jobs.py initial-load --config loader.toml [--tables s.t,...] [--parallelism N]
    spark-submit loader/app/spark_jobs.py compare --config loader.toml [--rows N] [--as-of ID]
    spark-submit loader/app/spark_jobs.py checksum --config loader.toml [--materialize] --sums source-sums.json
    spark-submit loader/app/spark_jobs.py rollback --config loader.toml --to-interval ID
    spark-submit loader/app/spark_jobs.py maintain --config loader.toml [--every-source]

Each takes ``--source NAME`` too when the config is a deployment of several sources.
Progress goes to stderr after ``PROGRESS_PREFIX``. The outcome (the step's summary, or the
error's class, text and whether it is transient) goes to the file ``$LOADER_JOB_RESULT`` names;
the exit code is 1 on a terminal error and 3 on a transient one (``errors.exit_code``).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # spark-submit runs this file as a script, which puts its folder first on sys.path; the
    # loader's modules must only be imported as ``loader.*`` (loader/app/airflow.py would shadow Airflow).
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]

import argparse
import dataclasses
import os
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from loader.app import steps
from loader.core import crashpoints, results
from loader.core.config import Config, load_config, load_deployment
from loader.core.errors import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_TRANSIENT,
    REPORTED,
    CatalogError,
    describe,
    exit_code,
)
from loader.core.tables import table_list
from loader.warehouse.submit import (
    JOBS,
    PROGRESS_PREFIX,
    RESULT_ENV,
    SOURCE_JOBS,
    error_outcome,
    write_outcome,
)


def _progress(message: str) -> None:
    print(PROGRESS_PREFIX + message, file=sys.stderr, flush=True)


def _materialize(spark: Any, cfg: Config, args: argparse.Namespace) -> Any:
    from loader.warehouse.materialize import run_materialize

    with steps.materialize_failures_noted(cfg), steps.source_lease(cfg, "the materialize job"):
        return results.to_dict(run_materialize(spark, cfg))


def _initial_load(spark: Any, cfg: Config, args: argparse.Namespace) -> Any:
    from loader.warehouse.initial_load import copy_tables, run_initial_load

    if args.parallelism:
        cfg = dataclasses.replace(cfg, load=dataclasses.replace(cfg.load, parallelism=args.parallelism))
    only = table_list(args.tables)
    if args.load_id:  # one step of a load the orchestrator started (P0 recorded already)
        return results.to_dict(copy_tables(spark, cfg, args.load_id, only, progress=_progress))
    return results.to_dict(run_initial_load(spark, cfg, only, progress=_progress))


def _compare(spark: Any, cfg: Config, args: argparse.Namespace) -> Any:
    from loader.warehouse.compare import compare_tables

    return results.to_dict(compare_tables(spark, cfg, sample=args.rows, as_of=args.as_of))


def _checksum(spark: Any, cfg: Config, args: argparse.Namespace) -> Any:
    import json

    from loader.warehouse.checksum import SourceSums, compare_sums

    with open(args.sums, encoding="utf-8") as f:
        sums = results.from_dict(SourceSums, json.load(f))
    if args.materialize:  # the changes up to the source's snapshot, extracted by the launcher
        with crashpoints.step("materialize"):
            _materialize(spark, cfg, args)
        steps.require_checkpoint_at(cfg, sums.position)
    return results.to_dict(compare_sums(spark, cfg, sums))


def _rollback(spark: Any, cfg: Config, args: argparse.Namespace) -> Any:
    from loader.warehouse.rollback import run_rollback

    with steps.source_lease(cfg, "the rollback job"):
        return results.to_dict(run_rollback(spark, cfg, args.to_interval))


def _maintain(spark: Any, cfg: Config, args: argparse.Namespace) -> Any:
    # Every source of the deployment: the other sources routed into a shared table write to it too.
    sources = {**load_deployment(cfg.path).sources, cfg.source.name: cfg}
    only = None if args.every_source else cfg.source.name
    return results.to_dict(maintain_sources(spark, cfg, sources, only))


def maintain_sources(
    spark: Any, cfg: Config, sources: Mapping[str, Config], only: str | None = None
) -> results.Maintenance:
    """Maintain the warehouse tables ``sources`` (by name) write to (``only``: those this source
    writes to) with ``cfg``'s maintenance settings, each table under its sources' leases."""
    from loader.warehouse.maintenance import Writer, run_maintenance

    def hold(names: list[str]) -> Any:
        return steps.source_leases((sources[n] for n in names), "the maintenance job")

    writers = [Writer.of(c) for c in sources.values()]
    return run_maintenance(spark, writers, cfg.warehouse.format, cfg.maintenance, hold, only)


RUNNERS = {
    "materialize": _materialize,
    "initial-load": _initial_load,
    "compare": _compare,
    "checksum": _checksum,
    "rollback": _rollback,
    "maintain": _maintain,
}
assert set(RUNNERS) == set(JOBS)


# Jobs that start at once on a new embedded (SQLite) catalog each bring its tables to Iceberg's
# current layout: all but the first then fail to add a column the first one added (seen with
# three sources' first merges at once). The catalog is ready by then: its check is tried again.
MIGRATED_MEANWHILE = "duplicate column name"
CATALOG_TRIES = 3


def _check_catalog(spark: Any, cfg: Config) -> None:
    """Reach the Iceberg catalog before any step: a wrong password or a server that is down is
    then one line naming the catalog and what to check, not a driver's exception mid-step."""
    from loader.warehouse.session import iceberg_catalog_advice
    from loader.warehouse.tables import ICEBERG_CATALOG

    for attempt in range(CATALOG_TRIES):
        try:
            spark.sql(f"SHOW NAMESPACES IN {ICEBERG_CATALOG}").collect()
            return
        except Exception as exc:
            _, cause, transient = error_outcome(exc)
            if MIGRATED_MEANWHILE in cause and attempt + 1 < CATALOG_TRIES:
                time.sleep(1)
                continue
            what, check = iceberg_catalog_advice(cfg.warehouse)
            raise CatalogError(f"cannot use {what} ({cause}): {check}", transient=transient) from exc


def _leave_outcome(summary: Any = None, error: BaseException | None = None) -> None:
    """Where the launcher looks for it (nowhere when the job is run by hand)."""
    if os.environ.get(RESULT_ENV):
        write_outcome(os.environ[RESULT_ENV], summary, error)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark_jobs")
    parser.add_argument("job", choices=sorted(RUNNERS))
    parser.add_argument("--config", help="TOML config file (default: $LOADER_CONFIG)")
    parser.add_argument("--source", help="the source, when the config is a deployment of several")
    parser.add_argument("--tables", help="initial-load: a comma-separated subset of the selected tables")
    parser.add_argument("--parallelism", type=int, help="initial-load: key ranges per table read at once")
    parser.add_argument("--load-id", help="initial-load: copy the tables of this started load only")
    parser.add_argument("--rows", type=int, default=3, help="compare: rows of each table to show")
    parser.add_argument("--sums", help="checksum: the source's sums (JSON) to compare the warehouse with")
    parser.add_argument(
        steps.MATERIALIZE_FIRST,
        action="store_true",
        help="checksum: apply the extracted intervals first (its launcher holds the source's lease)",
    )
    parser.add_argument(
        steps.EVERY_SOURCE,
        action="store_true",
        help="maintain: the tables of every source of the deployment, not only the chosen one's",
    )
    parser.add_argument("--as-of", help="compare: the warehouse as it was after this interval")
    parser.add_argument("--to-interval", help="rollback: the interval whose state the warehouse returns to")
    args = parser.parse_args(argv)
    from loader.warehouse.session import build_session, runs_quick_compiler_only

    started = time.monotonic()
    try:
        cfg = load_config(args.config, source=args.source)
        spark = build_session(
            cfg, app_name=f"loader-{args.job}-{cfg.source.name}", jdbc=args.job in SOURCE_JOBS
        )
        spark.sparkContext.setLogLevel("WARN")
        ready = f"{args.job}: Spark session ready in {time.monotonic() - started:.1f} s"
        if runs_quick_compiler_only(spark):
            ready += " (the JVM's quick compiler only)"
        if cfg.warehouse.format == "iceberg":
            reached = time.monotonic()
            _check_catalog(spark, cfg)
            ready += f", catalog in {time.monotonic() - reached:.1f} s"
        _progress(ready)
        with crashpoints.step(args.job, cfg.source.name):
            summary = RUNNERS[args.job](spark, cfg, args)
    except REPORTED as exc:
        _progress(f"{args.job}: error: {describe(exc)}")
        _leave_outcome(error=exc)
        return exit_code(exc)
    except Exception as exc:  # Spark's own (a JVM exception, an AnalysisException): one line
        traceback.print_exc()  # the whole story, for whoever reads the driver's log
        _, message, transient = error_outcome(exc)
        _progress(f"{args.job}: error: {message}")
        _leave_outcome(error=exc)
        return EXIT_TRANSIENT if transient else EXIT_ERROR
    _leave_outcome(summary)
    spark.stop()
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
