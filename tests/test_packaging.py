"""The loader as Airflow workers and Spark clusters get it: a wheel installed without the source
tree (not editable) still extracts and materialises, with the merge SQL it ships as package data."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from loader.core.config import DEFAULT_JARS
from loader.staging.stores import LocalStore
from loader.state.ledger import Ledger
from loader.state.records import Checkpoint
from tests.conftest import ROOT, MariaDB

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the loader's wheel installed (its dependencies come from
    the test environment through a path entry, so nothing is downloaded)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # a copy, so that the build leaves nothing in the working tree
    source.mkdir()
    shutil.copy(ROOT / "pyproject.toml", source)
    shutil.copy(ROOT / "README.md", source)
    shutil.copytree(ROOT / "loader", source / "loader", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copytree(ROOT / "native", source / "native", ignore=shutil.ignore_patterns("target"))
    # The native module is built offline from the crates set-up fetched (cargo's cache of the
    # working tree's builds spares compiling them again).
    cargo = {
        "CARGO_NET_OFFLINE": "true",
        "CARGO_TARGET_DIR": str(ROOT / "native" / "target"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # maturin's own
    }
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **cargo},
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp / "dist").glob("*.whl")
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    # A plain path entry: the test environment's packages without its .pth files, so the
    # editable install of the working tree stays out.
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr
    return env_dir


def test_the_wheel_ships_the_merge_sql_and_runs_from_its_install(installed: Path) -> None:
    probe = subprocess.run(
        [
            str(installed / "bin" / "python"),
            "-c",
            "import loader, loader._native as n, loader.warehouse.merge as m; print(loader.__file__); "
            "print(n.__file__); print(n.float_text(1e16)); print(m.merge_sql(['k', 'v'], ['k']).merge)",
        ],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert probe.returncode == 0, probe.stderr
    where, native, text, sql = probe.stdout.split("\n", 3)
    assert Path(where).is_relative_to(installed) and not Path(where).is_relative_to(ROOT)
    assert Path(native).is_relative_to(installed) and text == "1e+16"  # the wheel's own native module
    assert "_seqno" in sql


def test_an_installed_loader_extracts_and_materialises(
    installed: Path, mariadb: MariaDB, tmp_path: Path
) -> None:
    # Hive-format tables: a merge on local storage needs no jar (Iceberg's needs its runtime).
    config = mariadb.config_file(tmp_path, "wheel", "wheel.*", warehouse='format = "hive"')
    start = mariadb.execute(
        "DROP DATABASE IF EXISTS wheel",
        "CREATE DATABASE wheel",
        "CREATE TABLE wheel.t (id INT PRIMARY KEY, v VARCHAR(10))",
    )
    # The first interval starts here, as after an initial load of the empty table.
    Ledger(LocalStore(str(tmp_path / "staging")), "wheel").set_checkpoint(Checkpoint(start, "initial-load"))
    mariadb.execute(
        "INSERT INTO wheel.t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "UPDATE wheel.t SET v = 'B' WHERE id = 2",
        "DELETE FROM wheel.t WHERE id = 3",
    )
    env = {
        **os.environ,
        "LOADER_TEST_PASSWORD": mariadb.password,
        # The installed environment first; spark-submit comes from the test environment.
        "PATH": f"{installed / 'bin'}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    loader = str(installed / "bin" / "loader")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [loader, *args, "--config", str(config)], capture_output=True, text=True, env=env, cwd=tmp_path
        )

    assert run("extract").returncode == 0
    # Away from the checkout there are no fetched jars: local storage needs none of them...
    materialized = run("materialize")
    assert materialized.returncode == 0, materialized.stderr
    # ...a JDBC read does, and says where they come from; pointed at them, it runs.
    refused = run("compare")
    assert refused.returncode == 1
    assert "reading the source over JDBC needs the pinned ones" in refused.stderr.splitlines()[-1]
    env["LOADER__SPARK__JARS"] = str(DEFAULT_JARS)
    compared = run("compare")
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "source 2 rows, warehouse 2 rows, equal" in compared.stdout
