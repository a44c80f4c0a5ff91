"""AWS keys named by an Airflow connection, for boto3 (staging writes) and Spark's s3a.

A launcher resolves the connection (only it can reach Airflow's connections) and hands the keys
to its Spark job in one environment variable, never on a command line; the job's boto3 and s3a
then use them. Without a connection both use AWS's usual chain (environment, profile, role).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass

# The keys a launcher resolved, by connection id: JSON, read by the job it started.
KEYS_ENV = "LOADER_JOB_AWS_KEYS"


@dataclass(frozen=True)
class AwsKeys:
    """An Airflow AWS connection's keys: login = access key id, password = secret key, extras
    ``aws_session_token``, ``region_name``, ``endpoint_url``. Empty keys: the usual chain."""

    access_key: str = ""
    secret_key: str = ""
    session_token: str = ""
    region: str = ""
    endpoint_url: str = ""

    def __repr__(self) -> str:  # never print a secret
        return f"AwsKeys(access_key={self.access_key!r}, region={self.region!r})"


def connection_keys(conn_id: str) -> AwsKeys:
    """The keys of Airflow connection ``conn_id``: as the launcher handed them to this job, else
    looked up in Airflow."""
    passed = json.loads(os.environ.get(KEYS_ENV) or "{}")
    if conn_id in passed:
        return AwsKeys(**passed[conn_id])
    from airflow.sdk import BaseHook  # heavy import, only when asked for

    conn = BaseHook.get_connection(conn_id)
    extra = conn.extra_dejson or {}
    return AwsKeys(
        access_key=conn.login or "",
        secret_key=conn.password or "",
        session_token=extra.get("aws_session_token") or "",
        region=extra.get("region_name") or "",
        endpoint_url=extra.get("endpoint_url") or "",
    )


def keys_env(conn_ids: Iterable[str]) -> dict[str, str]:
    """The environment that hands these connections' keys to a job (empty when there are none)."""
    keys = {conn_id: asdict(connection_keys(conn_id)) for conn_id in sorted(set(conn_ids)) if conn_id}
    return {KEYS_ENV: json.dumps(keys)} if keys else {}
