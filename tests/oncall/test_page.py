"""The on-call page's facts and ways out, from the results the steps return (no server): what it
says of a source in each state, which DAG each way out runs with which fields filled, and that
whatever a source or an error says is shown as text, never as markup."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from loader.core.results import DagState, IntervalRecord, LastCheck, Status, TableMapping
from loader.oncall import html, page


def _status(**changed: Any) -> Status:
    fields: dict[str, Any] = {
        "source": "shop",
        "source_position": "mysql-bin.000003:900",
        "checkpoint": {"position": "mysql-bin.000003:900", "interval": "0000000002"},
        "lag_seconds": 0.0,
        "intervals": {"planned": 0, "extracted": 0, "materialised": 2, "failed": 0, "abandoned": 0},
        "last_error": None,
        "last_load": None,
        "lag_bytes": 0,
    }
    return Status(**{**fields, **changed})


DONE = [
    IntervalRecord(
        "0000000001", "materialised", "mysql-bin.000003:4", "mysql-bin.000003:500", 10, run_id="r1"
    ),
    IntervalRecord(
        "0000000002", "materialised", "mysql-bin.000003:500", "mysql-bin.000003:900", 5, run_id="r2"
    ),
]
STUCK = IntervalRecord(
    "0000000003",
    "extracted",
    "mysql-bin.000003:900",
    "mysql-bin.000003:1200",
    3,
    error="materialize: the materialize job failed: <b>disk</b> full",
    run_id="manual__2026-11-28T10:00:00+00:00",
)


def _page(status: Status, intervals: list[IntervalRecord], alert: int = 0) -> page.SourcePage:
    def dag_id(base: str) -> str:
        return f"{base}__shop"

    tables = [TableMapping("s", "t", "s__t", "mysql-bin.000001:4", last_interval="0000000002")]
    return page.source_page(
        "shop", dag_id, status, intervals, len(intervals), tables, alert_lag_seconds=alert
    )


def test_a_source_s_verdict_names_the_worst_of_what_is_wrong() -> None:
    assert (_page(_status(), DONE).verdict, _page(_status(), DONE).verdict_text) == (
        page.HEALTHY,
        "caught up",
    )
    behind = _status(lag_seconds=4000.0, lag_bytes=10_000)
    assert _page(behind, DONE).verdict == page.HEALTHY  # no threshold set
    assert _page(behind, DONE, alert=1800).verdict_text == (
        "4,000 s behind the source, more than alert_lag_seconds (1,800 s)"
    )
    differs = _status(
        last_check=LastCheck("checksum", "2026-11-28T10:00:00Z", 2, ["s.t"], "mysql-bin.000003:900")
    )
    assert _page(differs, DONE).verdict == page.DIFFERS
    failed = _page(differs, [*DONE, STUCK], alert=1)
    assert failed.verdict == page.FAILED and failed.verdict_text.startswith(
        "1 interval failed, the last 0000000003:"
    )
    stopped = _status(history_problem="the server's GTID history lacks the checkpoint's")
    assert _page(stopped, [*DONE, STUCK]).verdict == page.STOPPED
    assert _page(_status(source_position=None, source_error="refused"), DONE).verdict_text == (
        "the source cannot be reached: refused"
    )
    assert _page(_status(checkpoint=None), []).verdict == page.NOT_LOADED


def test_changes_waiting_with_no_run_to_come_are_not_healthy() -> None:
    def dag(**changed: Any) -> DagState:
        fields: dict[str, Any] = {
            "dag_id": "loader_continuous_delta__shop",
            "paused": False,
            "active_runs": 0,
            "next_run_at": "2026-11-28T10:15:00Z",
            "schedule": "*/15 * * * *",
        }
        return DagState(**{**fields, **changed})

    behind = {"lag_seconds": 2622.0, "lag_bytes": 10_000}
    paused = _page(_status(**behind, delta_dag=dag(paused=True, next_run_at=None)), DONE)
    assert (paused.verdict, paused.verdict_text) == (
        page.PAUSED,
        "the delta DAG loader_continuous_delta__shop is paused, 2,622 s behind the source (10,000 bytes "
        "of binlog): no run applies it until it is unpaused",
    )
    assert "Delta DAG" in html.source(paused, "/", many=False)
    unscheduled = _page(_status(**behind, delta_dag=dag(next_run_at=None, schedule="None")), DONE)
    assert unscheduled.verdict == page.NO_RUN and unscheduled.verdict_text.endswith(
        "no run of the delta DAG loader_continuous_delta__shop is due (schedule None: it runs when "
        "triggered): trigger a run"
    )
    # A run under way or one due applies it; caught up, a paused DAG is said, not alarmed.
    running = _page(_status(**behind, delta_dag=dag(active_runs=1, next_run_at=None)), DONE)
    assert (running.verdict, running.verdict_text) == (
        page.HEALTHY,
        "no failure; 2,622 s behind the source, the run under way applies it",
    )
    due = _page(_status(**behind, delta_dag=dag()), DONE)
    assert (
        due.verdict_text
        == "no failure; 2,622 s behind the source, the next run (due 2026-11-28T10:15:00Z) applies it"
    )
    idle = _page(_status(delta_dag=dag(paused=True)), DONE)
    assert (idle.verdict, idle.verdict_text) == (
        page.HEALTHY,
        "caught up; the delta DAG loader_continuous_delta__shop is paused: no run applies what comes next",
    )
    # Where Airflow is not known, the page says what it can.
    assert _page(_status(**behind), DONE).verdict_text.endswith("the next runs apply it")
    # loader status says it too.
    text = _status(**behind, delta_dag=dag(paused=True)).text()
    assert "delta DAG: loader_continuous_delta__shop: PAUSED (no run starts until it is unpaused)" in text
    assert "NO RUN TO COME: 10,000 bytes of binlog wait and no run will apply them" in text


def test_the_ways_out_fill_the_fields_of_the_right_dag_from_the_facts() -> None:
    differs = _status(last_check=LastCheck("compare", "2026-11-28T10:00:00Z", 2, ["s.t", "s.u"]))
    shown = _page(differs, [*DONE, STUCK])
    ways = {w.key: w for w in shown.ways_out}
    assert list(ways) == ["rerun", "abandon", "reload", "rollback", "backfill"]
    assert (ways["rerun"].dag_id, ways["rerun"].clear) == (
        "loader_continuous_delta__shop",
        ("manual__2026-11-28T10:00:00+00:00", "materialize"),
    )
    assert [(f.name, f.value, f.required) for f in ways["abandon"].fields] == [
        ("abandon_interval", "0000000003", False),
        ("abandon_reason", "", True),
    ]
    assert (ways["reload"].dag_id, ways["reload"].fields[0].value) == (
        "loader_initial_load__shop",
        ["s.t", "s.u"],
    )
    assert (ways["rollback"].dag_id, ways["rollback"].fields[0].value) == (
        "loader_rollback__shop",
        "0000000001",
    )
    assert [(f.title, f.value) for f in ways["backfill"].fields] == [
        ("Backfill from binlog file number", 3),
        ("Backfill from byte position", 900),
    ]
    # The failed interval's task run, in the delta DAG's run that planned it.
    (failed,) = shown.failed
    assert failed.task_link == (
        "dags/loader_continuous_delta__shop/runs/manual__2026-11-28T10%3A00%3A00%2B00%3A00/tasks/materialize"
    )
    # An interval failed outside Airflow: rerun is a new delta run.
    by_hand = _page(
        _status(), [*DONE, IntervalRecord("0000000003", "planned", "a:4", "a:9", error="extract: x")]
    )
    assert by_hand.failed[0].task_link is None and by_hand.ways_out[0].clear is None


def test_what_a_source_says_is_shown_as_text() -> None:
    one = _page(_status(), [*DONE, STUCK])
    shown = html.source(one, "/airflow/", many=True)
    assert "<b>disk</b>" not in shown and "&lt;b&gt;disk&lt;/b&gt; full" in shown
    assert 'href="/airflow/dags/loader_continuous_delta__shop/runs/' in shown
    assert 'data-run-id="manual__2026-11-28T10:00:00+00:00" data-task-id="materialize"' in shown
    listed = html.index([one], {"crm": "sources/crm.toml: source.port must be an integer <3306>"}, "/")
    assert '<a href="source/shop">shop</a>' in listed and "&lt;3306&gt;" in listed


def test_the_plugin_builds_its_web_app_only_when_the_api_server_asks_for_it() -> None:
    # Every Airflow task process loads the plugins (their macros and listeners): importing the
    # plugin must not import the web app's framework and Airflow's API security (~0.5 s a task).
    probe = (
        "import sys, loader.oncall.plugin as p\n"
        "heavy = sorted(m for m in ('fastapi', 'airflow.api_fastapi.core_api.security') if m in sys.modules)\n"
        "app = p.LoaderOncallPlugin().fastapi_apps[0]\n"
        "print(heavy, app['url_prefix'], type(app['app']).__name__)\n"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.strip().splitlines()[-1] == "[] /loader-oncall FastAPI"
