"""The operators' DAG runs, by real Airflow (``airflow dags test``) against the private MariaDB,
local staging and local Spark: a dry run, ``loader run-once``, the checksum (in the CLI and in
the delta DAG's form), and an interval that cannot be extracted, abandoned from the form.

Apart from ``test_dags.py`` so that the two long DAG tests run on different test workers."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import BIN, MariaDB, airflow_env, dags_test, run_state


@pytest.mark.integration
@pytest.mark.slow
def test_dry_run_plans_without_writing_and_run_once_applies(
    mariadb: MariaDB, airflow_home: Path, tmp_path: Path
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS afd",
        "CREATE DATABASE afd",
        "CREATE TABLE afd.t (id INT PRIMARY KEY)",
    )
    config = mariadb.config_file(tmp_path, "afd", "afd.*")
    from loader.core.config import load_config
    from loader.core.positions import Position
    from loader.staging import layout
    from loader.state.ledger import Ledger
    from loader.state.records import Checkpoint, Interval

    cfg = load_config(config)
    start = mariadb.execute()
    ledger = Ledger.of(cfg)
    ledger.set_checkpoint(Checkpoint(start, "test"))
    mariadb.execute("INSERT INTO afd.t VALUES (1), (2)")
    env = airflow_env(airflow_home, {"LOADER_CONFIG": str(config), "LOADER_TEST_PASSWORD": mariadb.password})
    out = dags_test(env, "loader_continuous_delta", "2026-03-01", {"dry_run": True})
    assert run_state(out) == "success", out[-3000:]
    assert f"dry run: would extract [{start}," in out
    assert ledger.intervals() == []  # nothing planned, nothing written
    cli = subprocess.run(
        [str(BIN / "loader"), "run-once", "--dry-run"], env=env, capture_output=True, text=True
    )
    assert cli.returncode == 0 and f"would extract [{start}," in cli.stdout
    assert ledger.intervals() == []
    # Without --dry-run, run-once does what a delta run does: plan, extract, materialise.
    once = subprocess.run(
        [str(BIN / "loader"), "run-once", "--output", "json"], env=env, capture_output=True, text=True
    )
    assert once.returncode == 0, once.stderr[-2000:]
    result = json.loads(once.stdout)
    assert result["extracted"]["changes"] == 2
    assert [(t["table"], t["inserted"]) for t in result["materialized"]] == [("afd.t", 2)]
    (interval,) = ledger.intervals()
    assert interval.state == "materialised" and ledger.checkpoint().position == interval.end  # type: ignore[union-attr]
    # The checksum below compares this table with the source (`loader compare`'s line: test_ui).

    # The binlog moved for another schema only: run-once applies that interval without a Spark
    # job, and the checkpoint moves to its end (the checksum below still finds the source's rows).
    mariadb.execute(
        "DROP DATABASE IF EXISTS afd_other",
        "CREATE DATABASE afd_other",
        "CREATE TABLE afd_other.x (id INT PRIMARY KEY)",
        "INSERT INTO afd_other.x VALUES (1)",
    )
    quiet = subprocess.run(
        [str(BIN / "loader"), "run-once", "--output", "json"], env=env, capture_output=True, text=True
    )
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert json.loads(quiet.stdout)["materialized"] == [] and "Spark session" not in quiet.stderr
    last = ledger.intervals()[-1]
    assert last.id != interval.id and (last.state, last.changes) == ("materialised", 0)
    assert ledger.checkpoint().position == last.end  # type: ignore[union-attr]

    # The checksum brings the warehouse to its snapshot of the source (plans and extracts up to
    # there; its one Spark job applies that interval, then sums) and compares row counts and
    # checksums per key range.
    mariadb.execute("INSERT INTO afd.t VALUES (3), (4)")
    checked = subprocess.run(
        [str(BIN / "loader"), "checksum", "--range-rows", "1"], env=env, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr[-2000:]
    assert checked.stderr.count("Spark session ready") == 1, checked.stderr[-3000:]
    assert [i.state for i in ledger.intervals()][-1] == "materialised"
    at = ledger.checkpoint().position  # type: ignore[union-attr]
    assert (
        f"checksum at {at} (warehouse brought there by interval {ledger.intervals()[-1].id})"
        in checked.stdout
    )
    assert (
        "afd.t → iceberg.afd_wh.afd__t: source 4 rows, warehouse 4 rows, 5 key ranges, equal"
        in checked.stdout
    )
    # loader status (and the on-call page) keep the last check's verdict.
    status = subprocess.run([str(BIN / "loader"), "status"], env=env, capture_output=True, text=True)
    assert re.search(
        rf"^last check: checksum at {at} \(.+Z\): 1 tables, every one equal$", status.stdout, re.M
    ), status.stdout
    # A change the binlog never carried: exit 1, the key ranges, and the remedy last.
    mariadb.execute("SET sql_log_bin = 0", "UPDATE afd.t SET id = 30 WHERE id = 3", "SET sql_log_bin = 1")
    checked = subprocess.run(
        [str(BIN / "loader"), "checksum", "--range-rows", "1"], env=env, capture_output=True, text=True
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr[-2000:]
    assert (
        "afd.t → iceberg.afd_wh.afd__t: source 4 rows, warehouse 4 rows, 5 key ranges, DIFFERENT"
        in checked.stdout
    )
    assert "  differs where id > 2 AND id <= 4: source 1 rows, warehouse 2 rows" in checked.stdout
    assert "  differs where id > 4 AND id <= 30: source 1 rows, warehouse 0 rows" in checked.stdout
    assert checked.stdout.strip().splitlines()[-1] == (
        f"checksum: 1 of 1 tables differ from the source at {at}: afd.t. Re-load them with "
        "`loader initial-load --tables afd.t` (the delta runs go on for the other tables)"
    )
    last = json.loads(
        subprocess.run(
            [str(BIN / "loader"), "status", "--output", "json"], env=env, capture_output=True, text=True
        ).stdout
    )["last_check"]
    assert (last["kind"], last["position"], last["tables"], last["differing"]) == (
        "checksum",
        str(at),
        1,
        ["afd.t"],
    )
    # The delta DAG's checksum (asked for in the run's form) fails the run, without retries.
    spark_conn = json.dumps({"conn_type": "spark", "host": "local[2]"})
    out = dags_test(
        {**env, "AIRFLOW_CONN_SPARK_DEFAULT": spark_conn},
        "loader_continuous_delta",
        "2026-03-02",
        {"checksum": True},
    )
    assert run_state(out) == "failed", out[-3000:]
    assert "checksum: 1 of 1 tables differ from the source at" in out, out[-8000:]
    assert "Marking task as UP_FOR_RETRY" not in out

    # An interval that cannot be extracted (recorded with a start inside an event) fails every
    # run, naming the way out; the form's Abandon interval takes it, and the run goes on.
    env = {**env, "AIRFLOW_CONN_SPARK_DEFAULT": spark_conn}
    at = ledger.checkpoint().position  # type: ignore[union-attr]
    now = mariadb.execute("INSERT INTO afd.t VALUES (5)")
    stuck = Interval(
        layout.interval_id(int(ledger.intervals()[-1].id) + 1), Position(at.file, at.pos + 1), now
    )
    ledger.save(stuck)
    out = dags_test(env, "loader_continuous_delta", "2026-03-03")
    assert run_state(out) == "failed" and f"interval {stuck.id} cannot be extracted" in out, out[-3000:]
    assert f"loader interval abandon {stuck.id}" in out
    form = {"abandon_interval": stuck.id, "abandon_reason": "start typed by hand"}
    out = dags_test(env, "loader_continuous_delta", "2026-03-04", form)
    assert run_state(out) == "success", out[-3000:]
    assert f"abandoned interval {stuck.id}: start typed by hand" in out
    assert ledger.get(stuck.id).state == "abandoned"  # type: ignore[union-attr]
    last = ledger.intervals()[-1]
    assert (last.state, last.start, last.changes) == ("materialised", at, 1)
