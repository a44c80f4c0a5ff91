"""Maintenance (``[maintenance] schedule``, daily by default), one DAG for the whole deployment:
every warehouse table its sources write to is compacted (data files with deletes, small files)
and its snapshots older than ``expire_after_hours`` expired, each table while none of the sources
writing to it runs a step. Wiring only; the task lives in ``loader``."""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG

from loader.app import airflow as tasks

deployment = tasks.deployment_dag()
with DAG(
    dag_id="loader_maintenance",
    description="compact the Iceberg warehouse tables and expire their old snapshots",
    schedule=deployment.maintenance_schedule,
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    default_args={
        "retries": 3,
        "retry_delay": dt.timedelta(minutes=1),
        "retry_exponential_backoff": True,
        "max_retry_delay": dt.timedelta(minutes=15),
    },
    tags=deployment.tags,
):
    tasks.LoaderMaintenanceOperator(task_id="maintain", conn_id="spark_default", pool=deployment.pool)
