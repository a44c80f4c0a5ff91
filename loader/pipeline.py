"""The steps of one delta run, shared by ``loader run-once`` and the Airflow DAGs, and the status.

A delta run is: plan the interval (snapshot the server's end position), extract it into
staging, materialise every extracted interval in order with the Spark job (which moves the
checkpoint). Each step is safe to run again: planning with the same run id returns the same
interval, extracting an interval writes the same files, materialising is idempotent.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from loader.config import Config
from loader.errors import ConfigError, LoaderError
from loader.extract import run_extract
from loader.ledger import EXTRACTED, MATERIALISED, PLANNED, Ledger
from loader.positions import Position
from loader.source import check_binlog_settings, connect, credentials, current_position

Progress = Callable[[str], None]


def plan_interval(
    cfg: Config,
    start: Position | None = None,
    max_changes: int | None = None,
    run_id: str | None = None,
    dry_run: bool = False,
    start_lognum: int | None = None,
    start_logpos: int | None = None,
) -> dict[str, Any]:
    """Snapshot the server's end position and record the interval to extract (or say what it would be).

    A backfill gives ``start`` or ``start_lognum`` + ``start_logpos`` (the file's base name is the
    server's): the interval replays from there to the present end.

    Returns:
        ``{"interval": id or None, "start", "end", "dry_run", "bytes"}``; ``interval`` is None when
        there is nothing new (or on a dry run).
    """
    ledger = Ledger.of(cfg)
    conn = connect(credentials(cfg.source))
    try:
        check_binlog_settings(conn)
        end = current_position(conn)
    finally:
        conn.close()
    if start_lognum is not None or start_logpos is not None:
        if start_lognum is None or start_logpos is None:
            raise ConfigError("a backfill needs both start_lognum and start_logpos")
        start = Position.from_lognum(end.file.rsplit(".", 1)[0], start_lognum, start_logpos)
    if dry_run:
        begin = start or ledger.next_start()
        return {
            "interval": None,
            "start": str(begin),
            "end": str(end),
            "dry_run": True,
            "bytes": _span(begin, end),
        }
    interval = ledger.plan(end, start=start, max_changes=max_changes, run_id=run_id)
    if interval is None:
        return {"interval": None, "start": str(end), "end": str(end), "dry_run": False, "bytes": 0}
    span = _span(Position.parse(interval.start), Position.parse(interval.end))
    return {
        "interval": interval.id,
        "start": interval.start,
        "end": interval.end,
        "dry_run": False,
        "bytes": span,
    }


def _span(begin: Position, end: Position) -> int | None:
    """Bytes of binlog between two positions of one file (None across files: sizes unknown here)."""
    return max(0, end.pos - begin.pos) if begin.file == end.file else None


def extract_planned(cfg: Config, interval_id: str, progress: Progress) -> dict[str, Any]:
    """Extract a planned interval (again: same boundaries, same files); note a failure in the ledger."""
    try:
        summary = run_extract(cfg, interval_id=interval_id, progress=progress)
    except LoaderError as exc:
        Ledger.of(cfg).record_error(interval_id, f"extract: {exc}")
        raise
    return asdict(summary) if summary else {}


def note_materialize_error(cfg: Config, error: str) -> None:
    """Note a failed materialisation on the first interval waiting for it."""
    ledger = Ledger.of(cfg)
    waiting = [i for i in ledger.intervals() if i.state == EXTRACTED]
    if waiting:
        ledger.record_error(waiting[0].id, f"materialize: {error}")


def materialize_failure(cfg: Config, fallback: str, started: dt.datetime) -> str:
    """Why the materialize job started at ``started`` failed: the error it noted itself, or
    ``fallback`` (noted now) when it died without a word (killed, out of memory). An error an
    earlier run noted is not this run's."""
    failed = Ledger.of(cfg).last_error(since=started)
    if failed is not None and failed.error:
        return failed.error
    note_materialize_error(cfg, fallback)
    return fallback


def clear_materialize_errors(cfg: Config) -> None:
    """Materialised intervals carry no error any more."""
    ledger = Ledger.of(cfg)
    for interval in ledger.intervals():
        if interval.state == MATERIALISED and interval.error:
            interval.error = None
            ledger.save(interval)


def status(cfg: Config) -> dict[str, Any]:
    """Where the source is, what is loaded, how far behind, and what failed last."""
    ledger = Ledger.of(cfg)
    out: dict[str, Any] = {"source": cfg.source.name}
    try:
        conn = connect(credentials(cfg.source))
        try:
            out["source_position"] = str(current_position(conn))
        finally:
            conn.close()
    except LoaderError as exc:
        out["source_position"] = None
        out["source_error"] = str(exc)
    checkpoint = ledger.checkpoint()
    out["checkpoint"] = asdict(checkpoint) if checkpoint else None
    now = time.time()
    if checkpoint is not None and checkpoint.commit_ts:
        out["lag_seconds"] = round(now - checkpoint.commit_ts / 1_000_000, 1)
        out["last_change_at"] = dt.datetime.fromtimestamp(
            checkpoint.commit_ts / 1_000_000, dt.UTC
        ).isoformat()
    else:
        out["lag_seconds"] = None
    intervals = ledger.intervals()
    counts = {PLANNED: 0, EXTRACTED: 0, MATERIALISED: 0, "failed": 0}
    for interval in intervals:
        if interval.error and interval.state != MATERIALISED:
            counts["failed"] += 1
        else:
            counts[interval.state] = counts.get(interval.state, 0) + 1
    out["intervals"] = counts
    failed = ledger.last_error()
    out["last_error"] = (
        {"interval": failed.id, "error": failed.error, "at": failed.error_at} if failed else None
    )
    loads = ledger.loads()
    out["last_load"] = (
        {"id": loads[-1].id, "state": loads[-1].state, "p0": loads[-1].p0, "tables": len(loads[-1].tables)}
        if loads
        else None
    )
    return out


def status_text(data: dict[str, Any]) -> str:
    """``status`` for people."""
    cp = data["checkpoint"]
    lines = [
        f"source {data['source']}: at {data['source_position'] or 'unreachable: ' + data.get('source_error', '')}",
        f"checkpoint: {cp['position'] + ' (' + cp['interval'] + ')' if cp else 'none (run the initial load)'}",
        "lag: "
        + (
            f"{data['lag_seconds']:,.0f} s (last applied change at {data['last_change_at']})"
            if data["lag_seconds"] is not None
            else "unknown"
        ),
        "intervals: " + ", ".join(f"{n} {state}" for state, n in data["intervals"].items()),
    ]
    if data["last_error"]:
        e = data["last_error"]
        lines.append(f"last error: interval {e['interval']} at {e['at']}: {e['error']}")
    if data["last_load"]:
        load = data["last_load"]
        lines.append(
            f"last initial load: {load['id']} ({load['state']}, {load['tables']} tables, P0 {load['p0']})"
        )
    return "\n".join(lines)
