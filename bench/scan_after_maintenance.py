"""Do reads stay fast on Iceberg after many merge-on-read intervals and one maintenance run?

An Iceberg table of ``--rows`` rows (1,000,000, made as the loader makes it) takes
``--intervals`` (100) merges of ``--changes`` (10,000) staged change rows each, one snapshot
per interval as ``loader run-once`` commits them (``materialize.materialize_table`` with an
interval id in the summary): updates of keys spread over the whole table (a D and an I row),
inserts of new keys and deletes of existing ones. Every merge writes deletion vectors into the
data files it touches and new small data files, so a scan must read more files and apply the
deletes. Then ``maintenance.maintain_table`` (what ``loader maintain`` runs: compaction of the
files with deletes and of small files, snapshot expiry with the config's defaults).

Timed, best of ``--repeat`` each, interleaved: a full scan (``count(*)`` and the sum of
``xxhash64`` over every column, so every column of every row is read and decoded) of

- ``merged``: the table after the intervals, before maintenance;
- ``maintained``: the same table after maintenance;
- ``fresh``: the same rows copied into a new table of the same layout (written once, no deletes).

The three scans must agree (rows and hash sum), so a fast wrong read cannot pass.

Target: ``maintained`` within 1.2x of ``fresh``.

    .venv/bin/python bench/scan_after_maintenance.py [--rows 1000000] [--intervals 100]
        [--changes 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cost_follows_change import Bench, bench_config, build_table, columns  # noqa: E402
from bench.materialize import Change, stage  # noqa: E402

TARGET = 1.20
SHARES = {"update": 0.5, "insert": 0.3, "delete": 0.2}


def interval_changes(
    n: int, live: list[int], top: int, seqno: int, rnd: random.Random
) -> tuple[list[Change], int]:
    """``n`` change rows: updates and deletes of keys drawn from ``live`` (spread over the
    table), inserts of new keys from ``top`` on. ``live`` is kept current; returns the rows and
    the new ``top``."""
    updates = int(n * SHARES["update"]) // 2  # a D and an I row each
    deletes = int(n * SHARES["delete"])
    inserts = n - 2 * updates - deletes
    picked = rnd.sample(range(len(live)), updates + deletes)
    out: list[Change] = []
    s = seqno
    for i in picked[:updates]:
        k = live[i]
        out.append(("D", s, 0, (k, 0, "old", "0.00", "2025-01-01 00:00:00.000000")))
        out.append(("I", s, 1, (k, s % 1000, f"updated {k} at {s}", "2.25", "2026-01-01 00:00:00.000000")))
        s += 1
    for i in picked[updates:]:
        out.append(("D", s, 0, (live[i], 0, "old", "0.00", "2025-01-01 00:00:00.000000")))
        s += 1
    for i in sorted(picked[updates:], reverse=True):  # remove the deleted keys, O(1) each
        live[i] = live[-1]
        live.pop()
    for k in range(top, top + inserts):
        out.append(("I", s, 0, (k, k % 1000, f"new {k}", "1.50", "2026-01-01 00:00:00.000000")))
        live.append(k)
        s += 1
    return out, top + inserts


def apply_intervals(bench: Bench, rows: int, intervals: int) -> int:
    """Merge ``intervals`` change sets, one snapshot each; returns the rows the table holds."""
    from loader.staging.manifest import FileEntry, TableEntry
    from loader.warehouse import iceberg
    from loader.warehouse.materialize import Staged, materialize_table
    from loader.warehouse.tables import Target

    cfg = bench.configs["iceberg"]
    rnd = random.Random(17)
    live = list(range(rows))
    top = rows
    started = time.perf_counter()
    for i in range(1, intervals + 1):
        changes, top = interval_changes(bench.changes, live, top, bench.next_seqno, rnd)
        bench.next_seqno += len(changes) + 10
        folder = f"interval-{i:04d}"
        stage(bench.staging / folder, changes)
        entry = TableEntry(
            "bench",
            "t",
            ["id"],
            [columns()],
            [FileEntry(f"{folder}/part-00000.csv", 0, len(changes), {}, 0, "")],
        )
        summary = {
            iceberg.SOURCE: cfg.source.name,
            iceberg.INTERVAL: f"bench-{i:04d}",
            iceberg.END: f"bench:{i}",
        }
        materialize_table(
            bench.spark,
            Target.of(cfg),
            bench.store,
            [Staged(f"bench-{i:04d}", entry)],
            f"v{i:04d}-bench",
            summary=summary,
        )
        if i % 10 == 0 or i == intervals:
            print(
                f"  {i:4d}/{intervals} intervals merged, {len(live):,} rows, "
                f"{time.perf_counter() - started:.0f} s",
                flush=True,
            )
    return len(live)


def files(spark: Any, name: str) -> str:
    row = spark.sql(
        f"SELECT count_if(content = 0) AS data, count_if(content <> 0) AS deletes, "
        f"sum(file_size_in_bytes) AS bytes FROM {name}.files"
    ).collect()[0]
    return f"{row.data} data files, {row.deletes} delete files, {int(row.bytes or 0) / 1e6:.1f} MB"


def scan(spark: Any, name: str) -> tuple[float, tuple[int, int]]:
    t0 = time.perf_counter()
    row = spark.sql(
        f"SELECT count(*) AS n, sum(CAST(xxhash64(id, a, b, c, d, _seqno, _commit_ts, "
        f"CAST(_loader_invalid_dates AS STRING)) AS DECIMAL(38, 0))) AS h FROM {name}"
    ).collect()[0]
    return time.perf_counter() - t0, (int(row.n), int(row.h))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--intervals", type=int, default=100)
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.changes < 10 or args.changes * args.intervals > args.rows:
        parser.error("need --changes >= 10 and --changes x --intervals <= --rows")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from loader.staging.stores import LocalStore
    from loader.warehouse.maintenance import WarehouseTable, maintain_table
    from loader.warehouse.session import build_session
    from loader.warehouse.tables import Target, ensure_table, table_name

    tmp = Path(tempfile.mkdtemp(prefix="bench-scan-after-maintenance-"))
    spark = None
    try:
        cfg = bench_config(tmp, "iceberg")
        t0 = time.perf_counter()
        spark = build_session(cfg, "bench-scan-after-maintenance")
        spark.sparkContext.setLogLevel("ERROR")
        print(f"session started in {time.perf_counter() - t0:.1f} s", flush=True)
        bench = Bench(
            spark, {"iceberg": cfg}, LocalStore(str(tmp / "staging")), tmp / "staging", args.changes, 1
        )
        name = build_table(bench, "iceberg", "t", args.rows)
        print(
            f"{name}: {args.rows:,} rows; {args.intervals} intervals of {args.changes:,} change rows",
            flush=True,
        )
        live = apply_intervals(bench, args.rows, args.intervals)
        fresh = table_name(cfg, "bench", "fresh")
        ensure_table(spark, Target.of(cfg), "bench", "fresh", columns(), key=["id"])
        spark.sql(f"INSERT INTO {fresh} SELECT * FROM {name} ORDER BY id")
        print(f"merged:  {files(spark, name)}", flush=True)
        print(f"fresh:   {files(spark, fresh)}", flush=True)

        best: dict[str, float] = {"merged": float("inf"), "fresh": float("inf")}
        answers: dict[str, tuple[int, int]] = {}
        scan(spark, fresh)  # warm-up: the scan path's first use
        for _ in range(args.repeat):
            for label, table in (("merged", name), ("fresh", fresh)):
                seconds, answers[label] = scan(spark, table)
                best[label] = min(best[label], seconds)
        t0 = time.perf_counter()
        done = maintain_table(spark, WarehouseTable(name, [cfg.source.name], shared=False), cfg.maintenance)
        print(
            f"maintenance in {time.perf_counter() - t0:.1f} s: {done.rewritten_files} files rewritten, "
            f"data files {done.data_files[0]} -> {done.data_files[1]}, delete files "
            f"{done.delete_files[0]} -> {done.delete_files[1]}, snapshots {done.snapshots[0]} -> "
            f"{done.snapshots[1]}",
            flush=True,
        )
        print(f"maintained: {files(spark, name)}", flush=True)
        best["maintained"] = float("inf")
        for _ in range(args.repeat):
            for label, table in (("maintained", name), ("fresh", fresh)):
                seconds, answers[label] = scan(spark, table)
                best[label] = min(best[label], seconds)
        if len(set(answers.values())) != 1 or answers["fresh"][0] != live:
            raise AssertionError(f"the scans disagree: {answers}; expected {live:,} rows")

        print(f"\nfull scan of {live:,} rows (count and xxhash64 of every column), best of {args.repeat}")
        for label in ("merged", "maintained", "fresh"):
            print(f"  {label:10s} {best[label]:6.2f} s   {best[label] / best['fresh']:.2f}x fresh")
        ratio = best["maintained"] / best["fresh"]
        print(f"  ratio maintained / fresh: {ratio:.2f} (target <= {TARGET:.2f})")
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
