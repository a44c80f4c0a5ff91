"""Crash points: a run is killed at the n-th time it reaches a point, alone or with its process
group, and the points it passes are logged for the crash test to choose from."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from loader.core.crashpoints import AT_ENV, LOG_ENV, SOURCE_ENV, Target, parse_target

# Reaches "a" three times and "b" twice, printing each before it does, in a child of its own.
RUN = (
    "import subprocess, sys; from loader.core.crashpoints import reached\n"
    "if sys.argv[1:] == ['child']:\n"
    "    print('child b', flush=True); reached('b'); print('child done', flush=True); sys.exit()\n"
    "for n in (1, 2, 3):\n"
    "    print('a', n, flush=True); reached('a')\n"
    "subprocess.run([sys.executable, __file__, 'child'])\n"
    "print('b', flush=True); reached('b'); print('done', flush=True)\n"
)


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "run.py"
    script.write_text(RUN)
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        start_new_session=True,
        timeout=60,
    )


def test_targets_are_read_and_a_bad_one_is_refused() -> None:
    assert parse_target("") is None
    assert parse_target("after put ledger interval:3") == Target("after put ledger interval", 3, "kill")
    assert parse_target("*:12:group") == Target("*", 12, "group")
    assert parse_target("extract: *:2:stop") == Target("extract: *", 2, "stop")
    assert Target("extract: *", 1).matches("extract: after put manifest")
    assert not Target("extract: *", 1).matches("plan: after create ledger interval")
    assert Target("*", 1).matches("anything") and not Target("a", 1).matches("ab")
    for bad in ("nothing", "point:0", "point:x", ":3", "point:1:pause"):
        with pytest.raises(ValueError, match=AT_ENV):
            parse_target(bad)


def test_a_run_dies_at_the_nth_hit_and_logs_the_points_it_passed(tmp_path: Path) -> None:
    clean = _run(tmp_path, **{LOG_ENV: str(tmp_path / "clean.log")})
    assert clean.returncode == 0 and clean.stdout.split() == [
        "a",
        "1",
        "a",
        "2",
        "a",
        "3",
        "child",
        "b",
        "child",
        "done",
        "b",
        "done",
    ]
    assert (tmp_path / "clean.log").read_text().split() == ["a", "a", "a", "b", "b"]

    killed = _run(tmp_path, **{AT_ENV: "a:2", LOG_ENV: str(tmp_path / "killed.log")})
    assert killed.returncode == -signal.SIGKILL and killed.stdout.split() == ["a", "1", "a", "2"]
    assert (tmp_path / "killed.log").read_text().split() == ["a", "a"]

    # Without a log each process counts its own hits.
    unlogged = _run(tmp_path, **{AT_ENV: "b:1"})
    assert unlogged.returncode == -signal.SIGKILL and unlogged.stdout.endswith("child b\nb\n")
    # The run's processes share the count through the log: the child reaches "b" first.
    alone = _run(tmp_path, **{AT_ENV: "b:1", LOG_ENV: str(tmp_path / "alone.log")})
    assert alone.returncode == 0 and "child done" not in alone.stdout and alone.stdout.endswith("b\ndone\n")
    group = _run(tmp_path, **{AT_ENV: "*:4:group", LOG_ENV: str(tmp_path / "group.log")})
    assert group.returncode == -signal.SIGKILL and group.stdout.split()[-2:] == ["child", "b"]


# Steps of two sources in one process, as a deployment's workers run them, and a point outside
# any step.
RUN_SOURCES = (
    "from loader.core import crashpoints\n"
    "crashpoints.reached('outside')\n"
    "for source in ('shop_01', 'shop_02'):\n"
    "    with crashpoints.step('materialize', source):\n"
    "        with crashpoints.step('inner'):\n"
    "            crashpoints.reached('committed')\n"
    "        print(source, 'done', flush=True)\n"
)


def test_a_source_scoped_target_counts_and_logs_only_that_sources_steps(tmp_path: Path) -> None:
    script = tmp_path / "sources.py"
    script.write_text(RUN_SOURCES)

    def run(**env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            timeout=60,
        )

    log = tmp_path / "all.log"
    unscoped = run(**{LOG_ENV: str(log)})
    assert unscoped.returncode == 0 and log.read_text() == "outside\ninner: committed\ninner: committed\n"
    scoped_log = tmp_path / "scoped.log"
    # The first hit of the point within shop_02's steps, though shop_01's came before it.
    killed = run(**{AT_ENV: "inner: committed:1", LOG_ENV: str(scoped_log), SOURCE_ENV: "shop_02"})
    assert killed.returncode == -signal.SIGKILL and killed.stdout == "shop_01 done\n"
    assert scoped_log.read_text() == "inner: committed\n"
