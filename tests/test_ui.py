"""Airflow's UI, driven by a real headless browser: the delta DAG's trigger form shows its params
with their titles, and a run triggered from it with a backfill position succeeds.

Airflow runs with ``airflow standalone`` (``tests.live_airflow``); Debian's ``chromium`` is driven by ``playwright-core`` (``tests/ui``). Screenshots
are kept in ``test-artifacts/ui/``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import BIN, ROOT, MariaDB, airflow_env
from tests.live_airflow import standalone

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ARTIFACTS = ROOT / "test-artifacts" / "ui"
UI_DIR = ROOT / "tests" / "ui"


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
        assert interval.start == str(start) and interval.state == "materialised" and interval.changes == 2
        assert sorted(p.name for p in ARTIFACTS.iterdir()) >= ["1-trigger-form.png", "2-backfill-filled.png"]
        # And the warehouse holds what the source holds.
        compared = subprocess.run(
            [str(BIN / "loader"), "compare"], env=airflow.env, capture_output=True, text=True
        )
        assert compared.returncode == 0, compared.stdout + compared.stderr[-2000:]
        assert "ui.t → iceberg.ui_wh.ui__t: source 2 rows, warehouse 2 rows, equal" in compared.stdout, (
            compared.stdout
        )
