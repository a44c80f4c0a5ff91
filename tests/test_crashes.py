"""Crashes at many points chosen at random, with a writer running: after each crash (and the
crashes of the reruns that follow it) a clean rerun carries on and the warehouse equals the
source, checksum for checksum.

The runs are killed as ``kill -9`` of their process group would (``loader.core.crashpoints``): the
loader, its Spark job and the job's driver, with no clean-up. A point is chosen from those the
last clean run of the same command passed (each before and after a write to the staging store or
the ledger, after each transaction extract writes, after a warehouse version is written and
after each catalog swap); a Spark run is also killed at a random moment, which may fall inside
Spark's own work. Each test prints how many kills hit each step and point.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loader.app import steps
from loader.core import crashpoints
from loader.core.config import Config
from loader.staging.stores import LocalStore
from loader.state.ledger import Ledger
from loader.warehouse.initial_load import run_initial_load
from loader.warehouse.materialize import run_materialize
from tests.conftest import (
    TABLE_FORMATS,
    MariaDB,
    assert_equal_to_source,
    fresh_schema,
    quiet,
    random_seed,
    run_loader,
    schema_config,
)
from tests.writer import TABLES, Writer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LOADER = str(Path(sys.executable).with_name("loader"))
# Kills per series. make test runs a sample: twelve of plan and extract (a run takes a second),
# and five of the Spark jobs (a run takes half a minute: two of the initial load, three of
# run-once) on one table format, which the seed picks. make test-long (LOADER_TEST_LONG=1) runs
# them all: a hundred of plan and extract, and the Spark series on both formats.
# LOADER_TEST_CRASHES=<n> and LOADER_TEST_SPARK_CRASHES=<n> ask for more (or fewer).
LONG = os.environ.get("LOADER_TEST_LONG") == "1"
EXTRACT_KILLS = int(os.environ.get("LOADER_TEST_CRASHES") or (100 if LONG else 12))
SPARK_KILLS = int(os.environ.get("LOADER_TEST_SPARK_CRASHES") or 5)


class Crashes:
    """Runs of one loader config, some killed at a point; what was hit, by step and point."""

    def __init__(self, mariadb: MariaDB, toml: Path, tmp: Path, seed: int) -> None:
        self.mariadb = mariadb
        self.toml = toml
        self.tmp = tmp
        self.random = random.Random(seed)
        self.passed: dict[str, list[str]] = {}  # command -> the points its last clean run passed
        self.hits: collections.Counter[str] = collections.Counter()
        self.missed = 0
        self.runs = 0
        self.seconds: collections.Counter[str] = collections.Counter()  # spent, by kind of run

    def _run(
        self, args: tuple[str, ...], env: dict[str, str], kill_after: float | None = None
    ) -> tuple[int, str, Path]:
        """Run ``loader *args`` in a process group of its own (a kill takes all of it) until it
        is not refused because a killed run's lease is still held (Airflow retries those too);
        with ``kill_after``, kill the group after that many seconds. Its exit code (-9 when
        killed), output, and the log of the points it passed."""
        for _ in range(30):
            self.runs += 1
            log = self.tmp / f"points-{self.runs:04d}.log"
            proc = subprocess.Popen(
                [LOADER, *args, "--config", str(self.toml)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env={
                    **os.environ,
                    "LOADER_TEST_PASSWORD": self.mariadb.password,
                    crashpoints.LOG_ENV: str(log),
                    **env,
                },
                start_new_session=True,
            )
            try:
                out, _ = proc.communicate(timeout=kill_after or 600)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
            if proc.returncode == -signal.SIGKILL:
                _wait_gone(proc.pid)
            if proc.returncode != 3:
                return proc.returncode, out, log
            time.sleep(0.5)
        raise AssertionError(f"loader {' '.join(args)} was refused 30 times:\n{out}")

    def clean(self, *args: str) -> str:
        """Run to the end; its output."""
        started = time.monotonic()
        code, out, log = self._run(args, {})
        self.seconds["clean runs"] += time.monotonic() - started
        assert code == 0, f"loader {' '.join(args)} exited {code}:\n{out}"
        self.passed[args[0]] = _points(log)
        return out

    def killed_at_a_point(self, *args: str, within: str = "") -> None:
        """Run, killed at a point its last clean run passed (in step ``within``, if given): the
        n-th time it reaches it."""
        passed = collections.Counter(p for p in self.passed.get(args[0], []) if p.startswith(within))
        if passed:  # each point alike, however often a run passes it, then one of its first hits
            point = self.random.choice(sorted(passed))
            nth = self.random.randint(1, (passed[point] + 1) // 2)
        else:  # no clean run yet: one of the step's first points
            point, nth = f"{within}*", self.random.randint(1, 8)
        started = time.monotonic()
        code, out, log = self._run(args, {crashpoints.AT_ENV: f"{point}:{nth}:group"})
        self.seconds["killed runs"] += time.monotonic() - started
        if code == -signal.SIGKILL:
            self.hits[_points(log)[-1]] += 1
        else:  # this run's data did not take it there
            assert code == 0, f"loader {' '.join(args)} exited {code}:\n{out}"
            self.missed += 1

    def killed_at_a_moment(self, *args: str, between: tuple[float, float]) -> None:
        """Run, killed after a random time (which may fall inside Spark's work)."""
        started = time.monotonic()
        code, out, log = self._run(args, {}, kill_after=self.random.uniform(*between))
        self.seconds["killed runs"] += time.monotonic() - started
        if code == -signal.SIGKILL:
            passed = _points(log)
            last = f"after {passed[-1]}" if passed else "before any point"
            self.hits[f"{args[0]} at a random moment: {last}"] += 1
        else:
            assert code == 0, f"loader {' '.join(args)} exited {code}:\n{out}"
            self.missed += 1

    @property
    def kills(self) -> int:
        return sum(self.hits.values())

    def report(self, title: str) -> str:
        by_step: collections.Counter[str] = collections.Counter()
        for point, n in self.hits.items():
            by_step[point.split(": ")[0] if ": " in point else "(no step)"] += n
        lines = [
            f"{title}: {self.kills} kills in {self.runs} runs ({self.missed} runs ended before their "
            "point); by step: " + ", ".join(f"{step} {n}" for step, n in sorted(by_step.items()))
        ]
        lines += [f"  {n:3d}  {point}" for point, n in sorted(self.hits.items())]
        lines.append("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(self.seconds.items())))
        return "\n".join(lines)


def _points(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _wait_gone(group: int) -> None:
    """Until every process of a killed group is gone (reaped), as the next run finds them."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"the processes of killed group {group} are still there after 30 s")


def test_extract_and_plan_killed_at_random_points_then_rerun_leave_the_warehouse_equal(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh_schema(mariadb, "crash", *TABLES)
    mariadb.execute(
        "INSERT INTO crash.k SELECT seq, seq, CONCAT('s', seq) FROM crash.seq_1_to_40",
        "INSERT INTO crash.c SELECT 'x', seq, seq FROM crash.seq_1_to_10",
    )
    cfg = schema_config(mariadb, tmp_path, spark_config, "crash")
    run_initial_load(spark, cfg, progress=quiet)
    toml = mariadb.config_file(tmp_path, cfg.source.name, "crash.*")
    crashes = Crashes(mariadb, toml, tmp_path, seed=random_seed())
    writer = Writer(mariadb, "crash", seed=random_seed())
    writer.start()
    cycles = 0
    try:
        while crashes.kills < EXTRACT_KILLS:
            # One to three kills in a row (a rerun killed too), then a clean rerun, while the
            # writer goes on; small intervals now and then, so that several wait together.
            for _ in range(crashes.random.randint(1, 3)):
                crashes.killed_at_a_point("extract", *crashes.random.choice([[], ["--max-changes", "20"]]))
            crashes.clean("extract")
            if crashes.random.random() < 0.7:
                continue  # materialise several intervals at once, later
            with writer.paused():
                started = time.monotonic()
                while steps.extract(cfg, progress=quiet) is not None:
                    pass
                run_materialize(spark, cfg)
                assert_equal_to_source(spark, cfg)
                crashes.seconds["checks"] += time.monotonic() - started
                cycles += 1
    finally:
        writer.finish()
    while steps.extract(cfg, progress=quiet) is not None:
        pass
    run_materialize(spark, cfg)
    assert_equal_to_source(spark, cfg)
    ledger = Ledger.of(cfg)
    assert not [i for i in ledger.intervals() if i.state not in ("materialised", "abandoned")]
    assert not [p for p in Path(cfg.staging.uri).rglob(".*.tmp")], "a killed write's temporary file was left"
    with capsys.disabled():
        print(
            "\n"
            + crashes.report(
                f"extract (seed {random_seed()}): {writer.transactions} transactions written, "
                f"{cycles + 1} warehouse checks"
            )
        )
    assert crashes.kills >= EXTRACT_KILLS and writer.transactions > 100


@pytest.mark.parametrize("table_format", TABLE_FORMATS)
def test_spark_jobs_killed_at_random_points_and_moments_then_rerun_leave_the_warehouse_equal(
    mariadb: MariaDB, tmp_path: Path, capsys: pytest.CaptureFixture[str], table_format: str
) -> None:
    picked = random.Random(random_seed()).choice(TABLE_FORMATS)
    if not LONG and table_format != picked:
        pytest.skip(
            f"make test runs this series on one format a day ({picked} with seed {random_seed()}): make test-long on both"
        )
    fresh_schema(mariadb, "crashjob", *TABLES)
    mariadb.execute(
        "INSERT INTO crashjob.k SELECT seq, seq, CONCAT('s', seq) FROM crashjob.seq_1_to_40",
        "INSERT INTO crashjob.c SELECT 'x', seq, seq FROM crashjob.seq_1_to_10",
    )
    # Small partitions and two per catalog call: a table's swap takes several calls.
    toml = mariadb.config_file(
        tmp_path,
        "crashjob",
        "crashjob.*",
        warehouse=f'format = "{table_format}"\npartition_rows = 10\nbuckets = 4\nswap_batch = 2',
        more='[spark]\nmaster = "local[2]"\nconf = { "spark.sql.shuffle.partitions" = "2" }\n',
    )
    crashes = Crashes(mariadb, toml, tmp_path, seed=random_seed() + 1)

    def check() -> None:
        """``loader checksum``: every key range of both tables equal (it first carries the
        changes up to the source's position)."""
        out = crashes.clean("checksum", "--range-rows", "8")
        assert out.count(", equal") == 2, out

    # The first load, killed twice (the second time at a point), then loaded to the end.
    crashes.killed_at_a_moment("initial-load", between=(8, 20))
    crashes.killed_at_a_point("initial-load")
    crashes.clean("initial-load")
    assert crashes.kills
    check()

    writer = Writer(mariadb, "crashjob", seed=random_seed() + 1)
    writer.start()
    try:
        while crashes.kills < SPARK_KILLS:
            # Killed in its Spark job (the first test kills plan and extract), its rerun killed
            # at a moment (after Spark's start: its own work, or the job's), and that one's.
            crashes.killed_at_a_point("run-once", within="materialize: ")
            crashes.killed_at_a_moment("run-once", between=(6, 14))
            crashes.killed_at_a_point("run-once", within="materialize: ")
            with writer.paused():
                # The interval a killed run planned is finished first, then the rest to now,
                # so that the check finds nothing left to carry.
                crashes.clean("extract")
                crashes.clean("extract")
                crashes.clean("run-once")
                check()
    finally:
        writer.finish()
    ledger = Ledger(LocalStore(str(tmp_path / "staging")), "crashjob")
    assert not [i for i in ledger.intervals() if i.state not in ("materialised", "abandoned")]
    with capsys.disabled():
        print(
            "\n"
            + crashes.report(
                f"Spark jobs ({table_format}, seed {random_seed()}): {writer.transactions} transactions written"
            )
        )
    assert crashes.kills >= SPARK_KILLS


def test_a_metastore_left_half_created_by_a_killed_first_job_is_created_again(
    mariadb: MariaDB, tmp_path: Path
) -> None:
    fresh_schema(mariadb, "crashderby", "k (id INT PRIMARY KEY, v INT)")
    mariadb.execute("INSERT INTO crashderby.k SELECT seq, seq * 2 FROM crashderby.seq_1_to_20")
    toml = mariadb.config_file(tmp_path, "crashderby", "crashderby.*", warehouse='format = "hive"')
    # What a first job killed while Derby created its database leaves: the folder, some of its
    # files, no service.properties (found so by the crash series above).
    unfinished = tmp_path / "warehouse" / "metastore" / "metastore_db"
    (unfinished / "seg0").mkdir(parents=True)
    (unfinished / "log").mkdir()
    loaded = run_loader(mariadb, toml, "initial-load")
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert (unfinished / "service.properties").is_file()
    checked = run_loader(mariadb, toml, "checksum")
    assert checked.returncode == 0 and "1 tables, 1 equal" in checked.stdout + checked.stderr, checked.stderr
