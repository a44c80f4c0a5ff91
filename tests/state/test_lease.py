"""The source's lease on a local store: one holder at a time, who holds it, expiry of a holder
that stopped renewing, renewal while a holder works, re-entry and a child joining."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest

from loader.core.errors import LeaseError
from loader.staging.stores import LocalStore
from loader.state import lease
from loader.state.lease import Lease


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(str(tmp_path / "staging"))


def test_one_holder_at_a_time_and_the_refusal_says_who(store: LocalStore) -> None:
    with lease.hold(store, "demo", "loader extract", 60):
        with pytest.raises(LeaseError) as busy:
            Lease(store, "demo", "loader materialize", 60).acquire()
        message = str(busy.value)
        assert message.startswith(f"source demo is busy: loader extract (pid {os.getpid()} on ")
        assert re.search(r"holds its lease since \S+Z .* its lease expires at \S+Z$", message), message
        assert busy.value.transient  # a retry finds it free
        # Another source is another lease.
        with lease.hold(store, "other", "loader extract", 60):
            pass
    # Released: the next run takes it, and only the latest record is kept.
    with lease.hold(store, "demo", "loader materialize", 60) as taken:
        assert taken.record is not None and taken.record.number == 2
        assert store.list("demo/_ledger/lease") == ["demo/_ledger/lease/000000000002.json"]


def test_a_step_that_waits_for_the_lease_takes_it_once_released_or_is_refused_after_its_wait(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lease, "WAIT_STEP", 0.05)
    merge = Lease(store, "demo", "loader materialize", 60)
    merge.acquire()
    heard: list[str] = []
    with (
        pytest.raises(LeaseError, match="loader materialize"),
        lease.hold(store, "demo", "the copy of s.t", 60, wait=0.3, waiting=heard.append),
    ):
        pass
    assert len(heard) == 1 and heard[0].startswith("waiting up to 0 s for the lease: source demo is busy")
    threading.Timer(0.3, merge.release).start()
    with lease.hold(store, "demo", "the copy of s.t", 60, wait=30, waiting=heard.append) as taken:
        assert taken.record is not None and taken.record.holder.startswith("the copy of s.t")
    assert len(heard) == 2


def test_a_holder_that_stops_renewing_loses_it_when_it_expires_and_a_live_one_keeps_it(
    store: LocalStore,
) -> None:
    killed = Lease(store, "demo", "a killed run", 1)
    killed.acquire()
    killed._stop.set()  # it stops renewing, as a killed process does, and never releases
    with pytest.raises(LeaseError, match="a killed run"):
        Lease(store, "demo", "the next run", 1).acquire()
    time.sleep(1.2)
    with lease.hold(store, "demo", "the next run", 1):
        time.sleep(2)  # past its first expiry: renewed meanwhile
        with pytest.raises(LeaseError, match="the next run"):
            Lease(store, "demo", "a third run", 1).acquire()


def test_the_same_process_re_enters_and_a_child_joins_with_the_token(store: LocalStore) -> None:
    with lease.hold(store, "demo", "loader run-once", 60) as outer:
        with lease.hold(store, "demo", "loader extract", 60) as inner:
            assert inner is outer
        token = lease.token_held("demo")
        assert token is not None and outer.record is not None and token == outer.record.token
        child = Lease(store, "demo", "the materialize job", 60)
        child.acquire(joining=token)
        child.release()  # a joined lease is the parent's to release
        with pytest.raises(LeaseError, match="loader run-once"):
            Lease(store, "demo", "another run", 60).acquire(joining="not-the-token")
    assert lease.token_held("demo") is None
    after = Lease(store, "demo", "after", 60)
    after.acquire()
    after.release()


def _killed_holder(store: LocalStore, hand_over: bool) -> tuple[int, int]:
    """A run that took the lease and started a child (handed the lease's token, as a Spark job
    is, or not), killed alone with ``kill -9`` while its child lives on; (the run's pid, the
    child's pid). The run shares this process's group, as a run started by a script does."""
    import subprocess
    import sys

    holder = (
        "import os, subprocess, sys, time; from loader.state import lease; from loader.staging.stores import "
        "LocalStore; held = lease.Lease(LocalStore(sys.argv[1]), 'demo', 'a run', 60); held.acquire(); "
        "env = {**os.environ, lease.LEASE_ENV: held.record.token} if sys.argv[2] == 'yes' else None; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], env=env); "
        "print(child.pid, flush=True); time.sleep(60)"
    )
    run = subprocess.Popen(
        [sys.executable, "-c", holder, str(store.root), "yes" if hand_over else "no"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert run.stdout is not None
    child = int(run.stdout.readline())
    run.kill()
    run.wait()
    return run.pid, child


def test_a_holder_killed_on_this_machine_frees_the_lease_at_once_unless_its_spark_job_lives_on(
    store: LocalStore,
) -> None:
    import signal

    # Its Spark job (which carries the lease's token) may still write: the lease holds.
    _, job = _killed_holder(store, hand_over=True)
    try:
        with pytest.raises(LeaseError, match="a run"):
            Lease(store, "demo", "the next run", 60).acquire()
        assert lease.holder(store, "demo") is not None
    finally:
        os.kill(job, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while lease.holder(store, "demo") is not None and time.monotonic() < deadline:
        time.sleep(0.05)  # the killed job is reaped by init
    with lease.hold(store, "demo", "the next run", 60) as taken:
        assert taken.record is not None and taken.record.number == 2

    # A run killed alone, its process group (this test's) alive, no process holding its lease:
    # the next run takes it over at once, not after the lease's 60 s.
    _, other = _killed_holder(store, hand_over=False)
    try:
        with lease.hold(store, "demo", "the run after", 60) as taken:
            assert taken.record is not None and taken.record.number == 4
    finally:
        os.kill(other, signal.SIGKILL)
