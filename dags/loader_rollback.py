"""Rollback (triggered by hand, Iceberg tables): the warehouse tables and the checkpoint return to
the state right after one materialised interval; the next delta run applies the later intervals
again. Wiring only; the task and its Param live in ``loader``."""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG

from loader.app import airflow as tasks
from loader.app import dag_params

for source in tasks.dag_sources():  # one set of DAGs per source of a deployment
    with DAG(
        dag_id=source.dag_id("loader_rollback"),
        description="return the warehouse tables and the checkpoint to the state after one interval",
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
        params=dag_params.rollback_params(),
    ):
        tasks.LoaderRollbackOperator(
            task_id="rollback", conn_id="spark_default", source=source.name, pool=source.pool
        )
