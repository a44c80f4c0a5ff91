"""Extraction speed and memory: this loader's ``extract`` against python-mysql-replication plus
Python's csv module and against MariaDB's own decoder ``mariadb-binlog -v``, and this loader's
``binlog show --format jsonl`` against python-mysql-replication writing JSON lines, on one
binlog interval of a private MariaDB, side by side in one run. With ``--server mysql`` the source
is a private MySQL (the one ``make setup`` unpacks) and the C tool MySQL's ``mysqlbinlog -v``.

The workload (``--table``), written into a fresh binlog file (one file, so that every reader
can be given the same start and stop positions):

- ``default``: the workload of ``bench/binlog_decode.py``, table ``bench.t`` (ten mixed-type
  columns): ``--changes`` row changes (1,000,000), 75% inserts in statements of 1,000 rows, 20%
  updates, 5% deletes;
- ``mixed``: ``bench.mixed``, ten columns (BIGINT key, INT, VARCHAR, DECIMAL(12,2),
  DATETIME(6), DOUBLE, TEXT, TINYINT, DATE, ENUM; NULLs in four of them), ``--changes`` row
  changes (240,000): five sixths inserts of new keys and one sixth updates of key ranges (of
  four columns), i.e. 200,000 inserts and 40,000 updates, 280,000 change rows;
- ``wide``: ``bench.wide``, the same ten types four times (40 columns), the same changes;
- ``oltp``: OLTP traffic's shape, ``--changes`` (100,000) transactions of one row change each
  (GTID, BEGIN, table map, rows and XID events per change) over ten tables of mixed's columns
  in turn, five of six inserting a new key and the sixth updating one row (``make_oltp``).

``mixed`` and ``wide`` are made on the server (the Sequence engine's ``seq_1_to_N``) in
transactions of 1,000 row changes, each its inserts then its updates, as an application writes
them. Every workload counts its change rows from the server's affected-row counts (an update is
two, its D then its I, as the staging files write it).

The variants, each run ``--repeat`` times (3) in a process of its own, its fastest run
counting (peak memory: the most of the max RSS of it and its children over its runs):

- ``ours-files-N``: ``loader extract`` of the interval into local CSV staging, the binlog files
  transport (``source.transport = "files"``), N decoding processes (``--workers``, one per
  core by default; the interval cut at transaction starts); ``ours-files-1`` too when N > 1;
- ``ours-server-N``: the same through a replication connection (``source.transport =
  "server"``, the loader's default): the stream read once and spooled in ranges that N
  processes decode; ``ours-server-1`` too when N > 1 (one process reading and decoding);
- ``ours-files-1-python``: ``ours-files-1`` with the Python decoder (``source.decoder =
  "python"``, the reference the native decoder must equal byte for byte), to show what the
  native decoder brings;
- ``ours-show-jsonl``: ``loader binlog show --file <datadir>/binlog --from FILE:START --to
  FILE:END --tables 'bench.*' --format jsonl``, the CLI's own entry called in-process with its
  standard output in a file (one process; the binlog files, no connection to the server);
- ``pymysqlrepl-csv``: python-mysql-replication 1.0.17 reading the same interval from the
  server and writing the same change rows with ``csv.writer``;
- ``pymysqlrepl-jsonl``: python-mysql-replication the same way, writing a JSON line per row
  change (``json.dumps`` of its op, schema, table and before and after images keyed by column
  name, DECIMAL and date-time values as strings, ``ensure_ascii=False``) into a file;
- ``mariadb-binlog``: MariaDB's C tool ``mariadb-binlog -v`` (or ``mysqlbinlog``; Debian
  package mariadb-client) on the same binlog file, ``--start-position`` to
  ``--stop-position``, its output into a file; its change rows are counted afterwards (not
  timed) from its ``### INSERT INTO``, ``### DELETE FROM`` and ``### UPDATE`` lines;
- ``mariadb-binlog-remote``: the same tool reading the same range from the server
  (``--read-from-remote-server``), as ``ours-server-N`` does.

A JSON line is one row change (an update's is one line with its before and after image); the
JSON lines variants count their change rows afterwards (not timed) from their lines' ``op``, an
update as two, as everywhere else here.

Every run of every variant must find the workload's number of change rows. ``ours-files-N``
and ``ours-server-N`` also run on the first quarter of the interval, to show that memory does
not grow with it.

Targets, in change rows/s (the issue "Extraction at the speed of the C tools"):
``ours-server-N`` at least 10x ``pymysqlrepl-csv``, ``ours-files-N`` at least 15x
``pymysqlrepl-csv``, and one process (``ours-server-1``) at least 0.40x ``mariadb-binlog``;
with the native decoder (the issue "Row images decoded in Rust"), one process on the files
(``ours-files-1``) at least 1.0x ``mariadb-binlog`` and N (``ours-files-N``) at least 1.6x;
through the server, one process (``ours-server-1``) at least 1.0x ``mariadb-binlog-remote`` and
N at least 1.6x; ``loader binlog show --format jsonl`` (``ours-show-jsonl``) at least 6x the
same reference writing JSON lines (``pymysqlrepl-jsonl``) and 0.5x ``mariadb-binlog``. Each
ratio prints met or MISSED. The extract variants are compared with ``pymysqlrepl-csv`` and both
``mariadb-binlog`` runs, ``ours-show-jsonl`` with ``pymysqlrepl-jsonl`` and ``mariadb-binlog``.

    .venv/bin/python bench/extract.py [--server mariadb|mysql] [--table default|mixed|wide|oltp]
        [--changes N] [--workers 2]
        [--repeat 3] [--variants ours-files-2,ours-files-1,ours-server-2,ours-server-1,...]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import binlog_decode  # noqa: E402
from bench.binlog_decode import (  # noqa: E402
    PASSWORD,
    SERVER_ENV,
    SERVER_SCRIPTS,
    reference_stream,
    server,
    start_server,
    stop_server,
)

TABLES = ("default", "mixed", "wide", "oltp")
# Row changes per workload when --changes is not given: mixed and wide make 200,000 inserts and
# 40,000 updates (280,000 change rows); oltp 100,000 transactions of one row change each.
DEFAULT_CHANGES = {"default": 1_000_000, "mixed": 240_000, "wide": 240_000, "oltp": 100_000}
OLTP_TABLES = 10  # the oltp workload's tables, bench.oltp0 .. oltp9, each of mixed's columns
GROUPS = {"mixed": 1, "wide": 4}  # times the ten column types appear
TX_ROWS = 1000  # row changes per transaction of mixed and wide
UPDATE_SHARE = 1 / 6
REFERENCES = ("pymysqlrepl-csv", "pymysqlrepl-jsonl", "mariadb-binlog", "mariadb-binlog-remote")
TOOL_REFERENCES = ("mariadb-binlog", "mariadb-binlog-remote")
# The references a variant of ours is compared with (the extract variants: the others).
COMPARED = {"ours-show-jsonl": ("pymysqlrepl-jsonl", "mariadb-binlog")}
EXTRACT_COMPARED = ("pymysqlrepl-csv", "mariadb-binlog", "mariadb-binlog-remote")
# (variant, reference) → the least ratio of their change rows/s; N is --workers.
TARGETS = {
    ("ours-server-N", "pymysqlrepl-csv"): 10.0,
    ("ours-files-N", "pymysqlrepl-csv"): 15.0,
    ("ours-server-1", "mariadb-binlog"): 0.40,
    ("ours-files-1", "mariadb-binlog"): 1.0,
    ("ours-files-N", "mariadb-binlog"): 1.6,
    ("ours-server-1", "mariadb-binlog-remote"): 1.0,
    ("ours-server-N", "mariadb-binlog-remote"): 1.6,
    ("ours-show-jsonl", "pymysqlrepl-jsonl"): 6.0,
    ("ours-show-jsonl", "mariadb-binlog"): 0.5,
}
ENUM = "'new','paid','shipped','returned','lost'"
# One group of the mixed and wide tables: a column's name, type and value in row ``k`` of the
# group ``{g}`` (so that the groups of the wide table differ); the first BIGINT is the key.
MIX = (
    ("n", "BIGINT NOT NULL", "k * 2654435761 + {g}"),
    ("a", "INT NOT NULL", "(k * 7919 + {g}) % 2147483647 - 1073741823"),
    ("b", "VARCHAR(64) NOT NULL", "CONCAT('name-', LPAD(k, 12, '0'), '-{g}')"),
    ("c", "DECIMAL(12,2) NULL", "IF(k % 11 = {g}, NULL, (k * 37 + {g}) % 100000000000 / 100)"),
    (
        "d",
        "DATETIME(6) NOT NULL",
        "'2024-01-01 00:00:00' + INTERVAL k * {g1} SECOND + INTERVAL k % 1000000 MICROSECOND",
    ),
    ("e", "DOUBLE NULL", "IF(k % 13 = {g}, NULL, SQRT(k) * 1234.5678 + {g})"),
    ("f", "TEXT NULL", "IF(k % 7 = {g}, NULL, CONCAT(REPEAT('note ', 1 + (k + {g}) % 11), k))"),
    ("t", "TINYINT NOT NULL", "(k + {g}) % 256 - 128"),
    ("h", "DATE NULL", "IF(k % 17 = {g}, NULL, DATE('2020-01-01') + INTERVAL (k + {g}) % 3650 DAY)"),
    ("s", f"ENUM({ENUM}) NOT NULL", f"ELT(1 + (k + {{g}}) % 5, {ENUM})"),
)


# --- the mixed and wide workloads ------------------------------------------------------------


def columns(groups: int) -> list[tuple[str, str, str]]:
    """(name, type, value of row ``k``) of a table of ``groups`` times MIX's ten types; the first
    BIGINT is the key ``id`` (= k), the others are named after their type's letter and group."""
    cols = []
    for g in range(groups):
        for name, sqltype, value in MIX:
            if (g, name) == (0, "n"):
                cols.append(("id", sqltype, "k"))
            else:
                cols.append((f"{name}{g}", sqltype, value.format(g=g, g1=g + 1)))
    return cols


def make_table(port: int, table: str, changes: int) -> dict[str, object]:
    """``bench.<table>`` made, then ``changes`` row changes in a fresh binlog file, in
    transactions of ``TX_ROWS``: new keys inserted from the Sequence engine, then a key range
    among the keys so far updated. Returns the binlog interval and its change rows."""
    from loader.source.connection import current_position

    cols = columns(GROUPS[table])
    updates = round(changes * UPDATE_SHARE)
    left = {"insert": changes - updates, "update": updates}
    per_tx = {"insert": TX_ROWS - round(TX_ROWS * UPDATE_SHARE), "update": round(TX_ROWS * UPDATE_SHARE)}
    values = ", ".join(value for _, _, value in cols)
    rnd = random.Random(42)
    conn = binlog_decode._connect(port)
    with conn.cursor() as cur:
        cur.execute("SET GLOBAL max_binlog_size = 1073741824")
        cur.execute("DROP DATABASE IF EXISTS bench")
        cur.execute("CREATE DATABASE bench")
        cur.execute("USE bench")  # the Sequence engine's tables need a current database
        ddl = ", ".join(f"{name} {sqltype}" for name, sqltype, _ in cols)
        cur.execute(
            f"CREATE TABLE bench.{table} ({ddl}, PRIMARY KEY (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
        )
        cur.execute("FLUSH BINARY LOGS")
        start = current_position(conn)
        t0 = time.monotonic()
        keys = change_rows = transactions = 0
        while any(left.values()):
            if transactions > 2 * (changes // TX_ROWS + 1):
                raise RuntimeError(f"the workload makes no progress: {left} row changes still to make")
            cur.execute("BEGIN")
            n = min(left["insert"], per_tx["insert"])
            if n:
                # seq is unsigned: signed keys, so that the values' arithmetic may go below zero.
                done = cur.execute(
                    f"INSERT INTO bench.{table} SELECT {values} FROM (SELECT CAST(seq + {keys} AS SIGNED) AS k "
                    f"FROM {_numbers(n)}) s"
                )
                keys += done
                left["insert"] -= done
                change_rows += done
            n = min(left["update"], per_tx["update"], keys)
            if n:
                lo = rnd.randint(1, keys - n + 1)
                done = cur.execute(
                    f"UPDATE bench.{table} SET a0 = a0 + 1, b0 = CONCAT('upd-', id, '-', {transactions}), "
                    f"c0 = c0 + 1.25, d0 = d0 + INTERVAL 1 SECOND WHERE id BETWEEN {lo} AND {lo + n - 1}"
                )
                left["update"] -= done
                change_rows += 2 * done
            cur.execute("COMMIT")
            transactions += 1
        end = current_position(conn)
    conn.close()
    assert start.file == end.file, f"the workload left its binlog file: {start} .. {end}"
    print(
        f"workload: bench.{table} ({len(cols)} columns), {changes:,} row changes ({change_rows:,} change rows) "
        f"in {transactions:,} transactions, written in {time.monotonic() - t0:.1f} s, binlog {start} .. {end}"
    )
    return {"file": end.file, "start": start.pos, "end": end.pos, "change_rows": change_rows}


def _numbers(n: int) -> str:
    """A table of the numbers 1 to ``n`` in a column ``seq``: MariaDB's Sequence engine, or on
    MySQL a recursive common table expression (``n`` within its 1,000 recursions)."""
    if server() == "mariadb":
        return f"seq_1_to_{n}"
    return f"(WITH RECURSIVE numbers (seq) AS (SELECT 1 UNION ALL SELECT seq + 1 FROM numbers WHERE seq < {n}) SELECT seq FROM numbers) numbers"


def _gtid_sequence(cur: Any) -> int:
    """How many GTIDs the server has given (one domain or uuid, one server: the bench's)."""
    if server() == "mariadb":
        cur.execute("SELECT @@GLOBAL.gtid_binlog_pos")
        (pos,) = cur.fetchone()
        return int(pos.rsplit("-", 1)[1]) if pos else 0
    cur.execute("SELECT @@GLOBAL.gtid_executed")
    (executed,) = cur.fetchone()
    spans = [
        span
        for part in executed.replace("\n", "").split(",")
        if ":" in part
        for span in re.findall(r"(\d+)(?:-(\d+))?", part.split(":", 1)[1])
    ]
    return sum(int(high or low) - int(low) + 1 for low, high in spans)


def make_oltp(port: int, changes: int) -> dict[str, object]:
    """OLTP traffic's shape: ``changes`` transactions of one row change each (autocommit: GTID,
    BEGIN, table map, rows, XID per change) over ``OLTP_TABLES`` tables of mixed's columns, in
    turn; five of six insert a new key, the sixth updates one row already there. Made by a
    stored procedure on the server (each of its statements commits on its own), with the redo
    log flushed once a second rather than at each commit, so that making it takes seconds."""
    from loader.source.connection import current_position

    cols = columns(1)
    values = ", ".join(value for _, _, value in cols)
    ddl = ", ".join(f"{name} {sqltype}" for name, sqltype, _ in cols)
    branches = []
    for t in range(OLTP_TABLES):
        branches.append(
            f"{'IF' if t == 0 else 'ELSEIF'} i % {OLTP_TABLES} = {t} THEN "
            f"IF r % 6 = 5 THEN UPDATE bench.oltp{t} SET a0 = a0 + 1, b0 = CONCAT('upd-', id, '-', r), "
            "c0 = c0 + 1.25, d0 = d0 + INTERVAL 1 SECOND WHERE id = r DIV 2 + 1; "
            f"ELSE INSERT INTO bench.oltp{t} SELECT {values} FROM (SELECT CAST(r - r DIV 6 + 1 AS SIGNED) AS k) s; "
            "END IF;"
        )
    conn = binlog_decode._connect(port)
    with conn.cursor() as cur:
        cur.execute("SET GLOBAL max_binlog_size = 1073741824")
        cur.execute("DROP DATABASE IF EXISTS bench")
        cur.execute("CREATE DATABASE bench")
        for t in range(OLTP_TABLES):
            cur.execute(
                f"CREATE TABLE bench.oltp{t} ({ddl}, PRIMARY KEY (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
            )
        cur.execute(
            "CREATE PROCEDURE bench.oltp_work(n INT) BEGIN DECLARE i INT DEFAULT 0; DECLARE r INT; "
            f"WHILE i < n DO SET r = i DIV {OLTP_TABLES}; {' '.join(branches)} END IF; SET i = i + 1; "
            "END WHILE; END"
        )
        cur.execute("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit")
        (flush,) = cur.fetchone()
        cur.execute("SET GLOBAL innodb_flush_log_at_trx_commit = 2")
        cur.execute("FLUSH BINARY LOGS")
        start = current_position(conn)
        before = _gtid_sequence(cur)
        t0 = time.monotonic()
        cur.execute(f"CALL bench.oltp_work({changes})")
        end = current_position(conn)
        # Each commit takes the next GTID (read without listing the events: a list of them would
        # grow this process, whose size the variants' processes start from).
        transactions = _gtid_sequence(cur) - before
        cur.execute(f"SET GLOBAL innodb_flush_log_at_trx_commit = {flush}")
        per_table = [changes // OLTP_TABLES + (t < changes % OLTP_TABLES) for t in range(OLTP_TABLES)]
        updates = sum(n // 6 for n in per_table)
    conn.close()
    assert start.file == end.file, f"the workload left its binlog file: {start} .. {end}"
    assert transactions == changes, f"{transactions} transactions for {changes} single-row changes"
    change_rows = changes + updates
    print(
        f"workload: {OLTP_TABLES} tables bench.oltp* ({len(cols)} columns), {changes:,} single-row "
        f"transactions ({change_rows:,} change rows), written in {time.monotonic() - t0:.1f} s, "
        f"binlog {start} .. {end} ({(end.pos - start.pos) / 1e6:,.0f} MB)"
    )
    return {"file": end.file, "start": start.pos, "end": end.pos, "change_rows": change_rows}


def generate(port: int, table: str, changes: int) -> dict[str, object]:
    """The ``--table`` workload in a fresh binlog file: its name, start and end positions, and
    the change rows every variant must find."""
    if table == "oltp":
        info = make_oltp(port, changes)
    elif table == "default":
        info = binlog_decode.generate(port, changes)
    else:
        info = make_table(port, table, changes)
    assert info["change_rows"], "the workload made no change rows"
    return info


# --- the variants ----------------------------------------------------------------------------


def run_ours(
    port: int,
    datadir: Path,
    file: str,
    start: int,
    end: int,
    transport: str,
    workers: int,
    out: Path,
    decoder: str = "native",
) -> int:
    """``loader extract`` of the interval into staging at ``out``; its change rows."""
    from loader.core.config import load_config
    from loader.core.positions import Position
    from loader.extract.interval import run_extract

    os.environ["BENCH_PASSWORD"] = PASSWORD
    cfg = load_config(
        None,
        env={
            "LOADER__SOURCE__PORT": str(port),
            "LOADER__SOURCE__USER": "loader",
            "LOADER__SOURCE__PASSWORD_ENV": "BENCH_PASSWORD",
            "LOADER__SOURCE__TRANSPORT": transport,
            "LOADER__SOURCE__BINLOG_DIR": str(datadir / "binlog"),
            "LOADER__TABLES__INCLUDE": '["bench.*"]',
            "LOADER__STAGING__URI": str(out),
            "LOADER__SOURCE__DECODER": decoder,
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
    files: dict[str, tuple[TextIO, Any]] = {}  # a table's file and its csv.writer
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
    for handle, _ in files.values():
        handle.close()
    stream.close()
    return written


# The start of a JSON line of either JSON lines variant (``op`` is its first key) → its change
# rows: an update's line is two, its before and after image.
JSONL_ROWS = {b'{"op": "I"': 1, b'{"op": "D"': 1, b'{"op": "U"': 2}
JSONL_OP_ROWS = {"I": 1, "D": 1, "U": 2}


def count_jsonl_rows(path: Path) -> int:
    """The change rows of a JSON lines file, from each line's ``op`` (so that its count is checked)."""
    rows = 0
    with open(path, "rb") as f:
        for line in f:
            n = JSONL_ROWS.get(line[:10])
            rows += n if n is not None else JSONL_OP_ROWS[json.loads(line)["op"]]
    return rows


def run_show_jsonl(datadir: Path, file: str, start: int, end: int, out: Path) -> tuple[int, float]:
    """``loader binlog show --format jsonl`` of the interval of the local binlog files, through
    the CLI's entry in this process, its standard output into a file under ``out``: (change
    rows, seconds of the command alone)."""
    from loader.app import cli

    # What a user runs with no configuration: none of the caller's overrides.
    for name in [n for n in os.environ if n.startswith("LOADER")]:
        del os.environ[name]
    out.mkdir(parents=True, exist_ok=True)
    result, log = out / "show.jsonl", out / "show.stderr"
    argv = ["binlog", "show", "--file", str(datadir / "binlog"), "--from", f"{file}:{start}"]
    argv += ["--to", f"{file}:{end}", "--tables", "bench.*", "--format", "jsonl"]
    with (
        open(result, "w", encoding="utf-8") as f,
        open(log, "w", encoding="utf-8") as err,
        contextlib.redirect_stdout(f),
        contextlib.redirect_stderr(err),
    ):
        t0 = time.perf_counter()
        code = cli.main(argv)
        f.flush()
        secs = time.perf_counter() - t0
    if code != 0:
        raise RuntimeError(f"loader {' '.join(argv)}: exit code {code}: {log.read_text().strip()}")
    return count_jsonl_rows(result), secs


def run_pymysqlrepl_jsonl(port: int, file: str, start: int, end: int, out: Path) -> tuple[int, float]:
    """python-mysql-replication reading the interval from the server, a JSON line per row change
    into a file under ``out``: (change rows, seconds of the reading and writing alone)."""
    from pymysqlreplication.row_event import DeleteRowsEvent, WriteRowsEvent

    out.mkdir(parents=True, exist_ok=True)
    result = out / "pymysqlrepl.jsonl"
    t0 = time.perf_counter()
    stream = reference_stream(port, file, start, end, 9904)
    with open(result, "w", encoding="utf-8") as f:
        for event in stream:
            for row in event.rows:
                if isinstance(event, WriteRowsEvent):
                    op, before, after = "I", None, row["values"]
                elif isinstance(event, DeleteRowsEvent):
                    op, before, after = "D", row["values"], None
                else:
                    op, before, after = "U", row["before_values"], row["after_values"]
                line = {
                    "op": op,
                    "schema": event.schema,
                    "table": event.table,
                    "before": before,
                    "after": after,
                }
                # default=str: DECIMAL, DATETIME and DATE values as strings.
                f.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
    stream.close()
    secs = time.perf_counter() - t0
    return count_jsonl_rows(result), secs


def binlog_tool(datadir: Path) -> list[str] | None:
    """The server's own binlog decoder: MariaDB's ``mariadb-binlog`` (or its older name
    ``mysqlbinlog``), or MySQL's ``mysqlbinlog`` of the unpacked root (``mysql.sh mysqlbinlog``)."""
    if server() == "mysql":
        return [str(SERVER_SCRIPTS["mysql"]), "mysqlbinlog", str(datadir)]
    found = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")
    return [found] if found else None


def shown(run: str) -> str:
    """A variant's name as printed: the C tool's is MySQL's ``mysqlbinlog`` on a MySQL server."""
    return run.replace("mariadb-binlog", "mysqlbinlog") if server() == "mysql" else run


# A row in ``mariadb-binlog -v``'s output starts with one of these lines; an update is two change rows.
TOOL_ROW_LINES = ((b"### INSERT INTO ", 1), (b"### DELETE FROM ", 1), (b"### UPDATE ", 2))


def count_tool_rows(path: Path) -> int:
    """The change rows in ``mariadb-binlog -v``'s output (so that its count is checked too)."""
    rows = 0
    with open(path, "rb") as f:
        for line in f:
            if line.startswith(b"### "):
                rows += next((n for prefix, n in TOOL_ROW_LINES if line.startswith(prefix)), 0)
    return rows


def run_mariadb_binlog(
    datadir: Path, file: str, start: int, end: int, out: Path, port: int | None = None
) -> tuple[int, float]:
    """``mariadb-binlog -v`` on the interval of the local binlog file, or (``port``) read from
    the server, its output into a file under ``out`` (as ours writes its CSV files): (change
    rows, seconds of the tool alone)."""
    tool = binlog_tool(datadir)
    assert tool is not None, "mariadb-binlog not found (Debian package mariadb-client)"
    out.mkdir(parents=True, exist_ok=True)
    result = out / "mariadb-binlog.txt"
    # --no-defaults (first): no option files of this machine's.
    command = [*tool, "--no-defaults", "-v", f"--start-position={start}", f"--stop-position={end}"]
    if port is not None:
        command += ["--read-from-remote-server", "--host=127.0.0.1", f"--port={port}", "--user=app"]
        command += [f"--password={PASSWORD}", file]
    else:
        command.append(str(datadir / "binlog" / file))
    t0 = time.perf_counter()
    with open(result, "wb") as f:
        subprocess.run(command, stdout=f, check=True)
    secs = time.perf_counter() - t0
    return count_tool_rows(result), secs


def run_variant(args: argparse.Namespace, out: Path) -> tuple[int, float]:
    """One run of the variant ``args.run`` in this process: (change rows, seconds)."""
    datadir = Path(args.datadir)
    if args.run in TOOL_REFERENCES:
        port = args.port if args.run == "mariadb-binlog-remote" else None
        return run_mariadb_binlog(datadir, args.file, args.start, args.end, out, port)
    if args.run == "ours-show-jsonl":
        return run_show_jsonl(datadir, args.file, args.start, args.end, out)
    if args.run == "pymysqlrepl-jsonl":
        return run_pymysqlrepl_jsonl(args.port, args.file, args.start, args.end, out)
    t0 = time.perf_counter()
    if args.run == "pymysqlrepl-csv":
        rows = run_pymysqlrepl_csv(args.port, args.file, args.start, args.end, out)
    else:
        _, transport, workers, *decoder = args.run.split("-")
        rows = run_ours(
            args.port, datadir, args.file, args.start, args.end, transport, int(workers), out, *decoder
        )
    return rows, time.perf_counter() - t0


def child(args: argparse.Namespace) -> None:
    """A measured run; prints its change rows, seconds and peak memory as JSON. The peak of
    ``mariadb-binlog`` is the tool's own (this Python process only starts it and counts)."""
    out = Path(tempfile.mkdtemp(prefix="bench-extract-out-"))
    try:
        rows, secs = run_variant(args, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    own = 0 if args.run in TOOL_REFERENCES else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rows": rows, "seconds": secs, "peak_rss_mb": max(own, children) / 1024}))


def measure(
    run: str, port: int, datadir: Path, info: dict[str, object], end: int | None = None
) -> dict[str, float]:
    return binlog_decode.measure(run, port, datadir, info, end, script=__file__)


# --- the report ------------------------------------------------------------------------------


def variants_wanted(args: argparse.Namespace, parser: argparse.ArgumentParser, datadir: Path) -> list[str]:
    """The variants to run, in order: ``--variants`` or all of them (without the references
    under ``--skip-reference``, without ``mariadb-binlog`` when it is not installed)."""
    if args.variants:
        wanted = [
            v.strip().replace("mysqlbinlog", "mariadb-binlog") for v in args.variants.split(",") if v.strip()
        ]
    else:
        wanted = [
            f"ours-{transport}-{n}"
            for transport in ("files", "server")
            for n in dict.fromkeys((args.workers, 1))
        ]
        wanted += ["ours-files-1-python", "ours-show-jsonl", *REFERENCES]
        if binlog_tool(datadir) is None:
            print("mariadb-binlog (or mysqlbinlog) not found: install the Debian package mariadb-client")
            wanted = [v for v in wanted if v not in TOOL_REFERENCES]
    if args.skip_reference:
        wanted = [v for v in wanted if v not in REFERENCES]
    known = re.compile(r"ours-(files|server)-[1-9][0-9]*(-python)?|ours-show-jsonl|" + "|".join(REFERENCES))
    unknown = [v for v in wanted if not known.fullmatch(v)]
    if unknown or not wanted:
        parser.error(
            f"--variants: {', '.join(unknown) or 'none left'}; accepted: ours-files-N[-python], "
            + "ours-server-N[-python], "
            + "ours-show-jsonl, "
            + ", ".join(REFERENCES)
        )
    if any(v in TOOL_REFERENCES for v in wanted) and binlog_tool(datadir) is None:
        parser.error("mariadb-binlog (or mysqlbinlog) not found: install the Debian package mariadb-client")
    return wanted


def best_of(run: str, repeat: int, port: int, datadir: Path, info: dict[str, object]) -> dict[str, float]:
    """``repeat`` runs of a variant: the fastest, with the highest peak memory of them all. Every
    run must find the workload's change rows."""
    runs = [measure(run, port, datadir, info) for _ in range(repeat)]
    for r in runs:
        if r["rows"] != info["change_rows"]:
            raise AssertionError(
                f"{shown(run)}: {r['rows']:,.0f} change rows, the workload made {info['change_rows']:,}"
            )
    best = min(runs, key=lambda x: x["seconds"])
    best["peak_rss_mb"] = max(x["peak_rss_mb"] for x in runs)
    return best


def print_ratios(results: dict[str, dict[str, float]], workers: int) -> None:
    """Every variant of ours against each reference run it is compared with (``COMPARED``), in
    change rows/s; the targets' ratios with met or MISSED."""
    speed = {run: r["rows"] / r["seconds"] for run, r in results.items()}
    targets = {(v.replace("-N", f"-{workers}"), ref): t for (v, ref), t in TARGETS.items()}
    for ref in REFERENCES:
        if ref not in speed:
            continue
        for run in (r for r in speed if r not in REFERENCES and ref in COMPARED.get(r, EXTRACT_COMPARED)):
            ratio = speed[run] / speed[ref]
            target = targets.get((run, ref))
            verdict = ""
            if target is not None:
                verdict = f" ({'met' if ratio >= target else 'MISSED'}, target >= {target:g}x)"
            print(f"ratio {shown(run)} / {shown(ref)} (change rows/s): {ratio:.2f}x{verdict}")
    for (run, ref), target in targets.items():
        if run not in speed or ref not in speed:
            print(f"ratio {shown(run)} / {shown(ref)}: not measured (target >= {target:g}x)")


def quarter_memory(
    run: str, port: int, datadir: Path, info: dict[str, object], whole: dict[str, float]
) -> None:
    """Memory must not grow with the interval: ``run`` on about its first quarter (ending at a
    transaction start near 25%)."""
    from loader.binlog.files import BinlogFiles
    from loader.binlog.split import split_points
    from loader.core.positions import Position

    file = str(info["file"])
    first, last = Position(file, int(str(info["start"]))), Position(file, int(str(info["end"])))
    cut = split_points(BinlogFiles(datadir / "binlog"), first, last, 4)
    q = measure(run, port, datadir, info, end=cut[0].pos)
    print(
        f"memory: {run} peak RSS {q['peak_rss_mb']:.0f} MB on a quarter of the interval "
        f"({q['rows']:,.0f} change rows), {whole['peak_rss_mb']:.0f} MB on all of it"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--table", choices=TABLES, default="default", help="the workload (default: default)")
    parser.add_argument(
        "--server",
        choices=sorted(SERVER_SCRIPTS),
        default=os.environ.get(SERVER_ENV, "mariadb"),
        help="the source server (default: mariadb; mysql is the MySQL make setup unpacked), "
        "whose own C tool is the reference",
    )
    parser.add_argument(
        "--changes",
        type=int,
        help="row changes (default: 1,000,000 for default, 240,000 for mixed and wide, 100,000 for oltp)",
    )
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 2, help="N of ours-files-N and ours-server-N"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each variant; the fastest counts")
    parser.add_argument(
        "--variants",
        help="comma-separated (default: all): ours-files-N, ours-server-N, ours-show-jsonl, "
        + ", ".join(REFERENCES),
    )
    parser.add_argument("--keep", help="a data directory to keep the server and workload in between runs")
    parser.add_argument(
        "--skip-reference",
        action="store_true",
        help="run only this loader (leave out " + ", ".join(REFERENCES) + ")",
    )
    for hidden in ("--child", "--port", "--datadir", "--file", "--start", "--end"):
        parser.add_argument(hidden, dest=hidden.strip("-").replace("child", "run"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ[SERVER_ENV] = args.server  # the measured children inherit it
    if args.run:
        args.port, args.start, args.end = int(args.port), int(args.start), int(args.end)
        child(args)
        return
    changes = args.changes or DEFAULT_CHANGES[args.table]
    if changes < 1 or args.workers < 1 or args.repeat < 1:
        parser.error("--changes, --workers and --repeat must be at least 1")
    datadir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-extract-"))
    wanted = variants_wanted(args, parser, datadir)
    port = start_server(datadir)
    try:
        info = generate(port, args.table, changes)
        print(f"server idle after the workload in {binlog_decode.settle(port):.1f} s")
        size = (datadir / "binlog" / str(info["file"])).stat().st_size
        print(
            f"binlog file: {size / 1e6:.0f} MB; every variant must find {info['change_rows']:,} change rows"
        )
        results = {}
        for run in wanted:
            results[run] = r = best_of(run, args.repeat, port, datadir, info)
            print(
                f"{shown(run):17s} {r['rows']:>10,.0f} change rows in {r['seconds']:6.2f} s = "
                f"{r['rows'] / r['seconds']:>9,.0f} rows/s, peak RSS {r['peak_rss_mb']:.0f} MB"
            )
        for many in (f"ours-files-{args.workers}", f"ours-server-{args.workers}"):
            if many in results:
                quarter_memory(many, port, datadir, info, results[many])
        print_ratios(results, args.workers)
    finally:
        stop_server(datadir)
        if not args.keep:
            shutil.rmtree(datadir, ignore_errors=True)


if __name__ == "__main__":
    main()
