"""Airflow commands (``dags test``, ``tasks test``) run in processes forked from one that has
Airflow imported already.

A fresh ``airflow`` process spends ~10 s of CPU before a DAG is parsed: ~4 s importing Airflow
and ~6 s building the execution API's versioned routers (Cadwyn) for ``dag.test()``'s in-process
API server. A test module runs many commands in one AIRFLOW_HOME, so this pays that once per home:
a runner process imports Airflow's command line, builds the in-process API with the module's
environment and has Cadwyn generate its routers (which it otherwise does at the app's first
request, in each child), then forks one child per command, which runs Airflow's own ``main()``
with the command's arguments, environment, working folder and output files, and exits as the
command would. Airflow disposes of its database engine in a forked child itself (``settings``),
as it does for the task processes it forks; the API's event-loop thread is started in each child.

Run as a script, this file is the runner; ``AirflowRunner`` starts one and sends it commands.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# The environment that Airflow reads when it is imported (its home, its settings, the Python path):
# a command whose environment differs there needs a runner of its own. Connections
# (AIRFLOW_CONN_*) and variables are read when they are looked up, in the child.
_READ_PER_LOOKUP = ("AIRFLOW_CONN_", "AIRFLOW_VAR_")


def import_environment(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The part of ``env`` a runner's imported Airflow depends on."""
    kept = {
        k: v
        for k, v in env.items()
        if (k.startswith("AIRFLOW") and not k.startswith(_READ_PER_LOOKUP)) or k in ("PYTHONPATH", "PATH")
    }
    return tuple(sorted(kept.items()))


class AirflowRunner:
    """A runner process with Airflow imported in ``env``'s AIRFLOW_HOME; ``run`` forks a command."""

    def __init__(self, env: dict[str, str]) -> None:
        self.key = import_environment(env)
        self.log = Path(env["AIRFLOW_HOME"]) / "airflow-runner.log"
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, __file__],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        self.pending = b""

    def run(self, args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        """``airflow *args`` with ``env``: its exit code and output, as ``subprocess.run`` gives them.
        On ``timeout`` its process group is killed and ``subprocess.TimeoutExpired`` raised."""
        assert self.process.stdin is not None
        with tempfile.TemporaryDirectory(prefix="airflow-command-") as folder:
            out, err = Path(folder) / "stdout", Path(folder) / "stderr"
            request = {"args": args, "env": env, "cwd": os.getcwd(), "stdout": str(out), "stderr": str(err)}
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
            pid = int(self._reply(300)["pid"])
            try:
                rc = int(self._reply(timeout)["rc"])
            except subprocess.TimeoutExpired:
                os.killpg(pid, signal.SIGKILL)
                self._reply(60)
                raise subprocess.TimeoutExpired(["airflow", *args], timeout) from None
            return subprocess.CompletedProcess(
                ["airflow", *args], rc, out.read_text(errors="replace"), err.read_text(errors="replace")
            )

    def _reply(self, timeout: float) -> dict[str, Any]:
        """The runner's next reply line (read from the pipe itself: both replies of a quick
        command can arrive at once, and a buffered reader would hide the second from select)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise subprocess.TimeoutExpired("airflow runner", timeout)
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(
                    f"the Airflow runner stopped; its log: {self.log}\n{self.log.read_text()[-3000:]}"
                )
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return dict(json.loads(line))

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


_runner: AirflowRunner | None = None


def airflow(args: list[str], env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``airflow *args`` in ``env``, forked from this worker's runner for ``env`` (one at a time:
    a test module's commands share their AIRFLOW_HOME, the next module starts another)."""
    global _runner
    if _runner is None or _runner.key != import_environment(env) or _runner.process.poll() is not None:
        if _runner is not None:
            _runner.close()
        _runner = AirflowRunner(env)
    launches = os.environ.get("LOADER_TEST_LAUNCHES")
    if launches:  # for the suite's cost report, as if it were launched (tests/launches)
        with open(launches, "a", encoding="utf-8") as noted:
            noted.write(" ".join(["airflow", *args[:4]]).replace("\n", " ") + "\n")
    return _runner.run(args, env, timeout)


def close() -> None:
    """Stop this worker's runner, if one runs."""
    global _runner
    if _runner is not None:
        _runner.close()
        _runner = None


def _serve() -> None:
    """The runner: import Airflow, then fork a child per request line on stdin; reply with the
    child's pid, then its exit code."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what importing prints must not mix with the replies
    from airflow.__main__ import main
    from airflow.sdk.execution_time.supervisor import in_process_api_server

    # Built once here, each child inherits it. Cadwyn generates the API's versioned routers at the
    # app's first request (~7 s of CPU), so that step is taken here too (a request would need
    # the app's lifespan); a Cadwyn without it only makes each child slower.
    app = in_process_api_server().app
    if not getattr(app, "_cadwyn_initialized", True) and hasattr(app, "_cadwyn_initialize"):
        app._cadwyn_initialize()
    # Modules every command imports, imported once here: Airflow's check of its database's
    # migrations imports alembic (~0.7 s of CPU a command), the DAG files the loader's operators.
    import alembic  # noqa: F401

    import loader.app.airflow  # noqa: F401

    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                replies.close()
                code = _child(main, request)
            finally:
                os._exit(code)  # never back into this loop
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


def _child(main: Any, request: dict[str, Any]) -> int:
    """Run one command as ``airflow`` would in a process of its own; its exit code."""
    import atexit
    import traceback

    os.setsid()  # a timeout kills the command and what it started
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.argv = ["airflow", *request["args"]]
    code = 0
    try:
        main()
    except SystemExit as stop:
        if isinstance(stop.code, int) or stop.code is None:
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()  # as an exiting interpreter would (log handlers flush there)
    sys.stdout.flush()
    sys.stderr.flush()
    return code


if __name__ == "__main__":
    _serve()
