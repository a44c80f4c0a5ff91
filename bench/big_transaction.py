"""Extract's peak memory on one large transaction (5,000,000 inserted rows by default), against
the same extract holding the whole transaction in memory (as the loader did before its rows
waited on disk) and against MariaDB's ``mariadb-binlog -v`` decoding the same binlog.

Each run is its own process; its peak memory is the max RSS of it and its children.

    .venv/bin/python bench/big_transaction.py [--rows 5000000] [--whole-rows 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.binlog_decode import PASSWORD, _connect, start_server, stop_server  # noqa: E402

LIMIT_MB = 512


def generate(port: int, rows: int) -> tuple[str, int, int]:
    """One transaction of ``rows`` inserts in a fresh binlog file; (file, start, end)."""
    from loader.source.connection import current_position

    conn = _connect(port)
    with conn.cursor() as cur:
        cur.execute("SET GLOBAL max_binlog_size = 1073741824")
        cur.execute("DROP DATABASE IF EXISTS bench")
        cur.execute("CREATE DATABASE bench")
        cur.execute("CREATE TABLE bench.big (id BIGINT PRIMARY KEY, v INT, s VARCHAR(40))")
        cur.execute("FLUSH BINARY LOGS")
        start = current_position(conn)
        cur.execute(
            f"INSERT INTO bench.big SELECT seq, seq % 1000, CONCAT('row ', seq) FROM bench.seq_1_to_{rows}"
        )
        end = current_position(conn)
    conn.close()
    return start.file, start.pos, end.pos


def child(run: str, port: int, datadir: str, file: str, start: int, end: int) -> None:
    from loader.core.config import load_config
    from loader.core.positions import Position
    from loader.extract import decode
    from loader.extract.interval import run_extract

    out = Path(tempfile.mkdtemp(prefix="bench-big-out-"))
    os.environ["BENCH_PASSWORD"] = PASSWORD
    if run == "whole":
        decode.OPEN_ROWS_HELD_AT = None  # type: ignore[assignment]
    cfg = load_config(
        None,
        env={
            "LOADER__SOURCE__PORT": str(port),
            "LOADER__SOURCE__USER": "loader",
            "LOADER__SOURCE__PASSWORD_ENV": "BENCH_PASSWORD",
            "LOADER__SOURCE__TRANSPORT": "files",
            "LOADER__SOURCE__BINLOG_DIR": str(Path(datadir) / "binlog"),
            "LOADER__TABLES__INCLUDE": '["bench.*"]',
            "LOADER__STAGING__URI": str(out),
        },
    )
    t0 = time.perf_counter()
    try:
        summary = run_extract(cfg, Position(file, start), Position(file, end), progress=lambda _: None)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    assert summary is not None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rows": summary.changes, "seconds": time.perf_counter() - t0, "peak_rss_mb": rss}))


def measure(run: str, port: int, datadir: Path, file: str, start: int, end: int) -> dict[str, float]:
    if run == "mariadb-binlog":
        # A fresh process runs it, so that its children's peak is this tool's alone.
        command = ["mariadb-binlog", "-v", f"--start-position={start}", f"--stop-position={end}"]
        command.append(str(datadir / "binlog" / file))
        probe = (
            "import json, resource, subprocess, sys, time; t = time.perf_counter(); "
            "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); "
            "print(json.dumps({'seconds': time.perf_counter() - t, "
            "'peak_rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe, *command], capture_output=True, text=True, check=True
        )
        return json.loads(done.stdout)
    done = subprocess.run(
        [sys.executable, __file__, "--child", run, str(port), str(datadir), file, str(start), str(end)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument(
        "--whole-rows", type=int, default=1_000_000, help="rows for the whole-in-memory run (it needs GBs)"
    )
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run, port, datadir, file, start, end = args.child
        child(run, int(port), datadir, file, int(start), int(end))
        return
    datadir = Path(tempfile.mkdtemp(prefix="bench-big-"))
    port = start_server(datadir)
    try:
        # The reference first, on its own transaction (each measured process is a fresh one).
        small = generate(port, args.whole_rows)
        whole = measure("whole", port, datadir, *small)
        held_small = measure("held", port, datadir, *small)
        big = generate(port, args.rows)
        held = measure("held", port, datadir, *big)
        tool = measure("mariadb-binlog", port, datadir, *big)
        print(
            f"whole transaction in memory: {args.whole_rows:,} rows, peak RSS {whole['peak_rss_mb']:.0f} MB, "
            f"{whole['seconds']:.1f} s"
        )
        print(
            f"rows held on disk:           {args.whole_rows:,} rows, peak RSS {held_small['peak_rss_mb']:.0f} MB, "
            f"{held_small['seconds']:.1f} s"
        )
        print(
            f"rows held on disk:           {args.rows:,} rows, peak RSS {held['peak_rss_mb']:.0f} MB, "
            f"{held['seconds']:.1f} s ({held['rows'] / held['seconds']:,.0f} rows/s)"
        )
        print(
            f"mariadb-binlog -v:           {args.rows:,} rows, peak RSS {tool['peak_rss_mb']:.0f} MB, "
            f"{tool['seconds']:.1f} s"
        )
        print(
            f"memory ratio, held / whole at {args.whole_rows:,} rows: "
            f"{held_small['peak_rss_mb'] / whole['peak_rss_mb']:.2f}; "
            f"time ratio {held_small['seconds'] / whole['seconds']:.2f}"
        )
        print(
            f"ratios at {args.rows:,} rows, loader / mariadb-binlog -v: memory "
            f"{held['peak_rss_mb'] / tool['peak_rss_mb']:.1f}x, time {held['seconds'] / tool['seconds']:.1f}x"
        )
        verdict = "within" if held["peak_rss_mb"] < LIMIT_MB else "OVER"
        print(
            f"peak RSS at {args.rows:,} rows: {held['peak_rss_mb']:.0f} MB, {verdict} the {LIMIT_MB} MB bound"
        )
    finally:
        stop_server(datadir)
        shutil.rmtree(datadir, ignore_errors=True)


if __name__ == "__main__":
    main()
