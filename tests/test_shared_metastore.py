"""A Hive metastore service that several Spark processes use at once (catalog = "hive"): the
re-load of one table holds its Spark session open while a delta run materialises another table,
and both land; the warehouse then equals the source."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loader.core import crashpoints
from tests.conftest import MariaDB, run_loader

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _stopped_job(job: str, config: Path) -> int | None:
    """The PID of ``job``'s Spark driver for ``config`` once it has stopped itself, else None."""
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        words = [w.decode(errors="replace") for w in cmdline]
        is_driver = any(w.endswith("spark_jobs.py") for w in words) and job in words
        if state == "T" and is_driver and str(config) in words:
            return int(proc.name)
    return None


def test_a_reload_and_a_delta_run_share_the_metastore_at_once(
    mariadb: MariaDB, hive_metastore: str, tmp_path: Path
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS hm",
        "CREATE DATABASE hm",
        "CREATE TABLE hm.a (id INT PRIMARY KEY, v VARCHAR(20))",
        "CREATE TABLE hm.b (id INT PRIMARY KEY, n DECIMAL(10,2))",
        "INSERT INTO hm.a SELECT seq, CONCAT('a', seq) FROM hm.seq_1_to_50",
        "INSERT INTO hm.b SELECT seq, seq / 4 FROM hm.seq_1_to_30",
    )
    toml = mariadb.config_file(
        tmp_path,
        "hm",
        "hm.*",
        warehouse=f'format = "hive"\ncatalog = "hive"\nmetastore_uri = "{hive_metastore}"',
    )
    loaded = run_loader(mariadb, toml, "initial-load")
    assert loaded.returncode == 0, loaded.stderr
    mariadb.execute(
        "UPDATE hm.a SET v = 'changed' WHERE id % 5 = 0",
        "DELETE FROM hm.a WHERE id > 45",
        "INSERT INTO hm.a VALUES (100, 'new')",
    )

    # The re-load of b stops in its Spark job, its session (and its metastore connection) open,
    # after it wrote b's new version and before it swaps it in.
    reload = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("loader")),
            "initial-load",
            "--tables",
            "hm.b",
            "--config",
            str(toml),
        ],
        env={
            **os.environ,
            "LOADER_TEST_PASSWORD": mariadb.password,
            crashpoints.AT_ENV: "initial-load: after version written:1:stop",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while (driver := _stopped_job("initial-load", toml)) is None:
            assert reload.poll() is None and time.monotonic() < deadline, reload.communicate()
            time.sleep(0.2)
        # Meanwhile another Spark process plans, extracts and materialises a's changes.
        ran = run_loader(mariadb, toml, "run-once")
        assert ran.returncode == 0, ran.stderr
        assert "hm.a" in ran.stdout and "hm.b" not in ran.stdout, ran.stdout
        os.kill(driver, signal.SIGCONT)
        out, err = reload.communicate(timeout=180)
    finally:
        if reload.poll() is None:
            reload.kill()
    assert reload.returncode == 0, out + err

    checked = run_loader(mariadb, toml, "checksum")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    lines = [x for x in checked.stdout.splitlines() if x.startswith("hm.")]
    assert len(lines) == 2 and all(x.endswith(", equal") for x in lines), checked.stdout
    assert any(x.startswith("hm.a → hm_wh.hm__a: source 46 rows, warehouse 46 rows,") for x in lines), lines
