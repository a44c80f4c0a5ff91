"""What ``loader status`` and the Airflow task say when a materialisation fails."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

from loader import pipeline
from loader.config import load_config
from loader.ledger import EXTRACTED, Ledger
from loader.positions import Position


def test_a_silent_death_is_not_blamed_on_an_earlier_runs_error(tmp_path: Path) -> None:
    cfg = load_config(None, env={"LOADER__STAGING__URI": str(tmp_path / "staging")})
    ledger = Ledger.of(cfg)
    interval = ledger.plan(Position.parse("binlog.000001:4000"), start=Position.parse("binlog.000001:4"))
    assert interval is not None
    interval.state = EXTRACTED
    ledger.save(interval)

    first = dt.datetime.now(dt.UTC)
    pipeline.note_materialize_error(cfg, "table s.t: column c changed type")  # the job's own words
    assert (
        pipeline.materialize_failure(cfg, "killed", first) == "materialize: table s.t: column c changed type"
    )

    time.sleep(1.1)  # errors are timed to the second
    second = dt.datetime.now(dt.UTC)
    assert pipeline.materialize_failure(cfg, "the Spark job ended without finishing", second) == (
        "the Spark job ended without finishing"
    )
    failed = ledger.last_error()
    assert failed is not None and failed.error == "materialize: the Spark job ended without finishing"
