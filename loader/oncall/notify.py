"""A notifier for the loader's DAGs: a failed task's DAG, run, task and error, posted to a webhook
that takes ``{"text": ...}`` (Slack's and Mattermost's incoming webhooks, most chat and paging
tools). Attached to the DAGs without changing them by a cluster policy
(``infra/airflow/airflow_local_settings.py``)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from airflow.sdk import BaseNotifier


def failure_text(context: Any) -> str:
    """One line for on-call: which task of which run failed, and the error it failed with."""
    ti = context.get("ti") or context.get("task_instance")
    error = context.get("exception")
    where = f"{ti.dag_id}: task {ti.task_id} of run {ti.run_id}" if ti is not None else "a loader task"
    return f"{where} failed: {error or 'see its log'}"


class WebhookNotifier(BaseNotifier):
    """Posts ``failure_text`` as ``{"text": ...}`` to ``url``."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        super().__init__()
        self.url = url
        self.timeout = timeout

    def notify(self, context: Any) -> None:
        body = json.dumps({"text": failure_text(context)}).encode()
        request = urllib.request.Request(self.url, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=self.timeout):
            pass
