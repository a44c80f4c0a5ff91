"""Continuous delta: every 15 minutes (``[source] schedule``, ``LOADER_DELTA_SCHEDULE``), one
interval of binlog changes is planned, extracted into staging, materialised into the warehouse
tables with Spark, and the changed tables are published as Assets; a run triggered with the
Checksum field then compares the warehouse with the source, and one given an interval to abandon
gives it up before planning. One such DAG per source of a deployment. Wiring only;
the tasks and the Params live in ``loader``."""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, task

from loader.app import airflow as tasks
from loader.app import dag_params

for source in tasks.dag_sources():  # one set of DAGs per source of a deployment
    with DAG(
        dag_id=source.dag_id("loader_continuous_delta"),
        description="binlog changes since the last interval → staging → warehouse tables",
        schedule=source.delta_schedule,
        start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        catchup=False,
        max_active_runs=1,
        default_args={
            "retries": 3,
            "retry_delay": dt.timedelta(seconds=30),
            "retry_exponential_backoff": True,
            "max_retry_delay": dt.timedelta(minutes=10),
        },
        tags=source.tags,
        doc_md=source.modes,
        params=dag_params.delta_params(),
    ):
        status = task(tasks.log_status, task_id="status", retries=0)(source=source.name)
        planned = task(tasks.plan, task_id="plan")(source=source.name)
        extracted = task(tasks.extract, task_id="extract")(planned, source=source.name)
        materialize = tasks.LoaderSparkJobOperator(
            task_id="materialize",
            job="materialize",
            conn_id="spark_default",
            source=source.name,
            pool=source.pool,
        )
        published = task(tasks.publish, task_id="publish", outlets=[tasks.TABLES_ALIAS])(
            planned, source=source.name
        )
        checksum = tasks.LoaderChecksumOperator(
            task_id="checksum",
            conn_id="spark_default",
            retries=0,
            source=source.name,
            pool=source.pool,
        )
        lag = task(tasks.check_lag, task_id="lag", retries=0, trigger_rule="all_done")(source=source.name)
        status >> planned
        extracted >> materialize >> published >> checksum
        # Not upstream of the run's other leaves: a run whose only leaf succeeds is a success,
        # whatever failed before it (Airflow judges a run by its leaves).
        materialize >> lag
