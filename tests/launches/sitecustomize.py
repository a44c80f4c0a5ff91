"""Records the processes a test's processes start, for the suite's cost report.

The suite puts this folder first on PYTHONPATH, so that every Python process a test starts (the
loader's commands, Airflow's, a Spark job's driver) imports it at start-up and notes each process
it launches, one line of its first words, in the file LOADER_TEST_LAUNCHES names.
tests/suite_report.py counts them per test and per file.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))


def install() -> None:
    """Note every ``subprocess.Popen`` of this process in the file LOADER_TEST_LAUNCHES names
    when it launches (a test worker sets its own after start-up)."""
    import subprocess

    launch = subprocess.Popen.__init__
    if getattr(launch, "_recorded", False):
        return

    def recorded(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        launch(self, args, *rest, **kwargs)
        log = os.environ.get("LOADER_TEST_LAUNCHES")
        if not log:
            return
        try:
            argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
            # The command and its first and last words say what it is (pyspark-shell comes last).
            kept = argv if len(argv) <= 10 else [*argv[:6], "...", *argv[-3:]]
            words = " ".join(os.fsdecode(a).replace("\n", " ") for a in kept)
            with open(log, "a", encoding="utf-8") as out:
                out.write(words + "\n")
        except Exception:  # a count is not worth a failed launch
            pass

    recorded._recorded = True  # type: ignore[attr-defined]
    subprocess.Popen.__init__ = recorded  # type: ignore[method-assign]


if os.environ.get("LOADER_TEST_LAUNCHES"):
    install()

if __name__ == "sitecustomize":
    # Another sitecustomize (a distribution's) that this one hides still runs.
    import importlib.machinery
    import importlib.util

    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    _other = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if _other is not None and _other.loader is not None:
        _other.loader.exec_module(importlib.util.module_from_spec(_other))
