"""The source side of ``loader checksum`` against pt-table-checksum, on the same table in one run.

A private MariaDB gets a 1,000,000-row table (the ten mixed-type columns of
``binlog_decode.DDL``, filled on the server as in ``initial_load``). Then, each best of
``--repeat`` after one warm-up run of each (so both find the buffer pool warm):

- ``loader``: ``checksum.source_sums`` of the table: the snapshot, the walk of the key's index
  for range bounds, and the one scan that sums every range (COUNT and the XOR of a 64-bit
  half of a per-row MD5, on the server);
- ``pt-table-checksum``: Percona Toolkit's checksum of the same table, as a user runs it on a
  primary without replicas (``--recursion-method=none``, ``--no-check-binlog-format`` since the
  server logs ROW), its results written to ``bench_pt.checksums``. Once with its default hash
  (``CRC32`` per row) and once with ``--function MD5`` (an MD5 per row, like the loader).

Chunk size: pt-table-checksum's default sizes its chunks by time (``--chunk-time 0.5``), which
the loader cannot copy; here both take ``--chunk-rows`` (default 100,000, the loader's
``DEFAULT_RANGE_ROWS``): the loader as ``range_rows``, pt-table-checksum as
``--chunk-size N --chunk-time 0`` (fixed chunks).

A plain full scan of the table once, ``SELECT COUNT(*), BIT_XOR(CRC32(CONCAT_WS('#', …)))``, is
printed as the floor: no checksum of every row can read the table faster.

The ratio is the loader's rows/s over pt-table-checksum's (above 1.0: the loader is faster).

    apt-get install percona-toolkit   # pt-table-checksum
    .venv/bin/python bench/checksum.py [--rows 1000000] [--chunk-rows 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import functools
import os
import re
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
from bench.initial_load import FILL, cpu_seconds, measured  # noqa: E402


def pt_checksum(port: int, chunk_rows: int, function: str | None) -> int:
    """Run pt-table-checksum on ``bench.t``; the number of chunks it checksummed."""
    command = [
        "pt-table-checksum",
        f"h=127.0.0.1,P={port},u=app,p={PASSWORD}",
        "--databases=bench",
        "--tables=bench.t",
        "--replicate=bench_pt.checksums",
        "--recursion-method=none",
        "--no-check-binlog-format",
        "--no-check-replication-filters",
        "--no-version-check",
        f"--chunk-size={chunk_rows}",
        "--chunk-time=0",
        *([f"--function={function}"] if function else []),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    # Its summary: TS ERRORS DIFFS ROWS DIFF_ROWS CHUNKS SKIPPED TIME TABLE
    line = re.search(
        r"^\S+\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\S+\s+bench\.t$", done.stdout, re.M
    )
    if line is None or int(line[1]) or int(line[6]):
        raise SystemExit(f"pt-table-checksum failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    return int(line[5])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("pt-table-checksum") is None:
        print("bench/checksum.py: pt-table-checksum is not on PATH; apt-get install percona-toolkit")
        sys.exit(2)
    import pymysql

    from loader.core.config import load_config
    from loader.warehouse.checksum import source_sums

    tmp = Path(tempfile.mkdtemp(prefix="bench-checksum-"))
    datadir = tmp / "mariadb"
    port = start_server(datadir)
    try:
        conn = pymysql.connect(host="127.0.0.1", port=port, user="app", password=PASSWORD, autocommit=True)
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE bench")
            cur.execute("CREATE DATABASE bench_pt")
            cur.execute(DDL)
            t0 = time.perf_counter()
            cur.execute("USE bench")
            for first in range(0, args.rows, 1_000_000):
                cur.execute(FILL.format(first=first, size=min(1_000_000, args.rows - first)))
            cur.execute("ANALYZE TABLE bench.t")
            cur.execute(
                "SELECT data_length FROM information_schema.tables WHERE table_schema = 'bench' AND table_name = 't'"
            )
            size = int(cur.fetchone()[0])
            cur.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = 'bench' AND table_name = 't' ORDER BY ordinal_position"
            )
            columns = ", ".join(f"`{c}`" for (c,) in cur.fetchall())
        print(
            f"source table: {args.rows:,} rows, {size / 1e6:,.0f} MB of data, "
            f"in {time.perf_counter() - t0:.1f} s; chunks of {args.chunk_rows:,} rows"
        )

        os.environ["LOADER_BENCH_PASSWORD"] = PASSWORD
        cfg = load_config(
            None,
            env={
                "LOADER__SOURCE__PORT": str(port),
                "LOADER__SOURCE__USER": "app",
                "LOADER__SOURCE__PASSWORD_ENV": "LOADER_BENCH_PASSWORD",
                "LOADER__TABLES__INCLUDE": '["bench.t"]',
            },
        )
        server_cpu = functools.partial(cpu_seconds, int((datadir / "mariadbd.pid").read_text()))
        ranges: dict[str, int] = {}

        def loader() -> None:
            sums = source_sums(cfg.source, cfg.tables, range_rows=args.chunk_rows, progress=lambda _: None)
            assert sums.tables[0].rows == args.rows, sums.tables[0].rows
            ranges["loader"] = len(sums.tables[0].bounds) + 1

        def pt(function: str | None) -> Callable[[], None]:
            def run() -> None:
                ranges[f"pt {function}"] = pt_checksum(port, args.chunk_rows, function)

            return run

        sides = {
            "loader source_sums": loader,
            "pt-table-checksum (CRC32)": pt(None),
            "pt-table-checksum --function MD5": pt("MD5"),
        }
        for action in sides.values():  # warm-up
            action()
        best = {}
        for name, action in sides.items():
            best[name] = min(measured(action, server_cpu) for _ in range(args.repeat))
        with conn.cursor() as cur:
            scan = measured(
                lambda: cur.execute(
                    f"SELECT COUNT(*), BIT_XOR(CRC32(CONCAT_WS('#', {columns}))) FROM bench.t"
                ),
                server_cpu,
            )
        conn.close()

        used = dict(zip(sides, [ranges["loader"], ranges["pt None"], ranges["pt MD5"]], strict=True))
        for name, (seconds, cpu) in [*best.items(), ("full scan (floor)", scan)]:
            parts = (
                f", {used[name]:,} {'ranges' if name.startswith('loader') else 'chunks'}"
                if name in used
                else ""
            )
            print(
                f"{name:34s} {seconds:6.2f} s, {args.rows / seconds:>10,.0f} rows/s, "
                f"server CPU {cpu:5.1f} s{parts}"
            )
        loader_seconds = best["loader source_sums"][0]
        for name in list(sides)[1:]:
            print(f"ratio loader / {name}: {best[name][0] / loader_seconds:.2f} (>1: the loader is faster)")
        print(f"loader / full scan (floor): {scan[0] / loader_seconds:.2f} of the floor's speed")
    finally:
        stop_server(datadir)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
