"""On-call ways out, on the private MariaDB and a local Spark: a start the server cannot read is
refused before anything is recorded, an interval that cannot be extracted is abandoned with a
reason, and a purged binlog is left behind by re-loading every table."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pymysql
import pytest

from loader.app import steps
from loader.core import crashpoints
from loader.core.config import Config
from loader.core.errors import LoaderError, is_transient
from loader.core.positions import Position
from loader.source.connection import connect, credentials
from loader.staging import layout
from loader.state import lease
from loader.state.ledger import Ledger
from loader.state.records import ABANDONED, MATERIALISED, Interval
from loader.warehouse.initial_load import run_initial_load
from loader.warehouse.materialize import run_materialize
from tests.conftest import (
    Loaded,
    MariaDB,
    assert_equal_to_source,
    delta,
    fresh_schema,
    quiet,
    run_loader,
    schema_config,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _last_line(run: subprocess.CompletedProcess[str]) -> str:
    return run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""


def test_a_start_the_server_cannot_read_is_refused_and_a_stuck_interval_is_abandoned(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    cfg = loaded("ops_start", ["t (id INT PRIMARY KEY, v INT)"], ["INSERT INTO ops_start.t VALUES (1, 1)"])
    ledger = Ledger.of(cfg)
    checkpoint = ledger.checkpoint()
    assert checkpoint is not None
    cp = checkpoint.position
    now = mariadb.execute(
        "INSERT INTO ops_start.t VALUES (2, 2)", "UPDATE ops_start.t SET v = 10 WHERE id = 1"
    )
    base = now.file.rsplit(".", 1)[0]
    toml = mariadb.config_file(tmp_path, cfg.source.name, "ops_start.*")  # the ledger is what counts

    # Mistyped starts: refused with the reason last and exit 1, by a run and a dry run alike.
    for args, reason in [
        (["--from", f"{base}.999999:4"], f"{base}.999999:4 lies past the server's current position"),
        (
            ["--from", "other-bin.000001:4"],
            f"binlog file other-bin.000001 is not on the server (its files are {base}",
        ),
        (["--from", f"{cp.file}:{cp.pos + 1}"], f"{cp.file}:{cp.pos + 1} is not where an event starts"),
        (
            ["--lognum", str(now.lognum), "--logpos", str(now.pos + 1_000_000)],
            f"{now.file}:{now.pos + 1_000_000} lies past the server's current position",
        ),
    ]:
        for dry in ([], ["--dry-run"]):
            refused = run_loader(mariadb, toml, "run-once", *args, *dry)
            assert refused.returncode == 1, refused.stdout + refused.stderr
            assert reason in _last_line(refused), _last_line(refused)
    # An end before the start is refused as such, not planned as a backwards range.
    backwards = run_loader(mariadb, toml, "extract", "--from", str(now), "--to", str(cp))
    assert backwards.returncode == 1 and _last_line(backwards).endswith(
        f"the interval asked for ends at {cp}, before its start {now}: an interval cannot run "
        "backwards; give an end after the start"
    ), _last_line(backwards)
    assert ledger.intervals() == [] and ledger.checkpoint() == checkpoint

    # An interval recorded with a start no event has (by a loader before these checks, or by
    # hand) would be retried forever: the run names it and the way out.
    stuck = Interval(layout.interval_id(1), Position(cp.file, cp.pos + 1), now)
    ledger.save(stuck)
    with pytest.raises(LoaderError) as refused:
        steps.extract(cfg, progress=quiet)
    message = str(refused.value)
    assert message.startswith(
        f"interval {stuck.id} cannot be extracted: {stuck.start} is not where an event starts"
    )
    assert f"loader interval abandon {stuck.id} --reason" in message

    abandoned = run_loader(mariadb, toml, "interval", "abandon", stuck.id, "--reason", "start typed by hand")
    assert abandoned.returncode == 0, abandoned.stdout + abandoned.stderr
    assert f"abandoned 1 interval: {stuck.id}" in abandoned.stdout
    assert f"the next run plans again from {checkpoint.position}" in abandoned.stdout
    again = run_loader(mariadb, toml, "interval", "abandon", stuck.id, "--reason", "twice")
    assert again.returncode == 1 and "was abandoned already: start typed by hand" in _last_line(again)

    listed = json.loads(run_loader(mariadb, toml, "intervals", "--output", "json").stdout)
    assert [(i["id"], i["state"], i["abandoned_reason"]) for i in listed["intervals"]] == [
        (stuck.id, ABANDONED, "start typed by hand")
    ]
    status = steps.status(cfg)
    assert status.intervals[ABANDONED] == 1 and status.last_error is None

    # The next run plans again from the checkpoint and carries every change.
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    [old, new] = ledger.intervals()
    assert (old.state, new.state, new.start) == (ABANDONED, MATERIALISED, checkpoint.position)
    text = run_loader(mariadb, toml, "intervals").stdout
    assert f"{stuck.id}  abandoned" in text and "start typed by hand" in text, text
    refused_again = run_loader(mariadb, toml, "interval", "abandon", new.id, "--reason", "late")
    assert refused_again.returncode == 1 and f"interval {new.id} is materialised" in _last_line(refused_again)


def test_a_purged_binlog_stops_every_run_until_every_table_is_reloaded(
    disposable_mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    db = disposable_mariadb
    fresh_schema(db, "ops_purge", "t (id INT PRIMARY KEY, v INT)", "u (id INT PRIMARY KEY)")
    db.execute("INSERT INTO ops_purge.t VALUES (1, 1)", "INSERT INTO ops_purge.u VALUES (1), (2)")
    cfg = schema_config(db, tmp_path, spark_config, "ops_purge")
    run_initial_load(spark, cfg, progress=quiet)
    ledger = Ledger.of(cfg)
    checkpoint = ledger.checkpoint()
    assert checkpoint is not None

    # An interval is planned, then the server purges the log it covers.
    db.execute("INSERT INTO ops_purge.t VALUES (2, 2)")
    planned = steps.plan(cfg)
    assert planned.interval is not None
    old = db.execute("FLUSH BINARY LOGS")
    sizes = dict(db.rows("SHOW BINARY LOGS"))  # type: ignore[arg-type]
    beyond = Position(checkpoint.position.file, int(sizes[checkpoint.position.file]) + 10)
    with pytest.raises(LoaderError, match=rf"lies outside {beyond.file}, whose events run from 4 to"):
        steps.plan(cfg, start=beyond, dry_run=True)
    db.execute("INSERT INTO ops_purge.t VALUES (3, 3)", "DELETE FROM ops_purge.u WHERE id = 1")
    # MariaDB keeps a file until its binlog checkpoint has moved past it (a moment after the
    # rotation, longer on a busy machine): purge until the file is gone.
    deadline = time.monotonic() + 60
    while checkpoint.position.file in dict(db.rows("SHOW BINARY LOGS")):  # type: ignore[arg-type]
        assert time.monotonic() < deadline, "the server kept the purged binlog file for a minute"
        db.execute(f"PURGE BINARY LOGS TO '{old.file}'")
        time.sleep(0.2)

    with pytest.raises(LoaderError) as stuck:
        steps.extract(cfg, progress=quiet)
    message = str(stuck.value)
    assert f"interval {planned.interval} cannot be extracted: binlog file" in message
    assert f"is no longer on the server (purged: its oldest file is {old.file})" in message
    assert message.endswith("re-load every table (loader initial-load)")
    assert ledger.checkpoint() == checkpoint

    # Abandoning it does not help: the log before it is gone too, and the run says so.
    steps.abandon(cfg, planned.interval, "its binlog was purged")
    with pytest.raises(LoaderError) as gone:
        steps.plan(cfg)
    assert f"changes continue at {checkpoint.position}, but binlog file" in str(gone.value)
    assert "Re-load every table (loader initial-load)" in str(gone.value)
    assert len(ledger.intervals()) == 1

    # A re-load of every table moves the checkpoint to its P0; the delta runs continue from it.
    db.execute("INSERT INTO ops_purge.t VALUES (4, 4)")
    run_initial_load(spark, cfg, progress=quiet)
    reloaded = ledger.checkpoint()
    assert reloaded is not None and reloaded.position > checkpoint.position
    assert reloaded.interval == ledger.loads()[-1].id
    db.execute("UPDATE ops_purge.t SET v = 40 WHERE id = 4", "DELETE FROM ops_purge.u WHERE id = 2")
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    assert ledger.intervals()[-1].start == reloaded.position


def test_a_reload_of_every_table_supersedes_the_intervals_left_behind(
    disposable_mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    db = disposable_mariadb
    fresh_schema(db, "ops_super", "t (id INT PRIMARY KEY, v INT)")
    db.execute("INSERT INTO ops_super.t VALUES (1, 1)")
    cfg = schema_config(db, tmp_path, spark_config, "ops_super")
    run_initial_load(spark, cfg, progress=quiet)
    ledger = Ledger.of(cfg)
    db.execute("INSERT INTO ops_super.t VALUES (2, 2)")
    extracted = steps.extract(cfg, progress=quiet)
    db.execute("INSERT INTO ops_super.t VALUES (3, 3)")

    # A re-load of some tables leaves the interval waiting; one of every table supersedes it.
    run_initial_load(spark, cfg, only=["ops_super.t"], progress=quiet)
    assert ledger.get(extracted.interval).state != ABANDONED  # type: ignore[union-attr]
    run_initial_load(spark, cfg, progress=quiet)
    superseded = ledger.get(extracted.interval)
    assert superseded is not None and superseded.state == ABANDONED
    assert superseded.abandoned_reason.startswith(f"superseded by the re-load {ledger.loads()[-1].id}")  # type: ignore[union-attr]
    db.execute("UPDATE ops_super.t SET v = 30 WHERE id = 3")
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)


def test_a_frozen_or_stopped_server_fails_the_step_as_transient_and_the_rerun_carries_on(
    disposable_mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    db = disposable_mariadb
    fresh_schema(db, "ops_down", "t (id INT PRIMARY KEY, v INT)")
    db.execute("INSERT INTO ops_down.t VALUES (1, 1)")
    cfg = schema_config(db, tmp_path, spark_config, "ops_down")
    run_initial_load(spark, cfg, progress=quiet)
    ledger = Ledger.of(cfg)
    checkpoint = ledger.checkpoint()
    db.execute("INSERT INTO ops_down.t VALUES (2, 2)", "UPDATE ops_down.t SET v = 10 WHERE id = 1")
    toml = db.config_file(tmp_path, cfg.source.name, "ops_down.*")
    quick = {"LOADER__SOURCE__CONNECT_TIMEOUT_SECONDS": "2", "LOADER__SOURCE__READ_TIMEOUT_SECONDS": "2"}

    # A frozen server accepts the connection and answers nothing: the step gives up after the
    # connect timeout (the subprocess's own timeout catches a hang) with exit 3, to be retried.
    with db.frozen():
        frozen = run_loader(db, toml, "extract", env=quick)
    assert frozen.returncode == 3, frozen.stdout + frozen.stderr
    assert f"cannot connect to source {cfg.source.name} (127.0.0.1:{db.port}) within 2 s" in _last_line(
        frozen
    )
    # A connection made before the server froze waits for an answer only as long as the read
    # timeout: transient too.
    conn = connect(credentials(dataclasses.replace(cfg.source, read_timeout_seconds=2)))
    try:
        with db.frozen(), pytest.raises(pymysql.err.OperationalError) as lost, conn.cursor() as cur:
            cur.execute("SELECT 1")
        assert is_transient(lost.value) and "timed out" in str(lost.value)
    finally:
        conn.close()

    # A stopped server refuses the connection: transient as well.
    db.stop()
    try:
        stopped = run_loader(db, toml, "extract", env=quick)
    finally:
        db.start()
    assert stopped.returncode == 3 and "cannot connect to source" in _last_line(stopped), stopped.stderr
    assert ledger.intervals() == [] and ledger.checkpoint() == checkpoint

    # An unset password variable is named, not left to the server's "using password: NO".
    unset = run_loader(db, toml, "check", env={"LOADER_TEST_PASSWORD": None})
    assert unset.returncode == 1 and "the password variable LOADER_TEST_PASSWORD is not set" in _last_line(
        unset
    )

    # The rerun, with the server back, carries everything.
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)


def _stopped(pid: int) -> bool:
    """Whether the process stopped itself (its crash point's ``stop``)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def test_a_server_frozen_or_stopped_in_the_middle_of_the_binlog_stream_fails_extract_as_transient(
    disposable_mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    db = disposable_mariadb
    fresh_schema(db, "ops_stream", "t (id INT PRIMARY KEY, s VARCHAR(100))")
    small = schema_config(db, tmp_path, spark_config, "ops_stream")
    cfg = dataclasses.replace(small, warehouse=dataclasses.replace(small.warehouse, partition_rows=100_000))
    run_initial_load(spark, cfg, progress=quiet)
    checkpoint = Ledger.of(cfg).checkpoint()
    # A small transaction, then one of about 20 MB of binlog (more than socket buffers hold),
    # then ten of about 3 MB: over 4 MB, extract decodes in several processes by default.
    db.execute(
        "INSERT INTO ops_stream.t VALUES (0, 'first')",
        "INSERT INTO ops_stream.t SELECT seq, REPEAT('x', 60) FROM ops_stream.seq_1_to_250000",
        *(
            f"INSERT INTO ops_stream.t SELECT seq, REPEAT('y', 100) FROM ops_stream.seq_{lo}_to_{lo + 24_999}"
            for lo in range(250_001, 500_001, 25_000)
        ),
    )
    toml = db.config_file(tmp_path, cfg.source.name, "ops_stream.*")
    env = {
        **os.environ,
        "LOADER_TEST_PASSWORD": db.password,
        "LOADER__SOURCE__CONNECT_TIMEOUT_SECONDS": "2",
        "LOADER__SOURCE__READ_TIMEOUT_SECONDS": "2",
    }
    command = [str(Path(sys.executable).with_name("loader")), "extract", "--config", str(toml)]
    # The extract stops itself in the middle of the stream (crash point stop) in the process
    # that reads it: in one process after the small transaction; in several, the parent after
    # it spooled the first range for a decoding process (which then meets the frozen server too).
    runs = [
        ("frozen", ["--workers", "1"], "extract: after transaction written:1:stop"),
        ("stopped", ["--workers", "1"], "extract: after transaction written:1:stop"),
        ("frozen", ["--workers", "2"], "extract: after range spooled:1:stop"),
    ]
    for fault, workers, stop_at in runs:
        run = subprocess.Popen(
            command + workers,
            env={**env, crashpoints.AT_ENV: stop_at},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not _stopped(run.pid):
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.05)
        if fault == "frozen":  # it answers nothing more: the read timeout ends the step
            with db.frozen():
                run.send_signal(signal.SIGCONT)
                out, err = run.communicate(timeout=120)
        else:  # it shuts down while the extract reads on, and closes the stream
            run.send_signal(signal.SIGCONT)
            db.stop()
            try:
                out, err = run.communicate(timeout=120)
            finally:
                db.start()
        last = err.strip().splitlines()[-1]
        assert run.returncode == 3, f"{fault} {workers}: {out}{err}"
        # Earlier tests on this server may have rotated its binlog: name the file the interval ends in.
        end_file = Ledger.of(cfg).intervals()[0].end.file
        said = {
            "frozen": f"lost the replication connection to source {cfg.source.name} (127.0.0.1:{db.port}): Lost connection",
            "stopped": f"the source stopped sending its binlog in {end_file}, before the end position",
        }[fault]
        if workers[1] == "2":  # the reader's timeout, or a decoding process's if it came first
            said = (
                said
                if said in last
                else f"cannot connect to source {cfg.source.name} (127.0.0.1:{db.port}) within 2 s"
            )
        else:
            assert "range 1 (" not in err  # one process: nothing spooled
        assert last.startswith(f"loader extract: error: {said}"), last
        [interval] = Ledger.of(cfg).intervals()
        assert interval.state == "planned" and interval.error is not None and said in interval.error
        assert Ledger.of(cfg).checkpoint() == checkpoint
        if said.startswith("lost"):  # how far it got, and what happens next
            assert f"; the binlog was read from {interval.start} to {end_file}:" in last, last
            assert last.endswith(", and the next run reads it again"), last
    assert "range 1 (" in err  # the last run's stream was spooled in ranges

    # The rerun extracts the same interval whole.
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg, range_rows=25_000)


def test_a_full_or_read_only_staging_disk_is_one_line_naming_the_file(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system for the staging needs root")
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)], check=True)
    try:
        fresh_schema(mariadb, "ops_disk", "t (id INT PRIMARY KEY, s VARCHAR(500))")
        mariadb.execute("INSERT INTO ops_disk.t VALUES (1, 'a')")
        toml = mariadb.config_file(small, "ops_disk_source", "ops_disk.*")
        base = schema_config(mariadb, tmp_path, spark_config, "ops_disk")
        cfg = dataclasses.replace(
            base,
            source=dataclasses.replace(base.source, name="ops_disk_source"),
            staging=dataclasses.replace(base.staging, uri=str(small / "staging")),
        )
        run_initial_load(spark, cfg, progress=quiet)
        checkpoint = Ledger.of(cfg).checkpoint()
        rows = ", ".join(f"({i}, REPEAT('x', 400))" for i in range(2, 1002))  # ~400 KB staged
        mariadb.execute(f"INSERT INTO ops_disk.t VALUES {rows}")

        full = run_loader(mariadb, toml, "extract")
        assert full.returncode == 1, full.stdout + full.stderr
        last = _last_line(full)
        assert last.startswith(f"loader extract: error: cannot write or read {small / 'staging'}/"), last
        assert last.endswith(": No space left on device") and "Traceback" not in full.stderr
        assert Ledger.of(cfg).checkpoint() == checkpoint

        subprocess.run(["mount", "-o", "remount,size=16m", str(small)], check=True)
        assert run_loader(mariadb, toml, "extract").returncode == 0
        subprocess.run(["mount", "-o", "remount,ro", str(small)], check=True)
        mariadb.execute("UPDATE ops_disk.t SET s = 'b' WHERE id = 1")
        read_only = run_loader(mariadb, toml, "extract")
        assert read_only.returncode == 1 and _last_line(read_only).endswith(": Read-only file system")
        assert f"{small / 'staging'}/" in _last_line(read_only) and "Traceback" not in read_only.stderr

        subprocess.run(["mount", "-o", "remount,rw", str(small)], check=True)
        delta(spark, cfg)
        assert_equal_to_source(spark, cfg)
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)


@pytest.mark.parametrize("table_format", ["hive"])  # the database's folder, as Hive lays it out
def test_a_read_only_warehouse_fails_materialise_with_spark_s_root_cause_noted(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a file system for the warehouse database needs root")
    cfg = schema_config(mariadb, tmp_path, spark_config, "ops_ro")
    warehouse = spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")
    folder = Path(warehouse) / f"{cfg.warehouse.database}.db"
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(folder)], check=True)
    try:
        fresh_schema(mariadb, "ops_ro", "t (id INT PRIMARY KEY, v INT)")
        mariadb.execute("INSERT INTO ops_ro.t VALUES (1, 1)")
        run_initial_load(spark, cfg, progress=quiet)
        checkpoint = Ledger.of(cfg).checkpoint()
        mariadb.execute("INSERT INTO ops_ro.t VALUES (2, 2)")
        steps.extract(cfg, progress=quiet)
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        with pytest.raises(Exception), steps.materialize_failures_noted(cfg):  # noqa: B017 - Spark's own
            run_materialize(spark, cfg)
        failed = steps.status(cfg).last_error
        assert failed is not None and failed.error.startswith(
            "materialize: IOException: Mkdirs failed to create"
        )
        assert str(folder) in failed.error and "\n" not in failed.error
        assert steps.status(cfg).intervals["failed"] == 1 and Ledger.of(cfg).checkpoint() == checkpoint

        subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=True)
        with steps.materialize_failures_noted(cfg):
            run_materialize(spark, cfg)
        assert_equal_to_source(spark, cfg)
        assert steps.status(cfg).last_error is None
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_one_step_at_a_time_per_source_and_a_killed_holder_does_not_block_for_ever(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    cfg = loaded("ops_lease", ["t (id INT PRIMARY KEY, v INT)"], ["INSERT INTO ops_lease.t VALUES (1, 1)"])
    ledger = Ledger.of(cfg)
    checkpoint = ledger.checkpoint()
    mariadb.execute("INSERT INTO ops_lease.t VALUES (2, 2)")
    toml = mariadb.config_file(tmp_path, cfg.source.name, "ops_lease.*")

    # While another run holds the source's lease, a run is refused naming it: exit 3, retried.
    with lease.hold(ledger.store, cfg.source.name, "the test's run", 60):
        busy = run_loader(mariadb, toml, "run-once")
        assert busy.returncode == 3, busy.stdout + busy.stderr
        assert f"source {cfg.source.name} is busy: the test's run (pid {os.getpid()} on" in _last_line(busy)
        assert run_loader(mariadb, toml, "run-once", "--dry-run").returncode == 0  # a dry run changes nothing
        assert (steps.status(cfg).lease or "").startswith("the test's run (pid")
    assert ledger.intervals() == [] and ledger.checkpoint() == checkpoint

    # A run killed on this machine while it held the lease, nothing it started still running
    # (its process group, this test's, lives on): the next run does not wait for its expiry.
    holder = (
        "import os, sys; from loader.state import lease; from loader.staging.stores import LocalStore; "
        "lease.Lease(LocalStore(sys.argv[1]), sys.argv[2], 'a killed run', 600).acquire(); os._exit(9)"
    )
    subprocess.run([sys.executable, "-c", holder, cfg.staging.uri, cfg.source.name], check=False)
    left = lease.Lease(ledger.store, cfg.source.name, "", 1)._current()
    assert left is not None and left.holder.startswith("a killed run") and left.expires > time.time() + 500
    assert run_loader(mariadb, toml, "extract").returncode == 0
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)


def test_transactions_held_on_disk_before_their_commit_reach_the_warehouse_exactly(
    mariadb: MariaDB, tmp_path: Path, spark: Any, loaded: Loaded, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loader.extract import decode

    cfg = loaded(
        "ops_held",
        ["t (id INT PRIMARY KEY, v INT, s TEXT)", "u (a VARCHAR(4), b INT, v INT, PRIMARY KEY (a, b))"],
        ["INSERT INTO ops_held.t SELECT seq, seq, 'x' FROM ops_held.seq_1_to_30"],
    )
    conn = mariadb.connect(database="ops_held")
    try:
        with conn.cursor() as cur:
            # Large transactions (past the threshold below) over both tables: inserts, updates of
            # the same rows twice, deletes, and one rolled back; small ones between them.
            cur.execute("BEGIN")
            cur.execute("INSERT INTO t SELECT seq, seq, 'new\\nline, \"q\"' FROM seq_31_to_80")
            cur.execute("UPDATE t SET v = v + 100 WHERE id % 3 = 0")
            cur.execute("INSERT INTO u SELECT 'k', seq, seq FROM seq_1_to_20")
            cur.execute("UPDATE t SET v = -v WHERE id % 6 = 0")
            cur.execute("DELETE FROM t WHERE id BETWEEN 10 AND 19")
            cur.execute("COMMIT")
            cur.execute("UPDATE u SET v = 0 WHERE b = 1")
            cur.execute("BEGIN")
            cur.execute("DELETE FROM u WHERE b > 10")
            cur.execute("UPDATE t SET s = NULL")
            cur.execute("ROLLBACK")
            cur.execute("BEGIN")
            cur.execute("DELETE FROM u WHERE b > 15")
            cur.execute("UPDATE t SET s = CONCAT(s, '!') WHERE id > 40")
            cur.execute("COMMIT")
    finally:
        conn.close()
    monkeypatch.setattr(decode, "OPEN_ROWS_HELD_AT", 7)
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
