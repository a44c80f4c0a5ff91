"""Airflow cluster policy: page on-call when a task of the loader's DAGs fails for good (after its
retries). Copy this file to $AIRFLOW_HOME/config/ on the scheduler, the DAG processor and the
workers, and set LOADER_ONCALL_WEBHOOK to the webhook's URL in their environment."""

import os

from loader.oncall.notify import WebhookNotifier


def task_policy(task) -> None:
    url = os.environ.get("LOADER_ONCALL_WEBHOOK")
    if url and task.dag_id.startswith("loader_"):
        # A list: the operator made its callbacks one when it was built; the task runner
        # iterates over them.
        task.on_failure_callback = [*(task.on_failure_callback or []), WebhookNotifier(url)]
