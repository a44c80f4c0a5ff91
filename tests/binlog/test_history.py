"""A position belongs to one binlog history: every recorded position carries the server and the
GTID state there, and a server that no longer holds the history read so far (reset, restored,
another server behind the address) is refused before anything is recorded; a re-load of every
table starts from the new one, and a promoted replica that holds it is followed by GTID. On
private MariaDB servers and a local Spark."""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from loader.app import steps
from loader.binlog import gtids
from loader.binlog.fingerprint import Fingerprint
from loader.binlog.history import Mark, SourceHistory
from loader.binlog.reader import open_transport
from loader.core.config import Config
from loader.core.errors import HistoryError, LoadError
from loader.core.positions import Position
from loader.extract.interval import run_extract
from loader.staging import layout
from loader.staging.stores import open_store
from loader.state.ledger import Ledger
from loader.state.records import ABANDONED, PLANNED
from loader.warehouse.initial_load import run_initial_load
from tests.conftest import (
    MariaDB,
    assert_equal_to_source,
    caught_up,
    delta,
    fresh_schema,
    mariadb_server,
    quiet,
    run_loader,
    schema_config,
)

# --- live ------------------------------------------------------------------------------------


def _gtid_at(db: MariaDB, at: str | Position) -> str:
    position = at if isinstance(at, Position) else Position.parse(at)
    [(gtid,)] = db.rows(f"SELECT BINLOG_GTID_POS('{position.file}', {position.pos})")
    return gtids.gtid_text(gtids.gtid_domains(str(gtid)))


def _server_identity(db: MariaDB) -> str:
    [(server_id, domain)] = db.rows("SELECT @@server_id, @@gtid_domain_id")
    return f"server_id={server_id} gtid_domain_id={domain}"


@pytest.mark.integration
@pytest.mark.slow
def test_every_recorded_position_carries_its_server_and_the_gtid_state_there(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    fresh_schema(mariadb, "hist_marks", "t (id INT PRIMARY KEY, v INT)")
    mariadb.execute("INSERT INTO hist_marks.t VALUES (1, 1), (2, 2)")
    cfg = schema_config(mariadb, tmp_path, spark_config, "hist_marks")
    run_initial_load(spark, cfg, progress=quiet)
    ledger = Ledger.of(cfg)
    [load] = ledger.loads()
    assert (load.server, load.p0_gtid) == (_server_identity(mariadb), _gtid_at(mariadb, load.p0))
    checkpoint = ledger.checkpoint()
    assert checkpoint is not None and (checkpoint.server, checkpoint.gtid) == (load.server, load.p0_gtid)

    # Two transactions, the second in another GTID domain: a position holds each domain's last.
    mariadb.execute(
        "UPDATE hist_marks.t SET v = 10 WHERE id = 1",
        "SET SESSION gtid_domain_id = 7",
        "INSERT INTO hist_marks.t VALUES (3, 3)",
    )
    # An interval bounded after one transaction: where it stopped, the stream's own GTID events
    # give the state, and it is the server's there.
    run_extract(cfg, max_changes=1, progress=quiet)
    [first] = ledger.intervals()
    assert first.extracted_end is not None and first.extracted_end != first.end
    assert first.start_gtid == load.p0_gtid
    assert first.extracted_end_gtid == _gtid_at(mariadb, first.extracted_end)
    delta(spark, cfg)
    second = ledger.intervals()[-1]
    assert (second.start, second.start_gtid) == (first.extracted_end, first.extracted_end_gtid)
    assert second.end_gtid == _gtid_at(mariadb, second.end) and "7-" in second.end_gtid
    checkpoint = ledger.checkpoint()
    assert checkpoint is not None and checkpoint.position == second.end
    assert (checkpoint.server, checkpoint.gtid) == (_server_identity(mariadb), second.end_gtid)
    said = steps.status(cfg).text()
    assert (
        f"history: GTID {second.end_gtid} at the checkpoint, written by {_server_identity(mariadb)}" in said
    )
    assert "STOPPED" not in said
    assert_equal_to_source(spark, cfg)


@pytest.mark.integration
def test_the_last_transaction_before_a_position_is_found_in_a_file_read_in_many_batches(
    mariadb: MariaDB, tmp_path: Path
) -> None:
    """A busy server's binlog file holds millions of events; the history reads them in batches
    (here of 4 KB) and must find the same transaction as a plain walk of every event, then leave
    the connection usable, also when it stopped early."""
    fresh_schema(mariadb, "hist_walk", "t (id INT PRIMARY KEY, v VARCHAR(60))")
    mariadb.execute(*(f"INSERT INTO hist_walk.t VALUES ({i}, REPEAT('v', 60))" for i in range(40)))
    # A transaction of 100 statements: batches of its events alone, without a GTID event.
    mariadb.execute(
        "BEGIN", *(f"INSERT INTO hist_walk.t VALUES ({i}, 'one')" for i in range(100, 200)), "COMMIT"
    )
    end = mariadb.execute(*(f"INSERT INTO hist_walk.t VALUES ({i}, REPEAT('v', 60))" for i in range(40, 80)))
    events = mariadb.rows(f"SHOW BINLOG EVENTS IN '{end.file}'")
    assert sum(len(str(e)) for e in events) > 5 * 4096  # the file is read in several batches
    gtid_events = [
        (Position(end.file, int(e[1])), str(e[5]).removeprefix("BEGIN ").removeprefix("GTID "))
        for e in events
        if e[2] == "Gtid"
    ]
    (last_at, last_gtid), (before_at, before_gtid) = gtid_events[-1], gtid_events[-2]
    inside = Position(end.file, last_at.pos + 1)  # not an event boundary: inside the last transaction
    cfg = mariadb.config(tmp_path, tables={"include": '["hist_walk.*"]'})
    conn = mariadb.connect(user="loader")
    try:
        history = SourceHistory(
            conn, "hist_walk", "here", lambda: open_transport(cfg.source, server_id=0), 4096
        )
        for at, (want_at, want_gtid) in [
            (end, (last_at, last_gtid)),
            (inside, (last_at, last_gtid)),
            (last_at, (before_at, before_gtid)),
        ]:
            found = history.last_transaction(at)
            assert found is not None and (found.at, found.gtid) == (want_at, want_gtid), at
        # Stopped early in the file, the rest of its events were read: the connection answers.
        found = history.last_transaction(gtid_events[1][0])
        assert found is not None and (found.at, found.gtid) == gtid_events[0]
        assert history.gtid_at(end) == _gtid_at(mariadb, end)
        # The state where the file ends is found at the end of its last event (not a GTID's).
        followed = history.follow(Mark(None, _gtid_at(mariadb, end)))
        assert followed is not None and followed[0] == end
    finally:
        conn.close()


@pytest.mark.integration
@pytest.mark.slow
def test_the_stream_must_lead_to_the_gtid_state_the_server_reported_at_the_end(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    fresh_schema(mariadb, "hist_stream", "t (id INT PRIMARY KEY)")
    cfg = schema_config(mariadb, tmp_path, spark_config, "hist_stream")
    run_initial_load(spark, cfg, progress=quiet)
    mariadb.execute("INSERT INTO hist_stream.t VALUES (1)", "INSERT INTO hist_stream.t VALUES (2)")
    interval_id = steps.plan(cfg).interval
    assert interval_id is not None
    ledger = Ledger.of(cfg)
    interval = ledger.get(interval_id)
    assert interval is not None and interval.end_gtid
    # What the server said at the end when the interval was planned is not where the binlog
    # read now leads (as after a switch of servers between plan and extract).
    recorded = interval.end_gtid
    interval.end_gtid = gtids.advance(recorded, ["0-1-999999"])
    ledger.save(interval)
    with pytest.raises(HistoryError) as refused:
        steps.extract(cfg, interval_id, progress=quiet)
    assert str(refused.value).startswith(
        f"interval {interval_id}: the binlog read from {interval.start} to {interval.end} leads to GTID state "
        f"{recorded}, but the server had {interval.end_gtid} at {interval.end}"
    )
    assert "Nothing was staged and the checkpoint stays" in str(refused.value)
    assert open_store(cfg.staging).get(layout.manifest_key(cfg.source.name, interval_id)) is None
    after = ledger.get(interval_id)
    assert after is not None and after.state == PLANNED and after.error and "leads to GTID" in after.error

    after.end_gtid = recorded
    ledger.save(after)
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)


@pytest.mark.integration
@pytest.mark.slow
def test_a_server_whose_binlog_was_reset_is_refused_and_a_reload_starts_a_new_history(
    disposable_mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    db = disposable_mariadb
    fresh_schema(db, "hist_reset", "t (id INT PRIMARY KEY, v VARCHAR(20))")
    db.execute("INSERT INTO hist_reset.t SELECT seq, 'loaded' FROM hist_reset.seq_1_to_20")
    cfg = schema_config(db, tmp_path, spark_config, "hist_reset")
    run_initial_load(spark, cfg, progress=quiet)
    db.execute(
        "UPDATE hist_reset.t SET v = 'delta 1' WHERE id <= 5", "DELETE FROM hist_reset.t WHERE id = 20"
    )
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    ledger = Ledger.of(cfg)
    db.execute("INSERT INTO hist_reset.t VALUES (21, 'planned')")
    planned = steps.plan(cfg).interval
    assert planned is not None
    checkpoint = ledger.checkpoint()

    # The server is rebuilt: its binlog starts again, and is written on past the old positions.
    db.execute(
        "RESET MASTER",
        "INSERT INTO hist_reset.t SELECT seq, 'after reset' FROM hist_reset.seq_100_to_400",
        "UPDATE hist_reset.t SET v = 'after reset' WHERE id <= 3",
    )
    # The planned interval is not extracted from the new binlog.
    with pytest.raises(HistoryError) as refused:
        steps.extract(cfg, planned, progress=quiet)
    said = str(refused.value)
    assert said.startswith(
        f"source {cfg.source.name} no longer holds the binlog history the loader has read: at interval "
        f"{planned}'s start {checkpoint.position if checkpoint else ''} the ledger recorded GTID"
    ), said
    assert "its binlog was reset (RESET MASTER)" in said and "Nothing was extracted" in said
    # Nor is anything planned, from the CLI either: exit 1, the last line says what to do.
    toml = db.config_file(tmp_path, cfg.source.name, "hist_reset.*")
    run = run_loader(db, toml, "extract")
    last = run.stderr.strip().splitlines()[-1]
    assert run.returncode == 1, run.stderr
    assert last.startswith("loader extract: error: source demo no longer holds the binlog history"), last
    assert last.endswith("or re-load every table (loader initial-load) to start from this one"), last
    assert ledger.checkpoint() == checkpoint
    assert [i.id for i in ledger.intervals()][-1] == planned
    status = steps.status(cfg)
    assert status.history_problem and "STOPPED: source demo no longer holds" in status.text()

    # A re-load of some tables cannot join the two histories; one of every table starts the new one.
    with pytest.raises(LoadError, match="re-load every table"):
        run_initial_load(spark, cfg, only=["hist_reset.t"], progress=quiet)
    run_initial_load(spark, cfg, progress=quiet)
    after = ledger.checkpoint()
    assert after is not None and checkpoint is not None
    assert (after.epoch, after.server) == (1, checkpoint.server) and after.interval != checkpoint.interval
    superseded = ledger.get(planned)
    assert superseded is not None and superseded.state == ABANDONED
    assert steps.status(cfg).history_problem is None
    db.execute(
        "UPDATE hist_reset.t SET v = 'new history' WHERE id > 390", "DELETE FROM hist_reset.t WHERE id < 3"
    )
    delta(spark, cfg)
    assert ledger.intervals()[-1].epoch == 1
    assert_equal_to_source(spark, cfg)


def _past_the_second_of(db: MariaDB, fingerprint: Fingerprint) -> None:
    """Wait until the server's clock is past the second ``fingerprint``'s transaction committed
    in: MariaDB's binlog times a transaction to the second, and a new history that commits the
    same GTID at the same place within it is not told apart (the README says so). A delta run
    on the warm session can end within that second."""
    while int(db.rows("SELECT UNIX_TIMESTAMP()")[0][0]) <= fingerprint.commit_us // 1_000_000:
        time.sleep(0.05)


def _refused_and_unmoved(cfg: Config, checkpoint: Any, interval_count: int) -> str:
    """Plan refuses the source with the history error, recording nothing; its text."""
    with pytest.raises(HistoryError) as refused:
        steps.plan(cfg)
    said = str(refused.value)
    assert said.startswith(
        f"source {cfg.source.name} no longer holds the binlog history the loader has read: at the checkpoint "
        f"{checkpoint.position} the ledger recorded GTID {checkpoint.gtid} (after GTID "
    ), said
    assert "Nothing was planned and the checkpoint stays" in said, said
    ledger = Ledger.of(cfg)
    assert ledger.checkpoint() == checkpoint
    assert len(ledger.intervals()) == interval_count
    assert "STOPPED: source demo no longer holds" in steps.status(cfg).text()
    return said


@pytest.mark.integration
@pytest.mark.slow
def test_a_new_history_that_reaches_the_recorded_gtid_state_again_is_refused(
    disposable_mariadb: MariaDB,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    spark_config: Config,
    spark: Any,
) -> None:
    """The GTID counters start again after RESET MASTER (and on another server given the same
    id): the same state at the same offset, or at an earlier one, names other transactions."""
    db = disposable_mariadb
    history = [
        "DROP DATABASE IF EXISTS hist_again",
        "CREATE DATABASE hist_again",
        "CREATE TABLE hist_again.t (id INT PRIMARY KEY, v VARCHAR(40))",
        "INSERT INTO hist_again.t SELECT seq, CONCAT('row number ', seq) FROM hist_again.seq_1_to_40",
    ]
    changes = [
        "UPDATE hist_again.t SET v = 'changed by the delta run' WHERE id <= 10",
        "DELETE FROM hist_again.t WHERE id = 40",
    ]
    db.execute("RESET MASTER", *history)
    cfg = schema_config(db, tmp_path, spark_config, "hist_again")
    run_initial_load(spark, cfg, progress=quiet)
    db.execute(*changes)
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    ledger = Ledger.of(cfg)
    checkpoint = ledger.checkpoint()
    assert checkpoint is not None and checkpoint.gtid == "0-1-6" and checkpoint.txn is not None
    [interval] = ledger.intervals()
    assert checkpoint.txn == interval.end_txn and interval.start_txn == ledger.loads()[0].p0_txn
    # The checkpoint follows the DELETE, the sixth transaction: that is the one it names.
    last = Fingerprint.parse(checkpoint.txn)
    assert last.gtid == "0-1-6" and last.at < checkpoint.position

    # The same statements after a reset: the same GTID state at the same offset, other transactions.
    _past_the_second_of(db, last)
    at = db.execute("RESET MASTER", *history, *changes)
    assert (str(at), _gtid_at(db, str(at))) == (str(checkpoint.position), checkpoint.gtid)
    said = _refused_and_unmoved(cfg, checkpoint, 1)
    assert "the server has GTID position 0-1-6, but after GTID 0-1-6 committed" in said, said
    assert "its binlog was reset (RESET MASTER), it was restored from a backup" in said, said
    # A checkpoint an older loader wrote has no fingerprint: checked by its GTID state alone, as
    # before (the README says what it lacks until the next interval records one).
    ledger.set_checkpoint(dataclasses.replace(checkpoint, txn=None))
    assert steps.plan(cfg, dry_run=True).interval is None  # not refused; the server ends there
    ledger.set_checkpoint(checkpoint)

    # Six smaller transactions: the state is reached before the checkpoint's offset, and no
    # longer there; not followed as if a replica had been promoted.
    db.execute("RESET MASTER")
    at = db.execute(*(f"INSERT INTO hist_again.t VALUES ({n}, 'x')" for n in range(100, 106)))
    assert at < checkpoint.position and _gtid_at(db, str(at)) == checkpoint.gtid
    said = _refused_and_unmoved(cfg, checkpoint, 1)
    assert "its GTID history does not reach the state read so far" in said, said

    # Another server given the same id, which wrote the same statements: the same GTID states
    # at the same offsets, other transactions.
    with mariadb_server(tmp_path_factory, "same-id") as twin:
        twin.execute("RESET MASTER", *history, *changes)
        assert _server_identity(twin) == checkpoint.server
        moved = dataclasses.replace(cfg, source=dataclasses.replace(cfg.source, port=twin.port))
        said = _refused_and_unmoved(moved, checkpoint, 1)
        assert "but after GTID 0-1-6 committed" in said, said


@pytest.mark.integration
@pytest.mark.slow
def test_a_server_restored_from_an_older_backup_is_refused_though_it_writes_the_same_again(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, spark_config: Config, spark: Any
) -> None:
    with mariadb_server(tmp_path_factory, "restored") as db:
        fresh_schema(db, "hist_restore", "t (id INT PRIMARY KEY, v VARCHAR(40))")
        db.execute("INSERT INTO hist_restore.t SELECT seq, 'loaded' FROM hist_restore.seq_1_to_30")
        cfg = schema_config(db, tmp_path, spark_config, "hist_restore")
        run_initial_load(spark, cfg, progress=quiet)
        # A backup of the server as it is now: its data and its binlog.
        backup = tmp_path / "backup"
        db.stop()
        shutil.copytree(db.datadir, backup, ignore=shutil.ignore_patterns("*.sock", "*.pid"))
        db.start()
        changes = [
            "UPDATE hist_restore.t SET v = 'delta' WHERE id <= 8",
            "DELETE FROM hist_restore.t WHERE id = 30",
        ]
        db.execute(*changes)
        delta(spark, cfg)
        assert_equal_to_source(spark, cfg)
        checkpoint = Ledger.of(cfg).checkpoint()
        assert checkpoint is not None and checkpoint.txn is not None

        # Restored from the backup, the server writes the same changes again: the same GTID state
        # at the same position, other transactions.
        db.stop()
        shutil.rmtree(db.datadir)
        shutil.copytree(backup, db.datadir)
        db.start()
        at = db.execute(*changes)
        assert (str(at), _gtid_at(db, str(at))) == (str(checkpoint.position), checkpoint.gtid)
        said = _refused_and_unmoved(cfg, checkpoint, 1)
        assert "it was restored from a backup" in said, said


@pytest.mark.integration
@pytest.mark.slow
def test_another_server_behind_the_same_address_is_refused(
    mariadb: MariaDB, disposable_mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    fresh_schema(mariadb, "hist_moved", "t (id INT PRIMARY KEY)")
    mariadb.execute("INSERT INTO hist_moved.t VALUES (1)")
    cfg = schema_config(mariadb, tmp_path, spark_config, "hist_moved")
    run_initial_load(spark, cfg, progress=quiet)
    mariadb.execute("INSERT INTO hist_moved.t VALUES (2)")
    delta(spark, cfg)
    checkpoint = Ledger.of(cfg).checkpoint()

    # The same source name now reaches the other server, which has the same schema and rows.
    fresh_schema(disposable_mariadb, "hist_moved", "t (id INT PRIMARY KEY)")
    disposable_mariadb.execute("INSERT INTO hist_moved.t VALUES (1), (2), (3)")
    moved = dataclasses.replace(cfg, source=dataclasses.replace(cfg.source, port=disposable_mariadb.port))
    with pytest.raises(
        HistoryError, match="no longer holds the binlog history the loader has read: at the checkpoint"
    ):
        delta(spark, moved)
    assert Ledger.of(moved).checkpoint() == checkpoint


@pytest.mark.integration
@pytest.mark.slow
def test_a_promoted_replica_is_followed_by_gtid_and_the_warehouse_stays_equal(
    replicated_mariadb: tuple[MariaDB, MariaDB], tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    primary, replica = replicated_mariadb
    fresh_schema(primary, "hist_failover", "t (id INT PRIMARY KEY, v INT, s VARCHAR(40))")
    primary.execute("INSERT INTO hist_failover.t SELECT seq, seq, 'loaded' FROM hist_failover.seq_1_to_50")
    cfg = schema_config(primary, tmp_path, spark_config, "hist_failover")
    run_initial_load(spark, cfg, progress=quiet)

    # A writer on the primary while delta runs go on.
    stop = threading.Event()

    def write() -> None:
        conn = primary.connect()
        n = 1000
        with conn.cursor() as cur:
            while not stop.is_set():
                n += 1
                cur.execute(f"INSERT INTO hist_failover.t VALUES ({n}, {n}, 'primary')")
                cur.execute(f"UPDATE hist_failover.t SET v = v + 1 WHERE id = {n % 50 + 1}")
                if n % 7 == 0:
                    cur.execute(f"DELETE FROM hist_failover.t WHERE id = {n - 3}")
                time.sleep(0.01)
        conn.close()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for _ in range(2):
            delta(spark, cfg)
    finally:
        stop.set()
        writer.join()
    # Changes the loader has not read yet reach the replica, then the primary is gone.
    primary.execute("UPDATE hist_failover.t SET s = 'last on the primary' WHERE id <= 10")
    caught_up(primary, replica)
    ledger = Ledger.of(cfg)
    checkpoint = ledger.checkpoint()
    assert checkpoint is not None and checkpoint.server == "server_id=1 gtid_domain_id=0"
    primary.stop()
    replica.execute("STOP SLAVE", "RESET SLAVE ALL")
    replica.execute("UPDATE hist_failover.t SET s = 'promoted' WHERE id BETWEEN 5 AND 15")

    # The same source, at the promoted replica's address: followed where its GTIDs reach the checkpoint's.
    promoted = dataclasses.replace(cfg, source=dataclasses.replace(cfg.source, port=replica.port))
    refusing = dataclasses.replace(promoted, source=dataclasses.replace(promoted.source, failover="stop"))
    with pytest.raises(HistoryError, match=r'\(source.failover = "stop": a server whose GTID history'):
        delta(spark, refusing)
    assert ledger.checkpoint() == checkpoint
    delta(spark, promoted)
    followed = next(i for i in ledger.intervals() if i.followed_from)
    assert followed.followed_from == f"{checkpoint.position} of {checkpoint.server} (GTID {checkpoint.gtid})"
    assert followed.start.file == "mysql-bin.000003"  # the replica's own position for it
    assert (followed.epoch, followed.server, followed.start_gtid) == (
        1,
        "server_id=2 gtid_domain_id=0",
        checkpoint.gtid,
    )
    # The replica logged the primary's last transaction with its GTID and commit time: the
    # same transaction, at the replica's own position.
    assert checkpoint.txn is not None and followed.start_txn is not None
    primary_last, replica_last = Fingerprint.parse(checkpoint.txn), Fingerprint.parse(followed.start_txn)
    assert replica_last.same_transaction(primary_last) and replica_last.at != primary_last.at
    [(at_start,)] = replica.rows(f"SELECT BINLOG_GTID_POS('{followed.start.file}', {followed.start.pos})")
    assert gtids.same_gtid(str(at_start), checkpoint.gtid or "")
    assert_equal_to_source(spark, promoted)
    said = steps.status(promoted).text()
    assert f"followed: interval {followed.id} continues on server_id=2" in said, said

    replica.execute(
        "DELETE FROM hist_failover.t WHERE id BETWEEN 20 AND 25",
        "INSERT INTO hist_failover.t VALUES (9999, 1, 'new primary')",
    )
    delta(spark, promoted)
    assert ledger.intervals()[-1].epoch == 1
    assert_equal_to_source(spark, promoted)
