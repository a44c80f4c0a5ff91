"""Binlog decoding speed and memory: this loader's reader against python-mysql-replication.

Starts a private MariaDB, writes about 1,000,000 row changes (multi-row inserts, 20% updates,
5% deletes, ten mixed-type columns) into one binlog file, then decodes every row of it:

- ``ours-files``: this reader on the binlog files;
- ``ours-server``: this reader over the replication protocol;
- ``pymysqlrepl``: python-mysql-replication 1.0.17's BinLogStreamReader, touching every value.

Each run is a separate process, so its peak memory (max RSS) is its own; each reader runs
``--repeat`` times and its fastest run counts. ``ours-files`` also runs
on the first quarter of the binlog, to show that memory does not grow with the binlog's size.

    .venv/bin/python bench/binlog_decode.py [--changes 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PASSWORD = "bench"
DDL = """CREATE TABLE bench.t (
    id BIGINT NOT NULL PRIMARY KEY,
    a INT NOT NULL,
    b VARCHAR(64) NOT NULL,
    c DECIMAL(12,2) NULL,
    d DATETIME(6) NOT NULL,
    e DOUBLE NULL,
    f TINYINT UNSIGNED NOT NULL,
    g TEXT NULL,
    h DATE NULL,
    i BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# The server a bench starts: "mariadb" (infra/mariadb/mariadb.sh) or "mysql" (infra/mysql/mysql.sh,
# the MySQL make setup unpacked); the measured child processes inherit it.
SERVER_ENV = "BENCH_SERVER"
SERVER_SCRIPTS = {"mariadb": ROOT / "infra/mariadb/mariadb.sh", "mysql": ROOT / "infra/mysql/mysql.sh"}


def server() -> str:
    """The flavour of the bench's server (``SERVER_ENV``, MariaDB by default)."""
    flavour = os.environ.get(SERVER_ENV, "mariadb")
    if flavour not in SERVER_SCRIPTS:
        raise SystemExit(f"{SERVER_ENV}={flavour}: use one of {', '.join(SERVER_SCRIPTS)}")
    return flavour


def start_server(datadir: Path) -> int:
    port = _free_port()
    env = {**os.environ, "LOADER_SOURCE_PASSWORD": PASSWORD}
    subprocess.run([str(SERVER_SCRIPTS[server()]), "start", str(datadir), str(port)], check=True, env=env)
    return port


def stop_server(datadir: Path) -> None:
    subprocess.run([str(SERVER_SCRIPTS[server()]), "stop", str(datadir)], check=False)


def _connect(port: int, user: str = "app"):  # type: ignore[no-untyped-def]
    import pymysql

    return pymysql.connect(host="127.0.0.1", port=port, user=user, password=PASSWORD, autocommit=True)


def _row(rnd: random.Random, key: int) -> str:
    text = "NULL" if key % 7 == 0 else f"'{'note ' * rnd.randrange(1, 12)}{key}'"
    return (
        f"({key},{rnd.randrange(-(2**31), 2**31)},'name-{key:012d}',"
        f"{'NULL' if key % 11 == 0 else f'{rnd.randrange(-(10**9), 10**9)}.{rnd.randrange(100):02d}'},"
        f"'2026-{1 + key % 12:02d}-{1 + key % 28:02d} {key % 24:02d}:{key % 60:02d}:{key % 60:02d}.{key % 10**6:06d}',"
        f"{'NULL' if key % 13 == 0 else rnd.random() * 1e6},{key % 256},{text},"
        f"{'NULL' if key % 17 == 0 else repr(f'2025-{1 + key % 12:02d}-{1 + key % 28:02d}')},{key * 2654435761 % 2**64})"
    )


def settle(port: int, most_seconds: float = 60.0) -> float:
    """Wait until InnoDB's purge of the workload's old row versions is done (it would take a
    core from the variants measured first, those of two processes most); its flushing of dirty
    pages goes on at a trickle that costs nothing here. The seconds waited."""
    t0 = time.monotonic()
    conn = _connect(port)
    try:
        with conn.cursor() as cur:
            while time.monotonic() - t0 < most_seconds:
                cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'")
                row = cur.fetchone()
                if row is None or int(row[1]) == 0:
                    break
                time.sleep(0.2)
    finally:
        conn.close()
    return time.monotonic() - t0


def generate(port: int, changes: int) -> dict[str, object]:
    """Write the workload into a fresh binlog file; returns its name, start and end positions and
    its change rows (``change_rows``: an update is two, its before and after image, counted from
    the server's affected-row counts), which every reader must find."""
    from loader.source.connection import current_position

    inserts = int(changes * 0.75)
    updates = int(changes * 0.20)
    deletes = changes - inserts - updates
    rnd = random.Random(42)
    conn = _connect(port)
    with conn.cursor() as cur:
        cur.execute("SET GLOBAL max_binlog_size = 1073741824")
        cur.execute("DROP DATABASE IF EXISTS bench")
        cur.execute("CREATE DATABASE bench")
        cur.execute(DDL)
        cur.execute("FLUSH BINARY LOGS")
        start = current_position(conn)
        t0 = time.monotonic()
        change_rows = 0
        for first in range(0, inserts, 1000):
            rows = ",".join(_row(rnd, k) for k in range(first, min(first + 1000, inserts)))
            change_rows += cur.execute(f"INSERT INTO bench.t VALUES {rows}")
        for first in range(0, updates, 1000):
            lo = rnd.randrange(0, inserts - 1000)
            change_rows += 2 * cur.execute(
                f"UPDATE bench.t SET a = a + 1, b = CONCAT('u', id), e = e * 2 WHERE id >= {lo} LIMIT {min(1000, updates - first)}"
            )
        deleted = 0
        step = inserts // max(1, deletes // 1000)
        lo = 0
        while deleted < deletes:
            n = min(1000, deletes - deleted)
            change_rows += cur.execute(f"DELETE FROM bench.t WHERE id >= {lo} ORDER BY id LIMIT {n}")
            deleted += n
            lo += step
        end = current_position(conn)
    conn.close()
    binlog = Path(end.file)
    print(
        f"workload: {changes:,} row changes written in {time.monotonic() - t0:.1f} s, binlog {start} .. {end}"
    )
    return {"file": str(binlog), "start": start.pos, "end": end.pos, "change_rows": change_rows}


def run_ours(kind: str, port: int, datadir: Path, file: str, start: int, end: int) -> tuple[int, float]:
    from loader.binlog.files import BinlogFiles
    from loader.binlog.reader import read_transactions
    from loader.binlog.schema import InformationSchema
    from loader.binlog.server import BinlogServer
    from loader.core.positions import Position
    from loader.source.connection import Credentials

    creds = Credentials("127.0.0.1", port, "loader", PASSWORD)
    transport = BinlogServer(creds, 9901) if kind == "server" else BinlogFiles(datadir / "binlog")
    schema_conn = _connect(port, "loader")
    rows = 0
    t0 = time.perf_counter()
    for tx in read_transactions(
        transport,
        Position(file, start),
        Position(file, end),
        lambda s, t: s == "bench",
        InformationSchema(schema_conn),
        allow_partial_end=True,  # the quarter-binlog memory run ends inside a transaction
    ):
        for batch in tx.batches:
            for before, after in batch.rows:
                rows += 1
                for image in (before, after):
                    if image is not None:
                        for _value in image:
                            pass
    return rows, time.perf_counter() - t0


def reference_stream(port: int, file: str, start: int, end: int, server_id: int) -> Any:
    """python-mysql-replication reading the workload's rows events (the settings it needs on
    MariaDB: is_mariadb=False, and an end position inside the one binlog file)."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    return BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": port, "user": "app", "passwd": PASSWORD},
        server_id=server_id,
        log_file=file,
        log_pos=start,
        resume_stream=True,
        blocking=False,
        end_log_pos=end,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=["bench"],
        is_mariadb=False,
        enable_logging=False,
    )


def run_pymysqlrepl(port: int, file: str, start: int, end: int) -> tuple[int, float]:
    stream = reference_stream(port, file, start, end, 9902)
    rows = 0
    t0 = time.perf_counter()
    for event in stream:
        for row in event.rows:
            rows += 1
            for key in ("values", "before_values", "after_values"):
                for _value in row.get(key, {}).values():
                    pass
    stream.close()
    return rows, time.perf_counter() - t0


def child(args: argparse.Namespace) -> None:
    datadir = Path(args.datadir)
    if args.run == "pymysqlrepl":
        rows, secs = run_pymysqlrepl(args.port, args.file, args.start, args.end)
    else:
        rows, secs = run_ours(args.run.split("-")[1], args.port, datadir, args.file, args.start, args.end)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rows": rows, "seconds": secs, "peak_rss_mb": rss_mb}))


def measure(
    run: str,
    port: int,
    datadir: Path,
    info: dict[str, object],
    end: int | None = None,
    script: str = __file__,
) -> dict[str, float]:
    """Run one measurement in a child process of ``script`` (its own peak memory); its last
    output line is the JSON result."""
    cmd = [sys.executable, script, "--child", run, "--port", str(port), "--datadir", str(datadir)]
    cmd += ["--file", str(info["file"]), "--start", str(info["start"])]
    cmd += ["--end", str(end if end is not None else info["end"])]
    # Modules compiled once, as an installed package has them: a shell that turned bytecode
    # files off would add their compiling to every run.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--keep", help="a data directory to keep the server and workload in between runs")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each reader; the fastest counts")
    parser.add_argument("--child", dest="run", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--datadir", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--end", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        child(args)
        return
    datadir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-binlog-"))
    port = start_server(datadir)
    try:
        info = generate(port, args.changes)
        print(f"server idle after the workload in {settle(port):.1f} s")
        size = (datadir / "binlog" / str(info["file"])).stat().st_size
        print(f"binlog file: {size / 1e6:.0f} MB")
        results = {}
        for run in ("ours-files", "ours-server", "pymysqlrepl"):
            # The same number of runs for every reader; the fastest shows each at its best on
            # this shared machine.
            runs = [measure(run, port, datadir, info) for _ in range(args.repeat)]
            results[run] = r = min(runs, key=lambda x: x["seconds"])
            r["peak_rss_mb"] = max(x["peak_rss_mb"] for x in runs)
            print(
                f"{run:12s} {r['rows']:>9,.0f} rows in {r['seconds']:6.2f} s = {r['rows'] / r['seconds']:>9,.0f} rows/s, "
                f"peak RSS {r['peak_rss_mb']:.0f} MB"
            )
        quarter = int(str(info["start"])) + (int(str(info["end"])) - int(str(info["start"]))) // 4
        q = measure("ours-files", port, datadir, info, end=quarter)
        print(
            f"memory: ours-files peak RSS {q['peak_rss_mb']:.0f} MB on a quarter of the binlog, "
            f"{results['ours-files']['peak_rss_mb']:.0f} MB on all of it"
        )
        base = results["pymysqlrepl"]["rows"] / results["pymysqlrepl"]["seconds"]
        for run in ("ours-files", "ours-server"):
            r = results[run]
            assert r["rows"] == results["pymysqlrepl"]["rows"], "the readers disagree on the number of rows"
            print(f"speed ratio {run} / python-mysql-replication: {r['rows'] / r['seconds'] / base:.1f}x")
    finally:
        stop_server(datadir)
        if not args.keep:
            shutil.rmtree(datadir, ignore_errors=True)


if __name__ == "__main__":
    main()
