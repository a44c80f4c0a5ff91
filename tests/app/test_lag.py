"""How far the warehouse is behind the source, as ``loader status`` tells on-call: in seconds (the
source's clock now minus the commit time of the oldest change not in the warehouse; 0 when
caught up, however long ago the last change was) and in binlog bytes, with the backlog of
intervals and changes not merged yet."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from loader.app import steps
from loader.core.config import Config
from loader.core.errors import LagError
from loader.core.positions import Position
from loader.core.results import to_dict
from loader.extract.interval import run_extract
from loader.state.ledger import Ledger
from loader.warehouse.materialize import run_materialize
from tests.conftest import Loaded, MariaDB, fresh_schema, schema_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_lag_is_what_the_warehouse_lacks_of_the_source_in_seconds_and_bytes(
    mariadb: MariaDB, spark: Any, loaded: Loaded
) -> None:
    cfg = loaded("lag", ["t (id INT PRIMARY KEY, v INT)"], ["INSERT INTO lag.t VALUES (1, 1)"])
    ledger = Ledger.of(cfg)

    def checkpoint() -> Position:
        recorded = ledger.checkpoint()
        assert recorded is not None
        return recorded.position

    # Caught up right after the load: nothing behind, however old the last change is.
    status = steps.status(cfg)
    assert status.source_position == str(checkpoint())
    assert (status.lag_seconds, status.lag_bytes, status.backlog_intervals) == (0, 0, 0)
    assert "lag: caught up" in status.text()

    # A change committed an hour ago (its session's clock set back) and one now: the oldest counts.
    end = mariadb.execute(
        "SET timestamp = UNIX_TIMESTAMP() - 3600",
        "INSERT INTO lag.t VALUES (2, 2)",
        "SET timestamp = DEFAULT",
        "INSERT INTO lag.t VALUES (3, 3)",
    )
    status = steps.status(cfg)
    assert status.lag_seconds is not None and 3600 <= status.lag_seconds < 3700
    assert status.lag_bytes == Position.parse(status.source_position or "").pos - checkpoint().pos
    assert status.lag_bytes and status.lag_bytes >= end.pos - checkpoint().pos
    assert (status.backlog_intervals, status.backlog_changes) == (0, 0)
    line = next(x for x in status.text().splitlines() if x.startswith("lag: "))
    assert line.startswith(
        f"lag: {status.lag_seconds:,.0f} s and {status.lag_bytes:,} bytes of binlog behind"
    )
    assert f"oldest change not in the warehouse committed at {status.oldest_unapplied_at}" in line
    # The alert: over its threshold the check fails, saying how far behind and what to look at.
    assert steps.check_lag(cfg) is not None  # no threshold: no alert
    alerting = _alerting(cfg, 1800)
    with pytest.raises(LagError) as behind:
        steps.check_lag(alerting)
    message = str(behind.value)
    assert message.startswith("source demo is 3,6") and "more than alert_lag_seconds (1,800 s)" in message
    assert f"committed at {status.oldest_unapplied_at}, {status.lag_bytes:,} bytes of binlog ago" in message
    assert "no interval waits to be merged" in message and "[source] schedule" in message
    # Under the threshold: no alert, the lag as status gave it (read again: the source's clock,
    # in tenths of a second, may have moved on).
    under = steps.check_lag(_alerting(cfg, 7200)).lag_seconds
    assert under is not None and status.lag_seconds <= under < status.lag_seconds + 60

    # Extracted, not merged: the backlog counts the interval and its changes; the lag stays.
    extracted = run_extract(cfg, progress=lambda _: None)
    assert extracted is not None
    status = steps.status(cfg)
    assert (status.backlog_intervals, status.backlog_changes) == (1, extracted.changes)
    assert status.lag_seconds is not None and status.lag_seconds >= 3600
    assert "backlog: 1 interval not merged (2 changes extracted)" in status.text()
    with pytest.raises(LagError, match=r"bytes of binlog ago; 1 interval not merged \(2 changes extracted\)"):
        steps.check_lag(alerting)

    # Across a rotation: the rest of the checkpoint's file and what the new one holds.
    mariadb.execute("FLUSH BINARY LOGS", "INSERT INTO lag.t VALUES (4, 4)")
    sizes = dict((str(name), int(size)) for name, size, *_ in mariadb.rows("SHOW BINARY LOGS"))
    status = steps.status(cfg)
    now = Position.parse(status.source_position or "")
    at = checkpoint()
    middle = [f for f in sizes if at.file < f < now.file]
    assert status.lag_bytes == sizes[at.file] - at.pos + sum(sizes[f] - 4 for f in middle) + now.pos - 4

    # Merged up to the source's position: caught up, in the JSON too.
    run_materialize(spark, cfg)
    assert run_extract(cfg, progress=lambda _: None) is not None
    run_materialize(spark, cfg)
    data = to_dict(steps.status(cfg))
    assert data["source_position"] == data["checkpoint"]["position"]
    assert (data["lag_seconds"], data["lag_bytes"], data["backlog_intervals"], data["backlog_changes"]) == (
        0,
        0,
        0,
        0,
    )
    assert steps.check_lag(alerting).lag_seconds == 0

    # A rotation alone is no change: 0 s, though the log moved on; a change in the next file
    # counts from its own commit time, not the rotation's.
    mariadb.execute("FLUSH BINARY LOGS")
    status = steps.status(cfg)
    assert status.lag_seconds == 0 and status.lag_bytes and status.lag_bytes > 0
    assert "(no change since the checkpoint)" in status.text()
    mariadb.execute("SET timestamp = UNIX_TIMESTAMP() - 7200", "INSERT INTO lag.t VALUES (5, 5)")
    status = steps.status(cfg)
    assert status.lag_seconds is not None and 7200 <= status.lag_seconds < 7300


def _alerting(cfg: Config, seconds: int) -> Config:
    return dataclasses.replace(cfg, source=dataclasses.replace(cfg.source, alert_lag_seconds=seconds))


def test_a_lag_alert_that_cannot_tell_the_lag_fails_saying_why(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config
) -> None:
    fresh_schema(mariadb, "lag_new", "t (id INT PRIMARY KEY)")
    cfg = _alerting(schema_config(mariadb, tmp_path, spark_config, "lag_new"), 60)
    with pytest.raises(LagError) as unknown:
        steps.check_lag(cfg)
    assert str(unknown.value) == (
        "source demo: how far the warehouse is behind cannot be told, so alert_lag_seconds (60 s) "
        "cannot be checked: it has no checkpoint yet: run the initial load"
    )
