"""Airflow's UI, driven by a real headless browser: the delta DAG's trigger form shows its params
with their titles, and a run triggered from it with a backfill position succeeds.

Airflow runs with ``airflow standalone`` (scheduler, API server, DAG processor; SQLite) on a free
loopback port; Debian's ``chromium`` is driven by ``playwright-core`` (``tests/ui``). Screenshots
are kept in ``test-artifacts/ui/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import BIN, ROOT, MariaDB, airflow_env, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ARTIFACTS = ROOT / "test-artifacts" / "ui"
UI_DIR = ROOT / "tests" / "ui"


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "airflow standalone exited"
        try:
            with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=5) as response:
                health = json.load(response)
            if all(health.get(part, {}).get("status") == "healthy" for part in ("metadatabase", "scheduler")):
                return
        except OSError:
            pass
        time.sleep(3)
    raise AssertionError(f"Airflow did not come up at {url}")


def _run_state(env: dict[str, str], run_id: str) -> str:
    done = subprocess.run(
        [str(BIN / "airflow"), "dags", "list-runs", "loader_continuous_delta", "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [
        x for x in done.stdout.splitlines() if x.startswith("[{") or x == "[]"
    ]  # past Airflow's warnings
    runs = json.loads(lines[-1]) if lines else []
    return next((r["state"] for r in runs if r["run_id"] == run_id), "missing")


def _finished(home: Path, run_id: str) -> bool:
    """Whether the run has finished, read from the standalone's SQLite database: cheap enough
    to ask every few seconds, where each ``airflow`` command starts Airflow (~5 s of CPU)."""
    database = home / "airflow.db"
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)) as db:
        row = db.execute("SELECT state FROM dag_run WHERE run_id = ?", (run_id,)).fetchone()
    return row is not None and row[0] in ("success", "failed")


def test_the_trigger_form_shows_the_params_and_a_backfill_run_succeeds(
    mariadb: MariaDB, tmp_path: Path
) -> None:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    assert Path(chromium).exists(), "chromium is missing: make setup installs it (infra/install-deps.sh)"
    assert (UI_DIR / "node_modules" / "playwright-core").exists(), "run make setup (npm ci in tests/ui)"
    from loader.config import load_config
    from loader.ledger import Checkpoint, Ledger
    from loader.positions import lognum_of

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
    ledger.set_checkpoint(Checkpoint(str(mariadb.execute()), "test"))  # after the rows

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    home = tmp_path / "airflow"
    home.mkdir()
    env = airflow_env(
        home,
        {
            "LOADER_CONFIG": str(config),
            "LOADER_TEST_PASSWORD": mariadb.password,
            "LOADER_DELTA_SCHEDULE": "none",  # only the run the browser triggers
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        },
    )
    log = open(tmp_path / "standalone.log", "wb")  # noqa: SIM115 - closed below
    airflow = subprocess.Popen(
        [str(BIN / "airflow"), "standalone"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait_healthy(url, airflow)
        if ARTIFACTS.exists():
            shutil.rmtree(ARTIFACTS)
        ARTIFACTS.mkdir(parents=True)
        browser = subprocess.run(
            ["node", "trigger_delta.mjs", url, str(ARTIFACTS), str(lognum_of(start.file)), str(start.pos)],
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
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and not _finished(home, seen["runId"]):
            time.sleep(2)
        state = _run_state(env, seen["runId"])
        assert state == "success", (tmp_path / "standalone.log").read_text(errors="replace")[-3000:]
        (interval,) = ledger.intervals()
        # The backfill started where the browser said, before the checkpoint: the rows came again.
        assert interval.start == str(start) and interval.state == "materialised" and interval.changes == 2
        assert sorted(p.name for p in ARTIFACTS.iterdir()) >= ["1-trigger-form.png", "2-backfill-filled.png"]
        # And the warehouse holds what the source holds.
        compared = subprocess.run([str(BIN / "loader"), "compare"], env=env, capture_output=True, text=True)
        assert compared.returncode == 0, compared.stdout + compared.stderr[-2000:]
        assert "ui.t → iceberg.ui_wh.ui__t: source 2 rows, warehouse 2 rows, equal" in compared.stdout, (
            compared.stdout
        )
    finally:
        os.killpg(airflow.pid, signal.SIGTERM)
        try:
            airflow.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(airflow.pid, signal.SIGKILL)
        log.close()
