"""On-call ways out, on the private MariaDB and a local Spark: a start the server cannot read is
refused before anything is recorded, an interval that cannot be extracted is abandoned with a
reason, and a purged binlog is left behind by re-loading every table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loader import steps
from loader.config import Config
from loader.errors import LoaderError
from loader.ledger import ABANDONED, MATERIALISED, Interval, Ledger
from loader.positions import Position
from loader.staging import layout
from loader.warehouse.initial_load import run_initial_load
from tests.conftest import (
    Loaded,
    MariaDB,
    assert_equal_to_source,
    delta,
    fresh_schema,
    quiet,
    schema_config,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _loader(mariadb: MariaDB, toml: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOADER_TEST_PASSWORD": mariadb.password}
    command = [str(Path(sys.executable).with_name("loader")), *args, "--config", str(toml)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def _last_line(run: subprocess.CompletedProcess[str]) -> str:
    return run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""


def test_a_start_the_server_cannot_read_is_refused_and_a_stuck_interval_is_abandoned(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    cfg = loaded("ops_start", ["t (id INT PRIMARY KEY, v INT)"], ["INSERT INTO ops_start.t VALUES (1, 1)"])
    ledger = Ledger.of(cfg)
    checkpoint = ledger.checkpoint()
    assert checkpoint is not None
    cp = Position.parse(checkpoint.position)
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
            refused = _loader(mariadb, toml, "run-once", *args, *dry)
            assert refused.returncode == 1, refused.stdout + refused.stderr
            assert reason in _last_line(refused), _last_line(refused)
    assert ledger.intervals() == [] and ledger.checkpoint() == checkpoint

    # An interval recorded with a start no event has (by a loader before these checks, or by
    # hand) would be retried forever: the run names it and the way out.
    stuck = Interval(layout.interval_id(1), f"{cp.file}:{cp.pos + 1}", str(now))
    ledger.save(stuck)
    with pytest.raises(LoaderError) as refused:
        steps.extract(cfg, progress=quiet)
    message = str(refused.value)
    assert message.startswith(
        f"interval {stuck.id} cannot be extracted: {stuck.start} is not where an event starts"
    )
    assert f"loader interval abandon {stuck.id} --reason" in message

    abandoned = _loader(mariadb, toml, "interval", "abandon", stuck.id, "--reason", "start typed by hand")
    assert abandoned.returncode == 0, abandoned.stdout + abandoned.stderr
    assert f"abandoned 1 interval: {stuck.id}" in abandoned.stdout
    assert f"the next run plans again from {checkpoint.position}" in abandoned.stdout
    again = _loader(mariadb, toml, "interval", "abandon", stuck.id, "--reason", "twice")
    assert again.returncode == 1 and "was abandoned already: start typed by hand" in _last_line(again)

    listed = json.loads(_loader(mariadb, toml, "intervals", "--output", "json").stdout)
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
    text = _loader(mariadb, toml, "intervals").stdout
    assert f"{stuck.id}  abandoned" in text and "start typed by hand" in text, text
    refused_again = _loader(mariadb, toml, "interval", "abandon", new.id, "--reason", "late")
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
    beyond = Position(checkpoint.position.split(":")[0], int(sizes[checkpoint.position.split(":")[0]]) + 10)
    with pytest.raises(LoaderError, match=rf"lies outside {beyond.file}, whose events run from 4 to"):
        steps.plan(cfg, start=beyond, dry_run=True)
    db.execute(
        "INSERT INTO ops_purge.t VALUES (3, 3)",
        "DELETE FROM ops_purge.u WHERE id = 1",
        f"PURGE BINARY LOGS TO '{old.file}'",
    )
    assert checkpoint.position.split(":")[0] not in dict(db.rows("SHOW BINARY LOGS"))  # type: ignore[arg-type]

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
    assert reloaded is not None and Position.parse(reloaded.position) > Position.parse(checkpoint.position)
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
