"""One delta cycle end to end, both warehouse table formats: ``loader run-once`` (plan, extract,
materialise) of ``--changes`` row changes (100,000) into a ``--rows``-row table (1,000,000).

A private MariaDB (binlog on) gets the table ``bench.t`` (BIGINT key and four mixed-type
columns), filled on the server from its Sequence engine. For each format in ``--formats``, its
own config file (source name, staging, warehouse folder and database; ``[spark] master =
"local[2]"``) and its own ``loader initial-load`` (not timed; its time is printed):

- ``hive``: partitioned Parquet tables in Spark's Hive catalog (the touched partitions are
  rewritten and swapped in);
- ``iceberg``: Iceberg tables, ``MERGE INTO`` merge-on-read, one snapshot per interval;
- ``iceberg_c2``: the same with ``-XX:TieredStopAtLevel=4`` in the driver's Java options: the
  JVM's default compilers, its optimising one (C2) too, where the loader would choose the quick
  one only (C1) for a job of this size (``[spark] quick_compiler_rows``; each cycle's report line
  says which compilers its job ran with);
- ``iceberg_g1``: the same with ``-XX:+UseG1GC``, the JVM's default garbage collector, in place
  of the parallel one the loader chooses for a local master.

Then the changes, once, after every load (so each format's next run reads the same binlog
interval): ``--changes`` row changes, about 50% updates of key ranges spread over the table, 30%
inserts of new keys, 20% deletes of key ranges, in transactions of about 1,000 row changes
(counted from the server's affected-row counts, so the number is exact). Then per format, timed
with the wall clock: ``loader run-once --config F`` as a user runs it (a process of its own, so
its Python start, the extraction and the materialisation's ``spark-submit`` with the JVM's start
all count). Where the time goes comes from the command's own JSON summary (its run seconds,
extraction seconds, per-table merge seconds) and from when its ``spark-submit`` child appeared:

- ``start``: the command's Python start, config and the source's lease before the run, and its
  exit after it (the command's wall time less the run's own seconds);
- ``plan``: from the run's start to the extraction's (the server's position, the ledger);
- ``extract``: the binlog read into CSV staging (change rows/s: an update is two, its D and I);
- ``materialise``: from ``spark-submit``'s start to the command's end: the per-table merges
  (``merge``, each table's own seconds) and the rest (``Spark start and bookkeeping``: the JVM,
  the Spark session and catalog, the ledger's checks and updates, the session's stop).

After each run ``loader checksum --config F`` (not timed) must find every table equal to the
source, so a wrong merge cannot pass as fast.

Target: each format's cycle under 30 s on this machine (ratio to the target <= 1.0); the
iceberg/hive ratio is printed too.

    .venv/bin/python bench/delta_cycle.py [--rows 1000000] [--changes 100000] [--formats hive,iceberg]

The warehouse modes beside the mirror on the same changes (target: each mode's cycle <= 1.5 times
its format's mirror's):

    .venv/bin/python bench/delta_cycle.py --formats iceberg,iceberg_soft_delete,iceberg_history,hive,hive_soft_delete,hive_history
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.binlog_decode import PASSWORD, start_server, stop_server  # noqa: E402

BIN = Path(sys.executable).parent  # the virtualenv's bin: loader, spark-submit
PASSWORD_ENV = "LOADER_BENCH_PASSWORD"
TARGET_SECONDS = 30.0
# A format's table format, the driver JVM's extra options and the table's warehouse mode:
# iceberg_c2 is Iceberg with the JVM's optimising compiler kept whatever the job's size (README, "A
# job's start"); iceberg_g1 with the JVM's default collector (G1) in place of the parallel one the
# loader sets for a local master; <format>_soft_delete and <format>_history the table in that mode
# (``[tables] mode``), whose cycle is compared with the mirror's of its format.
VARIANTS = {
    "hive": ("hive", "", "mirror"),
    "iceberg": ("iceberg", "", "mirror"),
    "iceberg_c2": ("iceberg", "-XX:TieredStopAtLevel=4", "mirror"),
    "iceberg_g1": ("iceberg", "-XX:+UseG1GC", "mirror"),
    "iceberg_soft_delete": ("iceberg", "", "soft_delete"),
    "iceberg_history": ("iceberg", "", "history"),
    "hive_soft_delete": ("hive", "", "soft_delete"),
    "hive_history": ("hive", "", "history"),
}
FORMATS = tuple(VARIANTS)
DEFAULT_FORMATS = ("hive", "iceberg", "iceberg_c2", "iceberg_g1")
MODE_TARGET = 1.5  # a soft_delete or history cycle's time over its format's mirror's
TX_ROWS = 1000  # row changes per transaction
SHARES = {"update": 0.5, "insert": 0.3, "delete": 0.2}

DDL = """CREATE TABLE bench.t (
    id BIGINT NOT NULL PRIMARY KEY,
    a INT NOT NULL,
    b VARCHAR(40) NOT NULL,
    c DECIMAL(12,2) NULL,
    d DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""

# Rows ``first + 1 .. first + size`` from the Sequence engine's table seq_1_to_<size>.
ROWS = """SELECT k, k * 7919 % 2147483647, CONCAT('row-', LPAD(k, 12, '0')),
       IF(k % 11 = 0, NULL, (k % 100000000) / 100),
       '2024-01-01 00:00:00' + INTERVAL k SECOND + INTERVAL k % 1000000 MICROSECOND
FROM (SELECT seq + {first} AS k FROM seq_1_to_{size}) s"""


# --- the private server (bench/binlog_decode.py starts and stops it) --------------------------


def connect(port: int, database: str | None = None) -> Any:
    """A connection as ``app`` (all privileges); the Sequence engine's ``seq_1_to_N`` tables need a
    current database."""
    import pymysql

    return pymysql.connect(
        host="127.0.0.1", port=port, user="app", password=PASSWORD, database=database, autocommit=True
    )


@contextlib.contextmanager
def redo_flushed_once_a_second(cur: Any) -> Iterator[None]:
    """InnoDB's redo log flushed once a second rather than at each commit while the block makes
    a workload (not timed: the server's work, not the loader's), the server's setting after it."""
    cur.execute("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit")
    (flush,) = cur.fetchone()
    cur.execute("SET GLOBAL innodb_flush_log_at_trx_commit = 2")
    try:
        yield
    finally:
        cur.execute(f"SET GLOBAL innodb_flush_log_at_trx_commit = {flush}")


# --- the workload ------------------------------------------------------------------------------


def fill(port: int, rows: int) -> None:
    """``bench.t`` with ids 1 .. rows, made on the server a million rows per statement."""
    conn = connect(port)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE bench")
            cur.execute(DDL)
            cur.execute("USE bench")
            for first in range(0, rows, 1_000_000):
                size = min(1_000_000, rows - first)
                cur.execute(f"INSERT INTO bench.t {ROWS.format(first=first, size=size)}")
            cur.execute("ANALYZE TABLE bench.t")
    finally:
        conn.close()


def make_changes(port: int, rows: int, changes: int, first_new_key: int | None = None) -> dict[str, int]:
    """Exactly ``changes`` row changes in the binlog, in transactions of about ``TX_ROWS``: each
    transaction updates a key range at a random place in ``1 .. rows``, inserts new keys above
    every key so far and deletes another key range. A range that meets keys deleted before
    changes fewer rows (the server's affected-row count says how many); the next transactions
    make up for it. New keys start at ``first_new_key`` (``rows + 1``; above the keys an earlier
    call inserted, for another round of changes). Returns the row changes made per kind, and the
    transactions."""
    updates = round(changes * SHARES["update"])
    inserts = round(changes * SHARES["insert"])
    left = {"update": updates, "insert": inserts, "delete": changes - updates - inserts}
    per_tx = {kind: max(1, round(TX_ROWS * share)) for kind, share in SHARES.items()}
    made = dict.fromkeys(left, 0) | {"transactions": 0}
    rnd = random.Random(42)
    next_key = first_new_key or rows + 1
    conn = connect(port, "bench")
    try:
        with conn.cursor() as cur:
            while any(left.values()):
                if made["transactions"] > 10 * (changes // TX_ROWS + 1) + 100:
                    raise RuntimeError(f"the workload makes no progress: {left} row changes still to make")
                tx = made["transactions"] + 1
                cur.execute("BEGIN")
                n = min(left["update"], per_tx["update"])
                if n:
                    lo = rnd.randint(1, max(1, rows - n + 1))
                    done = cur.execute(
                        f"UPDATE bench.t SET a = a + 1, b = CONCAT('upd-', id, '-', {tx}), c = c + 1.25, "
                        f"d = d + INTERVAL 1 SECOND WHERE id BETWEEN {lo} AND {lo + n - 1}"
                    )
                    left["update"] -= done
                    made["update"] += done
                n = min(left["insert"], per_tx["insert"])
                if n:
                    done = cur.execute(f"INSERT INTO bench.t {ROWS.format(first=next_key - 1, size=n)}")
                    next_key += n
                    left["insert"] -= done
                    made["insert"] += done
                n = min(left["delete"], per_tx["delete"])
                if n:
                    lo = rnd.randint(1, max(1, rows - n + 1))
                    done = cur.execute(f"DELETE FROM bench.t WHERE id BETWEEN {lo} AND {lo + n - 1}")
                    left["delete"] -= done
                    made["delete"] += done
                cur.execute("COMMIT")
                made["transactions"] += 1
    finally:
        conn.close()
    return made


# --- the loader, as a user runs it -------------------------------------------------------------


def write_config(
    folder: Path,
    fmt: str,
    port: int,
    include: str = "bench.t",
    *,
    spark_conf: Sequence[str] = (),
    merge_tables_at_once: int | None = None,
    load_engine: str | None = None,
) -> Path:
    """``folder/loader.toml``: the source as the ``loader`` user, the tables ``include``
    (``bench.t``), staging and warehouse under ``folder``, the warehouse database
    ``bench_<fmt>_wh`` in format ``fmt``; ``spark_conf`` (``KEY=VALUE``) more Spark settings,
    and ``[spark] merge_tables_at_once`` and ``[load] engine`` when given."""
    folder.mkdir(parents=True, exist_ok=True)
    table_format, java_options, mode = VARIANTS[fmt]
    java = f', "spark.driver.extraJavaOptions" = "{java_options}"' if java_options else ""
    java += "".join(f', "{k}" = "{v}"' for k, _, v in (c.partition("=") for c in spark_conf))
    at_once = f"merge_tables_at_once = {merge_tables_at_once}\n" if merge_tables_at_once is not None else ""
    engine = f'[load]\nengine = "{load_engine}"\n' if load_engine else ""
    path = folder / "loader.toml"
    path.write_text(
        f"""[source]
name = "bench_{fmt}"
host = "127.0.0.1"
port = {port}
user = "loader"
password_env = "{PASSWORD_ENV}"
[tables]
include = ["{include}"]
mode = "{mode}"
[staging]
uri = "{folder / "staging"}"
[warehouse]
database = "bench_{fmt}_wh"
format = "{table_format}"
dir = "{folder / "warehouse"}"
[spark]
master = "local[2]"
conf = {{ "spark.sql.shuffle.partitions" = "8", "spark.driver.memory" = "4g"{java} }}
{at_once}{engine}""",
        encoding="utf-8",
    )
    return path


def loader_env() -> dict[str, str]:
    """This environment without any loader settings of the caller's, with the source password,
    the virtualenv's bin first on PATH (``spark-submit``) and Spark on loopback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOADER_CONFIG", "LOADER__"))}
    env.update(
        {
            PASSWORD_ENV: PASSWORD,
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    return env


@dataclass
class Finished:
    """A ``loader`` command that ran: its output, wall seconds, and when (seconds after its
    start) its first ``spark-submit`` child appeared (None: it started none)."""

    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    spark_at: float | None = None

    def json(self) -> dict[str, Any]:
        """The command's ``--output json`` summary (its last JSON line)."""
        line = next(x for x in reversed(self.stdout.splitlines()) if x.startswith("{"))
        return dict(json.loads(line))

    def check(self) -> Finished:
        if self.returncode != 0:
            raise RuntimeError(
                f"{' '.join(self.command[1:])} exited {self.returncode}\n{self.stdout[-3000:]}\n{self.stderr[-3000:]}"
            )
        return self


def spark_child(pid: int) -> bool:
    """Whether the process ``pid`` has a child running spark-submit (Linux ``/proc``)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                if b"spark-submit" in Path(f"/proc/{child}/cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


def loader(*args: str, config: Path, cwd: Path) -> Finished:
    """``loader ARGS --config CONFIG`` in its own process, timed with the wall clock; watches for
    its ``spark-submit`` child every 20 ms."""
    command = [str(BIN / "loader"), *args, "--config", str(config)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=loader_env(), cwd=cwd
    )
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=lambda: out.extend(proc.stdout or ()), daemon=True),
        threading.Thread(target=lambda: err.extend(proc.stderr or ()), daemon=True),
    ]
    for r in readers:
        r.start()
    spark_at = None
    while proc.poll() is None:
        if spark_at is None and spark_child(proc.pid):
            spark_at = time.perf_counter() - t0
        time.sleep(0.02)
    seconds = time.perf_counter() - t0
    for r in readers:
        r.join()
    return Finished(command, proc.returncode, "".join(out), "".join(err), seconds, spark_at)


# --- one format ----------------------------------------------------------------------------------


@dataclass
class Cycle:
    """One format's timed ``run-once``, split."""

    fmt: str
    seconds: float  # wall clock of the whole command
    start: float  # the process before the run: Python, imports, config, the source's lease; its exit
    plan: float
    extract: float
    materialise: float  # spark-submit's start to the command's end
    merge: float  # of which the per-table merges (their own seconds, added)
    merge_span: float  # from the first merge's start to the last one's end (merges at once overlap)
    changes: int  # change rows extracted (an update is two)
    transactions: int
    tables: list[dict[str, Any]]
    spark_seen: bool  # the spark-submit child was seen (otherwise plan/materialise are estimates)
    quick_compiler: bool  # the job's driver ran with the JVM's quick compiler only (its ready line)

    @property
    def spark_start(self) -> float:
        """The materialisation's time outside the merges: spark-submit, the JVM, the Spark session,
        the catalog, the ledger's checks and updates, the session's stop."""
        return self.materialise - self.merge_span


def timed_cycle(fmt: str, config: Path, cwd: Path) -> Cycle:
    """``loader run-once`` (timed), split from its JSON summary and its spark-submit's start."""
    done = loader("run-once", "--output", "json", config=config, cwd=cwd).check()
    run = done.json()
    extracted = run.get("extracted") or {}
    extract = float(extracted.get("seconds", 0.0))
    # The run's own clock starts after the Python start and stops just before it prints.
    start = max(0.0, done.seconds - float(run["seconds"]))
    merge = sum(float(t["seconds"]) for t in run["materialized"])
    spans = [(float(t["started"]), float(t["started"]) + float(t["seconds"])) for t in run["materialized"]]
    merge_span = (
        max(e for _, e in spans) - min(b for b, _ in spans) if spans and all(b for b, _ in spans) else merge
    )
    if done.spark_at is not None:
        plan = max(0.0, done.spark_at - start - extract)
        materialise = done.seconds - done.spark_at
    else:  # the job was too short to be seen: charge the run's rest to the materialisation
        plan = 0.0
        materialise = max(0.0, float(run["seconds"]) - extract)
    return Cycle(
        fmt,
        done.seconds,
        start,
        plan,
        extract,
        materialise,
        merge,
        merge_span,
        int(extracted.get("changes", 0)),
        int(extracted.get("transactions", 0)),
        list(run["materialized"]),
        done.spark_at is not None,
        "(the JVM's quick compiler only)" in done.stderr,
    )


def checksum(config: Path, cwd: Path) -> list[str]:
    """``loader checksum``'s first line and table lines; every table line must end with ``, equal``."""
    done = loader("checksum", config=config, cwd=cwd)
    out = done.stdout.splitlines()
    lines = [x for x in out if " → " in x and not x.startswith(" ")]
    bad = [x for x in lines if not x.rstrip().endswith(", equal")]
    if done.returncode != 0 or not lines or bad:
        raise AssertionError(
            f"loader checksum --config {config}: exit {done.returncode}, the warehouse differs from the "
            f"source\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return [f"{out[0]} ({done.seconds:.1f} s)", *lines]


def report(cycles: list[Cycle], rows: int, changes: int) -> None:
    print()
    print(
        f"one delta cycle, {changes:,} row changes into a {rows:,}-row table (loader run-once, wall clock):"
    )
    for c in cycles:
        rate = c.changes / c.extract if c.extract else 0.0
        tables = ", ".join(
            f"{t['table']}: +{t['inserted']:,} ~{t['updated']:,} -{t['deleted']:,} in {t['partitions']} partitions"
            for t in c.tables
        )
        note = "" if c.spark_seen else " (spark-submit not seen: plan counted in materialise)"
        note += "; the quick compiler only" if c.quick_compiler else "; compilers C1 and C2"
        print(
            f"{c.fmt:10s} {c.seconds:6.1f} s = start {c.start:.2f} + plan {c.plan:.2f} + extract {c.extract:.2f} "
            f"({c.changes:,} change rows in {c.transactions:,} transactions, {rate:,.0f} rows/s) + materialise "
            f"{c.materialise:.1f} (Spark start and bookkeeping {c.spark_start:.1f} + merge {c.merge_span:.1f}){note}"
        )
        print(f"         {tables}")
    for c in cycles:
        verdict = "met" if c.seconds <= TARGET_SECONDS else "MISSED"
        print(
            f"ratio {c.fmt} / {TARGET_SECONDS:.0f} s target: {c.seconds / TARGET_SECONDS:.2f} ({verdict}, target <= 1.0)"
        )
    by_fmt = {c.fmt: c for c in cycles}
    if "hive" in by_fmt and "iceberg" in by_fmt:
        print(f"ratio iceberg / hive: {by_fmt['iceberg'].seconds / by_fmt['hive'].seconds:.2f}")
    for c in cycles:
        table_format, _, mode = VARIANTS[c.fmt]
        mirror = by_fmt.get(table_format)
        if mode != "mirror" and mirror is not None:
            ratio = c.seconds / mirror.seconds
            verdict = "met" if ratio <= MODE_TARGET else "MISSED"
            print(
                f"ratio {c.fmt} / {table_format} (mirror): {ratio:.2f} cycle, "
                f"{c.merge / mirror.merge:.2f} merge ({verdict}, target <= {MODE_TARGET})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument(
        "--formats", default=",".join(DEFAULT_FORMATS), help="comma-separated: " + ", ".join(FORMATS)
    )
    args = parser.parse_args()
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown or not formats:
        parser.error(f"--formats: {', '.join(unknown) or 'none given'}; accepted: {', '.join(FORMATS)}")
    if args.rows < 1 or args.changes < 1:
        parser.error("--rows and --changes must be at least 1")

    tmp = Path(tempfile.mkdtemp(prefix="bench-delta-cycle-"))
    datadir = tmp / "mariadb"
    try:
        port = start_server(datadir)
        t0 = time.perf_counter()
        fill(port, args.rows)
        print(f"source table bench.t: {args.rows:,} rows in {time.perf_counter() - t0:.1f} s")

        configs = {fmt: write_config(tmp / fmt, fmt, port) for fmt in formats}
        for fmt, config in configs.items():
            done = loader("initial-load", "--output", "json", config=config, cwd=config.parent).check()
            loaded = done.json()
            copied = sum(int(t["rows"]) for t in loaded["tables"])
            assert copied == args.rows, f"{fmt}: the initial load copied {copied:,} rows, not {args.rows:,}"
            print(
                f"{fmt:10s} initial load (not timed): {copied:,} rows, {done.seconds:.1f} s wall "
                f"({float(loaded['seconds']):.1f} s in the command), P0 {loaded['p0']}"
            )

        t0 = time.perf_counter()
        made = make_changes(port, args.rows, args.changes)
        total = made["update"] + made["insert"] + made["delete"]
        assert total == args.changes, made
        print(
            f"changes (not timed): {total:,} row changes = {made['update']:,} updates + {made['insert']:,} "
            f"inserts + {made['delete']:,} deletes in {made['transactions']:,} transactions, "
            f"{time.perf_counter() - t0:.1f} s"
        )

        load = os.getloadavg()
        print(
            f"load average before the timed runs: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores"
        )
        cycles = []
        for fmt, config in configs.items():
            cycle = timed_cycle(fmt, config, config.parent)
            expected = made["insert"] + made["delete"] + 2 * made["update"]
            assert cycle.changes == expected, (
                f"{fmt}: {cycle.changes:,} change rows extracted, not {expected:,}"
            )
            cycles.append(cycle)
            print(f"{fmt:10s} run-once: {cycle.seconds:.1f} s")
            for line in checksum(config, config.parent):
                print(f"{fmt:10s} checksum (not timed): {line}")
        report(cycles, args.rows, args.changes)
    finally:
        stop_server(datadir)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
