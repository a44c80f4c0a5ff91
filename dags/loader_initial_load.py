"""Initial load (triggered by hand): record P0, copy the selected tables into their warehouse tables
with Spark (one job per table), then set the checkpoint to P0 so the delta DAG continues from there
(or, started from now, set it with no copy). Wiring only; the tasks and Params live in ``loader``."""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, task

from loader.app import airflow as tasks
from loader.app import dag_params

for source in tasks.dag_sources():  # one set of DAGs per source of a deployment
    with DAG(
        dag_id=source.dag_id("loader_initial_load"),
        description="copy the selected source tables into the warehouse at a recorded binlog position",
        schedule=None,
        start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        catchup=False,
        max_active_runs=1,
        default_args={
            "retries": 2,
            "retry_delay": dt.timedelta(seconds=30),
            "retry_exponential_backoff": True,
        },
        tags=source.tags,
        doc_md=source.modes,
        params=dag_params.initial_load_params(source.modes),
    ):
        started = task(tasks.start_initial_load, task_id="record_p0")(source=source.name)
        arguments = task(tasks.copy_arguments, task_id="plan_copies")(started)
        # One Spark job per table; one at a time, as the embedded Derby catalog allows one Spark process.
        copies = tasks.LoaderSparkJobOperator.partial(
            task_id="copy_table",
            job="initial-load",
            conn_id="spark_default",
            max_active_tis_per_dagrun=1,
            source=source.name,
            pool=source.pool,
        ).expand(job_args=arguments)
        # Runs when no copy was planned too (a start from now): its copies are skipped.
        finished = task(tasks.finish_initial_load, task_id="set_checkpoint", trigger_rule="none_failed")(
            started, source=source.name
        )
        copies >> finished
