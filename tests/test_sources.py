"""A deployment of several sources (``[sources] dir``): each source is chosen by name and runs
its own DAGs and Spark jobs on its own ledger and warehouse tables; a broken source file stops
only itself; a fleet of servers runs at once under a real scheduler, a kill of one source's
merge stopping only that source."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from loader.core.config import load_config
from loader.core.crashpoints import AT_ENV, LOG_ENV, SOURCE_ENV
from loader.staging.stores import open_store
from loader.state import lease
from loader.state.ledger import Ledger
from loader.state.records import Checkpoint
from tests.conftest import (
    ROOT,
    MariaDB,
    airflow_env,
    dags_test,
    fresh_schema,
    iceberg_rows,
    loader_dag_env,
    mariadb_server,
    random_seed,
    run_loader,
    run_state,
)
from tests.live_airflow import StatsdListener, WebhookListener, standalone
from tests.writer import TABLES, Writer

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _deployment(tmp_path: Path, routes: str, source: str = "") -> Path:
    """``tmp_path/loader.toml``: a deployment of the source files in ``tmp_path/sources``, with
    ``routes`` and the ``[source]`` lines ``source`` for all of them, staging and warehouse
    (database ``fleet_wh``) under ``tmp_path``."""
    toml = tmp_path / "loader.toml"
    toml.write_text(
        f"""[sources]
dir = "sources"
[tables]
routes = {{ {routes} }}
[source]
{source}user = "loader"
password_env = "LOADER_TEST_PASSWORD"
[staging]
uri = "staging"
[warehouse]
database = "fleet_wh"
dir = "warehouse"
[spark]
conf = {{ "spark.sql.shuffle.partitions" = "2" }}
"""
    )
    return toml


def test_each_source_of_a_deployment_runs_its_own_dags_and_a_broken_one_stops_only_itself(
    mariadb: MariaDB, tmp_path: Path, airflow_home: Path
) -> None:
    fresh_schema(mariadb, "fleet_a", "t (id INT PRIMARY KEY, v VARCHAR(10))", "r (id INT PRIMARY KEY)")
    fresh_schema(mariadb, "fleet_b", "t (id INT PRIMARY KEY)")
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "fleet_a.toml").write_text('[tables]\ninclude = ["fleet_a.*"]\n')
    (tmp_path / "sources" / "fleet_b.toml").write_text(
        '[tables]\ninclude = ["fleet_b.*"]\n[warehouse]\ndatabase = "fleet_b_wh"\n'
    )
    (tmp_path / "sources" / "fleet_c.toml").write_text('[source]\nport = "3306"\n')  # a string
    toml = _deployment(
        tmp_path, '"fleet_*.r" = "fleet.r"', f'host = "{mariadb.host}"\nport = {mariadb.port}\n'
    )
    a = load_config(toml, source="fleet_a")
    b = load_config(toml, source="fleet_b")
    for cfg in (a, b):  # each source's changes from here on
        Ledger.of(cfg).set_checkpoint(Checkpoint(mariadb.execute(), "test"))
    mariadb.execute(
        "INSERT INTO fleet_a.t VALUES (1, 'one'), (2, 'two')",
        "INSERT INTO fleet_a.r VALUES (5)",
        "INSERT INTO fleet_b.t VALUES (7)",
    )

    # The source's own delta DAG: its tasks and its Spark job work on that source; the broken
    # source has no DAGs and does not stop the others'.
    env = loader_dag_env(airflow_home, toml, mariadb, extra={"LOADER_TEST_PASSWORD": mariadb.password})
    ran = dags_test(env, "loader_continuous_delta__fleet_a", "2026-03-01")
    assert run_state(ran) == "success", ran[-3000:]
    assert "updated: fleet_a.r, fleet_a.t" in ran, ran[-3000:]
    assert iceberg_rows(a, "fleet_a", "t", ["id", "v"]) == [[1, "one"], [2, "two"]]
    # The routed table went into the shared table, its rows named after the source.
    assert iceberg_rows(a, "fleet_a", "r", ["_source", "id"]) == [["fleet_a", 5]]
    (interval,) = Ledger.of(a).intervals()
    assert interval.state == "materialised" and interval.changes == 3
    # The other source's ledger did not move, and its changes wait for its own run.
    assert Ledger.of(b).intervals() == []
    assert sorted(p.name for p in (tmp_path / "staging").iterdir()) == ["fleet_a", "fleet_b"]

    # Without a choice, a command that works on one source names the sources, and the broken
    # one names its file and field.
    unchosen = run_loader(mariadb, toml, "intervals")
    assert unchosen.returncode == 1
    assert unchosen.stderr.strip().splitlines()[-1] == (
        f"loader intervals: error: {toml} is a deployment of sources fleet_a, fleet_b, fleet_c: choose one "
        "with --source NAME (or LOADER_SOURCE)"
    )
    fleet_c = tmp_path / "sources" / "fleet_c.toml"
    broken = run_loader(mariadb, toml, "intervals", env={"LOADER_SOURCE": "fleet_c"})
    assert broken.returncode == 1
    assert broken.stderr.strip().splitlines()[-1] == (
        f"loader intervals: error: {fleet_c}: source.port must be an integer, got '3306'"
    )
    status = run_loader(mariadb, toml, "status", "--source", "fleet_b", "--output", "json")
    assert status.returncode == 0, status.stderr[-2000:]
    assert json.loads(status.stdout)["source"] == "fleet_b"

    # status and tables without a choice show every source; the broken one does not hide the
    # others, and the last line says where to look (exit 1).
    every = run_loader(mariadb, toml, "status")
    assert every.returncode == 1, every.stderr[-2000:]
    assert "source fleet_a: at " in every.stdout and "source fleet_b: at " in every.stdout
    checkpoint = Ledger.of(a).checkpoint()
    assert checkpoint is not None and f"checkpoint: {checkpoint.position} ({interval.id})" in every.stdout
    assert f"broken source file: {fleet_c}: source.port must be an integer" in every.stdout
    assert every.stdout.strip().splitlines()[-1] == f"3 sources in {toml}; look at: fleet_c.toml"
    tables = run_loader(mariadb, toml, "tables", "--output", "json")
    shown = json.loads(tables.stdout)
    assert {
        name: [(t["schema"], t["table"]) for t in data["tables"]] for name, data in shown["sources"].items()
    } == {
        "fleet_a": [("fleet_a", "r"), ("fleet_a", "t")],
        "fleet_b": [("fleet_b", "t")],
    }
    assert shown["sources"]["fleet_b"]["database"] == "fleet_b_wh" and list(shown["broken"]) == [str(fleet_c)]
    assert [t["warehouse_table"] for t in shown["sources"]["fleet_a"]["tables"] if t["shared"]] == [
        "fleet__r"
    ]
    listed = run_loader(mariadb, toml, "tables").stdout
    assert (
        f"`fleet_a`.`r` -> fleet__r (mirror, shared by its routes, not loaded yet; last changed by interval "
        f"{interval.id}, committed by " in listed
    ), listed
    assert "shared table fleet_wh.fleet__r: sources fleet_a" in listed

    # Maintenance is one run over the deployment's warehouse tables, each table while none of the
    # sources writing to it runs a step: with fleet_a busy (another run holds its lease), both of
    # its tables wait, saying why, and the run asks to be run again (exit 3).
    busy = lease.Lease(open_store(a.staging), "fleet_a", "a merge of fleet_a", 600)
    busy.acquire()
    try:
        waited = run_loader(mariadb, toml, "maintain")
    finally:
        busy.release()
    assert waited.returncode == 3, waited.stderr[-3000:]
    lines = waited.stdout.strip().splitlines()
    assert lines[0].startswith("maintain: 0 Iceberg tables"), waited.stdout
    assert [line.split()[0] for line in lines[1:3]] == [
        "iceberg.fleet_wh.fleet__r",
        "iceberg.fleet_wh.fleet_a__t",
    ]
    assert all("skipped: source fleet_a is busy: a merge of fleet_a (pid" in line for line in lines[1:3])
    assert lines[-1].startswith("maintain: 2 tables skipped while a source writing to them was busy")
    # The deployment's one maintenance DAG does them once fleet_a is free.
    maintained = dags_test(env, "loader_maintenance", "2026-03-01")
    assert run_state(maintained) == "success", maintained[-3000:]
    assert "maintain: 2 Iceberg tables" in maintained, maintained[-3000:]
    assert "iceberg.fleet_wh.fleet__r" in maintained and "skipped" not in maintained
    assert iceberg_rows(a, "fleet_a", "t", ["id", "v"]) == [[1, "one"], [2, "two"]]


def test_a_fleet_runs_at_once_under_the_scheduler_and_a_kill_mid_merge_stops_only_its_source(
    mariadb: MariaDB, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Three servers with writers: two shards of one schema routed into shared tables, and a
    source of its own. Airflow's scheduler (LocalExecutor) runs their delta DAGs at once; the
    first shard's merge is killed after its first table's commit, its rerun finishes the
    interval, and every source's tables end equal to its server, checksum for checksum (each
    shard's own rows of the shared tables)."""
    with (
        mariadb_server(tmp_path_factory, "shop-01") as shop_01,
        mariadb_server(tmp_path_factory, "shop-02") as shop_02,
    ):
        servers = {"shop_01": shop_01, "shop_02": shop_02, "billing": mariadb}
        (tmp_path / "sources").mkdir()
        for name, server in servers.items():
            fresh_schema(server, name, *TABLES)
            (tmp_path / "sources" / f"{name}.toml").write_text(
                f'[source]\nhost = "{server.host}"\nport = {server.port}\nschedule = "none"\n'
                "alert_lag_seconds = 3600\n"
                f'[tables]\ninclude = ["{name}.*"]\n'
            )
        toml = _deployment(tmp_path, '"shop_*.k" = "shop.k", "shop_*.c" = "shop.c"')
        cfgs = {name: load_config(toml, source=name) for name in servers}
        for name, server in servers.items():  # each source's changes from here on
            Ledger.of(cfgs[name]).set_checkpoint(Checkpoint(server.execute(), "test"))
        crash_log = tmp_path / "crash.log"
        statsd = StatsdListener()  # the deployment's metrics, sent where its StatsD settings say
        # On-call's webhook, posted to by the notifier the example cluster policy attaches.
        webhook = WebhookListener()
        (tmp_path / "airflow" / "config").mkdir(parents=True)
        shutil.copy(ROOT / "infra" / "airflow" / "airflow_local_settings.py", tmp_path / "airflow" / "config")
        env = airflow_env(
            tmp_path / "airflow",
            {
                "LOADER_CONFIG": str(toml),
                "LOADER_TEST_PASSWORD": mariadb.password,
                "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
                # The first shard's merge dies (kill -9) after its first table's commit.
                AT_ENV: "materialize: after snapshot committed:1",
                **statsd.env(),
                "LOADER_ONCALL_WEBHOOK": webhook.url,
                SOURCE_ENV: "shop_01",
                LOG_ENV: str(crash_log),
            },
        )
        dags = {name: f"loader_continuous_delta__{name}" for name in servers}
        with standalone(tmp_path / "airflow", env) as airflow:
            airflow.wait_for_dags(*dags.values())
            writers = [
                Writer(server, name, seed=random_seed() + i)
                for i, (name, server) in enumerate(servers.items())
            ]
            for writer in writers:
                writer.start()
            try:
                for dag_id in dags.values():
                    airflow.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
                # Each run ends with the checksum of its tables against its server (the
                # warehouse brought to one snapshot of it while the writers go on).
                runs = {name: airflow.trigger(dag_id, {"checksum": True}) for name, dag_id in dags.items()}
                (failed,) = airflow.finished(runs["shop_01"])
                assert (
                    failed.state == "failed"
                    and airflow.task_state(runs["shop_01"], "materialize") == "failed"
                )
                # Killed once, in its merge's job, after its first commit (the other sources'
                # steps mark no points).
                assert crash_log.read_text().count("materialize: after snapshot committed\n") == 1
                # The on-call page lists every source; the killed one as failed, naming its interval.
                status, listed = airflow.page("/loader-oncall/")
                assert status == 200, listed
                rows = {
                    name: re.findall(rf'<tr><td><a href="source/{name}">.*?</tr>', listed) for name in servers
                }
                assert all(len(found) == 1 for found in rows.values()), listed
                assert '<span class="verdict failed">failed</span>' in rows["shop_01"][0], listed
                assert not any("verdict failed" in rows[name][0] for name in ("shop_02", "billing")), listed
                status, shown = airflow.page("/loader-oncall/source/shop_01")
                (stuck,) = [i for i in Ledger.of(cfgs["shop_01"]).intervals() if i.error]
                assert status == 200 and f"<td>{stuck.id}</td><td>extracted</td>" in shown, shown
                # The operator clears the failed task: the scheduler runs it again at once.
                airflow.clear(dags["shop_01"], runs["shop_01"], "materialize")
                killed, *others = airflow.finished(*runs.values())
            finally:
                for writer in writers:
                    writer.finish()
            assert [r.state for r in (killed, *others)] == ["success"] * 3, airflow.tail()
            assert [airflow.task_state(r, "checksum") for r in runs.values()] == ["success"] * 3
            # Within the lag alert's bounds while the writers wrote: every lag check passed.
            assert [airflow.task_state(r, "lag") for r in runs.values()] == ["success"] * 3
        statsd.close()
        webhook.close()
        _assert_metrics(statsd, servers)
        # One page: the killed merge (its task failed for good); the others ran through.
        (page,) = webhook.received
        assert page["text"].startswith(
            f"loader_continuous_delta__shop_01: task materialize of run {runs['shop_01']} failed: "
        ), page
        # The scheduler ran the sources' runs at once.
        for a, b in [(killed, others[0]), (others[0], others[1])]:
            assert a.start and a.end and b.start and b.end
            assert a.start < b.end and b.start < a.end, f"{a} and {b} did not overlap"
        assert all(w.transactions > 20 for w in writers), [w.transactions for w in writers]
        for cfg in cfgs.values():
            assert {i.state for i in Ledger.of(cfg).intervals()} == {"materialised"}
        # The shards' rows share the routed tables, each under its source's name.
        for table in ("k", "c"):
            shared = iceberg_rows(cfgs["shop_01"], "shop_01", table, ["_source"])
            assert {source for (source,) in shared} == {"shop_01", "shop_02"}


def _assert_metrics(statsd: StatsdListener, servers: dict[str, MariaDB]) -> None:
    """What the runs told the deployment's metrics: per source, the lag, the changes of the
    interval and of each table, the steps' durations; the killed merge as a failure."""
    for name in servers:
        prefix = f"airflow.loader.{name}"
        for gauge in ("lag_seconds", "lag_bytes", "backlog_intervals", "backlog_changes"):
            # At each run's start (the writers ahead) and after its merge.
            assert len(statsd.values(f"{prefix}.{gauge}")) >= 2, (gauge, statsd.names(prefix))
            assert {kind for _, kind in statsd.values(f"{prefix}.{gauge}")} == {"g"}
        assert statsd.values(f"{prefix}.lag_bytes")[0][0] > 0  # the writers' changes, not yet loaded
        (interval,) = statsd.values(f"{prefix}.interval_changes")
        tables = [n for n in statsd.names(f"{prefix}.table.") if n.endswith(".changes")]
        assert {n.split(".")[-2] for n in tables} <= {f"{name}__{t.split(' ')[0]}" for t in TABLES}
        assert sum(v for n in tables for v, _ in statsd.values(n)) == interval[0] > 0
        # Each step once; the killed source's lag check twice (after its failed merge, and after
        # the merge cleared and run again).
        for step in ("plan", "extract", "materialize", "lag"):
            times = 2 if (name, step) == ("shop_01", "lag") else 1
            assert [kind for _, kind in statsd.values(f"{prefix}.step.{step}")] == ["ms"] * times, (
                name,
                step,
            )
        failures = statsd.names(f"{prefix}.failures.")
        assert failures == ({f"{prefix}.failures.SparkJobError"} if name == "shop_01" else set()), failures
