"""How a loader Spark job is launched: its spark-submit command line and environment, built from
the config in one pure function that both the ``loader`` command and the Airflow operator use.

The job writes its outcome (summary, or its error's class and whether it is transient) to the
file named by ``RESULT_ENV``; whoever launched it reads that file (``steps.run_spark_job``), so
the retry decision never depends on log text.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loader.core.config import Config
from loader.core.errors import REPORTED, ConfigError, SparkJobError, describe, is_transient
from loader.source.connection import Credentials
from loader.warehouse.session import JobSize, spark_conf

JOBS = ("materialize", "initial-load", "compare", "checksum", "rollback", "maintain")
# The jobs that read the source: they get its credentials from the launcher (which may have
# them from an Airflow connection the Spark side cannot look up).
SOURCE_JOBS = frozenset({"initial-load", "compare"})
RESULT_ENV = "LOADER_JOB_RESULT"
# The job reads the source's password from this variable, so it is never on a command line.
PASSWORD_ENV = "LOADER_JOB_SOURCE_PASSWORD"
PROGRESS_PREFIX = "LOADER-JOB-PROGRESS "  # tells the job's progress apart from Spark's own logs
APPLICATION = str(Path(__file__).resolve().parents[1] / "app" / "spark_jobs.py")


@dataclass(frozen=True)
class SparkJob:
    """One run of ``loader/app/spark_jobs.py``: everything spark-submit needs."""

    name: str
    application: str
    args: list[str]
    master: str
    conf: dict[str, str]
    jars: list[str]
    env: dict[str, str]  # set on top of the launcher's own environment

    @property
    def result_path(self) -> str:
        return self.env[RESULT_ENV]

    def command(self) -> list[str]:
        """The spark-submit command line (the Airflow operator builds its own from the same fields)."""
        command = ["spark-submit", "--master", self.master]
        for key, value in self.conf.items():
            command += ["--conf", f"{key}={value}"]
        if self.jars:
            command += ["--jars", ",".join(self.jars)]
        return [*command, self.application, *self.args]


def build_spark_job(
    cfg: Config,
    name: str,
    extra: list[str],
    *,
    result_path: str,
    python: str,
    environ: Mapping[str, str],
    source: Credentials | None = None,
    size: JobSize | None = None,
) -> SparkJob:
    """The spark-submit run of job ``name`` with the config's settings.

    Args:
        extra: the job's own arguments after ``--config``.
        result_path: where the job writes its outcome.
        python: the interpreter the driver and executors run (the launcher's own, so that they
            import the same ``loader``).
        environ: the launcher's environment (``PATH``, ``SPARK_LOCAL_IP``).
        source: credentials resolved by the launcher (an Airflow connection, say) that a job
            of ``SOURCE_JOBS`` uses instead of looking them up itself; other jobs do not get them.
        size: what the job goes through, when the launcher knows (the driver's compilers
            follow: ``session.compiler_options``).
    """
    if name not in JOBS:
        raise ValueError(f"no Spark job {name!r} (jobs: {', '.join(JOBS)})")
    if not cfg.path:
        raise ConfigError(f"loader {name} needs --config (or LOADER_CONFIG): the Spark job reads it too")
    conf = spark_conf(cfg, jdbc=name in SOURCE_JOBS, job=size)
    jars = [j for j in conf.pop("spark.jars", "").split(",") if j]
    conf["spark.pyspark.python"] = python
    conf["spark.pyspark.driver.python"] = python
    env = {
        "SPARK_LOCAL_IP": environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
        # spark-submit and the interpreter of the launcher's environment come first.
        "PATH": str(Path(python).parent) + os.pathsep + environ.get("PATH", ""),
        RESULT_ENV: result_path,
    }
    if source is not None and name in SOURCE_JOBS:
        env.update(
            {
                "LOADER__SOURCE__HOST": source.host,
                "LOADER__SOURCE__PORT": str(source.port),
                "LOADER__SOURCE__USER": source.user,
                "LOADER__SOURCE__AIRFLOW_CONN_ID": '""',
                "LOADER__SOURCE__PASSWORD_ENV": PASSWORD_ENV,
                PASSWORD_ENV: source.password,
                # An Airflow connection's TLS extras, as the launcher read them.
                "LOADER__SOURCE__TLS": source.tls.mode,
                "LOADER__SOURCE__TLS_CA": source.tls.ca,
                "LOADER__SOURCE__TLS_CERT": source.tls.cert,
                "LOADER__SOURCE__TLS_KEY": source.tls.key,
            }
        )
    chosen = ["--source", cfg.source.name] if cfg.source_file else []  # one of a deployment's
    args = [name, "--config", str(Path(cfg.path).resolve()), *chosen, *extra]
    return SparkJob(name, APPLICATION, args, cfg.spark.master, conf, jars, env)


# --- the outcome file: written by the job, read by its launcher -------------------------------


def write_outcome(path: str, summary: Any = None, error: BaseException | None = None) -> None:
    """The job's summary, or its error's class, text and whether a retry may help."""
    if error is None:
        outcome: dict[str, Any] = {"ok": True, "summary": summary}
    else:
        name, message, transient = error_outcome(error)
        outcome = {"ok": False, "error": {"class": name, "message": message, "transient": transient}}
    Path(path).write_text(json.dumps(outcome, default=str), encoding="utf-8")


# Java exceptions of a network that failed or timed out: worth a retry.
_TRANSIENT_JAVA = {
    "ConnectException",
    "SocketTimeoutException",
    "UnknownHostException",
    "NoRouteToHostException",
}


def java_causes(java: Any) -> Iterator[Any]:
    """A JVM exception (a py4j object, or None) and its causes, outermost first, the last its
    root cause; a cause that is its own is not followed again."""
    while java is not None:
        yield java
        cause = java.getCause()
        java = None if cause is None or cause.equals(java) else cause


def error_outcome(error: BaseException) -> tuple[str, str, bool]:
    """An error of a job as (class, one line, transient). Spark's errors come from the JVM
    (``Py4JJavaError``): the root cause names what went wrong (a path, a full disk), where the
    outer exceptions say which call failed; Python's ``AnalysisException`` and the like keep
    their first line (the rest is a JVM stack trace)."""
    if isinstance(error, REPORTED):
        return type(error).__name__, describe(error), is_transient(error)
    java = getattr(error, "java_exception", None)
    if java is not None:
        *_, cause = java_causes(java)
        name = str(cause.getClass().getSimpleName())
        lines = str(cause.getMessage() or "").strip().splitlines()
        return name, f"{name}: {lines[0]}" if lines else name, name in _TRANSIENT_JAVA
    lines = str(error).strip().splitlines()
    name = type(error).__name__
    return name, f"{name}: {lines[0]}" if lines else name, False


def read_outcome(job: SparkJob, launch_failure: str | None) -> Any:
    """The summary the job left; raises its error, or says that it ended without finishing.

    Args:
        launch_failure: what the launcher saw go wrong (an exit code, the operator's message), or
            None when the process ended well.

    Raises:
        SparkJobError: ``error_class`` is the job's own error class, or empty when the job left
            no outcome (killed, out of memory, a crash outside the loader's code).
    """
    try:
        outcome = json.loads(Path(job.result_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        outcome = None
    if outcome is None:
        why = launch_failure or "it exited without an error but left no outcome (a driver running elsewhere?)"
        raise SparkJobError(f"the {job.name} job failed: it ended without finishing ({why})", job.name)
    if outcome["ok"]:
        return outcome["summary"]
    error = outcome["error"]
    raise SparkJobError(
        f"the {job.name} job failed: {error['message']}", job.name, error["class"], bool(error["transient"])
    )


Progress = Callable[[str], None]


_OPERATOR_EXIT = re.compile(r"Error code is: (-?\d+)")


def operator_failure(message: str) -> str:
    """What went wrong with spark-submit as Airflow's Spark operator reports it, in one line: the
    operator's message holds the whole command line and the output's tail, which its task's log
    shows already."""
    code = _OPERATOR_EXIT.search(message)
    if code is None:
        lines = message.strip().splitlines()
        return lines[0][:500] if lines else "no message"
    return f"{exit_text(int(code.group(1)))}: spark-submit's output is in the task's log"


def exit_text(code: int) -> str:
    """A process's exit code for people, with the signal that killed it: Python gives ``-n`` for
    a child killed by signal n, a shell ``128 + n``."""
    number = -code if code < 0 else code - 128 if code > 128 else 0
    try:
        killed = f", killed by {signal.Signals(number).name}" if number else ""
    except ValueError:
        killed = ""
    return f"exit {code}{killed}"


def launch_subprocess(job: SparkJob, progress: Progress) -> str | None:
    """Run the job with the local spark-submit; its progress lines go to ``progress``.

    Returns:
        None when spark-submit exited 0, else what went wrong with the process.
    """
    tail: list[str] = []
    # spark-submit runs the Python driver with its stderr merged into stdout: the job's progress
    # comes on stdout; Spark's own logs on stderr go to a file, of which only the error lines are
    # shown, when the process fails.
    with (
        tempfile.TemporaryFile("w+") as stderr,
        subprocess.Popen(
            job.command(), stdout=subprocess.PIPE, stderr=stderr, text=True, env={**os.environ, **job.env}
        ) as proc,
    ):
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(PROGRESS_PREFIX):
                message = line[len(PROGRESS_PREFIX) :].rstrip("\n")
                progress(message)
                tail.append(message)
        proc.wait()
        stderr.seek(0)
        tail += [x.strip() for x in stderr if "error" in x.lower() or "exception" in x.lower()]
    if proc.returncode == 0:
        return None
    errors = [x for x in tail if "error" in x.lower()][-3:] or tail[-3:]
    return f"{exit_text(proc.returncode)}: " + (" | ".join(errors) or "no output")
