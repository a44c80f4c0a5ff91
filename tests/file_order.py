"""Hands the test files to the workers heaviest first.

``make test`` gives each worker a whole file at a time (``--dist loadfile``): the wall time is the busier worker's. Handed out in collection order, the heaviest files came
last and one worker ran them while the other had finished; heaviest first, the small files fill
the gaps at the end (longest-processing-time-first scheduling).

A file's cost is its seconds in ``file_costs.json``, or unknown, which goes first (a new file may
be heavy; a light one costs nothing there). The figures are in the repository, not taken from the
last run, so that every run (CI's clean clone too) hands out the same order, and both workers
collect the same, which xdist requires. ``make file-costs``, after a whole run, writes that run's
figures (the cost report's cache, ``tests.suite_report``) into it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.suite_report import LAST

COSTS = Path(__file__).with_name("file_costs.json")


def file_costs(tests: dict[str, Any]) -> dict[str, float]:
    """Seconds per test file from the cost report's per-test figures."""
    costs: dict[str, float] = {}
    for nodeid, test in tests.items():
        name = nodeid.split("::")[0]
        costs[name] = costs.get(name, 0.0) + float(test.get("seconds", 0.0))
    return costs


def heaviest_first(items: list[pytest.Item], costs: dict[str, float]) -> list[pytest.Item]:
    """The items with their files in descending cost (unknown files first), each file's own
    tests in their order."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    order = sorted(files, key=lambda name: -costs.get(name, math.inf))  # stable: ties keep their order
    return [item for name in order for item in files[name]]


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("dist", "no") == "loadfile":  # else the files with the most tests go first
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # a worker's collection is the order xdist hands out
        items[:] = heaviest_first(items, json.loads(COSTS.read_text()) if COSTS.is_file() else {})


def save_costs(cache_dir: Path) -> dict[str, int]:
    """Write the last run's seconds per file (from the cost report's cache under ``cache_dir``)
    into ``file_costs.json``, keeping the figures of files that run did not have; returns them."""
    last = json.loads((cache_dir / "v" / LAST).read_text())
    kept = json.loads(COSTS.read_text()) if COSTS.is_file() else {}
    existing = {str(p.relative_to(COSTS.parents[1])) for p in COSTS.parent.rglob("test_*.py")}
    kept = {name: seconds for name, seconds in kept.items() if name in existing}
    costs = {name: round(s) for name, s in sorted({**kept, **file_costs(last)}.items())}
    COSTS.write_text(json.dumps(costs, indent=1) + "\n")
    return costs


if __name__ == "__main__":
    saved = save_costs(Path(__file__).resolve().parents[1] / ".pytest_cache")
    print(f"{COSTS.name}: {len(saved)} files, {sum(saved.values())} s in all")
