"""The installed ``loader`` command: help, exit codes, one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LOADER = str(Path(sys.executable).with_name("loader"))


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LOADER, *args], capture_output=True, text=True, env=env, timeout=60)


def test_help_lists_the_subcommands() -> None:
    out = run("--help")
    assert out.returncode == 0
    for name in ("config", "check", "demo"):
        assert name in out.stdout


def test_bad_command_line_exits_2() -> None:
    assert run("no-such-command").returncode == 2


def test_config_error_is_one_line_with_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "loader.toml"
    bad.write_text('[source]\ntransport = "kafka"\n')
    out = run("config", "--config", str(bad))
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0
    assert "accepted values: server, files" in out.stderr
    assert "Traceback" not in out.stderr


def test_unreachable_source_is_transient_exit_3(tmp_path: Path) -> None:
    cfg = tmp_path / "loader.toml"
    # Port 1 on loopback: nothing listens there.
    cfg.write_text("[source]\nport = 1\n")
    out = run("check", "--config", str(cfg))
    assert out.returncode == 3, out.stderr
    assert "cannot connect to source demo (127.0.0.1:1)" in out.stderr


def test_rollback_of_hive_format_tables_is_refused_before_spark_starts(tmp_path: Path) -> None:
    cfg = tmp_path / "loader.toml"
    cfg.write_text(f'[staging]\nuri = "{tmp_path / "staging"}"\n[warehouse]\nformat = "hive"\n')
    out = run("rollback", "--to-interval", "00000001", "--config", str(cfg))
    assert out.returncode == 1, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert 'rollback needs Iceberg tables (warehouse.format = "iceberg")' in line
    assert "re-load the tables instead" in line
    out = run("compare", "--as-of", "00000001", "--config", str(cfg))
    assert out.returncode == 1 and "compare --as-of needs Iceberg tables" in out.stderr, out.stderr
