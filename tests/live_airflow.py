"""A live Airflow for the tests that need its scheduler: ``airflow standalone`` (the scheduler
with its LocalExecutor, the API server, the DAG processor; SQLite) on a free loopback port,
driven through its REST API as a user's scripts would, its runs read from its database."""

from __future__ import annotations

import contextlib
import datetime as dt
import http.server
import json
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import BIN, free_port

FINISHED = ("success", "failed")


@dataclass(frozen=True)
class Run:
    """One DAG run as Airflow's database holds it."""

    dag_id: str
    run_id: str
    state: str
    start: dt.datetime | None
    end: dt.datetime | None


@dataclass
class LiveAirflow:
    url: str
    home: Path
    env: dict[str, str]
    log: Path
    _token: str = field(default="", repr=False)

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """One REST API call (``/api/v2/...``) with a token of the all-admins auth manager."""
        if not self._token:
            with urllib.request.urlopen(f"{self.url}/auth/token", timeout=30) as response:
                self._token = json.load(response)["access_token"]
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"Bearer {self._token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            raise AssertionError(
                f"{method} {path}: {exc.code} {exc.read().decode(errors='replace')}"
            ) from None

    def page(self, path: str) -> tuple[int, str]:
        """A page of the API server (a plugin's) as a signed-in user gets it: status and text."""
        self.api("GET", "/api/v2/version")  # the token
        request = urllib.request.Request(
            f"{self.url}{path}", headers={"Authorization": f"Bearer {self._token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def wait_for_dags(self, *dag_ids: str, timeout: float = 300) -> None:
        """Until the DAG processor has parsed them."""
        deadline = time.monotonic() + timeout
        while True:
            known = {d["dag_id"] for d in self.api("GET", "/api/v2/dags?limit=1000")["dags"]}
            if known >= set(dag_ids):
                return
            assert time.monotonic() < deadline, (
                f"Airflow did not parse {sorted(set(dag_ids) - known)}: {self.tail()}"
            )
            time.sleep(2)

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        """A run of ``dag_id`` now, as the UI's trigger button makes it; its run id."""
        made = self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf or {}})
        return str(made["dag_run_id"])

    def clear(self, dag_id: str, run_id: str, task_id: str) -> None:
        """Clear a task of a run and those after it, as "Clear" in the UI does: the scheduler
        runs them again."""
        self.api(
            "POST",
            f"/api/v2/dags/{dag_id}/clearTaskInstances",
            {
                "dry_run": False,
                "dag_run_id": run_id,
                "task_ids": [task_id],
                "only_failed": False,
                "include_downstream": True,
            },
        )

    def _query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        # Read-only, from the test: cheap enough to ask every second, where each ``airflow``
        # command starts Airflow (~5 s of CPU).
        database = self.home / "airflow.db"
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)) as db:
            return list(db.execute(sql, args).fetchall())

    def run(self, run_id: str) -> Run:
        rows = self._query(
            "SELECT dag_id, run_id, state, start_date, end_date FROM dag_run WHERE run_id = ?", run_id
        )
        assert rows, f"no run {run_id}"
        dag_id, _, state, start, end = rows[0]
        return Run(dag_id, run_id, state, _time(start), _time(end))

    def task_state(self, run_id: str, task_id: str) -> str | None:
        rows = self._query(
            "SELECT state FROM task_instance WHERE run_id = ? AND task_id = ?", run_id, task_id
        )
        return rows[0][0] if rows else None

    def wait(self, check: Any, what: str, timeout: float = 600) -> None:
        """Until ``check()`` is true, asking every second; a scheduler that died fails it."""
        deadline = time.monotonic() + timeout
        asked = 0
        while not check():
            assert time.monotonic() < deadline, (
                f"Airflow: {what} did not happen in {timeout:.0f} s: {self.tail()}"
            )
            asked += 1
            if asked % 15 == 0:
                assert _healthy(self.url), f"Airflow's scheduler stopped before {what}: {self.tail()}"
            time.sleep(1)

    def finished(self, *run_ids: str, timeout: float = 600) -> list[Run]:
        """The runs, once every one of them has succeeded or failed."""
        self.wait(
            lambda: all(self.run(r).state in FINISHED for r in run_ids), f"runs {run_ids} ending", timeout
        )
        return [self.run(r) for r in run_ids]

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def _time(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None


def _healthy(url: str) -> bool:
    """Whether the database and the scheduler are up (its heartbeat recent), as Airflow says."""
    try:
        with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=5) as response:
            health = json.load(response)
    except OSError:
        return False
    return all(health.get(part, {}).get("status") == "healthy" for part in ("metadatabase", "scheduler"))


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "airflow standalone exited"
        if _healthy(url):
            return
        time.sleep(3)
    raise AssertionError(f"Airflow did not come up at {url}")


@contextlib.contextmanager
def standalone(home: Path, env: dict[str, str]) -> Iterator[LiveAirflow]:
    """``airflow standalone`` in ``home`` (``env`` from ``airflow_env``), every user an admin,
    its output in ``home/standalone.log``; stopped with its process group on the way out."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **env,
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        # The DAG files are parsed once at the start: parsing them again every 30 s (the
        # default) takes CPU from the runs under test, and nothing changes them meanwhile.
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
        # The log servers of the scheduler and the triggerer listen on fixed ports by default
        # (8793, 8794): two live Airflows of two test workers at once would share them.
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
    }
    home.mkdir(exist_ok=True)
    log_path = home / "standalone.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    airflow = subprocess.Popen(
        [str(BIN / "airflow"), "standalone"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait_healthy(url, airflow)
        yield LiveAirflow(url, home, env, log_path)
    finally:
        os.killpg(airflow.pid, signal.SIGTERM)
        try:
            airflow.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(airflow.pid, signal.SIGKILL)
        log.close()


class StatsdListener:
    """A StatsD server on a free loopback UDP port: what Airflow's StatsD client sends (one
    ``name:value|type`` per line), kept as it arrives."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.5)
        self.port = int(self._socket.getsockname()[1])
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def env(self) -> dict[str, str]:
        """The Airflow settings that send its metrics here."""
        return {
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(self.port),
        }

    def values(self, name: str) -> list[tuple[float, str]]:
        """Each ``(value, type)`` received for the metric ``name``, in order."""
        found = []
        for line in list(self.lines):
            metric, _, rest = line.partition(":")
            if metric == name and "|" in rest:
                value, kind = rest.split("|")[:2]
                found.append((float(value), kind))
        return found

    def names(self, prefix: str) -> set[str]:
        return {line.partition(":")[0] for line in list(self.lines) if line.startswith(prefix)}

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._socket.recv(65536)
            except TimeoutError:
                continue
            self.lines.extend(data.decode(errors="replace").splitlines())

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._socket.close()


class WebhookListener:
    """An HTTP server on a free loopback port that keeps the JSON bodies POSTed to it."""

    def __init__(self) -> None:
        received: list[Any] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.received = received
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
