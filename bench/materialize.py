"""Materialisation cost against a full rewrite, on a 10,000,000-row table.

In one Spark session (local[2]): build the base table (integer key, partitioned by ranges of
1,000,000 keys), stage a 1% change set as CSV the way the extractor writes it, and time

- (a) ``recent``: inserts of new keys plus updates of the newest 5% of keys;
- (b) ``uniform``: updates spread over every key;
- the baseline: the dedupe a user would write by hand (``row_number()`` over the key across
  table and changes, newest wins, deletes dropped), rewriting the whole table.

Targets: (a) at most 15% of the full rewrite's time, (b) no worse than 1.1x.

Each is the best of ``--repeat`` runs after a warm-up materialisation of a small table, so the
JVM's first-use costs count for neither side. The small table's later runs (1,000 changes to
1,000 rows) give the fixed cost of a run, whatever its size: the Spark jobs that read the
changes, decide, write and swap. Applying a change set again does the same work (the
merge rule is idempotent: every change is applied again over its own earlier result).

    .venv/bin/python bench/materialize.py [--rows 10000000]
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


Change = tuple[str, int, int, tuple[object, ...]]  # op, seqno, row_id, (id, a, b, c, d)


def stage(folder: Path, rows: list[Change]) -> list[str]:
    """The change rows as one staged CSV file, written the way the extractor writes it."""
    from loader.staging import csvformat

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "part-00000.csv"
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(csvformat.header_line(["id", "a", "b", "c", "d"]))
        for op, seqno, row_id, values in rows:
            f.write(csvformat.row_line(op, seqno, row_id, "2026-01-01 00:00:00.000000", values))
    return [str(path)]


def change_set(
    kind: str, n: int, total: int, seqno: int, top: int | None = None, rnd: random.Random | None = None
) -> list[Change]:
    """``n`` change rows for a table of ``total`` base keys (0 .. total-1) whose keys now end
    below ``top`` (``total``): ``recent``, n/2 inserts from ``top`` on and n/4 updates among the
    newest 5% of the base keys; ``uniform``, n/2 updates among every base key. An update is a D
    and an I row with the same seqno."""
    rnd = rnd or random.Random(kind)
    top = total if top is None else top
    out: list[Change] = []
    if kind != "uniform":
        for i in range(n // 2):  # new keys
            k = top + i
            out.append(("I", seqno + i, 0, (k, i, f"new {k}", "1.50", "2026-01-01 00:00:00.000000")))
        keys = rnd.sample(range(total - total // 20, total), n // 4)
    else:
        keys = rnd.sample(range(total), n // 2)
    for j, k in enumerate(keys):  # updates: a D and an I each
        s = seqno + n + j
        out.append(("D", s, 0, (k, 0, "old", "0.00", "2025-01-01 00:00:00.000000")))
        out.append(("I", s, 1, (k, 1, f"updated {k}", "2.25", "2026-01-01 00:00:00.000000")))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from loader.core.config import load_config
    from loader.staging.manifest import ColumnSpec, FileEntry, TableEntry
    from loader.staging.stores import LocalStore
    from loader.warehouse.materialize import Staged, materialize_table
    from loader.warehouse.session import build_session
    from loader.warehouse.tables import PART, Target

    tmp = Path(tempfile.mkdtemp(prefix="bench-materialize-"))
    try:
        cfg = load_config(
            None,
            env={
                "LOADER__WAREHOUSE__DIR": str(tmp / "warehouse"),
                "LOADER__WAREHOUSE__DATABASE": "bench_wh",
                "LOADER__WAREHOUSE__PARTITION_ROWS": "1000000",
                "LOADER__SPARK__CONF": '{ "spark.sql.shuffle.partitions" = "8", "spark.driver.memory" = "6g" }',
            },
        )
        spark = build_session(cfg, "bench-materialize")
        spark.sparkContext.setLogLevel("ERROR")
        spark.sql("CREATE DATABASE IF NOT EXISTS bench_wh")
        spark.sql(
            f"CREATE TABLE bench_wh.bench__t (id BIGINT, a INT, b STRING, c DECIMAL(12,2), d TIMESTAMP_NTZ, "
            f"_seqno BIGINT, _commit_ts TIMESTAMP, {PART} BIGINT) USING parquet PARTITIONED BY ({PART})"
        )
        t0 = time.perf_counter()
        spark.sql(
            f"INSERT INTO bench_wh.bench__t SELECT id, CAST(id % 1000 AS INT), concat('row ', id), "
            f"CAST(id % 100000 AS DECIMAL(12,2)) / 100, TIMESTAMP_NTZ'2025-01-01 00:00:00', 1, "
            f"TIMESTAMP'2025-01-01 00:00:00', CAST(floor(id / 1000000) AS BIGINT) FROM range({args.rows})"
        )
        print(f"base table: {args.rows:,} rows written in {time.perf_counter() - t0:.1f} s")
        columns = [
            ColumnSpec("id", "bigint"),
            ColumnSpec("a", "int"),
            ColumnSpec("b", "varchar"),
            ColumnSpec("c", "decimal(12,2)"),
            ColumnSpec("d", "datetime(6)"),
        ]
        store = LocalStore(str(tmp / "staging"))
        n = args.rows // 100
        timings = {}
        for kind, seqno, table, count in (
            ("warm-up", 10, "warmup", 1000),
            ("recent", 10_000, "t", n),
            ("uniform", 10_000_000, "t", n),
        ):
            stage(tmp / "staging" / kind, change_set(kind, count, args.rows, seqno))
            entry = TableEntry(
                "bench", table, ["id"], [columns], [FileEntry(f"{kind}/part-00000.csv", 0, count, {}, 0, "")]
            )
            runs, results = [], []
            for attempt in range(args.repeat + (kind == "warm-up")):
                t0 = time.perf_counter()
                results.append(
                    materialize_table(
                        spark, Target.of(cfg), store, [Staged("bench", entry)], f"run-{kind}-{attempt}"
                    )
                )
                runs.append(time.perf_counter() - t0)
            result = results[0]  # later attempts re-apply the same changes: updates of their own rows
            if kind == "warm-up":
                timings["fixed"], fixed_changes = min(runs[1:]), count
                continue
            timings[kind] = min(runs)
            print(
                f"({'a' if kind == 'recent' else 'b'}) {kind:8s} {timings[kind]:6.1f} s, "
                f"partitions rewritten {result.partitions}, inserted {result.inserted:,}, updated {result.updated:,}"
            )
        # The baseline: the hand-written dedupe over the whole table and the uniform change set.
        from loader.staging import csvformat

        changes = csvformat.read_staged(
            spark, [store.spark_uri("uniform/part-00000.csv")], [c.name for c in columns]
        )
        changes.createOrReplaceTempView("bench_changes")
        full = float("inf")
        for attempt in range(args.repeat):
            t0 = time.perf_counter()
            full_rewrite(spark, tmp / f"full-rewrite-{attempt}")
            full = min(full, time.perf_counter() - t0)
        print(f"full rewrite (row_number dedupe) {full:6.1f} s")
        print(
            f"fixed cost of a run ({fixed_changes:,} changes to {fixed_changes:,} rows) {timings['fixed']:6.1f} s, "
            f"{timings['fixed'] / full:.2f} of the full rewrite"
        )
        print(f"ratio (a) recent / full rewrite:  {timings['recent'] / full:.2f} (target <= 0.15)")
        print(f"ratio (b) uniform / full rewrite: {timings['uniform'] / full:.2f} (target <= 1.10)")
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def full_rewrite(spark: Any, target: Path) -> None:
    """The dedupe a user would write by hand over the whole table and the uniform change set."""
    from loader.warehouse.tables import PART

    spark.sql(
        f"""
            SELECT id, a, b, c, d, _seqno, _commit_ts, {PART} FROM (
                SELECT *, row_number() OVER (PARTITION BY id ORDER BY _seqno DESC, _row DESC) AS rn FROM (
                    SELECT id, a, b, c, d, _seqno, _commit_ts, {PART}, 0 AS _row, 'I' AS op FROM bench_wh.bench__t
                    UNION ALL
                    SELECT CAST(id AS BIGINT), CAST(a AS INT), b, CAST(c AS DECIMAL(12,2)),
                           CAST(d AS TIMESTAMP_NTZ), CAST(_loader_seqno AS BIGINT), to_timestamp(_loader_commit_ts),
                           CAST(floor(CAST(id AS BIGINT) / 1000000) AS BIGINT), CAST(_loader_row_id AS INT), _loader_op
                    FROM bench_changes)
            ) WHERE rn = 1 AND op = 'I'
            """
    ).write.mode("overwrite").partitionBy(PART).parquet(str(target))


if __name__ == "__main__":
    main()
