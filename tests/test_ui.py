"""Airflow's UI, driven by a real headless browser: the delta DAG's trigger form shows its params
with their titles, and a run triggered from it with a backfill position succeeds.

Airflow runs with ``airflow standalone`` (``tests.live_airflow``); Debian's ``chromium`` is driven by ``playwright-core`` (``tests/ui``). Screenshots
are kept in ``test-artifacts/ui/``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BIN, ROOT, MariaDB, airflow_env, loader_dag_env, run_loader
from tests.live_airflow import standalone

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ARTIFACTS = ROOT / "test-artifacts" / "ui"
ONCALL = ARTIFACTS / "oncall"
UI_DIR = ROOT / "tests" / "ui"


def test_the_trigger_form_shows_the_params_and_a_backfill_run_succeeds(
    mariadb: MariaDB, tmp_path: Path
) -> None:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    assert Path(chromium).exists(), "chromium is missing: make setup installs it (infra/install-deps.sh)"
    assert (UI_DIR / "node_modules" / "playwright-core").exists(), "run make setup (npm ci in tests/ui)"
    from loader.core.config import load_config
    from loader.core.positions import lognum_of
    from loader.state.ledger import Ledger
    from loader.state.records import Checkpoint

    mariadb.execute(
        "DROP DATABASE IF EXISTS ui",
        "CREATE DATABASE ui",
        "CREATE TABLE ui.t (id INT PRIMARY KEY, v INT)",
    )
    config = mariadb.config_file(tmp_path, "ui", "ui.*")
    cfg = load_config(config)
    start = mariadb.execute()
    ledger = Ledger.of(cfg)
    mariadb.execute("INSERT INTO ui.t VALUES (1, 1), (2, 2)")
    ledger.set_checkpoint(Checkpoint(mariadb.execute(), "test"))  # after the rows

    env = airflow_env(
        tmp_path / "airflow",
        {
            "LOADER_CONFIG": str(config),
            "LOADER_TEST_PASSWORD": mariadb.password,
            "LOADER_DELTA_SCHEDULE": "none",  # only the run the browser triggers
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        },
    )
    with standalone(tmp_path / "airflow", env) as airflow:
        if ARTIFACTS.exists():
            shutil.rmtree(ARTIFACTS)
        ARTIFACTS.mkdir(parents=True)
        browser = subprocess.run(
            [
                "node",
                "trigger_delta.mjs",
                airflow.url,
                str(ARTIFACTS),
                str(lognum_of(start.file)),
                str(start.pos),
            ],
            cwd=UI_DIR,
            env={**os.environ, "CHROMIUM": chromium},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert browser.returncode == 0, browser.stderr[-3000:]
        seen = json.loads(browser.stdout.strip().splitlines()[-1])
        assert seen["titles"] == [
            "Backfill from binlog file number",
            "Backfill from byte position",
            "Most changes per interval",
            "Dry run",
        ]
        assert "Replay from this binlog file" in seen["form"]
        (run,) = airflow.finished(seen["runId"])
        assert run.state == "success", airflow.tail()
        (interval,) = ledger.intervals()
        # The backfill started where the browser said, before the checkpoint: the rows came again.
        assert (
            str(interval.start) == str(start) and interval.state == "materialised" and interval.changes == 2
        )
        assert sorted(p.name for p in ARTIFACTS.iterdir()) >= ["1-trigger-form.png", "2-backfill-filled.png"]
        # And the warehouse holds what the source holds.
        compared = subprocess.run(
            [str(BIN / "loader"), "compare"], env=airflow.env, capture_output=True, text=True
        )
        assert compared.returncode == 0, compared.stdout + compared.stderr[-2000:]
        assert "ui.t → iceberg.ui_wh.ui__t: source 2 rows, warehouse 2 rows, equal" in compared.stdout, (
            compared.stdout
        )


def _oncall(airflow: Any, screenshot: str, *action: str) -> dict[str, Any]:
    """What the browser sees of the on-call page, opened from Airflow's navigation."""
    browser = subprocess.run(
        ["node", "oncall.mjs", airflow.url, str(ONCALL / screenshot), *action],
        cwd=UI_DIR,
        env={**os.environ, "CHROMIUM": shutil.which("chromium") or "/usr/bin/chromium"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert browser.returncode == 0, browser.stderr[-3000:] + airflow.tail()
    seen: dict[str, Any] = json.loads(browser.stdout.strip().splitlines()[-1])
    return seen


def test_the_oncall_page_shows_a_healthy_source_then_a_failed_interval_whose_rerun_mends_it(
    mariadb: MariaDB, tmp_path: Path
) -> None:
    from loader.core.config import load_config
    from loader.core.crashpoints import AT_ENV, LOG_ENV
    from loader.state.ledger import Ledger

    mariadb.execute(
        "DROP DATABASE IF EXISTS oncall",
        "CREATE DATABASE oncall",
        "CREATE TABLE oncall.t (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE oncall.u (id INT PRIMARY KEY, v INT)",
        "INSERT INTO oncall.t VALUES (1, 1), (2, 2)",
        "INSERT INTO oncall.u VALUES (1, 1)",
    )
    config = mariadb.config_file(tmp_path, "oncall", "oncall.*")
    ledger = Ledger.of(load_config(config))
    loaded = run_loader(mariadb, config, "initial-load")
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    (load,) = ledger.loads()
    mariadb.execute("INSERT INTO oncall.t VALUES (3, 3)", "UPDATE oncall.t SET v = 20 WHERE id = 2")
    crash_log = tmp_path / "crash.log"
    env = loader_dag_env(
        tmp_path / "airflow",
        config,
        mariadb,
        extra={
            "LOADER_TEST_PASSWORD": mariadb.password,
            "LOADER_DELTA_SCHEDULE": "none",  # only the runs the test triggers
            # The second run's merge dies (kill -9) right after its commit.
            AT_ENV: "materialize: after snapshot committed:2",
            LOG_ENV: str(crash_log),
        },
    )
    dag = "loader_continuous_delta"
    with standalone(tmp_path / "airflow", env) as airflow:
        shutil.rmtree(ONCALL, ignore_errors=True)
        ONCALL.mkdir(parents=True)
        airflow.wait_for_dags(dag)
        airflow.api("PATCH", f"/api/v2/dags/{dag}", {"is_paused": False})
        first = airflow.trigger(dag, {"checksum": True})
        (run,) = airflow.finished(first)
        assert run.state == "success", airflow.tail()

        healthy = _oncall(airflow, "oncall-healthy.png")
        assert healthy["navHref"].rstrip("/").endswith("/loader-oncall"), healthy["navHref"]
        assert (healthy["title"], healthy["verdict"], healthy["why"]) == (
            "Source oncall HEALTHY",
            "HEALTHY",
            "caught up",
        )
        checkpoint = ledger.checkpoint()
        assert checkpoint is not None
        facts = healthy["facts"]
        assert facts["Checkpoint"] == f"{checkpoint.position} (interval {checkpoint.interval})"
        assert facts["Lag"].startswith("caught up (0 s, 0 bytes behind the source"), facts
        assert facts["Last initial load"] == f"{load.id} (complete, 2 tables, P0 {load.p0})"
        assert facts["Last check"].startswith(f"checksum at {checkpoint.position} (") and facts[
            "Last check"
        ].endswith("): 2 tables, every one equal"), facts
        assert healthy["failed"] == []
        # Per table: its copy, and the last interval that changed it (t changed, u did not).
        (interval,) = ledger.intervals()
        assert [row[:5] for row in healthy["tables"]] == [
            ["oncall.t", "oncall__t", "mirror", str(load.p0), f"interval {interval.id}"],
            ["oncall.u", "oncall__u", "mirror", str(load.p0), "none since its copy"],
        ]
        # No failure: no rerun or abandon; the others filled from the ledger.
        ways = healthy["ways"]
        assert sorted(ways) == ["backfill", "reload", "rollback"]
        lognum, logpos = str(checkpoint.position.lognum), str(checkpoint.position.pos)
        assert ways["backfill"]["fields"] == {"start_lognum": str(int(lognum)), "start_logpos": logpos}
        assert ways["backfill"]["labels"] == [
            "Backfill from binlog file number",
            "Backfill from byte position",
        ]
        assert (ways["rollback"]["dag"], ways["rollback"]["fields"]) == (
            "loader_rollback",
            {"to_interval": ""},
        )
        assert (ways["reload"]["dag"], ways["reload"]["fields"]) == ("loader_initial_load", {"tables": ""})

        # The next run's merge is killed after its commit: the run fails, the page says so.
        mariadb.execute("INSERT INTO oncall.t VALUES (4, 4)", "DELETE FROM oncall.u WHERE id = 1")
        second = airflow.trigger(dag)
        (run,) = airflow.finished(second)
        assert run.state == "failed" and airflow.task_state(second, "materialize") == "failed", airflow.tail()
        assert crash_log.read_text().count("materialize: after snapshot committed\n") == 2
        failed = _oncall(airflow, "oncall-failed-interval.png", "rerun")
        assert failed["verdict"] == "FAILED", failed
        stuck = ledger.intervals()[-1]
        assert failed["why"].startswith(f"1 interval failed, the last {stuck.id}: materialize: "), failed[
            "why"
        ]
        ((row, *_),) = [(f["cells"], f["link"]) for f in failed["failed"]]
        # The error as the ledger noted it: one line, Airflow's whole spark-submit report left to the log.
        assert row[0] == stuck.id and row[4] == f"materialize of run {second}", row
        assert row[3] == (
            "materialize: the materialize job failed: it ended without finishing (exit 137, killed by "
            "SIGKILL: spark-submit's output is in the task's log)"
        ), row[3]
        link = failed["failed"][0]["link"]
        assert link == f"/dags/{dag}/runs/{urllib.parse.quote(second, safe='')}/tasks/materialize", link
        ways = failed["ways"]
        assert sorted(ways) == ["abandon", "backfill", "reload", "rerun", "rollback"]
        assert (ways["rerun"]["runId"], ways["rerun"]["taskId"]) == (second, "materialize")
        assert ways["abandon"]["fields"] == {"abandon_interval": stuck.id, "abandon_reason": ""}
        # The page's Rerun cleared the failed task and opened the run: it finishes the interval.
        assert failed["opened"].endswith(f"/dags/{dag}/runs/{urllib.parse.quote(second, safe='')}"), failed
        airflow.wait(lambda: airflow.task_state(second, "materialize") not in ("failed",), "the clear", 120)
        (run,) = airflow.finished(second)
        assert run.state == "success", airflow.tail()

        # A change not applied yet, the delta DAG paused: no run will apply it, and the page and
        # loader status say so.
        mariadb.execute("INSERT INTO oncall.t VALUES (5, 5)")
        checkpoint = ledger.checkpoint()
        assert checkpoint is not None
        airflow.api("PATCH", f"/api/v2/dags/{dag}", {"is_paused": True})
        paused = _oncall(airflow, "oncall-paused.png")
        assert paused["verdict"] == "PAUSED" and paused["why"].startswith(
            f"the delta DAG {dag} is paused, "
        ), paused
        assert paused["facts"]["Delta DAG"] == f"{dag}: PAUSED (no run starts until it is unpaused)", paused
        status = subprocess.run(
            [str(BIN / "loader"), "status"], env=airflow.env, capture_output=True, text=True
        )
        assert status.returncode == 0, status.stderr[-2000:]
        assert f"delta DAG: {dag}: PAUSED" in status.stdout and "NO RUN TO COME: " in status.stdout, (
            status.stdout
        )
        airflow.api("PATCH", f"/api/v2/dags/{dag}", {"is_paused": False})
        # Unpaused, it still runs only when triggered (no schedule here): not healthy either.
        # The backfill way out, as filled (from the checkpoint): a run with those fields.
        mended = _oncall(airflow, "oncall-mended.png", "backfill")
        assert (mended["verdict"], mended["failed"]) == ("NO RUN DUE", []) and "rerun" not in mended["ways"]
        assert re.fullmatch(
            rf"[\d,]+ s behind the source \([\d,]+ bytes of binlog\), and no run of the delta DAG {dag} is "
            r"due \(schedule .*: it runs when triggered\): trigger a run",
            mended["why"],
        ), mended
        lognum, logpos = str(checkpoint.position.lognum), str(checkpoint.position.pos)
        assert mended["ways"]["backfill"]["fields"] == {
            "start_lognum": str(int(lognum)),
            "start_logpos": logpos,
        }
        backfill = urllib.parse.unquote(mended["opened"].split("/runs/")[1])
        shown = airflow.api("GET", f"/api/v2/dags/{dag}/dagRuns/{urllib.parse.quote(backfill, safe='')}")
        assert shown["conf"] == {"start_lognum": int(lognum), "start_logpos": int(logpos)}, shown
        (run,) = airflow.finished(backfill)
        assert run.state == "success", airflow.tail()
        (replayed,) = [i for i in ledger.intervals() if i.run_id == backfill]
        assert (replayed.start, replayed.state, replayed.changes) == (checkpoint.position, "materialised", 1)
        # And the warehouse holds what the source holds, the killed merge applied once.
        compared = subprocess.run(
            [str(BIN / "loader"), "compare"], env=airflow.env, capture_output=True, text=True
        )
        assert compared.returncode == 0, compared.stdout + compared.stderr[-2000:]
        assert (
            "oncall.t → iceberg.oncall_wh.oncall__t: source 5 rows, warehouse 5 rows, equal"
            in compared.stdout
        )
        assert (
            "oncall.u → iceberg.oncall_wh.oncall__u: source 0 rows, warehouse 0 rows, equal"
            in compared.stdout
        )
