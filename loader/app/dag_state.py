"""What Airflow knows of a source's delta DAG: whether it is paused, whether a run is under way,
when the next one is due. On-call needs it to tell a source whose backlog the next run applies
from one whose backlog no run will apply (``oncall``'s verdict, ``loader status``).

Read from Airflow's metadata database where this process may: in Airflow's API server (the
on-call page), or in a command run where Airflow is configured (``AIRFLOW_HOME`` or
``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`` set). Elsewhere, and in Airflow 3's task processes (which
may not use the database), nothing is known, and nothing is said.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from loader.core.results import DagState

DELTA = "loader_continuous_delta"


def _airflow_configured() -> bool:
    """Whether Airflow can be imported here without making a configuration of its own (it writes
    ``~/airflow/airflow.cfg`` when none is set)."""
    if "airflow.models" in sys.modules:
        return True
    if os.environ.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"):
        return True
    home = os.environ.get("AIRFLOW_HOME", "")
    return bool(home) and (Path(home) / "airflow.cfg").is_file()


def delta_dag_state(source: str, dag_id: str | None = None) -> DagState | None:
    """The delta DAG of ``source`` as Airflow's database has it: ``dag_id``, else
    ``loader_continuous_delta__<source>`` (a source of a deployment of several) or
    ``loader_continuous_delta``; None where Airflow is not known here, or does not know the DAG."""
    if not _airflow_configured():
        return None
    try:
        from airflow.models.dag import DagModel
        from airflow.models.dagrun import DagRun
        from airflow.utils.session import create_session
        from airflow.utils.state import DagRunState
        from sqlalchemy import func, select

        with create_session() as session:
            candidates = (dag_id,) if dag_id else (f"{DELTA}__{source}", DELTA)
            for known in candidates:
                model = session.get(DagModel, known)
                if model is not None and not model.is_stale:
                    break
            else:
                return None
            active = session.scalar(
                select(func.count())
                .select_from(DagRun)
                .where(DagRun.dag_id == known, DagRun.state.in_([DagRunState.QUEUED, DagRunState.RUNNING]))
            )
            due = model.next_dagrun_create_after
            return DagState(
                known,
                bool(model.is_paused),
                int(active or 0),
                due.strftime("%Y-%m-%dT%H:%M:%SZ") if due else None,
                model.timetable_summary,
            )
    except Exception:  # the state is said where it can be read; status never fails for it
        return None
