"""Maintenance (``[maintenance] schedule``, daily by default): the Iceberg tables' data files with
deletes and small files are compacted, and snapshots older than ``expire_after_hours`` expired.
Wiring only; the task lives in ``loader``."""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG

from loader import airflow as tasks

for source in tasks.sources():  # one set of DAGs per source of a deployment
    with DAG(
        dag_id=tasks.dag_id("loader_maintenance", source),
        description="compact the Iceberg warehouse tables and expire their old snapshots",
        schedule=tasks.maintenance_schedule(source),
        start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        catchup=False,
        max_active_runs=1,
        default_args={
            "retries": 3,
            "retry_delay": dt.timedelta(minutes=1),
            "retry_exponential_backoff": True,
            "max_retry_delay": dt.timedelta(minutes=15),
        },
        tags=tasks.dag_tags(source),
    ):
        tasks.LoaderMaintenanceOperator(
            task_id="maintain", conn_id="spark_default", source=source, pool=tasks.spark_pool(source)
        )
