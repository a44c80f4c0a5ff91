"""The whole delta cycle on OLTP traffic's shape: ``--changes`` (1,000,000) single-row
autocommit changes over ``--tables`` (10) tables of ``--rows`` (200,000) rows each, then one
``loader run-once`` on the defaults (Iceberg), timed as a user runs it; and the initial load of
the same tables before it.

The tables ``bench.oltp0`` .. ``oltp9`` have 16 columns: a BIGINT key, three BIGINTs, two INTs,
three DOUBLEs, four VARCHAR(128)s and three DATEs, filled on the server from its Sequence engine.
The changes are in the shape of a published CDC benchmark (wirekite's MySQL to Firebolt, "10M CDC
ops in 53 s"): 20% inserts of new keys, 60% updates of rows that stay, 20% deletes, each its own
autocommit transaction (GTID, table map, rows event and XID in the binlog: five events a change
on MySQL), the tables in turn. They are made by a stored procedure on the server, the redo log
flushed once a second rather than at each commit, so that making a million takes minutes, not
hours. Every statement's affected rows are counted (an update is two change rows, its D and I).

Timed with the wall clock, each in a process of its own (``bench/delta_cycle.py``'s runner):

- ``loader initial-load``: the tables' rows copied into the warehouse (rows/s, and per core),
  with each ``[load] engine`` of ``--load-engine`` (default both, Spark's then Arrow's, each into
  a warehouse of its own; the cycle runs on the last one's), and the ratio of the two;
- ``loader run-once``: plan, extract, materialise, split as ``bench/delta_cycle.py`` splits it
  (start, plan, extract, Spark start and bookkeeping, each table's merge).

After the run ``loader checksum`` (not timed) must find every table equal to the source.

Beside the initial load, a yardstick in a process of its own (``reference-copy``): the same
tables copied into Iceberg without a JVM, each table's rows as text from MariaDB's own client
(``mariadb --batch --quick``), parsed into Arrow by pyarrow and appended by pyiceberg to a table
of its own SQLite catalog, two tables at a time. It carries only this benchmark's column types
and takes the client's ``NULL`` for NULL (no value here is that text): what a copy engine
without Spark could reach, not a loader. Printed as the ratio of the two.

Printed: ops/s of the cycle (a change is an op), ops/s per core, and the ratio to OLake's
published figure for MySQL CDC into Iceberg (940 changes/s per vCPU); the targets of the issue
"A million OLTP changes in one minute on two cores": the cycle at most 60 s, the merges at most
35 s together (from the first one's start to the last one's end: tables merged at once overlap),
the initial load at least 100,000 rows/s per core.

    .venv/bin/python bench/oltp_cycle.py [--tables 10] [--rows 200000] [--changes 1000000]
        [--merge-tables-at-once N] [--load-engine spark,arrow]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.binlog_decode import start_server, stop_server  # noqa: E402
from bench.delta_cycle import (  # noqa: E402
    checksum,
    connect,
    loader,
    redo_flushed_once_a_second,
    timed_cycle,
    write_config,
)

OLAKE_PER_VCPU = 940.0  # OLake's published MySQL CDC into Iceberg, changes/s per vCPU
CYCLE_TARGET = 60.0  # seconds
MERGE_TARGET = 35.0  # seconds, the merges together
LOAD_TARGET = 100_000.0  # rows/s per core
# Of every five changes to a table: one insert, three updates, one delete.
INSERT, DELETE = 0, 1

# The 16 columns: name, type, value for key k.
COLUMNS = (
    ("id", "BIGINT NOT NULL", "k"),
    ("b1", "BIGINT NOT NULL", "k * 2654435761"),
    ("b2", "BIGINT NULL", "IF(k % 13 = 0, NULL, k * 40503 - 7)"),
    ("b3", "BIGINT NOT NULL", "k DIV 7"),
    ("i1", "INT NOT NULL", "(k * 7919) % 2147483647 - 1073741823"),
    ("i2", "INT NULL", "IF(k % 11 = 0, NULL, k % 1000)"),
    ("d1", "DOUBLE NOT NULL", "SQRT(k) * 1234.5678"),
    ("d2", "DOUBLE NULL", "IF(k % 17 = 0, NULL, k / 3)"),
    ("d3", "DOUBLE NOT NULL", "k * 0.001"),
    ("v1", "VARCHAR(128) NOT NULL", "CONCAT('name-', LPAD(k, 12, '0'))"),
    ("v2", "VARCHAR(128) NULL", "IF(k % 7 = 0, NULL, CONCAT('city-', k % 977))"),
    ("v3", "VARCHAR(128) NOT NULL", "REPEAT(CHAR(97 + k % 26), 1 + k % 40)"),
    ("v4", "VARCHAR(128) NOT NULL", "MD5(k)"),
    ("t1", "DATE NOT NULL", "DATE('2020-01-01') + INTERVAL k % 3650 DAY"),
    ("t2", "DATE NULL", "IF(k % 19 = 0, NULL, DATE('2000-01-01') + INTERVAL k % 9000 DAY)"),
    ("t3", "DATE NOT NULL", "DATE('2024-06-30') - INTERVAL k % 500 DAY"),
)
# An update's SET clause (r: the change's number in its table).
SETS = "b1 = b1 + 1, i1 = i1 + 1, d1 = d1 + 0.5, v1 = CONCAT('upd-', id, '-', r), t1 = t1 + INTERVAL 1 DAY"


def fill(
    port: int,
    tables: int,
    rows: int,
    columns: Sequence[tuple[str, str, str]] = COLUMNS,
    primary_key: str = "PRIMARY KEY (id)",
    replace: bool = False,
) -> None:
    """``bench.oltp0`` .. with keys 1 .. rows each, made on the server: ``columns`` (name, type,
    value for key k), ``primary_key`` (its clause); ``replace``: a database ``bench`` there
    before is dropped first."""
    ddl = ", ".join(f"{name} {sqltype}" for name, sqltype, _ in columns)
    values = ", ".join(value for _, _, value in columns)
    conn = connect(port)
    try:
        with conn.cursor() as cur:
            if replace:
                cur.execute("DROP DATABASE IF EXISTS bench")
            cur.execute("CREATE DATABASE bench")
            cur.execute("USE bench")
            for t in range(tables):
                cur.execute(
                    f"CREATE TABLE oltp{t} ({ddl}, {primary_key}) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
                )
                for first in range(0, rows, 1_000_000):
                    size = min(1_000_000, rows - first)
                    cur.execute(
                        f"INSERT INTO oltp{t} SELECT {values} FROM "
                        f"(SELECT CAST(seq + {first} AS SIGNED) AS k FROM seq_1_to_{size}) s"
                    )
    finally:
        conn.close()


def make_changes(port: int, tables: int, rows: int, changes: int) -> dict[str, int]:
    """``changes`` single-row autocommit changes, the tables in turn: of every five to a table,
    an insert of a new key (above ``rows``), three updates of even keys (never deleted) and a
    delete of the next odd key. Returns the row changes made per kind (affected rows)."""
    values = ", ".join(value for _, _, value in COLUMNS)
    branches = []
    for t in range(tables):
        branches.append(
            f"{'IF' if t == 0 else 'ELSEIF'} i % {tables} = {t} THEN "
            f"IF r % 5 = {INSERT} THEN INSERT INTO bench.oltp{t} SELECT {values} FROM "
            f"(SELECT CAST({rows} + r DIV 5 + 1 AS SIGNED) AS k) s; "
            f"ELSEIF r % 5 = {DELETE} THEN DELETE FROM bench.oltp{t} WHERE id = 2 * (r DIV 5) + 1; "
            f"ELSE UPDATE bench.oltp{t} SET {SETS} WHERE id = 2 * ((r * 7919) % ({rows} DIV 2)) + 2; "
            "END IF; SET done = done + ROW_COUNT();"
        )
    conn = connect(port)
    try:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL max_binlog_size = 1073741824")
            cur.execute(
                "CREATE PROCEDURE bench.oltp_work(n INT, OUT done BIGINT) BEGIN DECLARE i INT DEFAULT 0; "
                f"DECLARE r INT; SET done = 0; WHILE i < n DO SET r = i DIV {tables}; {' '.join(branches)} "
                "END IF; SET i = i + 1; END WHILE; END"
            )
            with redo_flushed_once_a_second(cur):
                cur.execute(f"CALL bench.oltp_work({changes}, @done)")
                cur.execute("SELECT @done")
                (done,) = cur.fetchone()
    finally:
        conn.close()
    # Per table, r runs over 0 .. its changes - 1: a fifth insert, a fifth delete, the rest update.
    per_table = [changes // tables + (t < changes % tables) for t in range(tables)]
    made = {
        "insert": sum((n + 4) // 5 for n in per_table),
        "delete": sum((n + 3) // 5 for n in per_table),
    }
    made["update"] = changes - made["insert"] - made["delete"]
    assert int(done) == changes, f"{done} rows changed by {changes} statements: a key was not where expected"
    return made


# Arrow's type of each column type of COLUMNS (the yardstick's only types).
ARROW_TYPES = {
    "BIGINT": "int64",
    "INT": "int32",
    "DOUBLE": "float64",
    "VARCHAR(128)": "string",
    "DATE": "date32",
}


def reference_copy(port: int, tables: int, folder: Path) -> int:
    """The yardstick: ``bench.oltp0`` .. copied by MariaDB's client, pyarrow and pyiceberg into
    an Iceberg catalog in ``folder``, two tables at a time; the rows copied."""
    import concurrent.futures

    import pyarrow as pa
    import pyarrow.csv as pacsv
    from pyiceberg.catalog.sql import SqlCatalog

    from bench.binlog_decode import PASSWORD

    client = shutil.which("mariadb") or shutil.which("mysql")
    assert client, "the reference copy needs MariaDB's client (mariadb-client)"
    schema = pa.schema(
        [pa.field(n, getattr(pa, ARROW_TYPES[t.split()[0]])(), "NOT NULL" not in t) for n, t, _ in COLUMNS]
    )
    folder.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("reference", uri=f"sqlite:///{folder}/catalog.db", warehouse=f"file://{folder}")
    catalog.create_namespace("bench")

    command = [client, "-h127.0.0.1", f"-P{port}", "-uapp", "--batch", "--skip-column-names", "--quick"]

    def copy(t: int) -> int:
        text = subprocess.run(
            [*command, "-e", f"SELECT * FROM bench.oltp{t}"],
            capture_output=True,
            check=True,
            env={**os.environ, "MYSQL_PWD": PASSWORD},
        ).stdout
        rows = pacsv.read_csv(
            pa.BufferReader(text),
            read_options=pacsv.ReadOptions(column_names=schema.names),
            parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
            convert_options=pacsv.ConvertOptions(
                column_types=schema, null_values=["NULL"], strings_can_be_null=True
            ),
        ).cast(schema)
        catalog.create_table(f"bench.oltp{t}", schema=schema).append(rows)
        return int(rows.num_rows)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return sum(pool.map(copy, range(tables)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--rows", type=int, default=200_000, help="rows of each table before the changes")
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument(
        "--merge-tables-at-once", type=int, help="[spark] merge_tables_at_once (default: the loader's)"
    )
    parser.add_argument(
        "--load-engine",
        default="spark,arrow",
        help="[load] engine of the initial load, or several comma-separated, each loading its own "
        "warehouse (the cycle runs on the last one's); default: spark,arrow",
    )
    parser.add_argument("--reference-copy", metavar="FOLDER", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reference_copy:  # the yardstick, in a process of its own
        print(reference_copy(args.port, args.tables, Path(args.reference_copy)))
        return
    if args.tables < 1 or args.rows < 2 or args.changes < 1:
        parser.error("--tables and --changes must be at least 1, --rows at least 2")
    if args.changes // args.tables // 5 * 2 + 2 > args.rows:
        parser.error("--rows too small for --changes: the deletes would run out of odd keys")
    cores = os.cpu_count() or 1

    tmp = Path(tempfile.mkdtemp(prefix="bench-oltp-cycle-"))
    datadir = tmp / "mariadb"
    try:
        port = start_server(datadir)
        t0 = time.perf_counter()
        fill(port, args.tables, args.rows)
        total_rows = args.tables * args.rows
        print(
            f"source: {args.tables} tables bench.oltp* of {len(COLUMNS)} columns, {args.rows:,} rows each, "
            f"{time.perf_counter() - t0:.1f} s"
        )
        loads = {}
        for engine in args.load_engine.split(","):  # the last one's warehouse goes on
            config = write_config(
                tmp / f"iceberg-{engine}",
                "iceberg",
                port,
                include="bench.oltp*",
                merge_tables_at_once=args.merge_tables_at_once,
                load_engine=engine,
            )
            done = loader("initial-load", "--output", "json", config=config, cwd=config.parent).check()
            copied = sum(int(t["rows"]) for t in done.json()["tables"])
            assert copied == total_rows, f"the initial load copied {copied:,} rows, not {total_rows:,}"
            loads[engine] = done
            print(
                f"initial load ([load] engine = {engine}): {copied:,} rows in {done.seconds:.1f} s wall = "
                f"{copied / done.seconds:,.0f} rows/s, {copied / done.seconds / cores:,.0f} per core"
            )
        if "spark" in loads and "arrow" in loads:
            print(
                f"ratio engine arrow / engine spark (rows/s): {loads['spark'].seconds / loads['arrow'].seconds:.2f}x"
            )
        load_rate = total_rows / done.seconds / cores
        t0 = time.perf_counter()
        child = [
            "--reference-copy",
            str(tmp / "reference"),
            "--port",
            str(port),
            "--tables",
            str(args.tables),
        ]
        yardstick = subprocess.run([sys.executable, __file__, *child], capture_output=True, text=True)
        assert yardstick.returncode == 0, f"the reference copy failed: {yardstick.stderr[-3000:]}"
        reference_seconds = time.perf_counter() - t0
        referenced = int(yardstick.stdout.split()[-1])
        assert referenced == total_rows, f"the reference copy copied {referenced:,} rows, not {total_rows:,}"
        print(
            f"reference copy without a JVM (MariaDB's client, pyarrow, pyiceberg): {reference_seconds:.1f} s = "
            f"{referenced / reference_seconds / cores:,.0f} rows/s per core; ratio initial load / reference (rows/s): "
            f"{reference_seconds / done.seconds:.2f}x"
        )

        t0 = time.perf_counter()
        made = make_changes(port, args.tables, args.rows, args.changes)
        print(
            f"changes (not timed): {args.changes:,} single-row transactions = {made['insert']:,} inserts + "
            f"{made['update']:,} updates + {made['delete']:,} deletes, {time.perf_counter() - t0:.1f} s"
        )
        load = os.getloadavg()
        print(
            f"load average before the timed run: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {cores} cores"
        )
        cycle = timed_cycle("iceberg", config, config.parent)
        expected = made["insert"] + made["delete"] + 2 * made["update"]
        assert cycle.changes == expected, f"{cycle.changes:,} change rows extracted, not {expected:,}"
        for line in checksum(config, config.parent):
            print(f"checksum (not timed): {line}")

        ops = args.changes / cycle.seconds
        rate = cycle.changes / cycle.extract if cycle.extract else 0.0
        print()
        print(f"one delta cycle of {args.changes:,} single-row changes (loader run-once, wall clock):")
        print(
            f"  {cycle.seconds:.1f} s = start {cycle.start:.2f} + plan {cycle.plan:.2f} + extract {cycle.extract:.1f} "
            f"({cycle.changes:,} change rows, {rate:,.0f} rows/s) + materialise {cycle.materialise:.1f} "
            f"(Spark start and bookkeeping {cycle.spark_start:.1f} + merges {cycle.merge_span:.1f}; their own "
            f"seconds added {cycle.merge:.1f})"
        )
        for t in sorted(cycle.tables, key=lambda t: str(t["table"])):
            print(
                f"  merge {t['table']}: {float(t['seconds']):.1f} s (+{t['inserted']:,} ~{t['updated']:,} "
                f"-{t['deleted']:,})"
            )
        print(f"  {ops:,.0f} ops/s, {ops / cores:,.0f} per core")
        print(
            f"ratio ops/s per core / OLake's per vCPU ({OLAKE_PER_VCPU:.0f}): {ops / cores / OLAKE_PER_VCPU:.2f}x"
        )
        for name, value, target, better in (
            ("cycle seconds", cycle.seconds, CYCLE_TARGET, "<="),
            ("merges seconds", cycle.merge_span, MERGE_TARGET, "<="),
            (f"initial load (engine {engine}) rows/s per core", load_rate, LOAD_TARGET, ">="),
        ):
            met = value <= target if better == "<=" else value >= target
            print(
                f"ratio {name} / target: {value / target:.2f} ({'met' if met else 'MISSED'}, "
                f"target {better} {target:,.0f})"
            )
    finally:
        stop_server(datadir)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
