"""The loader's metrics, sent by the tasks of its DAGs through Airflow's own metrics (the StatsD or
OpenTelemetry settings of the deployment's ``[metrics]`` section, whichever it configured, under
its prefix, ``airflow.`` by default). Outside Airflow (the command line) they go nowhere.

``<source>`` is ``[source] name``, ``<table>`` a source table as ``schema__table``; the same
values go as the tags ``source`` and ``table`` to a backend that keeps tags.

- ``loader.<source>.lag_seconds``, ``loader.<source>.lag_bytes`` (gauges): ``loader status``'s
  lag, at the start of each delta run and after its merge;
- ``loader.<source>.backlog_intervals``, ``loader.<source>.backlog_changes`` (gauges): the
  intervals not merged yet and the changes they hold;
- ``loader.<source>.interval_changes`` (gauge): the change rows of the interval a run extracted;
- ``loader.<source>.table.<table>.changes`` (counter): change rows extracted, per table;
- ``loader.<source>.step.<step>`` (timer, ms): how long a step took, when it succeeded: the
  delta DAG's ``plan``, ``extract``, ``materialize``, ``checksum``, ``lag``; the initial load
  DAG's ``start_load``, ``initial-load`` (a table's copy), ``finish_load``; ``rollback``;
- ``loader.<source>.failures.<ErrorClass>`` (counter): a failed step, by the class of the error
  that stopped it (a Spark job's own, for a job that failed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loader.core.results import ExtractSummary, Status

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def part(name: str) -> str:
    """One part of a metric's name: a table's ``schema.table`` as ``schema__table``, and any
    character a StatsD or OpenTelemetry name cannot hold as ``_``."""
    return _UNSAFE.sub("_", name.replace(".", "__"))


def _stats() -> Any:
    try:
        from airflow.sdk.observability import stats
    except ImportError:  # not in Airflow
        return None
    return stats


def gauge(source: str, name: str, value: float, tags: Mapping[str, str] | None = None) -> None:
    """Set ``loader.<source>.<name>``."""
    stats = _stats()
    if stats is not None:
        stats.gauge(f"loader.{part(source)}.{name}", value, tags={"source": source, **(tags or {})})


def count(source: str, name: str, n: int = 1, tags: Mapping[str, str] | None = None) -> None:
    """Add ``n`` to ``loader.<source>.<name>``."""
    stats = _stats()
    if stats is not None:
        stats.incr(f"loader.{part(source)}.{name}", n, tags={"source": source, **(tags or {})})


def seconds(source: str, name: str, value: float) -> None:
    """Record a duration of ``value`` seconds as ``loader.<source>.<name>`` (a timer, in ms)."""
    stats = _stats()
    if stats is not None:
        stats.timing(f"loader.{part(source)}.{name}", value * 1000.0, tags={"source": source})


def lag(source: str, status: Status) -> None:
    """The lag and backlog of a ``results.Status``; an unknown lag is not sent."""
    if status.lag_seconds is not None and status.lag_bytes is not None:
        gauge(source, "lag_seconds", status.lag_seconds)
        gauge(source, "lag_bytes", status.lag_bytes)
    gauge(source, "backlog_intervals", status.backlog_intervals)
    gauge(source, "backlog_changes", status.backlog_changes)


def extracted(source: str, summary: ExtractSummary) -> None:
    """The change rows of an ``results.ExtractSummary``: the interval's, and each table's."""
    gauge(source, "interval_changes", summary.changes)
    for table in summary.tables:
        rows = sum(table.ops.values())
        count(source, f"table.{part(table.table)}.changes", rows, {"table": table.table})
