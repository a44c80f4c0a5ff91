"""Which property of a workload makes a table's merge slow: one ``loader run-once`` per *shape*
of the same number of row changes, each shape differing from ``bench/oltp_cycle.py``'s traffic
(the baseline) in one property, in the same run.

Each shape has a private MariaDB of its own (its binlog holds its changes only) with ``--tables``
(4) tables ``bench.oltp*`` of ``--rows`` (130,000) rows, made on the server from its Sequence
engine, loaded (``[load] engine = "arrow"``) into a warehouse of its own on the defaults
(Iceberg); then ``--changes-per-table`` (65,000) row changes to each table, made by a stored
procedure in a session per table, two tables at a time: of every five changes to a table an
insert, three updates and a delete, one row each. That is 104,000 change rows a table (an update
is two, its D and I): more than the 100,000 a merge reads itself (``materialize.LOCAL_READ_ROWS``),
so that Spark's CSV reader reads them, as it reads a user's interval of 100,000 changes a table;
and twice as many rows as changes, as ``bench/oltp_cycle.py`` has them, so that the baseline
updates each key it updates once. None of that is timed, and every shape is made ready before the
first timed run: then each shape's ``loader run-once``, timed as a user runs it, one right after
another, so that a load of the machine that comes and goes moves them alike; then ``loader
checksum`` (not timed) of each, which must find every table equal. The shapes:

- ``baseline``: ``bench/oltp_cycle.py``'s 16 columns (BIGINT key, BIGINTs, INTs, DOUBLEs,
  VARCHAR(128)s, DATEs) and changes (``oltp_cycle.make_changes``): inserts of new keys above the
  table's, updates of even keys spread over the table, deletes of odd keys in turn, each change
  its own autocommit transaction;
- ``hot_keys``: every change on 1% of the keys (the first ``--rows`` / 100): the updates on its
  even keys, each deleted odd key inserted again by the next insert, so that a changed key
  changes tens of times in the interval;
- ``wide_rows``: two more columns, a TEXT of ~2 KB and a JSON document of ~1 KB, filled on
  insert and changed by every update;
- ``text_key``: the key a VARCHAR(36) uuid-like text (the MD5 of the baseline's key, dashed)
  instead of the BIGINT: the table is split into 16 hash buckets of it, not key ranges;
- ``composite_key``: ``PRIMARY KEY (tenant INT, id INT)``, 100 tenants (``1 + id % 100``): hash
  buckets of the tenant;
- ``transactions``: the baseline's changes grouped 20 to a transaction (of one table);
- ``insert_delete``: half the deletes are of the row inserted just before (the same interval's),
  the other half of odd keys as the baseline's;
- ``wide_text_key``, ``wide_composite_key`` (only when named in ``--shapes``): ``wide_rows``'
  columns with ``text_key``'s or ``composite_key``'s key, two properties at once.

The baseline is made and timed twice, first and last (``baseline_again``): how much its two
runs differ is the run's noise, and the shapes are compared with the mean of the two.

Printed for each shape: the load average before its run, the cycle (start, plan, extract,
materialise split into Spark's start and bookkeeping and the merges: from the first merge's start
to the last one's end), the CPU seconds of its processes (the command's and its Spark job's: what
another load moves less than the wall clock), each table's merge seconds, their median and the
median of those after the first ``[spark] merge_tables_at_once`` (2), which run while the job's
JVM still compiles (of a user's ten tables, most merge after them). Then each shape's merges
(their span, the median table's merge, the median of the later ones) as a ratio of the
baseline's, sorted, naming the shapes at 1.5x or more, with the cycles' wall and CPU ratios.

    .venv/bin/python bench/merge_shapes.py [--tables 4] [--rows 130000] [--changes-per-table 65000]
        [--shapes baseline,hot_keys,wide_rows,text_key,composite_key,transactions,insert_delete]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import oltp_cycle  # noqa: E402
from bench.binlog_decode import settle, start_server, stop_server  # noqa: E402
from bench.delta_cycle import (  # noqa: E402
    Cycle,
    checksum,
    connect,
    loader,
    redo_flushed_once_a_second,
    timed_cycle,
    write_config,
)
from bench.oltp_cycle import COLUMNS, DELETE, INSERT, SETS  # noqa: E402  (SETS: the baseline's update)
from loader.core.config import SparkConfig  # noqa: E402
from loader.warehouse.materialize import LOCAL_READ_BYTES, LOCAL_READ_ROWS  # noqa: E402

SLOW = 1.5  # a shape whose merges take this many times the baseline's is named
HOT_SHARE = 100  # hot_keys: one key in this many takes every change
TENANTS = 100  # composite_key: tenants, 1 + id % TENANTS
TX_CHANGES = 20  # transactions: changes per transaction
SESSIONS = 2  # tables changed at once, a session each
AT_ONCE = SparkConfig().merge_tables_at_once  # the loader's default: tables merged at once

# text_key's key: the MD5 of the baseline's key k, dashed as a uuid (36 characters).
UUID = (
    "CONCAT_WS('-', SUBSTR(MD5(k), 1, 8), SUBSTR(MD5(k), 9, 4), SUBSTR(MD5(k), 13, 4), "
    "SUBSTR(MD5(k), 17, 4), SUBSTR(MD5(k), 21, 12))"
)
# wide_rows' two columns: name, type, value for key k, what an update sets (r: the change's number).
WIDE = (
    (
        "notes",
        "TEXT NULL",
        "REPEAT(CONCAT(MD5(k), ' '), 62)",
        "CONCAT(LPAD(r, 10, '0'), SUBSTRING(notes, 11))",
    ),
    (
        "doc",
        "JSON NULL",
        "JSON_OBJECT('id', k, 'name', CONCAT('doc-', k), 'rev', 0, 'tags', JSON_ARRAY(k % 7, k % 11, k % 13), "
        "'body', REPEAT(SHA1(k), 23))",
        "JSON_SET(doc, '$.rev', r)",
    ),
)


@dataclass(frozen=True)
class Shape:
    """A workload: the baseline but for one property (two for ``wide_text_key`` and
    ``wide_composite_key``)."""

    name: str
    key: str = "int"  # "int" (id BIGINT), "text" (id VARCHAR(36)) or "composite" (tenant INT, id INT)
    hot: bool = False  # every change on the first 1% of the keys
    wide: bool = False  # WIDE's two columns more
    per_tx: int = 1  # changes per transaction
    delete_inserted: bool = False  # half the deletes of the row inserted just before

    def columns(self) -> list[tuple[str, str, str]]:
        """The table's columns: name, type, value for key k."""
        cols = list(COLUMNS)
        if self.key == "text":
            cols[0] = ("id", "VARCHAR(36) NOT NULL", UUID)
        elif self.key == "composite":
            cols[0:1] = [("tenant", "INT NOT NULL", f"1 + k % {TENANTS}"), ("id", "INT NOT NULL", "k")]
        if self.wide:
            cols += [(name, sqltype, value) for name, sqltype, value, _ in WIDE]
        return cols

    def primary_key(self) -> str:
        return "PRIMARY KEY (tenant, id)" if self.key == "composite" else "PRIMARY KEY (id)"

    def where(self) -> str:
        """The row of key k."""
        if self.key == "text":
            return f"id = {UUID}"
        if self.key == "composite":
            return f"tenant = 1 + k % {TENANTS} AND id = k"
        return "id = k"

    def sets(self) -> str:
        """An update's SET clause (r: the change's number in its table)."""
        extra = "".join(f", {name} = {update}" for name, _, _, update in WIDE) if self.wide else ""
        return SETS + extra

    def keys(self, rows: int) -> tuple[str, str, str]:
        """The key k of the r-th change to a table (r from 0) that is an insert, a delete, an
        update: SQL of r. The baseline's are oltp_cycle.make_changes's: a new key above ``rows``,
        the next odd key, an even key spread over the table (never deleted)."""
        group = "r DIV 5"  # the changes come in groups of five: an insert, a delete, three updates
        if self.hot:
            half = max(1, rows // HOT_SHARE // 2)  # the hot keys' odd ones and even ones
            # The group's delete takes the next hot odd key; its insert puts back the one the
            # previous group deleted (the first group's a new key, above the table's).
            return (
                f"IF({group} = 0, {rows} + 1, 2 * (({group} - 1) % {half}) + 1)",
                f"2 * ({group} % {half}) + 1",
                f"2 * ((r * 7919) % {half}) + 2",
            )
        insert = f"{rows} + {group} + 1"
        delete = f"2 * ({group}) + 1"
        if self.delete_inserted:  # every other group deletes the row it just inserted
            delete = f"IF({group} % 2 = 0, {insert}, {delete})"
        return insert, delete, f"2 * ((r * 7919) % ({rows} DIV 2)) + 2"


SHAPES = {
    s.name: s
    for s in (
        Shape("baseline"),
        Shape("hot_keys", hot=True),
        Shape("wide_rows", wide=True),
        Shape("text_key", key="text"),
        Shape("composite_key", key="composite"),
        Shape("transactions", per_tx=TX_CHANGES),
        Shape("insert_delete", delete_inserted=True),
        # Two properties at once, run only when named: wide rows with a key that is not one integer.
        Shape("wide_text_key", key="text", wide=True),
        Shape("wide_composite_key", key="composite", wide=True),
    )
}
DEFAULT_SHAPES = list(SHAPES)[:7]  # each one property away from the baseline


def fill(port: int, shape: Shape, tables: int, rows: int) -> None:
    """A fresh database ``bench`` with ``bench.oltp0`` .. of ``shape``'s columns, keys 1 .. rows
    each, made on the server."""
    oltp_cycle.fill(port, tables, rows, shape.columns(), shape.primary_key(), replace=True)


def make_changes(port: int, shape: Shape, tables: int, rows: int, changes: int) -> dict[str, int]:
    """``changes`` row changes to each table, one row each, by a stored procedure: of every five
    an insert, a delete and three updates of the keys ``shape.keys`` gives, ``shape.per_tx`` to a
    transaction. A table's changes are made in a session of their own, ``SESSIONS`` tables at a
    time (the server's work is a statement's, one core a session), the redo log flushed once a
    second rather than at each commit. Returns the row changes made per kind, checked against
    the statements' affected rows."""
    cols = shape.columns()
    names = ", ".join(name for name, _, _ in cols)
    values = ", ".join(value for _, _, value in cols)
    insert, delete, update = shape.keys(rows)
    where, sets = shape.where(), shape.sets()
    branches = [
        f"{'IF' if t == 0 else 'ELSEIF'} t = {t} THEN "
        f"IF r % 5 = {INSERT} THEN INSERT INTO bench.oltp{t} ({names}) VALUES ({values}); "
        f"ELSEIF r % 5 = {DELETE} THEN DELETE FROM bench.oltp{t} WHERE {where}; "
        f"ELSE UPDATE bench.oltp{t} SET {sets} WHERE {where}; "
        "END IF; SET done = done + ROW_COUNT();"
        for t in range(tables)
    ]
    begin = commit = ""
    if shape.per_tx > 1:
        begin = f"IF r % {shape.per_tx} = 0 THEN START TRANSACTION; END IF; "
        commit = f"IF r % {shape.per_tx} = {shape.per_tx - 1} OR r = n - 1 THEN COMMIT; END IF; "

    def work(t: int) -> int:
        conn = connect(port)
        try:
            with conn.cursor() as cur:
                cur.execute(f"CALL bench.shape_work({t}, {changes}, @done)")
                cur.execute("SELECT @done")
                return int(cur.fetchone()[0])
        finally:
            conn.close()

    conn = connect(port)
    try:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL max_binlog_size = 1073741824")
            cur.execute(
                "CREATE PROCEDURE bench.shape_work(t INT, n INT, OUT done BIGINT) BEGIN "
                "DECLARE r INT DEFAULT 0; DECLARE k BIGINT; SET done = 0; WHILE r < n DO "
                f"{begin}SET k = IF(r % 5 = {INSERT}, {insert}, IF(r % 5 = {DELETE}, {delete}, {update})); "
                f"{' '.join(branches)} END IF; {commit}SET r = r + 1; END WHILE; END"
            )
            with redo_flushed_once_a_second(cur), concurrent.futures.ThreadPoolExecutor(SESSIONS) as pool:
                done = list(pool.map(work, range(tables)))
    finally:
        conn.close()
    bad = {f"bench.oltp{t}": n for t, n in enumerate(done) if n != changes}
    assert not bad, f"rows changed by {changes:,} statements each: {bad}: a key was not where expected"
    made = {"insert": tables * ((changes + 4) // 5), "delete": tables * ((changes + 3) // 5)}
    made["update"] = tables * changes - made["insert"] - made["delete"]
    return made


def staged_bytes(folder: Path) -> int:
    """The bytes of the staged change files under ``folder``'s staging."""
    files = (folder / "staging").rglob("*.csv*")
    return sum(f.stat().st_size for f in files if f.is_file())


@dataclass
class Prepared:
    """A shape's server and warehouse, loaded and changed, before its timed ``run-once``."""

    label: str  # the shape's name; the baseline's second copy, timed last, "baseline_again"
    shape: Shape
    config: Path
    made: dict[str, int]


def prepare(
    label: str, datadir: Path, folder: Path, shape: Shape, tables: int, rows: int, changes: int
) -> Prepared:
    """``shape``'s private server in ``datadir``: its tables filled, loaded into a warehouse of
    their own under ``folder``, changed, and InnoDB's purge of the changes' old row versions
    waited for (it would take a core from the timed runs); none of it timed."""
    port = start_server(datadir)
    t0 = time.perf_counter()
    fill(port, shape, tables, rows)
    config = write_config(folder, "iceberg", port, include="bench.oltp*", load_engine="arrow")
    loader("initial-load", config=config, cwd=config.parent).check()
    loaded = time.perf_counter() - t0
    made = make_changes(port, shape, tables, rows, changes)
    changed = time.perf_counter() - t0 - loaded
    settled = settle(port, 120.0)
    print(
        f"{label}: {tables} tables of {rows:,} rows loaded ({loaded:.1f} s), {tables * changes:,} row "
        f"changes made ({made['insert']:,} inserts, {made['update']:,} updates, {made['delete']:,} deletes, "
        f"{shape.per_tx} a transaction; {changed:.1f} s, purged in {settled:.1f} s; not timed)",
        flush=True,
    )
    return Prepared(label, shape, config, made)


def children_cpu() -> float:
    """CPU seconds (user and system) of this process's finished children and theirs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(prepared: Prepared, tables: int) -> tuple[Cycle, float]:
    """The shape's timed ``run-once``, printed split; the cycle and its processes' CPU seconds."""
    config, made = prepared.config, prepared.made
    load = os.getloadavg()
    cpu = children_cpu()
    cycle = timed_cycle("iceberg", config, config.parent)
    cpu = children_cpu() - cpu
    expected = made["insert"] + made["delete"] + 2 * made["update"]
    assert cycle.changes == expected, f"{cycle.changes:,} change rows extracted, not {expected:,}"
    assert len(cycle.tables) == tables, f"{len(cycle.tables)} tables merged, not {tables}"
    staged = staged_bytes(config.parent)
    local = cycle.changes // tables <= LOCAL_READ_ROWS and staged // tables <= LOCAL_READ_BYTES
    reader = "the merge itself" if local else "Spark's CSV reader"
    compilers = "the JVM's quick compiler only" if cycle.quick_compiler else "both of the JVM's compilers"
    print(
        f"{prepared.label} (load average before it {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; the job on "
        f"{compilers}):"
    )
    print(
        f"  run-once {cycle.seconds:.1f} s = start {cycle.start:.2f} + plan {cycle.plan:.2f} + extract "
        f"{cycle.extract:.1f} ({cycle.changes:,} change rows in {cycle.transactions:,} transactions, "
        f"{staged / 1e6:,.0f} MB staged) + materialise {cycle.materialise:.1f} (Spark start and "
        f"bookkeeping {cycle.spark_start:.1f} + merges {cycle.merge_span:.1f}; ~{cycle.changes // tables:,} "
        f"change rows a table, read by {reader}); CPU {cpu:.1f} s"
    )
    own = sorted(cycle.tables, key=lambda t: float(t["started"]))
    merges = ", ".join(
        f"{t['table']} {float(t['seconds']):.1f} s (+{t['inserted']:,} ~{t['updated']:,} -{t['deleted']:,}, "
        f"{t['partitions']} partitions)"
        for t in own
    )
    print(f"  merges in start order: {merges}")
    print(
        f"  a table's merge: median {median_merge(cycle):.2f} s, of those after the first {AT_ONCE} "
        f"(the JVM warmer) {median_merge(cycle, later=True):.2f} s",
        flush=True,
    )
    return cycle, cpu


def median_merge(cycle: Cycle, later: bool = False) -> float:
    """The median of the cycle's table merges' seconds; ``later``: of those started after the first
    ``AT_ONCE`` (the first ones run while the job's JVM still compiles; of a user's ten tables,
    most merge after them), or of all when there are no others."""
    merges = sorted(cycle.tables, key=lambda t: float(t["started"]))
    if later and len(merges) > AT_ONCE:
        merges = merges[AT_ONCE:]
    return statistics.median(float(t["seconds"]) for t in merges)


def measures(cycle: Cycle, cpu: float) -> dict[str, float]:
    """What the summary compares: the merges' span, the median table's merge, the median of the
    later ones, the run-once's wall and CPU seconds."""
    return {
        "span": cycle.merge_span,
        "median": median_merge(cycle),
        "later": median_merge(cycle, later=True),
        "run-once": cycle.seconds,
        "CPU": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--rows", type=int, default=130_000, help="rows of each table before the changes")
    parser.add_argument(
        "--changes-per-table", type=int, default=65_000, help="row changes to each table (an update is one)"
    )
    parser.add_argument(
        "--shapes",
        default=",".join(DEFAULT_SHAPES),
        help="comma-separated, the baseline first and last whether named or not (default: all but the "
        f"last two): {', '.join(SHAPES)}",
    )
    args = parser.parse_args()
    chosen = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SHAPES))
    if unknown:
        parser.error(f"--shapes: {', '.join(unknown)}; accepted: {', '.join(SHAPES)}")
    # The baseline first and again last: how much its two runs differ is the run's noise.
    labels = ["baseline", *(s for s in SHAPES if s in chosen and s != "baseline"), "baseline_again"]
    if args.tables < 1 or args.changes_per_table < 5:
        parser.error("--tables must be at least 1, --changes-per-table at least 5")
    if args.changes_per_table // 5 * 2 + 2 > args.rows or args.rows < 2 * HOT_SHARE:
        parser.error(
            f"--rows too small: at least {2 * HOT_SHARE}, and the deletes of --changes-per-table "
            "would run out of odd keys"
        )

    if args.changes_per_table > args.rows // 2:
        print(
            "note: --rows is less than twice --changes-per-table: the baseline's updates change some keys "
            "more than once, as hot_keys does"
        )

    cycles: dict[str, Cycle] = {}
    cpus: dict[str, float] = {}
    tmp = Path(tempfile.mkdtemp(prefix="bench-merge-shapes-"))
    datadirs: list[Path] = []
    try:
        print(
            f"load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores"
        )
        prepared = []
        for label in labels:
            datadirs.append(tmp / label / "mariadb")
            shape = SHAPES[label.removesuffix("_again")]
            prepared.append(
                prepare(
                    label, datadirs[-1], tmp / label, shape, args.tables, args.rows, args.changes_per_table
                )
            )
        print()
        print("the timed runs, one after another:")
        for p in prepared:
            cycles[p.label], cpus[p.label] = timed(p, args.tables)
        for p in prepared:
            lines = checksum(p.config, p.config.parent)
            print(f"{p.label}: checksum (not timed): {lines[0]}; {len(lines) - 1} tables equal")
    finally:
        for datadir in datadirs:
            stop_server(datadir)
        shutil.rmtree(tmp, ignore_errors=True)

    seen = {label: measures(cycles[label], cpus[label]) for label in cycles}
    first, again = seen["baseline"], seen["baseline_again"]
    base = {k: (first[k] + again[k]) / 2 for k in first}
    print()
    print(
        "the baseline, first and last: "
        + ", ".join(
            f"{k} {first[k]:.1f} s and {again[k]:.1f} s ({again[k] / first[k]:.2f}x)"
            for k in ("span", "median", "later", "run-once")
        )
    )
    print(
        f"ratio of each shape's merges to the baseline's, the mean of its two runs ({args.tables} tables, "
        f"{args.changes_per_table:,} row changes each): the merges' span, the median table's merge, the "
        f"median of those after the first {AT_ONCE}; and of the run-once's wall and CPU seconds"
    )
    ratios = {label: {k: m[k] / base[k] for k in m} for label, m in seen.items()}
    merge_keys = ("span", "median", "later")
    for label, r in sorted(ratios.items(), key=lambda kv: -max(kv[1][k] for k in merge_keys)):
        m = seen[label]
        print(
            f"  {label:14s} "
            + ", ".join(f"{k} {r[k]:.2f}x ({m[k]:.1f} s)" for k in (*merge_keys, "run-once"))
            + f", CPU {r['CPU']:.2f}x ({m['CPU']:.1f} s)"
        )
    slow = [label for label, r in ratios.items() if max(r[k] for k in merge_keys) >= SLOW]
    print(f"shapes whose merges take {SLOW}x the baseline's or more: {', '.join(slow) if slow else 'none'}")


if __name__ == "__main__":
    main()
