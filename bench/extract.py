"""Extraction speed and memory: this loader's ``extract`` against python-mysql-replication plus
Python's csv module, on the workload of ``bench/binlog_decode.py`` (about 1,000,000 row changes).

- ``ours-N``: ``loader extract`` of the whole range into local CSV staging, N decoding processes
  (the binlog files transport, cut at transaction starts);
- ``pymysqlrepl-csv``: python-mysql-replication 1.0.17 iterating the same binlog and writing the
  same change rows (an update as its D then its I) with ``csv.writer``.

Every run is its own process (peak memory is max RSS of it and its children); each runs
``--repeat`` times and its fastest run counts.

    .venv/bin/python bench/extract.py [--changes 1000000] [--workers 2]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import binlog_decode  # noqa: E402
from bench.binlog_decode import PASSWORD, generate, reference_stream, start_server, stop_server  # noqa: E402


def run_ours(port: int, datadir: Path, file: str, start: int, end: int, workers: int, out: Path) -> int:
    from loader.config import load_config
    from loader.extract import run_extract
    from loader.positions import Position

    os.environ["BENCH_PASSWORD"] = PASSWORD
    cfg = load_config(
        None,
        env={
            "LOADER__SOURCE__PORT": str(port),
            "LOADER__SOURCE__USER": "loader",
            "LOADER__SOURCE__PASSWORD_ENV": "BENCH_PASSWORD",
            "LOADER__SOURCE__TRANSPORT": "files",
            "LOADER__SOURCE__BINLOG_DIR": str(datadir / "binlog"),
            "LOADER__TABLES__INCLUDE": '["bench.*"]',
            "LOADER__STAGING__URI": str(out),
        },
    )
    summary = run_extract(
        cfg, Position(file, start), Position(file, end), workers=workers, progress=lambda _: None
    )
    assert summary is not None
    return summary.changes


def run_pymysqlrepl_csv(port: int, file: str, start: int, end: int, out: Path) -> int:
    from pymysqlreplication.row_event import DeleteRowsEvent, WriteRowsEvent

    stream = reference_stream(port, file, start, end, 9903)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, tuple[object, csv.writer]] = {}  # type: ignore[valid-type]
    written = 0
    for event in stream:
        name = f"{event.schema}.{event.table}"
        if name not in files:
            f = open(out / f"{name}.csv", "w", newline="", encoding="utf-8")  # noqa: SIM115
            files[name] = (f, csv.writer(f))
        writer = files[name][1]
        for row in event.rows:
            if isinstance(event, WriteRowsEvent):
                writer.writerow(["I", *row["values"].values()])
                written += 1
            elif isinstance(event, DeleteRowsEvent):
                writer.writerow(["D", *row["values"].values()])
                written += 1
            else:
                writer.writerow(["D", *row["before_values"].values()])
                writer.writerow(["I", *row["after_values"].values()])
                written += 2
    for f, _ in files.values():
        f.close()  # type: ignore[attr-defined]
    stream.close()
    return written


def child(args: argparse.Namespace) -> None:
    out = Path(tempfile.mkdtemp(prefix="bench-extract-out-"))
    try:
        t0 = time.perf_counter()
        if args.run == "pymysqlrepl-csv":
            rows = run_pymysqlrepl_csv(args.port, args.file, args.start, args.end, out)
        else:
            workers = int(args.run.split("-")[1])
            rows = run_ours(args.port, Path(args.datadir), args.file, args.start, args.end, workers, out)
        secs = time.perf_counter() - t0
    finally:
        shutil.rmtree(out, ignore_errors=True)
    rss = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )
    print(json.dumps({"rows": rows, "seconds": secs, "peak_rss_mb": rss / 1024}))


def measure(
    run: str, port: int, datadir: Path, info: dict[str, object], end: int | None = None
) -> dict[str, float]:
    return binlog_decode.measure(run, port, datadir, info, end, script=__file__)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", help="a data directory to keep the server and workload in between runs")
    parser.add_argument(
        "--skip-reference", action="store_true", help="run only this loader (no python-mysql-replication)"
    )
    for hidden in ("--child", "--port", "--datadir", "--file", "--start", "--end"):
        parser.add_argument(hidden, dest=hidden.strip("-").replace("child", "run"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        args.port, args.start, args.end = int(args.port), int(args.start), int(args.end)
        child(args)
        return
    datadir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-extract-"))
    port = start_server(datadir)
    try:
        info = generate(port, args.changes)
        results = {}
        runs_wanted = [f"ours-{args.workers}", "ours-1"] + (
            [] if args.skip_reference else ["pymysqlrepl-csv"]
        )
        for run in runs_wanted:
            runs = [measure(run, port, datadir, info) for _ in range(args.repeat)]
            results[run] = r = min(runs, key=lambda x: x["seconds"])
            r["peak_rss_mb"] = max(x["peak_rss_mb"] for x in runs)
            print(
                f"{run:16s} {r['rows']:>10,.0f} change rows in {r['seconds']:6.2f} s = "
                f"{r['rows'] / r['seconds']:>9,.0f} rows/s, peak RSS {r['peak_rss_mb']:.0f} MB"
            )
        # Memory must not grow with the interval: the same extraction on a quarter of the range
        # (ending at a transaction start near 25%).
        from loader.binlog.files import BinlogFiles
        from loader.binlog.split import split_points
        from loader.positions import Position

        file = str(info["file"])
        first, last = Position(file, int(str(info["start"]))), Position(file, int(str(info["end"])))
        cut = split_points(BinlogFiles(datadir / "binlog"), first, last, 4)
        q = measure(f"ours-{args.workers}", port, datadir, info, end=cut[0].pos)
        print(
            f"memory: ours-{args.workers} peak RSS {q['peak_rss_mb']:.0f} MB on a quarter of the interval "
            f"({q['rows']:,.0f} change rows), {results[f'ours-{args.workers}']['peak_rss_mb']:.0f} MB on all of it"
        )
        if args.skip_reference:
            return
        assert results["ours-1"]["rows"] == results["pymysqlrepl-csv"]["rows"], "different row counts"
        base = results["pymysqlrepl-csv"]["rows"] / results["pymysqlrepl-csv"]["seconds"]
        for run in (f"ours-{args.workers}", "ours-1"):
            r = results[run]
            print(f"speed ratio {run} / python-mysql-replication+csv: {r['rows'] / r['seconds'] / base:.1f}x")
    finally:
        stop_server(datadir)
        if not args.keep:
            shutil.rmtree(datadir, ignore_errors=True)


if __name__ == "__main__":
    main()
