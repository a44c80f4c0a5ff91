"""A merge's cost per table: one ``loader run-once`` over ``--tables`` (100) tables with
``--changes-per-table`` (3,000) single-row changes each, against one ``run-once`` over a single
table given the same changes in all, on the same server in the same run.

The tables, the columns and the changes are ``bench/oltp_cycle.py``'s (16 columns; of every five
changes to a table an insert, three updates and a delete, each its own autocommit transaction);
each table has ``--rows`` (2,000) rows before them, the single table as many as its changes need.
Each shape is loaded (``[load] engine = "arrow"``, not timed) into a warehouse of its own on the
defaults (Iceberg, ``[spark] merge_tables_at_once``), its changes made, then ``loader run-once``
timed as a user runs it; ``loader checksum`` (not timed) must find every table equal after it.

Printed for each shape: its initial load (timed as a user runs it: rows/s, and per core), the
cycle (start, plan, extract, materialise split into Spark's start and bookkeeping and the merges),
and the merge's cost per table: the materialisation's seconds divided by the tables merged. Then
the ratios: the many tables' materialisation to the single table's (the same changes: what the
tables alone cost), the cost per table to the target (0.5 s on two cores), the median of one
table's own merge seconds, and the many small tables' load rate to the single table's and to the
target (80,000 rows/s per core).

    .venv/bin/python bench/many_tables.py [--tables 100] [--rows 2000] [--changes-per-table 3000]
        [--merge-tables-at-once N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.binlog_decode import start_server, stop_server  # noqa: E402
from bench.delta_cycle import Cycle, checksum, loader, timed_cycle, write_config  # noqa: E402
from bench.oltp_cycle import fill, make_changes  # noqa: E402

PER_TABLE_TARGET = 0.5  # seconds of materialisation per table merged, two cores
LOAD_TARGET = 80_000.0  # rows/s per core of an initial load of small tables
CORES = os.cpu_count() or 1


@dataclass
class Shape:
    """A shape's timed initial load (rows/s per core) and cycle."""

    load_rate: float
    cycle: Cycle


def shape(
    tmp: Path,
    port: int,
    name: str,
    tables: int,
    rows: int,
    changes: int,
    at_once: int | None,
    conf: list[str],
) -> Shape:
    """``tables`` tables ``bench.oltp*`` of ``rows`` rows, loaded (timed) into a warehouse of their
    own, then ``changes`` changes over them and one timed ``run-once``; checked equal."""
    fill(port, tables, rows, replace=True)
    config = write_config(
        tmp / name,
        "iceberg",
        port,
        include="bench.oltp*",
        spark_conf=conf,
        merge_tables_at_once=at_once,
        load_engine="arrow",
    )
    loaded = loader("initial-load", config=config, cwd=config.parent).check()
    load_rate = tables * rows / loaded.seconds / CORES
    print(
        f"{name}: {tables} tables of {rows:,} rows loaded in {loaded.seconds:.1f} s "
        f"({tables * rows / loaded.seconds:,.0f} rows/s, {load_rate:,.0f} per core)",
        flush=True,
    )
    t0 = time.perf_counter()
    made = make_changes(port, tables, rows, changes)
    print(
        f"  {changes:,} single-row changes made ({made['insert']:,} inserts, {made['update']:,} updates, "
        f"{made['delete']:,} deletes; not timed, {time.perf_counter() - t0:.1f} s)",
        flush=True,
    )
    cycle = timed_cycle("iceberg", config, config.parent)
    expected = made["insert"] + made["delete"] + 2 * made["update"]
    assert cycle.changes == expected, f"{cycle.changes:,} change rows extracted, not {expected:,}"
    merged = len(cycle.tables)
    assert merged == tables, f"{merged} tables merged, not {tables}"
    lines = checksum(config, config.parent)
    print(f"  checksum (not timed): {lines[0]}; {len(lines) - 1} tables equal")
    own = [float(t["seconds"]) for t in cycle.tables]
    print(
        f"  run-once {cycle.seconds:.1f} s = start {cycle.start:.2f} + plan {cycle.plan:.2f} + extract "
        f"{cycle.extract:.1f} ({cycle.changes:,} change rows) + materialise {cycle.materialise:.1f} (Spark start "
        f"and bookkeeping {cycle.spark_start:.1f} + merges {cycle.merge_span:.1f})"
    )
    print(
        f"  per table merged: {cycle.materialise / merged:.2f} s of materialisation; a table's own merge "
        f"median {statistics.median(own):.2f} s (min {min(own):.2f}, max {max(own):.2f})",
        flush=True,
    )
    return Shape(load_rate, cycle)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--rows", type=int, default=2_000, help="rows of each table before the changes")
    parser.add_argument("--changes-per-table", type=int, default=3_000)
    parser.add_argument(
        "--merge-tables-at-once", type=int, help="[spark] merge_tables_at_once (default: the loader's)"
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting more ([spark] conf)",
    )
    args = parser.parse_args()
    if args.tables < 2 or args.changes_per_table < 5:
        parser.error("--tables must be at least 2, --changes-per-table at least 5")
    if args.changes_per_table // 5 * 2 + 2 > args.rows:
        parser.error("--rows too small for --changes-per-table: the deletes would run out of odd keys")
    changes = args.tables * args.changes_per_table
    one_rows = max(args.rows, changes // 5 * 2 + 2)

    tmp = Path(tempfile.mkdtemp(prefix="bench-many-tables-"))
    datadir = tmp / "mariadb"
    try:
        port = start_server(datadir)
        print(
            f"load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores"
        )
        many_shape = shape(
            tmp, port, "many", args.tables, args.rows, changes, args.merge_tables_at_once, args.spark_conf
        )
        one_shape = shape(tmp, port, "one", 1, one_rows, changes, args.merge_tables_at_once, args.spark_conf)
    finally:
        stop_server(datadir)
        shutil.rmtree(tmp, ignore_errors=True)
    many, one = many_shape.cycle, one_shape.cycle
    per_table = many.materialise / args.tables
    print()
    print(
        f"ratio materialise {args.tables} tables / 1 table ({changes:,} changes each way): "
        f"{many.materialise / one.materialise:.2f}x ({many.materialise:.1f} s / {one.materialise:.1f} s)"
    )
    print(
        f"ratio run-once {args.tables} tables / 1 table: {many.seconds / one.seconds:.2f}x "
        f"({many.seconds:.1f} s / {one.seconds:.1f} s)"
    )
    print(
        f"each table beyond the first adds {(many.materialise - one.materialise) / (args.tables - 1):.2f} s "
        "of materialisation (the difference of the two, over the tables added)"
    )
    verdict = "met" if per_table <= PER_TABLE_TARGET else "MISSED"
    print(
        f"ratio materialisation per table / target: {per_table / PER_TABLE_TARGET:.2f} ({verdict}: "
        f"{per_table:.2f} s, target <= {PER_TABLE_TARGET} s)"
    )
    rate = many_shape.load_rate
    print(
        f"ratio initial load rows/s per core {args.tables} tables / 1 table: {rate / one_shape.load_rate:.2f}x; "
        f"/ target: {rate / LOAD_TARGET:.2f} ({'met' if rate >= LOAD_TARGET else 'MISSED'}: {rate:,.0f}, "
        f"target >= {LOAD_TARGET:,.0f}; each load includes its job's start)"
    )


if __name__ == "__main__":
    main()
