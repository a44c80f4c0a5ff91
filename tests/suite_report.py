"""The suite's cost report: time per file and per test, slowest first, and what each file starts.

Printed at the end of every run (``-p no:tests.suite_report`` turns it off) and kept in pytest's
cache (``.pytest_cache``, key ``suite_report/last``) to compare two runs. A test's time is its
setup, run and teardown (a shared server's start falls to the first test that asks for it). The
launches are counted in every Python process the tests start (tests/launches/sitecustomize.py):
Spark jobs (spark-submit of a job), JVM starts (those, the in-process sessions' gateways and other
``java`` commands), Airflow runs (``dags test``, ``tasks test``), servers (MariaDB, moto, the
infra/ services, Airflow's own) and ``loader`` commands.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

LAUNCHES = Path(__file__).with_name("launches")
FILE_SECONDS = Path(__file__).with_name("file_seconds.json")
KINDS = ("spark jobs", "JVMs", "Airflow runs", "servers", "loader runs")
_KEY = "suite_report"


def kinds(words: str) -> list[str]:
    """What one launched command (its first words) costs, by the report's kinds; a server also
    as ``server <name>``."""
    argv = words.split()
    if not argv:
        return []
    name, rest = os.path.basename(argv[0]), argv[1:]
    if name == "spark-submit":
        return ["JVMs"] if "pyspark-shell" in rest else ["spark jobs", "JVMs"]
    if name == "java":
        return ["JVMs"]
    if name == "airflow":
        if rest[:2] == ["dags", "test"] or rest[:2] == ["tasks", "test"]:
            return ["Airflow runs"]
        if rest[:1] in (["standalone"], ["scheduler"], ["api-server"]):
            return ["servers", f"server airflow {rest[0]}"]
        return []
    if name == "moto_server" or (name.endswith(".sh") and rest[:1] == ["start"]):
        return ["servers", f"server {name.removesuffix('.sh')}"]
    if name == "loader":
        return ["loader runs"]
    return []


class _Launches:
    """The worker's launch log, read on from where the last phase left it."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.offset = 0

    def since_last(self) -> dict[str, int]:
        try:
            with self.log.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return {}
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits for the next phase
        self.offset += len(complete)
        counts: collections.Counter[str] = collections.Counter()
        for line in complete.decode("utf-8", "replace").splitlines():
            counts.update(kinds(line))
        return dict(counts)


class SuiteReport:
    """The plugin: counts each test's launches where it runs (a worker), adds up and prints the
    times and counts where the reports arrive (the controller)."""

    def __init__(self, launches: _Launches, owned: str | None) -> None:
        self.launches = launches
        self.owned = owned  # the launch logs' folder, when this process made it
        self.results: dict[str, dict[str, Any]] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        outcome = yield
        report = outcome.get_result()
        counts = self.launches.since_last()
        if counts:
            report.user_properties = [*report.user_properties, (_KEY, counts)]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = self.results.setdefault(
            report.nodeid, {"seconds": 0.0, "counts": collections.Counter(), "worker": "main"}
        )
        test["seconds"] += report.duration
        node = getattr(report, "node", None)
        if node is not None and hasattr(node, "workerinput"):
            test["worker"] = node.workerinput.get("workerid", "main")
        for key, value in report.user_properties:
            if key == _KEY:
                test["counts"].update(value)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.owned:
            shutil.rmtree(self.owned, ignore_errors=True)

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if hasattr(config, "workerinput") or not self.results:
            return
        for line in report_lines(self.results):
            if line.startswith("== "):
                terminalreporter.section(line.strip("= "))
            else:
                terminalreporter.write_line(line)
        cache = getattr(config, "cache", None)
        if cache is not None:
            cache.set(
                f"{_KEY}/last",
                {
                    nodeid: {"seconds": round(t["seconds"], 2), **t["counts"]}
                    for nodeid, t in self.results.items()
                },
            )


def report_lines(results: dict[str, dict[str, Any]]) -> list[str]:
    """The report of the tests' times and counts: per file, slowest first, then the slowest tests."""
    files: dict[str, dict[str, Any]] = {}
    for nodeid, test in results.items():
        f = files.setdefault(
            nodeid.split("::")[0], {"seconds": 0.0, "tests": 0, "counts": collections.Counter()}
        )
        f["seconds"] += test["seconds"]
        f["tests"] += 1
        f["counts"].update(test["counts"])

    def row(seconds: float, tests: int, counts: collections.Counter[str], name: str) -> str:
        return (
            f"{seconds:8.1f} {tests:>5} " + " ".join(f"{counts.get(k, 0):>12}" for k in KINDS) + f"  {name}"
        )

    lines = [
        "== time and launches per file, slowest first ==",
        f"{'seconds':>8} {'tests':>5} " + " ".join(f"{k:>12}" for k in KINDS) + "  file",
    ]
    ranked = sorted(files.items(), key=lambda kv: -kv[1]["seconds"])
    shown = [(name, f) for name, f in ranked if f["seconds"] >= 1.0]
    lines += [row(f["seconds"], f["tests"], f["counts"], name) for name, f in shown]
    rest = ranked[len(shown) :]
    if rest:
        lines.append(
            row(
                sum(f["seconds"] for _, f in rest),
                sum(f["tests"] for _, f in rest),
                collections.Counter(),
                f"({len(rest)} files under 1 s each)",
            )
        )
    total: collections.Counter[str] = collections.Counter()
    for f in files.values():
        total.update(f["counts"])
    lines.append(row(sum(f["seconds"] for f in files.values()), len(results), total, "all files"))
    servers = sorted((k.removeprefix("server "), n) for k, n in total.items() if k.startswith("server "))
    if servers:
        lines.append("servers started: " + ", ".join(f"{name} {n}" for name, n in servers))
    workers: collections.Counter[str] = collections.Counter()
    for test in results.values():
        workers[test["worker"]] += test["seconds"]
    if len(workers) > 1:
        lines.append("busy per worker: " + ", ".join(f"{w} {s:.0f} s" for w, s in sorted(workers.items())))
    lines.append("== slowest tests (setup + run + teardown) ==")
    slowest = sorted(results.items(), key=lambda kv: -kv[1]["seconds"])[:25]
    lines += [f"{test['seconds']:8.1f}  {nodeid}" for nodeid, test in slowest]
    return lines


def pytest_configure(config: pytest.Config) -> None:
    folder = os.environ.get("LOADER_TEST_LAUNCH_DIR")
    owned = None
    if not folder:  # the controller (or a run without workers); its workers inherit the folder
        folder = owned = tempfile.mkdtemp(prefix="loader-test-launches-")
        os.environ["LOADER_TEST_LAUNCH_DIR"] = folder
    log = Path(folder) / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.log"
    os.environ["LOADER_TEST_LAUNCHES"] = str(log)
    paths = [str(LAUNCHES), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # This process's own launches too (servers, the in-process Spark session's gateway).
    spec = importlib.util.spec_from_file_location("_launch_recorder", LAUNCHES / "sitecustomize.py")
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    config.pluginmanager.register(SuiteReport(_Launches(log), owned), "suite_report_plugin")


def file_seconds() -> dict[str, float]:
    """Each test file's time in a recent whole run (``tests/file_seconds.json``), by its path as
    pytest names it (``tests/test_edges.py``); empty when the file is missing."""
    try:
        return {name: float(seconds) for name, seconds in json.loads(FILE_SECONDS.read_text()).items()}
    except FileNotFoundError:
        return {}


def save_file_seconds(cache_dir: Path = Path(".pytest_cache")) -> dict[str, float]:
    """Write the files' times of the last run (pytest's cache) into ``tests/file_seconds.json``.

    A file the last run did not reach keeps its time; a file that no longer exists is dropped."""
    last = json.loads((cache_dir / "v" / _KEY / "last").read_text())
    measured: collections.Counter[str] = collections.Counter()
    for nodeid, test in last.items():
        measured[nodeid.split("::")[0]] += test["seconds"]
    root = FILE_SECONDS.parents[1]
    kept = {name: s for name, s in file_seconds().items() if (root / name).exists()}
    kept.update({name: round(s, 1) for name, s in measured.items()})
    ranked = dict(sorted(kept.items(), key=lambda kv: (-kv[1], kv[0])))
    FILE_SECONDS.write_text(json.dumps(ranked, indent=1) + "\n")
    return ranked


if __name__ == "__main__":
    saved = save_file_seconds()
    print(f"{FILE_SECONDS}: {len(saved)} files, {sum(saved.values()):.0f} s in all")
