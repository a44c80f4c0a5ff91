"""Does a merge cost follow the size of the change, not the size of the table? Both table formats.

The same ``--changes`` staged changes (100,000) are materialised into a 1,000,000-row table and
into a 10,000,000-row table, for each warehouse table format side by side:

- ``hive``: partitioned Parquet in Spark's Hive catalog; the touched partitions are rewritten
  and swapped in (``materialize.materialize_table``);
- ``iceberg``: an Iceberg table merged with ``MERGE INTO``, merge-on-read, in one snapshot
  (``materialize.materialize_table``, which calls ``iceberg.merge_changes``).

Two change sets, each ``--changes`` rows staged as CSV the way the extractor writes them:

- ``recent``: half inserts of new keys above the table's largest key, half updates (a D and an I
  row with the same seqno) of keys among the newest 5% of the base table's keys;
- ``uniform``: updates of keys spread uniformly over the whole base table.

Target: for each format and each change set, the 10,000,000-row table's merge takes at most 1.3x
the 1,000,000-row table's.

Both tables are made as the loader makes them (``tables.ensure_table``: the loader's columns,
partitions of 1,000,000 keys: a ``loader_partition`` column for Hive, ``truncate(1000000, id)``
for Iceberg), then filled from ``range()`` with ``_seqno`` 1. Each timing is the best of
``--repeat`` merges, after a warm-up merge into a small table of each format, so the JVM's
first-use costs count for neither side. Every merge gets new seqnos (and, on Iceberg, a new
interval id in its snapshot summary), its new keys start above the table's largest key and its
updates are a new sample, so every repeat does the same kind of work; ``recent`` runs before
``uniform`` on the same table. After each merge the table's rows are counted (not timed): the
base rows plus the new keys so far, and the rows carrying the merge's seqnos are its inserts
and updates.

    .venv/bin/python bench/cost_follows_change.py [--small 1000000] [--large 10000000]
        [--changes 100000] [--repeat 2] [--formats hive,iceberg] [--driver-java-options OPTS]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.materialize import change_set, stage  # noqa: E402

FORMATS = ("hive", "iceberg")
KINDS = ("recent", "uniform")
TARGET = 1.30


@dataclass
class Bench:
    """What every run needs: the session, a config per format, the staging store, a seqno and a
    run counter that only grow."""

    spark: Any
    configs: dict[str, Any]
    store: Any
    staging: Path
    changes: int
    repeat: int
    next_seqno: int = 10  # the base rows have _seqno 1
    runs: int = 0
    timings: dict[tuple[str, str, int], float] = field(default_factory=dict)


def columns() -> list[Any]:
    from loader.staging.manifest import ColumnSpec

    return [
        ColumnSpec("id", "bigint"),
        ColumnSpec("a", "int"),
        ColumnSpec("b", "varchar"),
        ColumnSpec("c", "decimal(12,2)"),
        ColumnSpec("d", "datetime(6)"),
    ]


def bench_config(tmp: Path, fmt: str, partition_rows: int = 1_000_000, java_options: str = "") -> Any:
    """The loader's config for a warehouse of table format ``fmt`` in ``tmp`` (database
    ``bench_wh``), on local[2] with room for 10,000,000-row tables; ``java_options`` go to the
    driver's JVM."""
    from loader.core.config import load_config

    conf = '"spark.sql.shuffle.partitions" = "8", "spark.driver.memory" = "6g"'
    if java_options:
        conf += f', "spark.driver.extraJavaOptions" = "{java_options}"'
    env = {
        "LOADER__WAREHOUSE__DIR": str(tmp / "warehouse"),
        "LOADER__WAREHOUSE__DATABASE": "bench_wh",
        "LOADER__WAREHOUSE__FORMAT": fmt,
        "LOADER__WAREHOUSE__PARTITION_ROWS": str(partition_rows),
        "LOADER__SPARK__MASTER": '"local[2]"',
        "LOADER__SPARK__CONF": "{ " + conf + " }",
    }
    return load_config(None, env=env)


def build_table(bench: Bench, fmt: str, table: str, rows: int) -> str:
    """Create the table as the loader does and fill it with ``rows`` keys; returns its name."""
    from loader.warehouse.tables import (
        PART,
        Target,
        ensure_database,
        ensure_table,
        partition_expr,
        table_name,
    )

    cfg = bench.configs[fmt]
    spark = bench.spark
    name = table_name(cfg, "bench", table)
    ensure_database(spark, cfg.warehouse)
    spark.sql(f"DROP TABLE IF EXISTS {name}" + (" PURGE" if fmt == "iceberg" else ""))
    cols = columns()
    ensure_table(spark, Target.of(cfg), "bench", table, cols, key=["id"])
    select = (
        "id, CAST(id % 1000 AS INT), concat('row ', id), CAST(id % 100000 / 100 AS DECIMAL(12,2)), "
        "TIMESTAMP_NTZ'2025-01-01 00:00:00', CAST(1 AS BIGINT), TIMESTAMP'2025-01-01 00:00:00', "
        "CAST(NULL AS MAP<STRING, STRING>)"
    )
    if fmt == "hive":
        part = partition_expr(cols, ["id"], *cfg.warehouse.partitioning("bench", table))
        select += f", {part} AS {PART}"
    spark.sql(f"INSERT INTO {name} SELECT {select} FROM range({rows})")
    return name


def merge(
    bench: Bench, fmt: str, table: str, kind: str, rows: int, top: int, attempt: int
) -> tuple[Any, float, int]:
    """Stage one change set and materialise it into the table the way the loader does, timed.

    Returns the loader's result, the seconds and the seqno the changes start at.
    """
    from loader.staging.manifest import FileEntry, TableEntry
    from loader.warehouse import iceberg
    from loader.warehouse.materialize import Staged, materialize_table
    from loader.warehouse.tables import Target

    cfg = bench.configs[fmt]
    n = bench.changes if table != "warmup" else 200
    seqno = bench.next_seqno
    bench.next_seqno += 2 * n + 10
    bench.runs += 1
    run = f"{bench.runs:05d}"
    folder = f"{fmt}-{table}-{kind}-{run}"
    changes = change_set(kind, n, rows, seqno, top, random.Random(f"{kind}-{attempt}"))
    stage(bench.staging / folder, changes)
    entry = TableEntry(
        "bench",
        table,
        ["id"],
        [columns()],
        [FileEntry(f"{folder}/part-00000.csv", 0, len(changes), {}, 0, "")],
    )
    # What run_materialize gives a merge: a version folder name (Hive) and the snapshot summary
    # of one interval (Iceberg), new for every run.
    summary = {iceberg.SOURCE: "bench", iceberg.INTERVAL: f"bench-{run}", iceberg.END: f"bench:{run}"}
    t0 = time.perf_counter()
    result = materialize_table(
        bench.spark,
        Target.of(cfg),
        bench.store,
        [Staged(f"bench-{run}", entry)],
        f"v{run}-bench",
        summary=summary,
    )
    return result, time.perf_counter() - t0, seqno


def check(bench: Bench, name: str, expected_rows: int, seqno: int, expected_changed: int) -> None:
    """The table holds the base rows plus the new keys, and this merge's rows carry its seqnos."""
    got = bench.spark.sql(
        f"SELECT count(*) AS n, count_if(_seqno >= {seqno}) AS changed FROM {name}"
    ).collect()[0]
    if got.n != expected_rows or got.changed != expected_changed:
        raise AssertionError(
            f"{name}: {got.n:,} rows, {got.changed:,} from this merge; expected {expected_rows:,} "
            f"and {expected_changed:,}"
        )


def run_table(bench: Bench, fmt: str, label: str, rows: int) -> None:
    """Build one table, then time ``recent`` and ``uniform`` on it (best of ``repeat`` each)."""
    n = bench.changes
    table = f"t_{label}"
    t0 = time.perf_counter()
    name = build_table(bench, fmt, table, rows)
    print(
        f"[{fmt}] {label} base table {name}: {rows:,} rows built in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    top = rows
    for kind in KINDS:
        inserted, updated = (n // 2, n // 4) if kind == "recent" else (0, n // 2)
        best = float("inf")
        for attempt in range(bench.repeat):
            result, seconds, seqno = merge(bench, fmt, table, kind, rows, top, attempt)
            top += inserted
            if (result.inserted, result.updated, result.deleted) != (inserted, updated, 0):
                raise AssertionError(
                    f"{name} {kind}: the loader reports {result.inserted:,} inserted, "
                    f"{result.updated:,} updated, {result.deleted:,} deleted; expected "
                    f"{inserted:,}, {updated:,}, 0"
                )
            check(bench, name, top, seqno, inserted + updated)
            best = min(best, seconds)
            print(
                f"[{fmt}] {label} {kind:7s} run {attempt + 1}: {seconds:6.2f} s, partitions changed "
                f"{result.partitions}, inserted {result.inserted:,}, updated {result.updated:,}; "
                f"{top:,} rows after",
                flush=True,
            )
        bench.timings[(fmt, kind, rows)] = best
    bench.spark.sql(f"DROP TABLE IF EXISTS {name}" + (" PURGE" if fmt == "iceberg" else ""))


def warm_up(bench: Bench, fmt: str) -> None:
    """Merges into a small table, untimed: the JVM's first-use costs of this format's path."""
    t0 = time.perf_counter()
    name = build_table(bench, fmt, "warmup", 1000)
    top = 1000
    for kind in KINDS:
        merge(bench, fmt, "warmup", kind, 1000, top, 0)
        top += 100 if kind == "recent" else 0
    bench.spark.sql(f"DROP TABLE IF EXISTS {name}" + (" PURGE" if fmt == "iceberg" else ""))
    print(f"[{fmt}] warm-up done in {time.perf_counter() - t0:.1f} s", flush=True)


def report(bench: Bench, formats: list[str], small: int, large: int) -> None:
    t = bench.timings
    for fmt in formats:
        print(f"\n{fmt}: {bench.changes:,} changes, best of {bench.repeat}")
        for kind in KINDS:
            print(
                f"  {kind:7s} {small:>12,} rows {t[(fmt, kind, small)]:7.2f} s   "
                f"{large:>12,} rows {t[(fmt, kind, large)]:7.2f} s"
            )
        for kind in KINDS:
            ratio = t[(fmt, kind, large)] / t[(fmt, kind, small)]
            print(f"  ratio {kind:7s} large / small: {ratio:.2f} (target <= {TARGET:.2f})")
    print(f"\nside by side ({bench.changes:,} changes; seconds, best of {bench.repeat})")
    print(f"  {'':31s}" + "".join(f"{fmt:>10s}" for fmt in formats))
    for kind in KINDS:
        for rows in (small, large):
            print(
                f"  {kind:7s} {rows:>12,} rows{'':6s}"
                + "".join(f"{t[(f, kind, rows)]:10.2f}" for f in formats)
            )
    for kind in KINDS:
        ratios = "".join(f"{t[(f, kind, large)] / t[(f, kind, small)]:10.2f}" for f in formats)
        print(f"  ratio {kind:7s} large / small{'':4s}" + ratios + f"   (target <= {TARGET:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--small", type=int, default=1_000_000)
    parser.add_argument("--large", type=int, default=10_000_000)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument(
        "--partition-rows", type=int, default=1_000_000, help="keys per partition (the loader's default)"
    )
    parser.add_argument(
        "--driver-java-options",
        default="",
        help="extra options for the driver's JVM, e.g. -XX:TieredStopAtLevel=1 (the quick compiler only)",
    )
    args = parser.parse_args()
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not formats or any(f not in FORMATS for f in formats):
        parser.error(f"--formats: a comma-separated list of {', '.join(FORMATS)}")
    if args.changes < 4 or args.changes // 4 > args.small // 20 or args.small >= args.large:
        parser.error("need --small < --large and --changes / 4 keys within the newest 5% of --small")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from loader.staging.stores import LocalStore
    from loader.warehouse.session import build_session

    tmp = Path(tempfile.mkdtemp(prefix="bench-cost-follows-change-"))
    spark = None
    try:
        configs = {
            fmt: bench_config(tmp, fmt, args.partition_rows, args.driver_java_options) for fmt in FORMATS
        }
        # One session for both: the Iceberg config's session is the Hive one plus the Iceberg
        # catalog and SQL extensions (start-only settings), so both formats share one warm JVM.
        session_cfg = configs["iceberg" if "iceberg" in formats else "hive"]
        t0 = time.perf_counter()
        spark = build_session(session_cfg, "bench-cost-follows-change")
        spark.sparkContext.setLogLevel("ERROR")
        print(f"session started in {time.perf_counter() - t0:.1f} s", flush=True)
        bench = Bench(
            spark, configs, LocalStore(str(tmp / "staging")), tmp / "staging", args.changes, args.repeat
        )
        for fmt in formats:
            warm_up(bench, fmt)
        for fmt in formats:
            for label, rows in (("small", args.small), ("large", args.large)):
                run_table(bench, fmt, label, rows)
        report(bench, formats, args.small, args.large)
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
