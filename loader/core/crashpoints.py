"""Named points where a test kills the loader as a crash would (``kill -9``, the OOM killer, a
lost machine). Nothing happens unless the environment asks for it.

``LOADER_CRASH_AT=point:n`` kills the process that reaches ``point`` for the ``n``-th time with
SIGKILL: no ``finally`` block, no lease release, no clean-up runs. ``point:n:group`` kills its
whole process group instead (the run, its Spark job and the job's driver; start the run in a
session of its own); ``point:n:stop`` stops the process there (SIGSTOP) until a test, having
done something to the world around it, lets it go on (SIGCONT). A point reached within a ``step`` is named ``step: point``; a ``point``
ending in ``*`` stands for every point that starts with what comes before it (``*`` alone: any
point, ``materialize: *``: any of that step's). ``LOADER_CRASH_LOG=file`` appends each point
reached to ``file``, a line each; the run's processes share it, and with it the count of hits,
so that a test knows which points a step passes and how often. ``LOADER_CRASH_SOURCE=name``
keeps both to the steps working on that source of a deployment, whose other sources' runs share
the environment (an Airflow deployment's workers).

The points sit where a crash leaves something half done: before and after each write to the
staging store and the ledger (``stores``), after each transaction extract writes, after each
range of a server's stream extract spools for its decoding processes, after a warehouse
version is written and after each of its catalog swaps.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass

AT_ENV = "LOADER_CRASH_AT"
LOG_ENV = "LOADER_CRASH_LOG"
SOURCE_ENV = "LOADER_CRASH_SOURCE"


ACTIONS = ("kill", "group", "stop")


@dataclass(frozen=True)
class Target:
    point: str
    hit: int
    action: str = "kill"

    def matches(self, point: str) -> bool:
        if self.point.endswith("*"):
            return point.startswith(self.point[:-1])
        return point == self.point


def parse_target(spec: str) -> Target | None:
    """``point:n``, ``point:n:group`` or ``point:n:stop``; None for an empty spec."""
    if not spec:
        return None
    action = next((a for a in ACTIONS if spec.endswith(f":{a}")), "kill")
    point, _, n = spec.removesuffix(f":{action}").rpartition(":")
    if not point or not n.isdigit() or int(n) < 1:
        raise ValueError(f"{AT_ENV}={spec!r}: expected point:n, point:n:group or point:n:stop (n from 1)")
    return Target(point, int(n), action)


_TARGET = parse_target(os.environ.get(AT_ENV, ""))
_LOG = os.environ.get(LOG_ENV) or None
_SOURCE = os.environ.get(SOURCE_ENV) or None
_hits = 0  # this process's hits of the target, when there is no log to count them in
_counting = threading.Lock()  # merges run in threads: each hit counted once, in order
_step = ""
_source: str | None = None  # the source the current step works on


def enabled() -> bool:
    """Whether this run marks points at all (the stores wrap themselves only then)."""
    return _TARGET is not None or _LOG is not None


@contextlib.contextmanager
def step(name: str, source: str | None = None) -> Iterator[None]:
    """Points reached in the block are the step's: ``extract: after put manifest``; ``source``
    is the source it works on (a step within another keeps the outer one's)."""
    global _step, _source
    outer = _step, _source
    _step, _source = name, source or _source
    try:
        yield
    finally:
        _step, _source = outer


def reached(point: str) -> None:
    """Mark ``point``; the crash a test asked for happens here."""
    global _hits
    if _TARGET is None and _LOG is None:
        return
    if _SOURCE is not None and _source != _SOURCE:
        return
    point = f"{_step}: {point}" if _step else point
    with _counting:
        if _LOG is not None:
            _append(_LOG, point)
        if _TARGET is None or not _TARGET.matches(point):
            return
        if _LOG is not None:
            with open(_LOG, encoding="utf-8") as f:
                count = sum(1 for line in f if _TARGET.matches(line.rstrip("\n")))
        else:
            _hits += 1
            count = _hits
        if count == _TARGET.hit:
            if _TARGET.action == "group":
                os.killpg(os.getpgrp(), signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGSTOP if _TARGET.action == "stop" else signal.SIGKILL)


def _append(log: str, point: str) -> None:
    # One write per line, appended: the lines of the run's processes never mix.
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{point}\n".encode())
    finally:
        os.close(fd)
