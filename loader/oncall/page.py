"""What on-call sees of one source and what it can do about it: the facts of ``loader status``,
``loader intervals`` and ``loader tables`` arranged as the on-call page shows them (its HTML is
``oncall.html``, its place in Airflow ``oncall.plugin``), and the ways out, each a
DAG run with the fields of that DAG's trigger form filled from the facts.

Pure: built from results the steps return, so that the page says what the commands say.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loader.app import dag_params
from loader.core.positions import Position, lognum_of
from loader.core.results import IntervalRecord, Status, TableMapping
from loader.state.records import MATERIALISED, waits_on_failure

DELTA, INITIAL_LOAD, ROLLBACK = "loader_continuous_delta", "loader_initial_load", "loader_rollback"
# A step's failure is noted on its interval as "<step>: <error>" (``steps``); the delta DAG's task
# of that step.
TASK_OF_STEP = {"extract": "extract", "materialize": "materialize"}

HEALTHY, NOT_LOADED, FAILED, BEHIND, DIFFERS, STOPPED, UNREACHABLE, PAUSED, NO_RUN = (
    "healthy",
    "not loaded",
    "failed",
    "behind",
    "differs",
    "stopped",
    "unreachable",
    "paused",
    "no run due",  # changes wait and no run will come: the delta DAG has no schedule
)


@dataclass(frozen=True)
class Field:
    """One field of a DAG's trigger form (a Param), with the value a way out fills in."""

    name: str
    title: str
    help: str
    kind: str  # the Param's JSON type: integer, boolean, array, string
    value: Any
    required: bool = False  # the way out needs it, though the DAG's Param may be empty


@dataclass(frozen=True)
class WayOut:
    """A way out: a run of ``dag_id`` with ``fields`` as its conf, or, with ``clear``, the failed
    task ``(run_id, task_id)`` of a run cleared so that Airflow runs it again."""

    key: str  # rerun, abandon, reload, rollback, backfill
    title: str
    explain: str
    dag_id: str
    fields: list[Field] = field(default_factory=list)
    clear: tuple[str, str] | None = None


@dataclass(frozen=True)
class FailedInterval:
    """An interval whose step failed and that waits: its record and the task run to open."""

    record: IntervalRecord
    task_id: str | None  # the delta DAG's task of the failed step
    task_link: str | None  # that task in the run that planned the interval (a path of Airflow's UI)


@dataclass
class SourcePage:
    """One source as the on-call page shows it."""

    name: str
    dag_ids: dict[str, str]  # DELTA, INITIAL_LOAD, ROLLBACK -> this source's DAG
    status: Status
    verdict: str  # one of HEALTHY ... UNREACHABLE
    verdict_text: str
    failed: list[FailedInterval]
    intervals: list[IntervalRecord]  # the latest, oldest first
    total_intervals: int
    tables: list[TableMapping]
    tables_error: str | None  # why the tables could not be listed (the source unreachable)
    ways_out: list[WayOut]


def source_page(
    name: str,
    dag_id: Callable[[str], str],
    status: Status,
    intervals: list[IntervalRecord],
    total_intervals: int,
    tables: list[TableMapping],
    tables_error: str | None = None,
    alert_lag_seconds: int = 0,
) -> SourcePage:
    """The page of source ``name`` from its status, latest intervals and tables; ``dag_id`` names
    its DAG of a base id (``DagSource.dag_id``)."""
    dags = {base: dag_id(base) for base in (DELTA, INITIAL_LOAD, ROLLBACK)}
    waiting = [_failed(r, dags[DELTA]) for r in intervals if waits_on_failure(r.state, r.error)]
    verdict, text = _verdict(status, waiting, alert_lag_seconds)
    return SourcePage(
        name,
        dags,
        status,
        verdict,
        text,
        waiting,
        intervals,
        total_intervals,
        tables,
        tables_error,
        _ways_out(dags, status, waiting, intervals),
    )


def task_link(dag_id: str, run_id: str, task_id: str | None = None) -> str:
    """The path of a run (or a task of it) in Airflow's UI, below its root."""
    run = f"dags/{urllib.parse.quote(dag_id, safe='')}/runs/{urllib.parse.quote(run_id, safe='')}"
    return f"{run}/tasks/{urllib.parse.quote(task_id, safe='')}" if task_id else run


def _failed(record: IntervalRecord, delta: str) -> FailedInterval:
    step = (record.error or "").split(":", 1)[0]
    task = TASK_OF_STEP.get(step)
    link = task_link(delta, record.run_id, task) if record.run_id else None
    return FailedInterval(record, task, link)


def _verdict(status: Status, failed: list[FailedInterval], alert_lag_seconds: int) -> tuple[str, str]:
    if status.source_position is None:
        return UNREACHABLE, f"the source cannot be reached: {status.source_error}"
    if status.history_problem:
        return STOPPED, f"runs refuse to read on: {status.history_problem}"
    if failed:
        last = failed[-1].record
        plural = "s" if len(failed) > 1 else ""
        return FAILED, f"{len(failed)} interval{plural} failed, the last {last.id}: {last.error}"
    if status.checkpoint is None:
        return NOT_LOADED, "no checkpoint yet: run the initial load"
    dag = status.delta_dag
    behind = f"{status.lag_seconds or 0:,.0f} s behind the source ({status.lag_bytes or 0:,} bytes of binlog)"
    if dag and status.lag_bytes and not dag.runs_to_come:
        if dag.paused:
            return (
                PAUSED,
                f"the delta DAG {dag.dag_id} is paused, {behind}: no run applies it until it is unpaused",
            )
        return NO_RUN, (
            f"{behind}, and no run of the delta DAG {dag.dag_id} is due (schedule {dag.schedule or 'none'}: "
            "it runs when triggered): trigger a run"
        )
    if alert_lag_seconds and (status.lag_seconds or 0) > alert_lag_seconds:
        return (
            BEHIND,
            f"{status.lag_seconds:,.0f} s behind the source, more than alert_lag_seconds ({alert_lag_seconds:,} s)",
        )
    check = status.last_check
    if check and check.differing:
        return DIFFERS, f"the last {check.kind} found tables that differ: {', '.join(check.differing)}"
    if not status.lag_bytes:
        paused = (
            f"; the delta DAG {dag.dag_id} is paused: no run applies what comes next"
            if dag and dag.paused
            else ""
        )
        return HEALTHY, "caught up" + paused
    if dag and dag.active_runs:
        coming = "the run under way applies it"
    elif dag and dag.next_run_at:
        coming = f"the next run (due {dag.next_run_at}) applies it"
    else:
        coming = "the next runs apply it"
    return HEALTHY, f"no failure; {status.lag_seconds or 0:,.0f} s behind the source, {coming}"


def _field(params: dict[str, Any], name: str, value: Any, required: bool = False) -> Field:
    """The DAG's Param ``name`` as a field of a way out, filled with ``value``."""
    schema = params[name].schema
    kinds = schema.get("type", "string")
    kind = next((k for k in kinds if k != "null"), "string") if isinstance(kinds, list) else kinds
    return Field(name, schema.get("title", name), params[name].description or "", kind, value, required)


def _ways_out(
    dags: dict[str, str], status: Status, failed: list[FailedInterval], intervals: list[IntervalRecord]
) -> list[WayOut]:
    delta, load, rollback = (
        dag_params.delta_params(),
        dag_params.initial_load_params(""),
        dag_params.rollback_params(),
    )
    out = []
    if failed:
        last = failed[-1]
        if last.record.run_id and last.task_id:
            out.append(
                WayOut(
                    "rerun",
                    f"Rerun interval {last.record.id}",
                    f"Clear the failed {last.task_id} task of run {last.record.run_id}: Airflow runs it and "
                    "the tasks after it again, and the interval is picked up where it stopped. For a failure "
                    "that was passing (a server restarted, a full disk made room).",
                    dags[DELTA],
                    clear=(last.record.run_id, last.task_id),
                )
            )
        else:
            out.append(
                WayOut(
                    "rerun",
                    f"Rerun interval {last.record.id}",
                    "Trigger a delta run: it picks the interval up where it stopped.",
                    dags[DELTA],
                )
            )
        first = failed[0].record
        out.append(
            WayOut(
                "abandon",
                f"Abandon interval {first.id}",
                "Give it up, and the later ones not materialised, then plan again from before it: for an "
                "interval that cannot be extracted. Its changes are read again, not lost.",
                dags[DELTA],
                [
                    _field(delta, "abandon_interval", first.id),
                    _field(delta, "abandon_reason", "", required=True),
                ],
            )
        )
    check = status.last_check
    differing = list(check.differing) if check else []
    out.append(
        WayOut(
            "reload",
            "Re-load tables",
            "Copy these tables again while the delta runs go on"
            + (f" (the last {check.kind} found them different)." if check and differing else "."),
            dags[INITIAL_LOAD],
            [_field(load, "tables", differing, required=True)],
        )
    )
    done = [r.id for r in intervals if r.state == MATERIALISED]
    out.append(
        WayOut(
            "rollback",
            "Roll back",
            "Return every warehouse table and the checkpoint to the state right after this interval"
            + (f" (filled: the one before the last applied, {done[-1]})." if len(done) > 1 else ".")
            + " The next delta run applies the later intervals again.",
            dags[ROLLBACK],
            [_field(rollback, "to_interval", done[-2] if len(done) > 1 else "", required=True)],
        )
    )
    at = Position.parse(status.checkpoint["position"]) if status.checkpoint else None
    out.append(
        WayOut(
            "backfill",
            "Backfill",
            "Replay the binlog from a position to the present end (filled: the checkpoint; give an earlier "
            "transaction's start to apply a stretch of log again).",
            dags[DELTA],
            [
                _field(delta, "start_lognum", lognum_of(at.file) if at else None, required=True),
                _field(delta, "start_logpos", at.pos if at else None, required=True),
            ],
        )
    )
    return out
