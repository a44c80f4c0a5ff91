"""Initial load against a dump of the same table, in the same run.

A private MariaDB gets a 5,000,000-row table (the ten mixed-type columns of
``binlog_decode.DDL``, filled on the server). Then, each best of ``--repeat``:

- ``mariadb-dump --single-transaction`` of the table to a file (the reference: a copy that is
  not yet a warehouse table);
- ``loader``'s initial load of the table into a partitioned warehouse table (Spark over JDBC
  in key ranges, ``load.parallelism`` at a time; the Spark session is started beforehand).

Target: the load at least as fast as the dump (ratio >= 1.0).

    .venv/bin/python bench/initial_load.py [--rows 5000000] [--parallelism 4]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import pymysql

    from loader.config import load_config
    from loader.initial_load import run_initial_load
    from loader.spark import build_session

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

        dump_file = tmp / "dump.sql"
        dump_times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
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
            dump_times.append(time.perf_counter() - t0)
        dump = min(dump_times)
        print(
            f"mariadb-dump --single-transaction: {dump:6.1f} s, {args.rows / dump:,.0f} rows/s, "
            f"{dump_file.stat().st_size / 1e6:,.0f} MB"
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
        load_times = []
        for attempt in range(args.repeat):
            if attempt:  # a second full load: a re-load needs a checkpoint, so start over
                shutil.rmtree(tmp / "staging", ignore_errors=True)
            t0 = time.perf_counter()
            summary = run_initial_load(spark, cfg, progress=lambda _: None)
            load_times.append(time.perf_counter() - t0)
            assert summary.tables[0].rows == args.rows, summary
        load = min(load_times)
        print(
            f"loader initial load ({args.parallelism} ranges): {load:6.1f} s, {args.rows / load:,.0f} rows/s"
        )
        print(f"ratio load rows/s / dump rows/s: {dump / load:.2f} (target >= 1.0)")
        spark.stop()
    finally:
        stop_server(datadir)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
