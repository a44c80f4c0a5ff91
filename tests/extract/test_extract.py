"""Extraction from the private MariaDB into staging: files, manifest, ledger, schema changes."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import os
import zlib
from pathlib import Path
from typing import Any

import pytest

from loader.binlog.reader import SourceLog
from loader.binlog.spool import Piece
from loader.core.config import Config
from loader.core.errors import DecodeError, ExtractError, LedgerError, LoaderError
from loader.core.positions import Position
from loader.extract.interval import run_extract
from loader.staging import csvformat, layout
from loader.staging.manifest import Manifest
from loader.staging.stores import open_store
from loader.state.ledger import Ledger
from loader.state.records import EXTRACTED, Checkpoint
from tests.conftest import MariaDB, fresh_schema

pytestmark = pytest.mark.integration


def _config(mariadb: MariaDB, tmp_path: Path, schema: str, **staging: Any) -> Config:
    cfg = mariadb.config(tmp_path, tables={"include": f'["{schema}.*"]'})
    return dataclasses.replace(cfg, staging=dataclasses.replace(cfg.staging, **staging)) if staging else cfg


def _start_at_now(cfg: Config, mariadb: MariaDB) -> Position:
    """Set the checkpoint at the server's current position, as an initial load would."""
    pos = mariadb.execute()
    Ledger.of(cfg).set_checkpoint(Checkpoint(pos, "initial-load"))
    return pos


def _csv_rows(cfg: Config, manifest: Manifest, table: str) -> list[list[str | None]]:
    import csv
    import sys

    csv.field_size_limit(sys.maxsize)
    store = open_store(cfg.staging)
    entry = next(t for t in manifest.tables if t.table == table)
    rows: list[list[str | None]] = []
    for f in entry.files:
        data = store.get(f.path)
        assert data is not None
        rows.extend(list(csv.reader(data.decode().splitlines(keepends=True)))[1:])
    return rows


def test_interval_lands_in_staging_with_manifest_and_ledger(mariadb: MariaDB, tmp_path: Path) -> None:
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS ex1",
        "CREATE TABLE IF NOT EXISTS ex1.t (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2))",
    )
    cfg = _config(mariadb, tmp_path, "ex1")
    start = _start_at_now(cfg, mariadb)
    end = mariadb.execute(
        "INSERT INTO ex1.t VALUES (1, 'a', 1.50), (2, '', NULL), (3, 'c', -2.25)",
        "UPDATE ex1.t SET v = 'b' WHERE id = 2",
        "UPDATE ex1.t SET id = 30 WHERE id = 3",
        "DELETE FROM ex1.t WHERE id = 1",
    )
    summary = run_extract(cfg, progress=lambda _: None)
    assert summary is not None
    assert (summary.start, summary.end, summary.changes) == (str(start), str(end), 3 + 2 + 2 + 1)
    store = open_store(cfg.staging)
    manifest = Manifest.from_json(store.get(summary.manifest) or b"")
    (table,) = manifest.tables
    assert (table.schema, table.table, table.primary_key) == ("ex1", "t", ["id"])
    assert table.ops == {"I": 5, "D": 3}
    assert [c.mysql_type for c in table.layouts[0]] == ["int", "varchar", "decimal(10,2)"]
    rows = _csv_rows(cfg, manifest, "t")
    assert [r[0] for r in rows] == ["I", "I", "I", "D", "I", "D", "I", "D"]
    # An update is its D then its I: same seqno, consecutive row_ids.
    update = rows[3:5]
    assert update[0][1] == update[1][1] and int(update[1][2]) == int(update[0][2]) + 1
    assert update[0][4:] == ["2", "", ""] and update[1][4:] == ["2", "b", ""]
    assert rows[5][4] == "3" and rows[6][4] == "30"  # a primary key change
    for f in table.files:
        data = store.get(f.path) or b""
        assert f"crc32:{zlib.crc32(data):08x}" == f.checksum and len(data) == f.bytes
    interval = Ledger(store, cfg.source.name).intervals()[-1]
    assert interval.state == EXTRACTED and interval.manifest == summary.manifest
    # Nothing new: no interval.
    assert run_extract(cfg, progress=lambda _: None) is None


def test_extracting_again_writes_identical_bytes_whichever_decoder(mariadb: MariaDB, tmp_path: Path) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS ex2",
        "CREATE DATABASE ex2",
        "CREATE TABLE ex2.t (id INT PRIMARY KEY, b BLOB, v VARCHAR(40), l VARCHAR(10) CHARACTER SET latin1, "
        "bn BINARY(4), e ENUM('x', 'y\"z'), s SET('p', 'q'), f DOUBLE, d DECIMAL(12,3), dt DATETIME(6), "
        "tm TIME(2), j JSON) DEFAULT CHARSET=utf8mb4",
    )
    cfg = _config(mariadb, tmp_path, "ex2", gzip=True)
    python = dataclasses.replace(cfg, source=dataclasses.replace(cfg.source, decoder="python"))
    _start_at_now(cfg, mariadb)
    mariadb.execute(
        "INSERT INTO ex2.t VALUES (1, x'00ff', 'a \"quoted\",\nline', 'caf\xe9', x'01', 'y\"z', 'p,q', 1e16, "
        "-0.5, '2024-02-29 23:59:59.000001', '-00:00:00.5', '{\"k\": [1, 2.5]}'), "
        "(2, NULL, '', '', '', 'x', '', 0.1, 0, '1000-01-01 00:00:00', '838:59:59', 'null')",
        "UPDATE ex2.t SET v = 'ü' WHERE id = 2",
        "DELETE FROM ex2.t WHERE id = 1",
    )
    summary = run_extract(python, progress=lambda _: None)
    assert summary is not None
    store = open_store(cfg.staging)
    manifest = Manifest.from_json(store.get(summary.manifest) or b"")
    first = {k: store.get(k) for k in store.list("demo")}
    again_summary = run_extract(cfg, interval_id=summary.interval, progress=lambda _: None)
    assert again_summary is not None and again_summary.interval == summary.interval
    again = {k: store.get(k) for k in store.list("demo")}
    data_keys = [k for k in first if "/_ledger/" not in k]
    for k in data_keys:
        assert first[k] == again[k], k
    # Whole gzip files: the manifest's checksums are of what was stored.
    for f in manifest.tables[0].files:
        data = again[f.path] or b""
        assert f.path.endswith(".csv.gz") and (f"crc32:{zlib.crc32(data):08x}", len(data)) == (
            f.checksum,
            f.bytes,
        )
        assert gzip.decompress(data).decode().count("\n") >= 1 + 5


def test_max_changes_splits_a_backlog_at_transaction_boundaries(mariadb: MariaDB, tmp_path: Path) -> None:
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS ex3", "CREATE TABLE IF NOT EXISTS ex3.t (id INT PRIMARY KEY)"
    )
    cfg = _config(mariadb, tmp_path, "ex3")
    _start_at_now(cfg, mariadb)
    mariadb.execute(*[f"INSERT INTO ex3.t VALUES ({i * 2}), ({i * 2 + 1})" for i in range(10)])
    seen = 0
    intervals = []
    while (s := run_extract(cfg, max_changes=5, progress=lambda _: None)) is not None:
        intervals.append(s)
        seen += s.changes
    assert seen == 20
    assert [s.changes for s in intervals] == [6, 6, 6, 2]
    for a, b in itertools.pairwise(intervals):
        assert a.end == b.start


def test_no_checkpoint_and_no_primary_key_are_refused(mariadb: MariaDB, tmp_path: Path) -> None:
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS ex4", "CREATE TABLE IF NOT EXISTS ex4.nokey (a INT, b INT)"
    )
    cfg = _config(mariadb, tmp_path, "ex4")
    with pytest.raises(LedgerError, match="run the initial load first"):
        run_extract(cfg, progress=lambda _: None)
    _start_at_now(cfg, mariadb)
    mariadb.execute("INSERT INTO ex4.nokey VALUES (1, 2)")
    with pytest.raises(ExtractError, match=r"table ex4\.nokey has no primary key"):
        run_extract(cfg, progress=lambda _: None)
    keyed = dataclasses.replace(cfg, tables=dataclasses.replace(cfg.tables, keys={"ex4.nokey": ("a",)}))
    summary = run_extract(keyed, progress=lambda _: None)
    assert summary is not None and summary.changes == 1


def test_add_column_splits_files_and_drop_column_stops(mariadb: MariaDB, tmp_path: Path) -> None:
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS ex5",
        "CREATE TABLE IF NOT EXISTS ex5.t (id INT PRIMARY KEY, a INT)",
    )
    cfg = _config(mariadb, tmp_path, "ex5")
    _start_at_now(cfg, mariadb)
    mariadb.execute(
        "INSERT INTO ex5.t VALUES (1, 1)",
        "ALTER TABLE ex5.t ADD COLUMN b VARCHAR(10) NULL",
        "ALTER TABLE ex5.t MODIFY a BIGINT",
        "INSERT INTO ex5.t VALUES (2, 2, 'x')",
    )
    summary = run_extract(cfg, progress=lambda _: None)
    assert summary is not None
    manifest = Manifest.from_json(open_store(cfg.staging).get(summary.manifest) or b"")
    (table,) = manifest.tables
    assert [[c.name for c in lay] for lay in table.layouts] == [["id", "a"], ["id", "a", "b"]]
    assert [f.layout for f in table.files] == [0, 1]
    assert any("ADD COLUMN" in s["query"] for s in table.statements)
    mariadb.execute(
        "INSERT INTO ex5.t VALUES (3, 3, 'y')",
        "ALTER TABLE ex5.t DROP COLUMN a",
        "INSERT INTO ex5.t VALUES (4, 'z')",
    )
    with pytest.raises(
        ExtractError, match=r"ex5\.t: ALTER TABLE drops column a, which the warehouse table cannot follow"
    ):
        run_extract(cfg, progress=lambda _: None)


def test_truncate_of_a_selected_table_stops_with_the_statement(mariadb: MariaDB, tmp_path: Path) -> None:
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS ex6", "CREATE TABLE IF NOT EXISTS ex6.t (id INT PRIMARY KEY)"
    )
    cfg = _config(mariadb, tmp_path, "ex6")
    _start_at_now(cfg, mariadb)
    mariadb.execute("INSERT INTO ex6.t VALUES (1)", "TRUNCATE TABLE ex6.t")
    with pytest.raises(
        ExtractError,
        match=r"ex6\.t: TRUNCATE TABLE cannot be carried .*\(statement: TRUNCATE TABLE ex6\.t\); re-load",
    ):
        run_extract(cfg, progress=lambda _: None)


def test_odd_names_stay_inside_the_staging_root(mariadb: MariaDB, tmp_path: Path) -> None:
    schema, table = "we.ird ..", "t/../ '\"é"
    mariadb.execute(
        f"CREATE DATABASE IF NOT EXISTS `{schema}`",
        f"CREATE TABLE IF NOT EXISTS `{schema}`.`{table}` (id INT PRIMARY KEY)",
    )
    cfg = _config(mariadb, tmp_path, "we.ird*")
    cfg = dataclasses.replace(cfg, tables=dataclasses.replace(cfg.tables, include=("we.ird*.*",)))
    _start_at_now(cfg, mariadb)
    mariadb.execute(f"INSERT INTO `{schema}`.`{table}` VALUES (1)")
    summary = run_extract(cfg, progress=lambda _: None)
    assert summary is not None and summary.tables[0].table == f"{schema}.{table}"
    root = tmp_path / "staging"
    files = [p for p in root.rglob("*.csv")]
    assert len(files) == 1 and files[0].resolve().is_relative_to(root.resolve())
    assert layout.safe_component("..") == "%2E%2E"


def test_s3_staging(mariadb: MariaDB, tmp_path: Path, s3_endpoint: str, s3_bucket: str, spark: Any) -> None:
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS ex7",
        "CREATE TABLE IF NOT EXISTS ex7.t (id INT PRIMARY KEY, v TEXT)",
    )
    cfg = _config(mariadb, tmp_path, "ex7", uri=f"s3://{s3_bucket}/stage", s3_endpoint_url=s3_endpoint)
    _start_at_now(cfg, mariadb)
    mariadb.execute("INSERT INTO ex7.t VALUES (1, 'one'), (2, ''), (3, NULL)")
    summary = run_extract(cfg, progress=lambda _: None)
    assert summary is not None
    import boto3

    keys = [
        o["Key"]
        for o in boto3.client("s3", endpoint_url=s3_endpoint).list_objects_v2(Bucket=s3_bucket)["Contents"]
    ]
    assert f"stage/{summary.manifest}" in keys
    assert any(k.endswith("part-00000.csv") for k in keys)
    # Spark (without hadoop-aws here) reads the same bytes from a local copy.
    store = open_store(cfg.staging)
    manifest = Manifest.from_json(store.get(summary.manifest) or b"")
    local = tmp_path / "copy.csv"
    local.write_bytes(store.get(manifest.tables[0].files[0].path) or b"")
    rows = csvformat.read_staged(spark, [local.as_uri()], ["id", "v"]).collect()
    assert [(r._loader_op, r.id, r.v) for r in rows] == [("I", "1", "one"), ("I", "2", ""), ("I", "3", None)]


def test_interval_errors_leave_the_ledger_planned(mariadb: MariaDB, tmp_path: Path) -> None:
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS ex8", "CREATE TABLE IF NOT EXISTS ex8.t (id INT PRIMARY KEY)"
    )
    cfg = _config(mariadb, tmp_path, "ex8")
    _start_at_now(cfg, mariadb)
    mariadb.execute("INSERT INTO ex8.t VALUES (1)", "TRUNCATE TABLE ex8.t")
    with pytest.raises(LoaderError):
        run_extract(cfg, progress=lambda _: None)
    ledger = Ledger.of(cfg)
    (interval,) = ledger.intervals()
    assert interval.state == "planned" and interval.manifest is None
    assert not open_store(cfg.staging).list(layout.manifests_prefix(cfg.source.name))


def test_parallel_extraction_writes_the_same_rows(
    mariadb: MariaDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both transports, decoded in one process or cut into ranges, stage the same rows in the
    same order: across a rotation and with a large transaction's rows waiting on disk."""
    from loader.app import steps
    from loader.extract import decode

    monkeypatch.setattr(decode, "OPEN_ROWS_HELD_AT", 7)
    monkeypatch.setattr(decode, "PARALLEL_FROM_BYTES", 0)  # a few kB of binlog here
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS ex9",
        "CREATE TABLE IF NOT EXISTS ex9.a (id INT PRIMARY KEY, v VARCHAR(50))",
        "CREATE TABLE IF NOT EXISTS ex9.b (id INT PRIMARY KEY, d DATETIME(6))",
    )
    base = _config(mariadb, tmp_path, "ex9")
    files_cfg = dataclasses.replace(
        base, source=dataclasses.replace(base.source, transport="files", binlog_dir=str(mariadb.binlog_dir))
    )
    start = mariadb.execute()
    for i in range(60):
        mariadb.execute(
            f"INSERT INTO ex9.a VALUES ({i}, 'row {i}')",
            f"INSERT INTO ex9.b VALUES ({i}, '2024-01-01 00:00:{i % 60:02d}.{i:06d}')",
            f"UPDATE ex9.a SET v = 'changed' WHERE id = {i // 2}",
        )
        if i == 30:
            mariadb.execute("FLUSH BINARY LOGS")
        if i == 40:  # one transaction of 20 rows
            mariadb.execute("INSERT INTO ex9.b SELECT id + 1000, NULL FROM ex9.a WHERE id < 20")
    end = mariadb.execute()
    outputs = {}
    said: list[str] = []
    for transport, workers in (("files", 1), ("files", 3), ("server", 1), ("server", 3), ("server", None)):
        cfg = files_cfg if transport == "files" else base
        staging = tmp_path / f"staging-{transport}-{workers}"
        cfg = dataclasses.replace(cfg, staging=dataclasses.replace(cfg.staging, uri=str(staging)))
        if workers is None:  # as the DAG's extract runs it: the default number of processes
            summary = steps.extract(cfg, start=start, end=end, progress=said.append)
        else:
            summary = run_extract(cfg, start, end, workers=workers, progress=said.append)
        assert summary is not None
        manifest = Manifest.from_json(open_store(cfg.staging).get(summary.manifest) or b"")
        outputs[transport, workers] = (
            summary.changes,
            {t.table: t.ops for t in manifest.tables},
            {t: _csv_rows(cfg, manifest, t) for t in ("a", "b")},
            len(manifest.tables[0].files),
        )
    # 60 + 60 + 20 inserts, and 30 updates that change a row (each a D and an I).
    reference = outputs["server", 1]
    assert reference[0] == 60 + 60 + 20 + 30 * 2 and reference[3] == 1
    for key, out in outputs.items():
        assert out[:3] == reference[:3], key
    # The work really was split: the server's stream in more ranges than processes (up to twice
    # as many; fewer where a transaction spans a cut).
    assert outputs["files", 3][3] > 1 and 3 < outputs["server", 3][3] <= 6
    assert sum("read from the server" in line for line in said) > 3 + (os.cpu_count() or 1)


def test_a_range_spooled_from_the_server_is_removed_once_decoded(mariadb: MariaDB, tmp_path: Path) -> None:
    """The spool of a server's stream takes scratch disk only for the ranges still to decode."""
    from loader.binlog.reader import open_transport
    from loader.binlog.spool import spool_pieces

    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS ex14", "CREATE TABLE IF NOT EXISTS ex14.t (id INT PRIMARY KEY, v TEXT)"
    )
    cfg = _config(mariadb, tmp_path, "ex14")
    start = mariadb.execute()
    end = mariadb.execute(*(f"INSERT INTO ex14.t VALUES ({i}, REPEAT('v', 500))" for i in range(20)))
    transport = open_transport(cfg.source)
    try:
        events = transport.events(start, end)
        pieces = list(spool_pieces(events, start, end, end.pos - start.pos, 3, str(tmp_path)))
    finally:
        transport.close()
    assert len(pieces) == 3
    changes = 0
    for i, piece in enumerate(pieces):
        assert Path(piece.path).exists()
        changes += _decode_spooled(cfg, piece, tmp_path / f"w{i}")
        assert not Path(piece.path).exists()
        assert all(Path(p.path).exists() for p in pieces[i + 1 :])
    assert changes == 20


def test_a_transaction_longer_than_a_run_across_the_cut_is_spooled_whole(
    mariadb: MariaDB, tmp_path: Path
) -> None:
    """A cut that falls inside a transaction of several runs of the server's stream is made where
    the next transaction starts, and every change is decoded once."""
    from loader.binlog.reader import open_transport
    from loader.binlog.spool import spool_pieces
    from loader.binlog.transport import RUN_BYTES

    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS ex15",
        "CREATE TABLE IF NOT EXISTS ex15.t (id INT PRIMARY KEY, v LONGTEXT)",
    )
    cfg = _config(mariadb, tmp_path, "ex15")
    start = mariadb.execute()
    mariadb.execute("INSERT INTO ex15.t VALUES (0, 'first')")
    rows = 4 * RUN_BYTES // 40_000
    big = [
        "BEGIN",
        *(f"INSERT INTO ex15.t VALUES ({i}, REPEAT('v', 40000))" for i in range(1, rows)),
        "COMMIT",
    ]
    after_big = mariadb.execute(*big)
    end = mariadb.execute(*(f"INSERT INTO ex15.t VALUES ({i}, 'small')" for i in range(rows, rows + 10)))
    transport = open_transport(cfg.source)
    try:
        runs = transport.runs(start, end)  # as the extract spools with the native decoder
        pieces = list(spool_pieces(runs, start, end, end.pos - start.pos, 2, str(tmp_path)))
    finally:
        transport.close()
    assert len(pieces) == 2
    assert after_big <= pieces[0].end < end
    assert sum(_decode_spooled(cfg, piece, tmp_path / f"w{i}") for i, piece in enumerate(pieces)) == rows + 10


def test_the_servers_stream_is_cut_at_shares_of_the_log_where_the_server_leaves_events_out(
    mariadb: MariaDB, tmp_path: Path
) -> None:
    """MariaDB writes each statement's text to the binlog (an Annotate_rows event) and leaves it
    out of a replica's stream: single-row transactions of long statements are most of their log
    and little of the stream. The pieces are still cut at shares of the log, so that each
    process gets its share of the work."""
    from loader.binlog.reader import open_transport
    from loader.binlog.spool import spool_pieces

    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS ex16", "CREATE TABLE IF NOT EXISTS ex16.t (id INT PRIMARY KEY, v INT)"
    )
    cfg = _config(mariadb, tmp_path, "ex16")
    start = mariadb.execute()
    long_text = "x" * 2000  # in the statement, not in the row
    end = mariadb.execute(
        *(f"INSERT INTO ex16.t SELECT {i}, {i} FROM DUAL WHERE '{long_text}' <> ''" for i in range(60))
    )
    total = end.pos - start.pos
    for read in ("events", "runs"):  # the Python decoder's stream, and the native one's
        transport = open_transport(cfg.source)
        try:
            stream = getattr(transport, read)(start, end)
            pieces = list(spool_pieces(stream, start, end, total, 3, str(tmp_path)))
        finally:
            transport.close()
        spans = [p.end.pos - p.start.pos for p in pieces]
        assert len(pieces) == 3 and all(total / 6 < span < total / 2 for span in spans), (read, spans, total)
        assert sum(p.bytes for p in pieces) == total
        assert sum(_decode_spooled(cfg, p, tmp_path / f"{read}{i}") for i, p in enumerate(pieces)) == 60


def _decode_spooled(cfg: Config, piece: Piece, folder: Path) -> int:
    """The changes a decoding process stages from one spooled piece of the server's stream."""
    from loader.extract import decode

    settings = decode.ExtractSettings.of(cfg)
    log = SourceLog.of(cfg.source)
    return decode._extract_range(
        settings, log, piece.start, piece.end, str(folder), None, None, "", spool=piece.path
    ).changes


def test_a_stop_in_a_range_decoded_by_another_process_stops_the_extract_as_in_one(
    mariadb: MariaDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loader.extract import decode

    monkeypatch.setattr(decode, "PARALLEL_FROM_BYTES", 0)
    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS ex13", "CREATE TABLE IF NOT EXISTS ex13.t (id INT PRIMARY KEY, a INT)"
    )
    cfg = _config(mariadb, tmp_path, "ex13")
    _start_at_now(cfg, mariadb)
    for i in range(40):
        mariadb.execute(f"INSERT INTO ex13.t VALUES ({i}, {i})")
    mariadb.execute("ALTER TABLE ex13.t DROP COLUMN a", "INSERT INTO ex13.t VALUES (100)")
    said: list[str] = []
    errors = []
    for workers in (1, 2):
        with pytest.raises(ExtractError) as stopped:
            run_extract(cfg, workers=workers, progress=said.append)
        errors.append(str(stopped.value))
    assert errors[0] == errors[1] and "ALTER TABLE drops column a" in errors[0]
    assert sum("read from the server" in line for line in said) > 1  # decoded in ranges
    (interval,) = Ledger.of(cfg).intervals()
    assert interval.state == "planned" and interval.manifest is None
    assert not open_store(cfg.staging).list(layout.manifests_prefix(cfg.source.name))


def test_extract_command_prints_a_summary(mariadb: MariaDB, tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    mariadb.execute(
        "CREATE DATABASE IF NOT EXISTS ex10",
        "CREATE TABLE IF NOT EXISTS ex10.t (id INT PRIMARY KEY)",
    )
    start = mariadb.execute()
    end = mariadb.execute("INSERT INTO ex10.t VALUES (1), (2)", "DELETE FROM ex10.t WHERE id = 2")
    env = {
        **os.environ,
        "LOADER_TEST_PASSWORD": mariadb.password,
        "LOADER__SOURCE__PORT": str(mariadb.port),
        "LOADER__SOURCE__PASSWORD_ENV": "LOADER_TEST_PASSWORD",
        "LOADER__TABLES__INCLUDE": '["ex10.*"]',
        "LOADER__STAGING__URI": str(tmp_path / "staging"),
    }
    loader = str(Path(sys.executable).with_name("loader"))
    args = [loader, "extract", "--from", str(start), "--to", str(end)]
    out = subprocess.run([*args, "--output", "json"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["changes"] == 3 and data["tables"] == [
        {"table": "ex10.t", "ops": {"D": 1, "I": 2}, "files": 1, "bytes": data["tables"][0]["bytes"]}
    ]
    text = subprocess.run([loader, "extract"], capture_output=True, text=True, env=env, timeout=120)
    assert text.returncode == 0 and "nothing new" in text.stdout


@pytest.mark.parametrize("decoder", ["native", "python"])
def test_a_large_transaction_waits_on_disk_and_stages_the_same_rows(
    mariadb: MariaDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decoder: str
) -> None:
    from loader.extract import decode

    mariadb.execute(
        "DROP DATABASE IF EXISTS ex_big",
        "CREATE DATABASE ex_big",
        "CREATE TABLE ex_big.t (id INT PRIMARY KEY, s TEXT)",
        "CREATE TABLE ex_big.u (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE ex_big.m (id INT PRIMARY KEY) ENGINE=MyISAM",
    )
    whole = _config(mariadb, tmp_path / "whole", "ex_big")
    whole = dataclasses.replace(whole, source=dataclasses.replace(whole.source, decoder=decoder))
    start = _start_at_now(whole, mariadb)
    values = ", ".join(f"({i}, 'line {i}\\nwith, \"quotes\"')" for i in range(1, 301))
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            # One transaction of 300 inserts, 300 updates (two rows each) and 50 deletes over two
            # tables, values with newlines, commas and quotes; then a small one.
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO ex_big.t VALUES {values}")
            cur.execute("INSERT INTO ex_big.u SELECT id, id FROM ex_big.t")
            cur.execute("UPDATE ex_big.t SET s = CONCAT(s, '!')")
            cur.execute("DELETE FROM ex_big.u WHERE id <= 50")
            cur.execute("COMMIT")
            # Rolled back: only the non-transactional table's row is logged.
            cur.execute("BEGIN")
            cur.execute("UPDATE ex_big.u SET v = -v")
            cur.execute("INSERT INTO ex_big.m VALUES (1)")
            cur.execute("ROLLBACK")
            cur.execute("UPDATE ex_big.u SET v = 0 WHERE id = 51")
    finally:
        conn.close()
    held = _config(mariadb, tmp_path / "held", "ex_big")
    held = dataclasses.replace(held, source=dataclasses.replace(held.source, decoder=decoder))
    Ledger.of(held).set_checkpoint(Checkpoint(start, "initial-load"))

    in_memory = run_extract(whole, progress=lambda _: None)
    monkeypatch.setattr(decode, "OPEN_ROWS_HELD_AT", 7)
    on_disk = run_extract(held, progress=lambda _: None)
    assert in_memory is not None and on_disk is not None
    assert on_disk.changes == in_memory.changes == 300 + 300 + 600 + 50 + 1 + 2
    for table in ("t", "u", "m"):
        a = Manifest.from_json(open_store(whole.staging).get(in_memory.manifest) or b"")
        b = Manifest.from_json(open_store(held.staging).get(on_disk.manifest) or b"")
        assert _csv_rows(held, b, table) == _csv_rows(whole, a, table)
        assert [f.checksum for f in next(t for t in b.tables if t.table == table).files] == [
            f.checksum for f in next(t for t in a.tables if t.table == table).files
        ]
    assert not list((tmp_path / "held").rglob("held.csv"))


def test_rows_a_rollback_to_savepoint_undid_are_not_staged_and_a_non_transactional_engine_stops(
    mariadb: MariaDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows after a savepoint are held in memory until the commit, also in a transaction
    large enough for its rows to wait on disk, so that a ROLLBACK TO can still take them back;
    rows it takes back of a table the source reports as non-transactional stop the read."""
    from loader.binlog.files import BinlogFiles
    from loader.binlog.reader import read_transactions
    from loader.binlog.schema import SourceTable, StaticSchema
    from loader.extract import decode

    fresh_schema(
        mariadb,
        "ex_savepoint",
        "i (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
        "m (id INT PRIMARY KEY) ENGINE=MyISAM",
    )
    whole = _config(mariadb, tmp_path / "whole", "ex_savepoint")
    start = _start_at_now(whole, mariadb)
    conn = mariadb.connect(database="ex_savepoint")
    try:
        with conn.cursor() as cur:
            for statement in [
                "BEGIN",
                "INSERT INTO i SELECT seq, seq FROM seq_1_to_20",
                "SAVEPOINT s",
                "UPDATE i SET v = -v",
                "INSERT INTO m VALUES (1)",
                "ROLLBACK TO SAVEPOINT s",
                "INSERT INTO i VALUES (100, 100)",
                "COMMIT",
                # Rolled back to a savepoint at its start: logged as a group that ends in ROLLBACK.
                "BEGIN",
                "SAVEPOINT z",
                "INSERT INTO i VALUES (200, 200)",
                "INSERT INTO m VALUES (2)",
                "ROLLBACK TO SAVEPOINT z",
                "COMMIT",
            ]:
                cur.execute(statement)
    finally:
        conn.close()
    end = mariadb.execute()
    held = _config(mariadb, tmp_path / "held", "ex_savepoint")
    Ledger.of(held).set_checkpoint(Checkpoint(start, "initial-load"))
    in_memory = run_extract(whole, progress=lambda _: None)
    monkeypatch.setattr(decode, "OPEN_ROWS_HELD_AT", 7)  # the 20 inserts wait on disk
    on_disk = run_extract(held, progress=lambda _: None)
    assert in_memory is not None and on_disk is not None
    a = Manifest.from_json(open_store(whole.staging).get(in_memory.manifest) or b"")
    b = Manifest.from_json(open_store(held.staging).get(on_disk.manifest) or b"")
    staged = _csv_rows(whole, a, "i")
    assert _csv_rows(held, b, "i") == staged
    assert [(row[0], row[4], row[5]) for row in staged] == [
        *(("I", str(n), str(n)) for n in range(1, 21)),
        ("I", "100", "100"),
    ]
    assert [row[4] for row in _csv_rows(whole, a, "m")] == ["1", "2"]

    # Were the source to report the table as non-transactional now (its engine changed since?),
    # whether it kept the rows cannot be told: the read stops naming the table to re-load.
    def read(transactional: bool | None) -> int:
        table = SourceTable("ex_savepoint", "i", (), ("id",), transactional=transactional)
        schema = StaticSchema({("ex_savepoint", "i"): table})
        txs = read_transactions(BinlogFiles(mariadb.binlog_dir), start, end, schema=schema)
        return sum(tx.change_count for tx in txs)

    assert read(True) == read(None) == 20 + 1 + 2  # m's rows are groups of their own
    with pytest.raises(DecodeError) as stopped:
        read(False)
    assert "ROLLBACK TO SAVEPOINT s in the transaction that starts at" in str(stopped.value)
    assert str(stopped.value).endswith("loader initial-load --tables ex_savepoint.i")


def test_rows_of_a_transaction_that_never_commits_are_not_staged_even_once_handed_out(
    mariadb: MariaDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction whose commit never came (the binlog ended inside it after a crash, and the
    next transaction began) stages nothing, also when its rows were handed out and held."""
    from loader.binlog.constants import EventType
    from loader.extract import decode

    mariadb.execute(
        "DROP DATABASE IF EXISTS ex_lost",
        "CREATE DATABASE ex_lost",
        "CREATE TABLE ex_lost.t (id INT PRIMARY KEY, v INT)",
    )
    whole = _config(mariadb, tmp_path / "whole", "ex_lost")
    start = _start_at_now(whole, mariadb)
    mariadb.execute(
        "INSERT INTO ex_lost.t SELECT seq, seq FROM ex_lost.seq_1_to_5",
        "INSERT INTO ex_lost.t SELECT seq, seq FROM ex_lost.seq_100_to_120",  # never commits
        "UPDATE ex_lost.t SET v = -v WHERE id <= 2",
    )
    held = _config(mariadb, tmp_path / "held", "ex_lost")
    Ledger.of(held).set_checkpoint(Checkpoint(start, "initial-load"))

    # The server sends the binlog as it is, less the second transaction's commit event.
    real_transport = SourceLog.open
    commits = itertools.count()

    def losing_a_commit(log: SourceLog) -> Any:
        transport = real_transport(log)
        events = transport.events

        def without_the_commit(*a: Any, **k: Any) -> Any:
            for raw in events(*a, **k):
                if raw.data[4] == EventType.XID and next(commits) == 1:
                    continue
                yield raw

        transport.events = without_the_commit
        transport.runs = None  # read as events (grouped into runs for the native reader)
        return transport

    monkeypatch.setattr(SourceLog, "open", losing_a_commit)
    in_memory = run_extract(whole, progress=lambda _: None)
    commits = itertools.count()
    monkeypatch.setattr(decode, "OPEN_ROWS_HELD_AT", 3)  # its 21 rows are handed out, held, then dropped
    on_disk = run_extract(held, progress=lambda _: None)
    assert in_memory is not None and on_disk is not None
    assert on_disk.changes == in_memory.changes == 5 + 2 * 2  # an update stages as D and I
    a = Manifest.from_json(open_store(whole.staging).get(in_memory.manifest) or b"")
    b = Manifest.from_json(open_store(held.staging).get(on_disk.manifest) or b"")
    rows = _csv_rows(held, b, "t")
    assert rows == _csv_rows(whole, a, "t")
    assert sorted({int(r[4] or 0) for r in rows}) == [1, 2, 3, 4, 5], rows
    assert not list((tmp_path / "held").rglob("held.csv"))


def test_the_native_reader_stages_what_the_python_decoder_stages(
    mariadb: MariaDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Single-row transactions as OLTP traffic writes them, read from the binlog files, are
    taken whole by the native reader; everything around them (statements, a schema change, a
    rollback, savepoints, a transaction large enough to wait on disk, an unselected table, a
    rotation, parts cut small, intervals cut by --max-changes) by the Python reader: the
    staged bytes, manifests and interval records equal the Python decoder's."""
    import random

    from loader.extract import decode

    monkeypatch.setattr(decode, "OPEN_ROWS_HELD_AT", 40)
    taken = []
    write_native = decode._RangeTables.native
    monkeypatch.setattr(
        decode._RangeTables,
        "native",
        lambda self, run: taken.append(run.result.transactions) or write_native(self, run),
    )
    mariadb.execute(
        "DROP DATABASE IF EXISTS ex_nat",
        "CREATE DATABASE ex_nat",
        "CREATE TABLE ex_nat.a (id INT PRIMARY KEY, v VARCHAR(40), d DECIMAL(9,2), t DATETIME(3), f DOUBLE)",
        "CREATE TABLE ex_nat.c (id BIGINT PRIMARY KEY, j JSON, s TEXT) DEFAULT CHARSET=utf8mb4",
        "CREATE TABLE ex_nat.skipped (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE ex_nat.m (id INT PRIMARY KEY) ENGINE=MyISAM",
    )
    base = _config(mariadb, tmp_path, "ex_nat")
    base = dataclasses.replace(
        base,
        source=dataclasses.replace(base.source, transport="files", binlog_dir=str(mariadb.binlog_dir)),
        tables=dataclasses.replace(base.tables, exclude=("ex_nat.skipped",)),
        staging=dataclasses.replace(base.staging, part_bytes=2500),  # parts cut every few rows
    )
    start = _start_at_now(base, mariadb)
    rng = random.Random(7)
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            conn.autocommit(True)
            for i in range(240):
                k = rng.randrange(40)
                table = rng.choice(["a", "a", "c", "skipped"])
                if table == "a":
                    cur.execute(
                        "INSERT INTO ex_nat.a (id, v, d, t, f) VALUES (%s, %s, %s, '2024-05-06 07:08:09.123', %s) "
                        "ON DUPLICATE KEY UPDATE v = CONCAT(v, '\"'), d = d + 1",
                        (k, f'row {i}, "q"\n', i / 4, i / 3),
                    )
                elif table == "c":
                    cur.execute(
                        "REPLACE INTO ex_nat.c VALUES (%s, %s, %s)",
                        (k, f'{{"n": {i}, "s": "é"}}', "x" * (i % 50)),
                    )
                else:
                    cur.execute("REPLACE INTO ex_nat.skipped VALUES (%s, %s)", (k, i))
                if i % 37 == 0:
                    cur.execute("DELETE FROM ex_nat.a WHERE id = %s", (rng.randrange(40),))
                if i == 80:
                    cur.execute("ALTER TABLE ex_nat.a ADD COLUMN z INT")  # a new layout from here
                if i == 100:
                    cur.execute("FLUSH BINARY LOGS")
                if i == 120:
                    conn.autocommit(False)
                    cur.execute("INSERT INTO ex_nat.c SELECT id + 1000, NULL, 'big' FROM ex_nat.a")
                    cur.execute("INSERT INTO ex_nat.c SELECT id + 2000, '[]', 'big' FROM ex_nat.a")
                    cur.execute("SAVEPOINT s1")
                    cur.execute("UPDATE ex_nat.a SET v = 'undone'")
                    cur.execute("ROLLBACK TO SAVEPOINT s1")
                    conn.commit()
                    cur.execute("UPDATE ex_nat.a SET v = 'rolled back'")
                    cur.execute("INSERT INTO ex_nat.m VALUES (1)")  # logged in a group of its own
                    conn.rollback()
                    conn.autocommit(True)
    finally:
        conn.close()
    outputs = {}
    # The server's stream leaves out MariaDB's annotations: its runs have gaps.
    for decoder, transport in (("python", "files"), ("native", "files"), ("native", "server")):
        cfg = dataclasses.replace(
            base,
            source=dataclasses.replace(base.source, decoder=decoder, transport=transport),
            staging=dataclasses.replace(base.staging, uri=str(tmp_path / f"{decoder}-{transport}")),
        )
        Ledger.of(cfg).set_checkpoint(Checkpoint(start, "initial-load"))
        summaries = []
        while (s := run_extract(cfg, max_changes=150, progress=lambda _: None)) is not None:
            summaries.append((s.start, s.end, s.changes, [(t.table, t.ops, t.files) for t in s.tables]))
        store = open_store(cfg.staging)
        staged = {k: store.get(k) for k in store.list("demo") if "/_ledger/" not in k}
        intervals = Ledger.of(cfg).intervals()
        outputs[decoder, transport] = (summaries, staged, intervals)
        if decoder == "native":
            assert sum(taken) >= 150, taken  # most transactions were the native reader's
            taken.clear()
    python = outputs["python", "files"]
    assert len(python[0]) >= 3
    for native in (outputs["native", "files"], outputs["native", "server"]):
        assert native[0] == python[0]
        assert native[1].keys() == python[1].keys()
        for key, data in python[1].items():
            assert native[1][key] == data, key
        assert native[2] == python[2]
