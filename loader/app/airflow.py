"""Airflow glue: the task callables and the Spark job operator the DAG files wire together.

Each task calls one step of ``loader.app.steps`` and turns its typed result into XCom (plain JSON).
Nothing here runs while a DAG file is parsed: the config is read, connections are looked up and
the source is queried inside the tasks. The config file comes from ``LOADER_CONFIG`` in the
workers' environment. Errors: a transient one (``errors.is_transient``) is raised as it is
(Airflow retries it with backoff); any other becomes ``AirflowFailException`` with the loader's
text (no retry).
"""

from __future__ import annotations

import datetime as dt
import inspect
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset, AssetAlias, get_current_context
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from loader.app import metrics, steps
from loader.core.config import (
    Config,
    MaintenanceConfig,
    SparkConfig,
    TablesConfig,
    load_config,
    load_deployment,
)
from loader.core.errors import REPORTED, ConfigError, describe, error_class, is_transient
from loader.core.results import PlannedInterval, StartedLoad, from_dict, to_dict
from loader.warehouse.submit import SparkJob, operator_failure

log = logging.getLogger(__name__)
SCHEDULE_ENV = "LOADER_DELTA_SCHEDULE"
DEFAULT_SCHEDULE = dt.timedelta(minutes=15)
TABLES_ALIAS = AssetAlias("loader-warehouse-tables")


@dataclass(frozen=True)
class DagSource:
    """One source's set of DAGs as the DAG files make them, from the config read once when they
    are parsed (files only, no connection)."""

    name: str | None  # one of a deployment's sources; None: the config's one source
    cfg: Config | None  # None: $LOADER_CONFIG not set or not loading (the tasks say why)

    def dag_id(self, base: str) -> str:
        """``base`` for a single source, ``<base>__<source>`` for one of a deployment's."""
        return base if self.name is None else f"{base}__{self.name}"

    @property
    def tags(self) -> list[str]:
        """``loader``, and ``source:<name>`` for one of a deployment's sources."""
        return ["loader"] if self.name is None else ["loader", f"source:{self.name}"]

    @property
    def delta_schedule(self) -> str | dt.timedelta | None:
        """The source's ``[source] schedule``, else ``$LOADER_DELTA_SCHEDULE`` (minutes, a cron
        expression, or ``none`` for triggered runs only), else every 15 minutes."""
        value = (self.cfg.source.schedule.strip() if self.cfg else "") or os.environ.get(
            SCHEDULE_ENV, ""
        ).strip()
        if not value:
            return DEFAULT_SCHEDULE
        if value.lower() == "none":
            return None
        return dt.timedelta(minutes=int(value)) if value.isdigit() else value

    @property
    def maintenance_schedule(self) -> str | None:
        """``[maintenance] schedule`` ("none": triggered runs only)."""
        value = (self.cfg.maintenance.schedule.strip() if self.cfg else "") or MaintenanceConfig.schedule
        return None if value.lower() == "none" else value

    @property
    def modes(self) -> str:
        """The warehouse modes of the source's tables (``tables.mode``, ``tables.modes``), for
        the DAGs' forms and pages."""
        tables = self.cfg.tables if self.cfg else TablesConfig()
        per_table = "".join(f"; {pattern}: {mode}" for pattern, mode in tables.modes.items())
        return f"Warehouse modes: {tables.mode} for every table{per_table}."

    @property
    def pool(self) -> str:
        """The Airflow pool of the DAGs' Spark jobs: ``[spark] airflow_pool``."""
        return self.cfg.spark.airflow_pool if self.cfg else SparkConfig.airflow_pool


def dag_sources() -> list[DagSource]:
    """The sources to make DAGs for: each source of a deployment (``[sources]``), a broken source
    file shown as an import error naming it; the config's one source for a single-source file,
    whose DAGs keep their plain names. A config that is not set or does not load gives one set
    of plain DAGs on the defaults, whose tasks then fail with the config's error."""
    if not os.environ.get("LOADER_CONFIG"):
        return [DagSource(None, None)]
    try:
        deployment = load_deployment()
    except ConfigError:
        return [DagSource(None, None)]
    if not deployment.many:
        return [DagSource(None, cfg) for cfg in deployment.sources.values()]
    for file, error in deployment.broken.items():
        _report_import_error(file, error)
    return [DagSource(name, cfg) for name, cfg in sorted(deployment.sources.items())]


def deployment_dag() -> DagSource:
    """The settings of a DAG of the whole deployment (maintenance, per warehouse table): the
    settings its sources share; the defaults when no source loads (its task says why)."""
    try:
        return DagSource(
            None, load_deployment().shared_settings() if os.environ.get("LOADER_CONFIG") else None
        )
    except ConfigError:
        return DagSource(None, None)


def config(source: str | None = None) -> Config:
    """The config of ``source`` (a deployment's; None: the file's one source), as the workers
    see it (``$LOADER_CONFIG``)."""
    return _configured(lambda: load_config(source=source))


def shared_config() -> Config:
    """The settings every source of the deployment shares, for a task of the whole deployment
    (``Deployment.shared_settings``)."""
    return _configured(lambda: load_deployment().shared_settings())


def _configured(read: Callable[[], Config]) -> Config:
    if not os.environ.get("LOADER_CONFIG"):
        raise AirflowFailException(
            "set LOADER_CONFIG to the loader's config file in the workers' environment"
        )
    try:
        return read()
    except ConfigError as exc:
        raise AirflowFailException(str(exc)) from None


def _report_import_error(file: str, error: str) -> None:
    """Show a broken source file as an import error of its own, so that the parse's other DAGs
    still load: an error the DAG file raised would drop all of them, and one kept under the DAG
    file's name marks all of them stale. Airflow has no public way to add one; the ``DagBag``
    parsing this file is found on the stack and the error filed under the source file's path
    (relative to the DAG bundle, when inside it), as Airflow 3.3 files its own."""
    from airflow.dag_processing.dagbag import DagBag

    frame = inspect.currentframe()
    while frame is not None:
        bag = frame.f_locals.get("self")
        if isinstance(bag, DagBag):
            key = file
            if bag.bundle_path and Path(file).resolve().is_relative_to(Path(bag.bundle_path).resolve()):
                key = str(Path(file).resolve().relative_to(Path(bag.bundle_path).resolve()))
            bag.import_errors[key] = error
            return
        frame = frame.f_back
    log.error("%s", error)  # not parsed by Airflow (a DAG file run by hand)


@contextmanager
def loader_errors(source: str | None = None, step: str | None = None) -> Iterator[None]:
    """Transient errors are retried by Airflow; the others fail the task at once with their text.
    With ``step``, how long it took (when it succeeded) or the class of the error that stopped
    it goes to ``source``'s metrics (``loader.app.metrics``)."""
    started = time.monotonic()
    try:
        yield
    except REPORTED as exc:
        if source and step:
            metrics.count(source, f"failures.{metrics.part(error_class(exc))}", tags={"step": step})
        if is_transient(exc):
            raise
        raise AirflowFailException(f"{type(exc).__name__}: {describe(exc)}") from None
    if source and step:
        metrics.seconds(source, f"step.{metrics.part(step)}", time.monotonic() - started)


def asset_for(cfg: Config, schema: str, table: str) -> Asset:
    """The Airflow Asset of one warehouse table: ``loader://<source>/<database>/<warehouse name>``
    (``TablesConfig.warehouse_name``: ``<schema>__<table>`` for ordinary names), or for a shared
    table (``tables.routes``) ``loader://shared/<database>/<name>``, one asset whichever source
    updated it (Airflow keeps one asset per name)."""
    name = cfg.tables.warehouse_name(schema, table)
    owner = "shared" if cfg.tables.route(schema, table) else cfg.source.name
    return Asset(
        name=f"{cfg.warehouse.database}.{name}",
        uri=f"loader://{owner}/{cfg.warehouse.database}/{name}",
    )


# --- delta DAG tasks -------------------------------------------------------------------------


def log_status(source: str | None = None) -> dict[str, Any]:
    """Log ``loader status`` (position, checkpoint, lag, intervals, last error)."""
    cfg = config(source)
    with loader_errors():
        result = steps.status(cfg)
    metrics.lag(cfg.source.name, result)
    for line in result.text().splitlines():
        log.info("%s", line)
    return to_dict(result)


def check_lag(source: str | None = None) -> dict[str, Any]:
    """Fail when the source is behind by more than ``[source] alert_lag_seconds`` (the delta
    run's last task, run whatever the others did: Airflow's failure notifications fire)."""
    cfg = config(source)
    with loader_errors(cfg.source.name, "lag"):
        result = steps.status(cfg)
        metrics.lag(cfg.source.name, result)
        log.info("%s", result.lag_line())
        steps.check_lag(cfg, result)
    return to_dict(result)


def plan(source: str | None = None) -> dict[str, Any]:
    """Snapshot the end position and record this run's interval (a rerun gets the same one)."""
    context = get_current_context()
    params = context["params"]
    cfg = config(source)
    with loader_errors(cfg.source.name, "plan"):
        abandon = params.get("abandon_interval")
        if abandon:
            reason = params.get("abandon_reason") or ""
            for record in steps.abandon(cfg, str(abandon), reason, rerun_ok=True):
                log.info("abandoned interval %s: %s", record.id, record.abandoned_reason)
        planned = steps.plan(
            cfg,
            max_changes=params.get("max_changes"),
            run_id=context["run_id"],
            dry_run=bool(params.get("dry_run")),
            start_lognum=params.get("start_lognum"),
            start_logpos=params.get("start_logpos"),
            allow_gap=bool(params.get("allow_gap")),
        )
    if planned.dry_run:
        size = f", {planned.bytes:,} bytes of binlog" if planned.bytes is not None else ""
        log.info("dry run: would extract [%s, %s)%s; nothing written", planned.start, planned.end, size)
    elif planned.interval is None:
        log.info("nothing new since the last interval (source at %s)", planned.end)
    else:
        log.info("interval %s: [%s, %s)", planned.interval, planned.start, planned.end)
    return to_dict(planned)


def extract(planned: dict[str, Any], source: str | None = None) -> dict[str, Any]:
    """Extract the planned interval into staging (again on a rerun: same boundaries, same files)."""
    interval = from_dict(PlannedInterval, planned)
    if interval.dry_run:
        raise AirflowSkipException("dry run: nothing is extracted")
    if interval.interval is None:
        return {"interval": None}
    cfg = config(source)
    with loader_errors(cfg.source.name, "extract"):
        summary = steps.extract(cfg, interval.interval, progress=log.info)
    assert summary is not None  # a planned interval is always extracted
    metrics.extracted(cfg.source.name, summary)
    log.info(  # where the extraction ended (a cut one before the planned end), as the ledger has it
        "interval %s [%s, %s): %s changes in %s transactions",
        summary.interval,
        summary.start,
        summary.end,
        summary.changes,
        summary.transactions,
    )
    return to_dict(summary)


def publish(planned: dict[str, Any], source: str | None = None, *, outlet_events: Any) -> list[str]:
    """Mark the warehouse tables the run's materialisation changed as updated Assets: those of
    every interval it applied (an earlier run's that failed after its extraction too, which
    that run never published), and its own interval's."""
    cfg = config(source)
    own = from_dict(PlannedInterval, planned).interval
    # The materialize task's intervals; none when its outcome is not there (a task run by hand).
    applied = get_current_context()["ti"].xcom_pull(task_ids="materialize") or []
    intervals = list(dict.fromkeys([*applied, *([own] if own else [])]))
    latest: dict[tuple[str, str], str] = {}
    with loader_errors():
        for interval in intervals:
            for name in steps.changed_tables(cfg, interval):
                latest[name] = interval
    for (schema, table), interval in sorted(latest.items()):
        outlet_events[TABLES_ALIAS].add(asset_for(cfg, schema, table), extra={"interval": interval})
    tables = [f"{schema}.{table}" for schema, table in sorted(latest)]
    of = f" (intervals {', '.join(intervals)})" if len(intervals) > 1 else ""
    log.info("updated%s: %s", of, ", ".join(tables) or "no tables")
    return tables


# --- initial load DAG tasks ------------------------------------------------------------------


def start_initial_load(source: str | None = None) -> dict[str, Any]:
    """Check the source and the tables, record P0 before any row is read (or, with the run's
    ``from_now`` Param, start the deltas there with no copy)."""
    params = get_current_context()["params"]
    only = [t for t in (params.get("tables") or []) if t] or None
    cfg = config(source)
    with loader_errors(cfg.source.name, "start_load"):
        return to_dict(steps.start_load(cfg, only, log.info, bool(params.get("from_now"))))


def copy_arguments(started: dict[str, Any]) -> list[list[str]]:
    """One Spark job's arguments per table (the copy fans out over them)."""
    parallelism = get_current_context()["params"].get("parallelism")
    return steps.copy_arguments(from_dict(StartedLoad, started), parallelism)


def finish_initial_load(started: dict[str, Any], source: str | None = None) -> dict[str, Any]:
    """Every table copied: the checkpoint goes to P0 (first load; a start from now set it)."""
    cfg = config(source)
    with loader_errors(cfg.source.name, "finish_load"):
        load = steps.finish_load(cfg, from_dict(StartedLoad, started).load_id)
    log.info("initial load %s complete from P0 = %s: %s", load.id, load.p0, load.rows)
    return {"load_id": load.id, "p0": str(load.p0), "rows": load.rows}


# --- the Spark jobs ---------------------------------------------------------------------------


class LoaderSparkJobOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` running one of the loader's Spark jobs with the loader's config.

    The application, its arguments, jars, settings and environment come from
    ``warehouse.submit.build_spark_job`` when the task runs (not when the DAG file is parsed);
    the master comes from the Spark connection (``spark_default``). The job's outcome decides:
    a transient error is retried, any other fails the task without retries.
    """

    template_fields = (*SparkSubmitOperator.template_fields, "job_args")

    def __init__(
        self, *, job: str, job_args: list[str] | None = None, source: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(application="", **kwargs)
        self.job = job
        self.job_args = job_args or []
        self.source = source  # one of a deployment's sources; None: the config's one source

    def launcher(self, context: Any) -> Any:
        """A ``steps.Launcher`` that runs a loader job through this operator's spark-submit."""

        def launch(job: SparkJob) -> str | None:
            self.refuse_another_master(job.master)
            self.application = job.application
            self.application_args = job.args
            self.conf = job.conf
            self.jars = ",".join(job.jars) or None
            self.env_vars = job.env
            try:
                super(LoaderSparkJobOperator, self).execute(context)
            except AirflowException as exc:
                return operator_failure(str(exc))
            return None

        return launch

    def refuse_another_master(self, master: str) -> None:
        """The job's driver starts its session on ``[spark] master``, whatever spark-submit was
        given: a Spark connection naming another master would split one job between two."""
        submits_to = self._get_hook()._connection["master"]
        if submits_to != master:
            raise AirflowFailException(
                f"the Spark connection {self._conn_id!r} submits to {submits_to} but the loader's "
                f"[spark] master is {master}: set both to the same master (for a local one: "
                'AIRFLOW_CONN_SPARK_DEFAULT=\'{"conn_type": "spark", "host": "local[2]"}\')'
            )

    def execute(self, context: Any) -> list[str] | None:  # type: ignore[override]
        """Run the job; a materialisation's intervals applied (for ``publish``)."""
        cfg = config(self.source)
        with loader_errors(cfg.source.name, self.job):
            if self.job != "materialize":
                steps.run_spark_job(cfg, self.job, self.job_args, self.launcher(context))
                return None
            done = steps.materialize(cfg, self.launcher(context))
        # Every interval applied: an earlier run's that failed after its extraction too.
        for line in done.interval_lines() or ["no extracted intervals to apply"]:
            log.info("%s", line.strip())
        if done.intervals:
            log.info("%s tables merged: %s", len(done.tables), ", ".join(t.table for t in done.tables))
        return [i.interval for i in done.intervals]


class LoaderChecksumOperator(LoaderSparkJobOperator):
    """The delta DAG's optional check (the run's ``checksum`` Param): row counts and checksums per
    key range, source against warehouse at one snapshot of the source (``steps.checksum``, which
    brings the warehouse there first). A differing table fails the task, without retries."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(job="checksum", **kwargs)

    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]
        if not context["params"].get("checksum"):
            raise AirflowSkipException("no checksum asked for (the run's Checksum field)")
        cfg = config(self.source)
        with loader_errors(cfg.source.name, "checksum"):
            report = steps.checksum(cfg, self.launcher(context), progress=log.info)
        for line in report.text().splitlines():
            log.info("%s", line)
        verdict = report.verdict()
        if verdict:
            raise AirflowFailException(verdict)
        return to_dict(report)


class LoaderRollbackOperator(LoaderSparkJobOperator):
    """The rollback DAG's task: ``steps.rollback`` to the run's ``to_interval`` Param, its summary
    in the task's log."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(job="rollback", **kwargs)

    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]
        interval = str(context["params"].get("to_interval") or "").strip()
        if not interval:
            raise AirflowFailException("say which interval to roll back to (the run's to_interval field)")
        cfg = config(self.source)
        with loader_errors(cfg.source.name, "rollback"):
            done = steps.rollback(cfg, self.launcher(context), interval)
        for line in done.text().splitlines():
            log.info("%s", line)
        return to_dict(done)


class LoaderMaintenanceOperator(LoaderSparkJobOperator):
    """The maintenance DAG's task: ``steps.maintain`` over every source's tables, its summary in
    the task's log. A table skipped because a source writing to it was busy fails the task
    after the others are done, so that Airflow's retries come back for it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(job="maintain", **kwargs)

    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]
        with loader_errors():
            done = steps.maintain(shared_config(), self.launcher(context), every_source=True)
        for line in done.text().splitlines():
            log.info("%s", line)
        if done.skipped:
            raise AirflowException(done.verdict())
        return to_dict(done)
