"""Initial load against a dump of the same table, in the same run.

A private MariaDB gets a 5,000,000-row table (the ten mixed-type columns of
``binlog_decode.DDL``, filled on the server). Then, each best of ``--repeat``:

- ``mariadb-dump --single-transaction`` of the table to a file (the reference: a copy that is
  not yet a warehouse table);
- ``loader``'s initial load of the table into a new Iceberg warehouse table with each ``[load]
  engine`` of ``--engine`` (``arrow``: read, cast and written by this process, committed by
  Iceberg's API; ``spark``: Spark over JDBC), in key ranges, ``load.parallelism`` at a time; the
  Spark session is started beforehand.

Target: the load at least as fast as the dump (ratio >= 1.0).

Each side's CPU seconds are printed too (the server's and the copying program's), because on a
small machine the server and the copier share the cores: wall time cannot go below the CPU
seconds of both divided by the cores.

    .venv/bin/python bench/initial_load.py [--rows 5000000] [--parallelism 4] [--engine arrow,spark]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.binlog_decode import DDL, PASSWORD, start_server, stop_server  # noqa: E402

FILL = """INSERT INTO bench.t
SELECT k, k * 7919 % 2147483647, CONCAT('name-', LPAD(k, 12, '0')),
       IF(k % 11 = 0, NULL, (k % 1000000000) / 100), '2024-01-01 00:00:00' + INTERVAL k SECOND,
       IF(k % 13 = 0, NULL, k / 3), k % 256, IF(k % 7 = 0, NULL, REPEAT('note ', 1 + k % 11)),
       IF(k % 5 = 0, NULL, '2020-01-01' + INTERVAL k % 3000 DAY), k * 1000003
FROM (SELECT seq + {first} AS k FROM seq_1_to_{size}) s"""


def cpu_seconds(pid: int) -> float:
    """The user and system CPU seconds a process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """CPU seconds of this process's finished children (the dump program)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(action: Callable[[], object], *cpu_counters: Callable[[], float]) -> tuple[float, ...]:
    """Run ``action``: its wall seconds, then how many CPU seconds each counter grew meanwhile."""
    before = [counter() for counter in cpu_counters]
    t0 = time.perf_counter()
    action()
    seconds = time.perf_counter() - t0
    return (seconds, *(counter() - b for counter, b in zip(cpu_counters, before, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--engine", default="arrow,spark", help="[load] engine, or several comma-separated")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import pymysql

    from loader.core.config import load_config
    from loader.warehouse.initial_load import run_initial_load
    from loader.warehouse.session import build_session

    tmp = Path(tempfile.mkdtemp(prefix="bench-initial-load-"))
    datadir = tmp / "mariadb"
    port = start_server(datadir)
    try:
        conn = pymysql.connect(host="127.0.0.1", port=port, user="app", password=PASSWORD, autocommit=True)
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE bench")
            cur.execute(DDL)
            t0 = time.perf_counter()
            cur.execute("USE bench")
            for first in range(0, args.rows, 1_000_000):
                size = min(1_000_000, args.rows - first)
                cur.execute(FILL.format(first=first, size=size))
            cur.execute("ANALYZE TABLE bench.t")
        conn.close()
        print(f"source table: {args.rows:,} rows in {time.perf_counter() - t0:.1f} s")

        server_pid = int((datadir / "mariadbd.pid").read_text())
        server_cpu = functools.partial(cpu_seconds, server_pid)
        dump_file = tmp / "dump.sql"

        def dump_table() -> None:
            with open(dump_file, "wb") as out:
                subprocess.run(
                    [
                        shutil.which("mariadb-dump") or "mysqldump",
                        "--single-transaction",
                        "--quick",
                        "-h127.0.0.1",
                        f"-P{port}",
                        "-uapp",
                        f"-p{PASSWORD}",
                        "bench",
                        "t",
                    ],
                    stdout=out,
                    check=True,
                )

        # (seconds, server CPU, dump program CPU); Spark's JVM, a child too, is not started yet.
        dump_runs = [measured(dump_table, server_cpu, children_cpu_seconds) for _ in range(args.repeat)]
        dump, dump_server, dump_client = min(dump_runs)
        print(
            f"mariadb-dump --single-transaction: {dump:6.1f} s, {args.rows / dump:,.0f} rows/s, "
            f"{dump_file.stat().st_size / 1e6:,.0f} MB; CPU: server {dump_server:.1f} s + "
            f"mariadb-dump {dump_client:.1f} s"
        )

        os.environ["LOADER_BENCH_PASSWORD"] = PASSWORD
        cfg = load_config(
            None,
            env={
                "LOADER__SOURCE__PORT": str(port),
                "LOADER__SOURCE__USER": "app",
                "LOADER__SOURCE__PASSWORD_ENV": "LOADER_BENCH_PASSWORD",
                "LOADER__TABLES__INCLUDE": '["bench.t"]',
                "LOADER__STAGING__URI": str(tmp / "staging"),
                "LOADER__WAREHOUSE__DIR": str(tmp / "warehouse"),
                "LOADER__WAREHOUSE__DATABASE": "bench_wh",
                "LOADER__SPARK__CONF": '{ "spark.sql.shuffle.partitions" = "4", "spark.driver.memory" = "2g" }',
            },
        )
        cfg = dataclasses.replace(cfg, load=dataclasses.replace(cfg.load, parallelism=args.parallelism))
        spark = build_session(cfg, "bench-initial-load")
        spark.sparkContext.setLogLevel("ERROR")
        jvm = spark.sparkContext._jvm
        assert jvm is not None  # a session started here has its JVM
        jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
        jvm_cpu = functools.partial(cpu_seconds, jvm_pid)

        runs = itertools.count()

        def load_table(engine: str) -> None:
            # Each run a first load into a database of its own: a re-load would be Spark's copy.
            shutil.rmtree(tmp / "staging", ignore_errors=True)
            run = dataclasses.replace(
                cfg,
                load=dataclasses.replace(cfg.load, engine=engine),
                warehouse=dataclasses.replace(cfg.warehouse, database=f"bench_wh{next(runs)}"),
            )
            summary = run_initial_load(spark, run, progress=lambda _: None)
            assert summary.tables[0].rows == args.rows, summary

        def own_cpu() -> float:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            return usage.ru_utime + usage.ru_stime

        cores = os.cpu_count() or 1
        for engine in args.engine.split(","):
            # (seconds, server CPU, Spark's JVM CPU, this process's CPU)
            load_runs = [
                measured(functools.partial(load_table, engine), server_cpu, jvm_cpu, own_cpu)
                for _ in range(args.repeat)
            ]
            load, load_server, load_jvm, load_python = min(load_runs)
            copier = load_jvm + load_python
            print(
                f"loader initial load, engine {engine} ({args.parallelism} ranges): {load:6.1f} s, "
                f"{args.rows / load:,.0f} rows/s; CPU: server {load_server:.1f} s + JVM {load_jvm:.1f} s "
                f"+ Python {load_python:.1f} s"
            )
            print(f"ratio load (engine {engine}) rows/s / dump rows/s: {dump / load:.2f} (target >= 1.0)")
            print(
                f"CPU seconds, load / dump: {(load_server + copier) / (dump_server + dump_client):.2f}; "
                f"on {cores} cores the load cannot take less than {(load_server + copier) / cores:.1f} s"
            )
        spark.stop()
    finally:
        stop_server(datadir)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
