"""One step at a time per source: a lease in the ledger's store, expiring so that a killed run
does not block the next one for ever.

Leases are numbered records under ``<source>/_ledger/lease/``; the highest number is the lease.
A run takes it by creating the next number (the store's create-once decides between two runs
that try at once) when the highest is released or expired, renews it while it works, and
releases it when done. A run that finds the lease held is refused with who holds it (a transient
error: the next try or Airflow's retry finds it free). A lease whose holder was killed on this
machine is free at once when no process it handed the lease to lives on. A process the holder
started (the Spark job of ``loader run-once``) joins the holder's lease through ``LEASE_ENV``
instead of waiting for it; that variable in its environment is also how a dead holder's child
is found still at work.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loader.core.errors import LeaseError
from loader.staging import layout
from loader.staging.stores import Store, open_store
from loader.state.processes import alive

if TYPE_CHECKING:
    from loader.core.config import Config

LEASE_ENV = "LOADER_LEASE_TOKEN"  # the token of a lease a parent process holds
_HELD: dict[str, Lease] = {}  # leases this process holds, by source
_LOCK = threading.Lock()
WAIT_STEP = 2.0  # seconds between tries of a held lease, for a step that waits for it


@dataclass(frozen=True)
class LeaseRecord:
    number: int
    token: str
    holder: str  # what, which process, where
    taken_at: str  # ISO UTC
    expires: float  # epoch seconds; 0 once released
    # The holder's machine (``_machine``), process group and process: a run killed on this
    # machine frees the lease at once instead of at its expiry, when no process it handed the
    # lease to (``LEASE_ENV``) lives on. Records without ``pid`` wait for the whole group.
    machine: str = ""
    group: int = 0
    pid: int = 0

    def free(self, now: float) -> bool:
        return self.expires <= now or self._gone()

    def _gone(self) -> bool:
        if not self.machine or self.machine != _machine():
            return False  # elsewhere, or unknown: only the expiry tells
        if self.pid > 0:
            return not alive(self.pid) and not _joined(self.token)
        if self.group <= 0:
            return False
        try:
            os.killpg(self.group, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False  # there, but not ours to signal
        return False


def _joined(token: str) -> bool:
    """Whether a live process on this machine carries the lease ``token`` in its environment (a
    Spark job its holder started, which may still write)."""
    needle = f"{LEASE_ENV}={token}".encode()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes() and alive(int(environ.parent.name)):
                return True
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to read
    return False


@functools.cache
def _machine() -> str:
    """This host, boot and process-id namespace (two containers may share a host name; process
    ids mean something only within one namespace), or "" where that cannot be told."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return f"{socket.gethostname()} {boot} {namespace}"


def _utc(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Lease:
    """The lease of one source while a step runs; use ``hold``."""

    def __init__(self, store: Store, source: str, what: str, seconds: int) -> None:
        self.store = store
        self.source = source
        self.seconds = seconds
        self.prefix = f"{layout.ledger_prefix(source)}/lease"
        run = os.environ.get("AIRFLOW_CTX_DAG_RUN_ID")
        self.holder = (
            f"{what} (pid {os.getpid()} on {socket.gethostname()}{', Airflow run ' + run if run else ''})"
        )
        self.record: LeaseRecord | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _key(self, number: int) -> str:
        return f"{self.prefix}/{number:012d}.json"

    def _current(self) -> LeaseRecord | None:
        keys = self.store.list(self.prefix)
        for key in reversed(keys):
            data = self.store.get(key)
            if data:
                # Fields a later loader added are left out: the lease still says who holds it.
                fields = json.loads(data)
                known = {f.name for f in dataclasses.fields(LeaseRecord)}
                return LeaseRecord(**{k: v for k, v in fields.items() if k in known})
        return None

    def _write(self, record: LeaseRecord) -> None:
        self.store.put(self._key(record.number), json.dumps(dataclasses.asdict(record)).encode())

    def acquire(self, joining: str | None = None) -> None:
        """Take the lease, or join the one whose token is ``joining`` (held by a parent process).

        Raises:
            LeaseError: another run holds it.
        """
        now = time.time()
        current = self._current()
        if joining and current is not None and current.token == joining and not current.free(now):
            self.record = current  # the parent renews and releases it
            return
        if current is not None and not current.free(now):
            raise LeaseError(
                f"source {self.source} is busy: {current.holder} holds its lease since {current.taken_at} "
                f"(it runs one step at a time). Try again when it is done; if that process is gone, "
                f"its lease expires at {_utc(current.expires)}"
            )
        number = current.number + 1 if current is not None else 1
        record = LeaseRecord(
            number,
            uuid.uuid4().hex,
            self.holder,
            _utc(now),
            now + self.seconds,
            _machine(),
            os.getpgrp(),
            os.getpid(),
        )
        if not self.store.create(self._key(number), json.dumps(dataclasses.asdict(record)).encode()):
            winner = self._current()
            holder = winner.holder if winner is not None else "another run"
            raise LeaseError(f"source {self.source} is busy: {holder} took its lease just now")
        self.record = record
        for key in self.store.list(self.prefix):  # the records before it are history
            if key < self._key(number):
                self.store.delete(key)
        self._renewer = threading.Thread(target=self._renew, name="loader-lease", daemon=True)
        self._renewer.start()

    def _renew(self) -> None:
        # Three tries per lease time: a store hiccup does not let it expire under a live run.
        while not self._stop.wait(self.seconds / 3):
            record = self.record
            try:
                current = self._current()
                if record is None or current is None or current.token != record.token:
                    return  # taken over after it expired (this process was stopped that long)
                self.record = dataclasses.replace(record, expires=time.time() + self.seconds)
                self._write(self.record)
            except Exception:  # the next round tries again
                continue

    def release(self) -> None:
        self._stop.set()
        if self._renewer is None or self.record is None:
            return  # joined: the parent releases
        self._renewer.join()
        current = self._current()
        if current is not None and current.token == self.record.token:
            self._write(dataclasses.replace(self.record, expires=0))


def holder(store: Store, source: str) -> str | None:
    """Who holds ``source``'s lease and until when, or None when it is free."""
    current = Lease(store, source, "", 1)._current()
    if current is None or current.free(time.time()):
        return None
    return f"{current.holder} since {current.taken_at} (expires {_utc(current.expires)} unless renewed)"


@contextmanager
def hold(
    store: Store,
    source: str,
    what: str,
    seconds: int,
    wait: float = 0,
    waiting: Callable[[str], None] | None = None,
) -> Iterator[Lease]:
    """Hold ``source``'s lease while the block runs (re-entrant within a process; a child joins
    through ``LEASE_ENV``). With ``wait``, a held lease is tried again for that many seconds
    (``waiting`` hears once who holds it) before the refusal.

    Raises:
        LeaseError: another run holds it.
    """
    with _LOCK:
        mine = _HELD.get(source)
    if mine is not None:
        yield mine
        return
    lease = Lease(store, source, what, seconds)
    deadline = time.monotonic() + wait
    while True:
        try:
            lease.acquire(joining=os.environ.get(LEASE_ENV))
            break
        except LeaseError as exc:
            if time.monotonic() >= deadline:
                raise
            if waiting is not None:
                waiting(f"waiting up to {wait:.0f} s for the lease: {exc}")
                waiting = None
            time.sleep(min(WAIT_STEP, max(deadline - time.monotonic(), 0.01)))
    with _LOCK:
        _HELD[source] = lease
    try:
        yield lease
    finally:
        with _LOCK:
            _HELD.pop(source, None)
        lease.release()


def of_source(
    cfg: Config, what: str, wait: float = 0, waiting: Callable[[str], None] | None = None
) -> contextlib.AbstractContextManager[Lease]:
    """The lease of the config's source (``hold``), in its staging store."""
    return hold(open_store(cfg.staging), cfg.source.name, what, cfg.source.lease_seconds, wait, waiting)


def token_held(source: str) -> str | None:
    """The token of the lease this process holds for ``source``, for a child process to join."""
    with _LOCK:
        lease = _HELD.get(source)
    return lease.record.token if lease is not None and lease.record is not None else None
