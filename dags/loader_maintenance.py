"""Maintenance (``[maintenance] schedule``, daily by default): the Iceberg tables' data files with
deletes and small files are compacted, and snapshots older than ``expire_after_hours`` expired.
Wiring only; the task lives in ``loader``."""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG

from loader import airflow as tasks

for source in tasks.dag_sources():  # one set of DAGs per source of a deployment
    with DAG(
        dag_id=source.dag_id("loader_maintenance"),
        description="compact the Iceberg warehouse tables and expire their old snapshots",
        schedule=source.maintenance_schedule,
        start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        catchup=False,
        max_active_runs=1,
        default_args={
            "retries": 3,
            "retry_delay": dt.timedelta(minutes=1),
            "retry_exponential_backoff": True,
            "max_retry_delay": dt.timedelta(minutes=15),
        },
        tags=source.tags,
    ):
        tasks.LoaderMaintenanceOperator(
            task_id="maintain", conn_id="spark_default", source=source.name, pool=source.pool
        )
