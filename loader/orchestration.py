"""The Airflow side of the loader: task callables and the Spark operator the DAG files wire together.

Nothing here runs while a DAG file is parsed: the config is read, connections are looked up and
the source is queried inside the tasks. The config file comes from ``LOADER_CONFIG`` in the
workers' environment. Errors: a ``TransientError`` is raised as it is (Airflow retries it with
backoff); any other loader error becomes ``AirflowFailException`` with the loader's text (no retry).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset, AssetAlias, get_current_context
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from loader.config import Config, load_config
from loader.errors import ConfigError, LoaderError, TransientError

log = logging.getLogger(__name__)
SCHEDULE_ENV = "LOADER_DELTA_SCHEDULE"
DEFAULT_SCHEDULE = dt.timedelta(minutes=15)
TABLES_ALIAS = AssetAlias("loader-warehouse-tables")


def delta_schedule() -> str | dt.timedelta | None:
    """The delta DAG's schedule: ``$LOADER_DELTA_SCHEDULE`` (cron, minutes, or ``none`` for
    triggered runs only), else every 15 minutes."""
    value = os.environ.get(SCHEDULE_ENV, "").strip()
    if not value:
        return DEFAULT_SCHEDULE
    if value.lower() == "none":
        return None
    return dt.timedelta(minutes=int(value)) if value.isdigit() else value


def config() -> Config:
    """The loader's config, as the workers see it (``$LOADER_CONFIG``)."""
    if not os.environ.get("LOADER_CONFIG"):
        raise AirflowFailException(
            "set LOADER_CONFIG to the loader's config file in the workers' environment"
        )
    try:
        return load_config()
    except ConfigError as exc:
        raise AirflowFailException(str(exc)) from None


@contextmanager
def loader_errors() -> Iterator[None]:
    """Transient errors are retried by Airflow; the others fail the task at once with their text."""
    try:
        yield
    except TransientError:
        raise
    except LoaderError as exc:
        raise AirflowFailException(f"{type(exc).__name__}: {exc}") from None


def asset_for(cfg: Config, qualified: str) -> Asset:
    """The Airflow Asset of one warehouse table: ``loader://<source>/<database>/<schema>__<table>``."""
    schema, table = qualified.split(".", 1)
    return Asset(
        name=f"{cfg.warehouse.database}.{schema}__{table}",
        uri=f"loader://{cfg.source.name}/{cfg.warehouse.database}/{schema}__{table}",
    )


# --- delta DAG tasks -------------------------------------------------------------------------


def log_status() -> dict[str, Any]:
    """Log ``loader status`` (position, checkpoint, lag, intervals, last error)."""
    from loader.pipeline import status, status_text

    with loader_errors():
        data = status(config())
    for line in status_text(data).splitlines():
        log.info("%s", line)
    return data


def plan() -> dict[str, Any]:
    """Snapshot the end position and record this run's interval (a rerun gets the same one)."""
    from loader.pipeline import plan_interval

    context = get_current_context()
    params = context["params"]
    cfg = config()
    with loader_errors():
        planned = plan_interval(
            cfg,
            max_changes=params.get("max_changes"),
            run_id=context["run_id"],
            dry_run=bool(params.get("dry_run")),
            start_lognum=params.get("start_lognum"),
            start_logpos=params.get("start_logpos"),
        )
    if planned["dry_run"]:
        size = f", {planned['bytes']:,} bytes of binlog" if planned["bytes"] is not None else ""
        log.info("dry run: would extract [%s, %s)%s; nothing written", planned["start"], planned["end"], size)
    elif planned["interval"] is None:
        log.info("nothing new since the last interval (source at %s)", planned["end"])
    else:
        log.info("interval %s: [%s, %s)", planned["interval"], planned["start"], planned["end"])
    return planned


def extract(planned: dict[str, Any]) -> dict[str, Any]:
    """Extract the planned interval into staging (again on a rerun: same boundaries, same files)."""
    from loader.pipeline import extract_planned

    if planned["dry_run"]:
        raise AirflowSkipException("dry run: nothing is extracted")
    if planned["interval"] is None:
        return {"interval": None}
    with loader_errors():
        summary = extract_planned(config(), planned["interval"], progress=log.info)
    log.info(
        "interval %s: %s changes in %s transactions",
        summary["interval"],
        summary["changes"],
        summary["transactions"],
    )
    return {k: summary[k] for k in ("interval", "start", "end", "changes", "transactions")}


def publish(planned: dict[str, Any], *, outlet_events: Any) -> list[str]:
    """Mark the warehouse tables this run's interval changed as updated Assets."""
    from loader.ledger import Ledger
    from loader.staging.manifest import Manifest
    from loader.staging.stores import open_store

    cfg = config()
    if planned.get("interval") is None:
        return []
    store = open_store(cfg.staging)
    interval = Ledger(store, cfg.source.name).get(planned["interval"])
    if interval is None or interval.manifest is None:
        return []
    manifest = Manifest.from_json(store.get(interval.manifest) or b"")
    tables = sorted(f"{t.schema}.{t.table}" for t in manifest.tables)
    for qualified in tables:
        outlet_events[TABLES_ALIAS].add(asset_for(cfg, qualified), extra={"interval": interval.id})
    log.info("updated: %s", ", ".join(tables) or "no tables")
    return tables


# --- initial load DAG tasks ------------------------------------------------------------------


def start_initial_load() -> dict[str, Any]:
    """Check the source and the tables, record P0 before any row is read."""
    from loader.initial_load import start_load

    params = get_current_context()["params"]
    only = [t for t in (params.get("tables") or []) if t] or None
    with loader_errors():
        load = start_load(config(), only, progress=log.info)
    return {"load_id": load.id, "p0": load.p0, "tables": load.tables}


def copy_arguments(started: dict[str, Any]) -> list[list[str]]:
    """One Spark job's arguments per table (the copy fans out over them)."""
    parallelism = get_current_context()["params"].get("parallelism")
    extra = ["--parallelism", str(parallelism)] if parallelism else []
    return [["--load-id", started["load_id"], "--tables", table, *extra] for table in started["tables"]]


def finish_initial_load(started: dict[str, Any]) -> dict[str, Any]:
    """Every table copied: the checkpoint goes to P0 (first load)."""
    from loader.initial_load import finish_load

    with loader_errors():
        load = finish_load(config(), started["load_id"])
    log.info("initial load %s complete from P0 = %s: %s", load.id, load.p0, load.rows)
    return {"load_id": load.id, "p0": load.p0, "rows": load.rows}


# --- the Spark jobs ---------------------------------------------------------------------------


class LoaderSparkJobOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` running one of ``loader/spark_jobs.py`` with the loader's config.

    The application, its arguments and the Spark settings are filled in from the config when the
    task runs (not when the DAG file is parsed); the master comes from the Spark connection
    (``spark_default``). A failed job's loader error fails the task without retries.
    """

    template_fields = (*SparkSubmitOperator.template_fields, "job_args")

    def __init__(self, *, job: str, job_args: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(application="", **kwargs)
        self.job = job
        self.job_args = job_args or []

    def execute(self, context: Any) -> None:
        from loader import spark_jobs
        from loader.source import credentials
        from loader.spark import spark_conf

        cfg = config()
        self.application = str(Path(spark_jobs.__file__))
        self.application_args = [self.job, "--config", str(Path(cfg.path).resolve()), *self.job_args]
        conf = spark_conf(cfg)
        conf.pop("spark.jars", None)
        self.conf = {
            **conf,
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
        }
        if cfg.load.jdbc_jar and Path(cfg.load.jdbc_jar).is_file():
            self.jars = cfg.load.jdbc_jar
        env: dict[str, str] = {"SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
        if self.job == "initial-load":
            with loader_errors():
                creds = credentials(cfg.source)  # the Airflow connection, looked up here, not in Spark
            env.update(
                {
                    "LOADER__SOURCE__HOST": creds.host,
                    "LOADER__SOURCE__PORT": str(creds.port),
                    "LOADER__SOURCE__USER": creds.user,
                    "LOADER__SOURCE__AIRFLOW_CONN_ID": '""',
                    "LOADER__SOURCE__PASSWORD_ENV": "LOADER_JOB_SOURCE_PASSWORD",
                    "LOADER_JOB_SOURCE_PASSWORD": creds.password,
                }
            )
        self.env_vars = env
        started = dt.datetime.now(dt.UTC)
        try:
            super().execute(context)
        except AirflowException as exc:
            if "Error code is: 3" in str(exc):
                raise  # transient: retried
            if self.job != "materialize":
                raise AirflowFailException(f"the {self.job} job failed: {exc}") from None
            from loader.pipeline import materialize_failure

            error = materialize_failure(cfg, f"the Spark job ended without finishing: {exc}", started)
            raise AirflowFailException(f"the {self.job} job failed: {error}") from None
