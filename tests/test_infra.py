"""The files users copy: the compose file and the server settings."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

INFRA = Path(__file__).resolve().parents[1] / "infra"


def test_compose_file_declares_the_real_parts_with_binlog_on() -> None:
    compose = yaml.safe_load((INFRA / "compose.yaml").read_text())
    services = compose["services"]
    assert {"mysql", "minio", "airflow", "spark"} <= set(services)
    assert services["mysql"]["image"].startswith("mysql:8.4")
    flags = " ".join(services["mysql"]["command"])
    for flag in ("--log-bin", "--binlog-format=ROW", "--binlog-row-image=FULL", "--binlog-row-metadata=FULL"):
        assert flag in flags
    for svc in services.values():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("."):
                assert (INFRA / src).exists(), vol


@pytest.mark.skipif(
    shutil.which("docker") is None
    or subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0,
    reason="no docker compose client on this machine",
)
def test_docker_compose_accepts_the_file() -> None:
    out = subprocess.run(
        ["docker", "compose", "-f", str(INFRA / "compose.yaml"), "config", "--quiet"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_server_settings_match_what_the_loader_checks() -> None:
    from loader.source.connection import REQUIRED_SETTINGS

    cnf = (INFRA / "mariadb" / "binlog.cnf").read_text()
    assert "binlog_format        = ROW" in cnf
    assert "binlog_row_image     = FULL" in cnf
    assert set(REQUIRED_SETTINGS) == {"log_bin", "binlog_format", "binlog_row_image"}
    grants = (INFRA / "mariadb" / "grants.sql").read_text()
    assert "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*" in grants
