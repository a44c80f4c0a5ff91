"""The Airflow DAGs, run by real Airflow (``airflow dags test``, which is ``dag.test()``) against the
private MariaDB, local staging and local Spark, in their own AIRFLOW_HOME (SQLite)."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from loader.core.config import load_config
from tests import airflow_runner
from tests.conftest import (
    BIN,
    ROOT,
    MariaDB,
    airflow_env,
    dags_test,
    fresh_schema,
    iceberg_rows,
    loader_dag_env,
    run_state,
)

PARSE_CHECK = """
import json, sys
from airflow.sdk import BaseHook
from airflow.models import Connection

def refuse(*args, **kwargs):
    raise RuntimeError("a connection was looked up while the DAG files were parsed")

BaseHook.get_connection = classmethod(refuse)
Connection.get_connection_from_secrets = classmethod(refuse)
import pymysql
pymysql.connect = refuse

from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
out = {"errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": {}}
for dag_id, dag in bag.dags.items():
    out["dags"][dag_id] = {
        "schedule": str(dag.schedule),
        "max_active_runs": dag.max_active_runs,
        "catchup": dag.catchup,
        "tasks": sorted(t.task_id for t in dag.tasks),
        "params": {
            k: {**dag.params.get_param(k).schema, "description": dag.params.get_param(k).description}
            for k in dag.params
        },
    }
    out["dags"][dag_id]["default_args"] = dict(dag.default_args)
    out["dags"][dag_id]["doc_md"] = dag.doc_md
    out["dags"][dag_id]["tags"] = sorted(dag.tags)
    out["dags"][dag_id]["pools"] = {
        t.task_id: getattr(t, "pool", None) or (getattr(t, "partial_kwargs", None) or {}).get("pool")
        for t in dag.tasks
    }
    # The source each task works on: an operator's own (a mapped one's partial), a task
    # function's argument.
    out["dags"][dag_id]["sources"] = {
        t.task_id: getattr(t, "source", None)
        or (getattr(t, "op_kwargs", None) or {}).get("source")
        or (getattr(t, "partial_kwargs", None) or {}).get("source")
        for t in dag.tasks
    }

# How task errors reach Airflow: transient ones are raised as they are (Airflow retries them),
# the loader's others become AirflowFailException (no retry), with the loader's text.
from airflow.sdk.exceptions import AirflowFailException
from loader.core.errors import SourceError, TransientError
from loader.app.airflow import loader_errors

try:
    with loader_errors():
        raise TransientError("the source did not answer")
except TransientError:
    out["transient"] = "raised as it is"
try:
    with loader_errors():
        raise SourceError("binlog_format is STATEMENT")
except AirflowFailException as exc:
    out["permanent"] = str(exc)
print("RESULT " + json.dumps(out, default=str))
"""


@pytest.mark.integration
def test_dag_files_import_without_errors_or_connection_lookups(airflow_home: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PARSE_CHECK, str(ROOT / "dags")],
        env=airflow_env(airflow_home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, done.stderr[-3000:]
    result = json.loads(line[len("RESULT ") :])
    assert result["errors"] == {}
    delta = result["dags"]["loader_continuous_delta"]
    assert delta["schedule"] == "0:15:00" and delta["max_active_runs"] == 1 and delta["catchup"] is False
    assert delta["tasks"] == ["checksum", "extract", "lag", "materialize", "plan", "publish", "status"]
    params = delta["params"]
    assert set(params) == {
        "start_lognum",
        "start_logpos",
        "allow_gap",
        "max_changes",
        "checksum",
        "dry_run",
        "abandon_interval",
        "abandon_reason",
    }
    assert all(p.get("title") and p.get("description") for p in params.values())
    assert params["start_logpos"]["minimum"] == 4 and params["dry_run"]["type"] == "boolean"
    initial = result["dags"]["loader_initial_load"]
    assert initial["schedule"] == "None"
    assert initial["tasks"] == ["copy_table", "plan_copies", "record_p0", "set_checkpoint"]
    assert set(initial["params"]) == {"tables", "parallelism", "from_now"}
    assert initial["params"]["from_now"]["type"] == "boolean"
    rollback = result["dags"]["loader_rollback"]
    assert rollback["schedule"] == "None" and rollback["tasks"] == ["rollback"]
    assert set(rollback["params"]) == {"to_interval"} and rollback["params"]["to_interval"]["title"]
    maintenance = result["dags"]["loader_maintenance"]
    assert maintenance["schedule"] == "@daily" and maintenance["tasks"] == ["maintain"]
    assert (
        delta["default_args"]["retries"] == 3 and delta["default_args"]["retry_exponential_backoff"] is True
    )
    assert result["transient"] == "raised as it is"
    assert result["permanent"] == "SourceError: binlog_format is STATEMENT"
    assert delta["tags"] == ["loader"] and set(delta["sources"].values()) == {None}  # the file's one source
    assert set(delta["pools"].values()) == {"default_pool"}

    # A deployment of several sources: a set of DAGs per source, named and tagged after it, each
    # task working on its own source.
    (tmp_path / "sources").mkdir()
    for name in ("shop_01", "crm"):
        (tmp_path / "sources" / f"{name}.toml").write_text(f'[tables]\ninclude = ["{name}.*"]\n')
    with (tmp_path / "sources" / "crm.toml").open("a") as own:
        own.write('mode = "soft_delete"\nmodes = { "crm.customers" = "history" }\n')
    with (tmp_path / "sources" / "shop_01.toml").open("a") as own:
        own.write('[source]\nschedule = "5"\n')  # its own; crm keeps the default
    broken = tmp_path / "sources" / "broken.toml"
    broken.write_text('[source]\nport = "3306"\n')
    (tmp_path / "loader.toml").write_text(
        '[sources]\ndir = "sources"\n[maintenance]\nschedule = "@weekly"\n[spark]\nairflow_pool = "loader_spark"\n'
    )
    done = subprocess.run(
        [sys.executable, "-c", PARSE_CHECK, str(ROOT / "dags")],
        env=airflow_env(airflow_home, {"LOADER_CONFIG": str(tmp_path / "loader.toml")}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, done.stderr[-3000:]
    fleet = json.loads(line[len("RESULT ") :])
    # The broken source is an import error naming its file and field; the others' DAGs load.
    assert fleet["errors"] == {str(broken): f"{broken}: source.port must be an integer, got '3306'"}
    # Maintenance is one DAG of the whole deployment (per warehouse table, whoever writes to it).
    assert sorted(fleet["dags"]) == sorted(
        [
            f"loader_{dag}__{name}"
            for dag in ("continuous_delta", "initial_load", "rollback")
            for name in ("crm", "shop_01")
        ]
        + ["loader_maintenance"]
    )
    for name in ("crm", "shop_01"):
        shop_delta = fleet["dags"][f"loader_continuous_delta__{name}"]
        assert shop_delta["tasks"] == delta["tasks"] and shop_delta["params"] == delta["params"]
        assert shop_delta["tags"] == ["loader", f"source:{name}"]
        for dag in ("continuous_delta", "initial_load", "rollback"):
            tasks = fleet["dags"][f"loader_{dag}__{name}"]["sources"]
            # Every task that reads the config reads its own source's (plan_copies reads none).
            assert {t for t, source in tasks.items() if source != name} <= {"plan_copies"}, tasks
    # The Spark jobs of every source take slots of the one pool the deployment names.
    spark_tasks = {"materialize", "checksum", "copy_table", "rollback", "maintain"}
    for dag in fleet["dags"].values():
        assert {t: p for t, p in dag["pools"].items() if p != "default_pool"} == {
            t: "loader_spark" for t in dag["pools"] if t in spark_tasks
        }
    assert fleet["dags"]["loader_maintenance"]["schedule"] == "@weekly"
    assert fleet["dags"]["loader_maintenance"]["tags"] == ["loader"]
    assert fleet["dags"]["loader_continuous_delta__shop_01"]["schedule"] == "0:05:00"
    assert fleet["dags"]["loader_continuous_delta__crm"]["schedule"] == "0:15:00"
    # The forms and pages say what each table's warehouse table keeps.
    modes = "Warehouse modes: soft_delete for every table; crm.customers: history."
    crm_load = fleet["dags"]["loader_initial_load__crm"]
    assert modes in crm_load["params"]["tables"]["description"] and crm_load["doc_md"] == modes
    assert fleet["dags"]["loader_continuous_delta__crm"]["doc_md"] == modes
    shop_load = fleet["dags"]["loader_initial_load__shop_01"]
    assert "Warehouse modes: mirror for every table." in shop_load["params"]["tables"]["description"]


MASTER_CHECK = """
from loader.app.airflow import LoaderSparkJobOperator

operator = LoaderSparkJobOperator(task_id="materialize", job="materialize")
try:
    operator.refuse_another_master("local[2]")
    print("RESULT agreed")
except Exception as exc:
    print(f"RESULT {type(exc).__name__}: {exc}")
"""


@pytest.mark.integration
def test_a_spark_connection_naming_another_master_than_the_config_is_refused(airflow_home: Path) -> None:
    def check(connection: str) -> str:
        env = airflow_env(airflow_home, {"AIRFLOW_CONN_SPARK_DEFAULT": connection})
        done = subprocess.run([sys.executable, "-c", MASTER_CHECK], env=env, capture_output=True, text=True)
        line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
        assert line is not None, done.stderr[-3000:]
        return line[len("RESULT ") :]

    assert check(json.dumps({"conn_type": "spark", "host": "local[2]"})) == "agreed"
    refused = check(json.dumps({"conn_type": "spark", "host": "spark://10.0.0.5", "port": 7077}))
    assert refused.startswith(
        "AirflowFailException: the Spark connection 'spark_default' submits to spark://10.0.0.5:7077 "
        "but the loader's [spark] master is local[2]: set both to the same master"
    ), refused


def _source(mariadb: MariaDB) -> dict[str, list[list[Any]]]:
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            out = {}
            for table, columns in COLUMNS.items():
                cur.execute(f"SELECT {', '.join(columns)} FROM af.{table}")
                out[table] = sorted([_plain(v) for v in r] for r in cur.fetchall())
            return out
    finally:
        conn.close()


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return str(value) if value is not None and not isinstance(value, int | str) else value


# Each table's columns, its key first (the rows sort by it on both sides).
COLUMNS = {
    "orders": ["id", "customer", "total", "at"],
    "lines": ["order_id", "line", "sku", "qty"],
    "notes": ["code", "flags", "body"],
}


# The warehouse modes of the tables (the test's config), and the column saying a row is live.
LIVE = {"lines": ("_is_deleted", False), "notes": ("_is_current", True)}


def _warehouse(config: Path) -> dict[str, list[list[Any]]]:
    """Every warehouse table's live rows (``soft_delete``: not deleted; ``history``: the current
    versions) as the source's (``_source``), read by pyiceberg."""
    cfg = load_config(config)
    out = {}
    for table, columns in COLUMNS.items():
        flag, live = LIVE.get(table, (None, None))
        rows = iceberg_rows(cfg, "af", table, columns + ([flag] if flag else []))
        out[table] = sorted(
            [_plain(v) for v in row[: len(columns)]] for row in rows if not flag or row[-1] == live
        )
    return out


def _status(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [str(BIN / "loader"), "status", "--output", "json"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


class Writer(threading.Thread):
    def __init__(self, mariadb: MariaDB, seed: int) -> None:
        super().__init__(daemon=True)
        self.mariadb, self.seed = mariadb, seed
        self.stop = threading.Event()

    def run(self) -> None:
        import random

        rnd = random.Random(self.seed)
        conn = self.mariadb.connect()
        try:
            with conn.cursor() as cur:
                n = 0
                while not self.stop.is_set() or n < 20:
                    n += 1
                    k = rnd.randint(1, 400)
                    cur.execute(
                        f"INSERT INTO af.orders VALUES ({k}, 'c{n}', {n}.25, NOW(6)) "
                        f"ON DUPLICATE KEY UPDATE customer = 'c{n}', total = total + 1"
                    )
                    cur.execute(f"DELETE FROM af.lines WHERE order_id = {rnd.randint(1, 400)} AND line = 1")
                    cur.execute(f"INSERT IGNORE INTO af.lines VALUES ({k}, {n % 5 + 1}, 'sku{n}', {n % 9})")
                    cur.execute(f"REPLACE INTO af.notes VALUES ('n{k % 50}', x'{n:04x}', 'note {n}')")
                    time.sleep(0.01)
        finally:
            conn.close()


@pytest.mark.integration
def test_the_initial_load_dag_started_from_now_sets_the_checkpoint_and_leaves_every_table_to_its_copy(
    mariadb: MariaDB, airflow_home: Path, tmp_path: Path
) -> None:
    fresh_schema(mariadb, "afn", "t (id INT PRIMARY KEY)", "u (id INT PRIMARY KEY)")
    mariadb.execute("INSERT INTO afn.t VALUES (1), (2)")
    config = tmp_path / "loader.toml"
    config.write_text(
        f"""[source]
name = "afn"
airflow_conn_id = "loader_source"
[tables]
include = ["afn.*"]
[staging]
uri = "{tmp_path / "staging"}"
[warehouse]
dir = "{tmp_path / "warehouse"}"
"""
    )
    env = loader_dag_env(airflow_home, config, mariadb)
    now = mariadb.rows("SHOW MASTER STATUS")[0]
    started = dags_test(env, "loader_initial_load", "2026-02-01T00:00:00+00:00", {"from_now": True})
    assert run_state(started) == "success", started[-3000:]
    assert "started from now at" in started and "2 tables wait for their copy" in started
    status = _status(env)
    assert status["checkpoint"]["position"] == f"{now[0]}:{now[1]}"
    assert status["awaiting_copy"] == ["afn.t", "afn.u"]
    assert status["last_load"]["state"] == "started from now"
    # Once started, a second start from now is refused, saying how to go on.
    again = dags_test(env, "loader_initial_load", "2026-02-02T00:00:00+00:00", {"from_now": True})
    assert run_state(again) == "failed" and "a start from now is for a source never loaded" in again


@pytest.mark.integration
@pytest.mark.slow
def test_initial_load_then_delta_runs_rerun_and_backfill_keep_the_warehouse_equal_to_the_source(
    mariadb: MariaDB, airflow_home: Path, tmp_path: Path
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS af",
        "CREATE DATABASE af",
        "CREATE TABLE af.orders (id INT PRIMARY KEY, customer VARCHAR(20), total DECIMAL(10,2), at DATETIME(6))",
        "CREATE TABLE af.lines (order_id INT, line INT, sku VARCHAR(10), qty SMALLINT, PRIMARY KEY (order_id, line))",
        "CREATE TABLE af.notes (code VARCHAR(8) PRIMARY KEY, flags VARBINARY(4), body TEXT)",
        "INSERT INTO af.orders SELECT seq, CONCAT('c', seq), seq * 1.5, '2026-01-01' FROM af.seq_1_to_300",
        "INSERT INTO af.lines SELECT seq % 300 + 1, seq % 3 + 1, CONCAT('s', seq), seq % 7 FROM af.seq_1_to_600"
        " ON DUPLICATE KEY UPDATE qty = VALUES(qty)",
    )
    config = tmp_path / "loader.toml"
    events = tmp_path / "spark-events"  # Spark's event log: what its UI and history server show
    events.mkdir()
    config.write_text(
        f"""[source]
name = "af"
airflow_conn_id = "loader_source"
alert_lag_seconds = 1800
[tables]
include = ["af.*"]
modes = {{ "af.lines" = "soft_delete", "af.notes" = "history" }}
[staging]
uri = "{tmp_path / "staging"}"
[warehouse]
database = "af_wh"
dir = "{tmp_path / "warehouse"}"
partition_rows = 100
buckets = 4
swap_batch = 1
[load]
parallelism = 2
[spark]
conf = {{ "spark.sql.shuffle.partitions" = "2", "spark.eventLog.enabled" = "true", "spark.eventLog.dir" = "{events}" }}
"""
    )
    env = loader_dag_env(airflow_home, config, mariadb)
    # A delta before any initial load fails at once, saying what to do.
    early = dags_test(env, "loader_continuous_delta", "2026-02-01T00:00:00+00:00")
    assert run_state(early) == "failed" and "run the initial load first" in early

    writer = Writer(mariadb, 1)
    writer.start()
    try:
        loaded = dags_test(env, "loader_initial_load", "2026-02-01T00:00:00+00:00")
    finally:
        writer.stop.set()
        writer.join()
    assert run_state(loaded) == "success", loaded[-3000:]
    outputs = [loaded]

    # One delta run carries the changes written during the load; the writer's next changes go to
    # the crashed run below, and the backfill replays from before the load's position.
    delta = dags_test(env, "loader_continuous_delta", "2026-02-02T00:00:00+00:00")
    outputs.append(delta)
    assert run_state(delta) == "success", delta[-3000:]
    assert _warehouse(config) == _source(mariadb)
    # Spark's warnings the loader causes by design (a header check per staged file) are not
    # in the task's log.
    assert "CSVHeaderChecker" not in delta, delta[-3000:]
    writer = Writer(mariadb, 2)
    writer.start()
    writer.stop.set()
    writer.join()

    # A run whose materialisation dies half way (after one table's snapshot, before the ledger
    # records it) fails without retries; its tasks cleared and run again in the same run, it
    # finishes the same interval (the committed table's snapshot is found and not applied again).
    crash = dags_test(
        {**env, "LOADER_CRASH_AT": "materialize: after snapshot committed:1"},
        "loader_continuous_delta",
        "2026-02-04",
    )
    assert run_state(crash) == "failed" and "the materialize job failed" in crash
    assert "Marking task as UP_FOR_RETRY" not in crash
    status = _status(env)
    assert status["intervals"]["failed"] == 1 and "materialize" in status["last_error"]["error"]
    failed_interval = status["last_error"]["interval"]
    run_id = crash.split("DagRun Finished:", 1)[1].split("run_id=", 1)[1].split(",", 1)[0]
    for task_id in ("plan", "extract", "materialize", "publish"):  # what clearing them reruns
        rerun = airflow_runner.airflow(["tasks", "test", "loader_continuous_delta", task_id, run_id], env)
        outputs.append(rerun.stdout + rerun.stderr)
        assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-3000:]
        if task_id == "plan":  # the same interval, planned again by the same run
            assert f"interval {failed_interval}: [" in rerun.stdout + rerun.stderr
    outputs.append(crash)
    assert _warehouse(config) == _source(mariadb)

    # A run killed in its merge, not cleared: the next run applies the killed run's interval
    # with its own, says both, and publishes the tables both changed.
    mariadb.execute("UPDATE af.orders SET total = total + 1 WHERE id < 5")
    killed = dags_test(
        {**env, "LOADER_CRASH_AT": "materialize: after snapshot committed:1"},
        "loader_continuous_delta",
        "2026-02-04T06:00:00+00:00",
    )
    outputs.append(killed)
    assert run_state(killed) == "failed", killed[-3000:]
    killed_interval = _status(env)["last_error"]["interval"]
    mariadb.execute("INSERT INTO af.notes VALUES ('late', x'01', 'after the kill')")
    after = dags_test(env, "loader_continuous_delta", "2026-02-04T12:00:00+00:00")
    outputs.append(after)
    assert run_state(after) == "success", after[-3000:]
    assert f"materialised interval {killed_interval} [" in after, after[-3000:]
    (updated,) = re.findall(r"updated \(intervals (\d+), (\d+)\): (.*)", after)
    assert updated[0] == killed_interval and updated[1] > killed_interval, updated
    assert "af.orders" in updated[2] and "af.notes" in updated[2], updated
    assert _warehouse(config) == _source(mariadb)

    # A backfill from a position before the checkpoint replays from there: same tables.
    status = _status(env)
    assert status["intervals"] == {
        "planned": 0,
        "extracted": 0,
        "materialised": 4,
        "failed": 0,
        "abandoned": 0,
    }
    assert status["lag_seconds"] is not None and status["last_error"] is None
    p0 = status["last_load"]["p0"]
    lognum, logpos = int(p0.split(":")[0].rsplit(".", 1)[1]), int(p0.split(":")[1])
    mariadb.execute("UPDATE af.orders SET total = 0 WHERE id < 50")
    backfill = dags_test(
        env,
        "loader_continuous_delta",
        "2026-02-05",
        {"start_lognum": lognum, "start_logpos": logpos, "checksum": True},
    )
    outputs.append(backfill)
    assert run_state(backfill) == "success", backfill[-3000:]
    assert f"[{p0}," in backfill
    # The run's checksum compared every table at the source's snapshot: all equal.
    assert re.search(r"checksum at \S+: 3 tables, 3 equal", backfill), backfill[-3000:]
    assert _warehouse(config) == _source(mariadb)
    # The soft_delete table kept the lines the writers deleted; the history table every note's
    # versions, each once whatever the reruns and the backfill applied again.
    cfg = load_config(config)
    lines = iceberg_rows(cfg, "af", "lines", ["order_id", "line", "_is_deleted", "_op"])
    assert any(deleted and op == "d" for *_, deleted, op in lines)
    notes = iceberg_rows(cfg, "af", "notes", ["code", "_valid_from_seqno", "_valid_to_seqno", "_is_current"])
    assert len(notes) > len(_source(mariadb)["notes"])
    assert len({(code, start) for code, start, *_ in notes}) == len(notes)
    for (code, _, end, current), (after, start, *_) in itertools.pairwise(notes):
        assert current or code != after or end == start, (code, end, start)  # versions follow each other

    # Each run's last task checked the lag (caught up after it); a change the warehouse lacks
    # for an hour (its session's clock set back) fails the check, saying how far behind.
    assert "lag: caught up" in backfill
    mariadb.execute("SET timestamp = UNIX_TIMESTAMP() - 3600", "UPDATE af.orders SET total = 1 WHERE id = 1")
    run_id = backfill.split("DagRun Finished:", 1)[1].split("run_id=", 1)[1].split(",", 1)[0]
    behind = airflow_runner.airflow(["tasks", "test", "loader_continuous_delta", "lag", run_id], env)
    said = behind.stdout + behind.stderr
    outputs.append(said)
    # (``tasks test`` exits 0 whatever the task did: its state is in the log.)
    assert "new_state=failed" in said and "LagError: source af is 3,6" in said, said[-3000:]
    assert "more than alert_lag_seconds (1,800 s)" in said

    # The source's password is nowhere: not in the task logs (with spark-submit's command lines),
    # nor in any file the runs left: staging files and manifests, the ledger, the warehouse and
    # its catalog, Spark's event logs, Airflow's database (XComs, rendered fields) and logs.
    assert list(events.iterdir())
    for text in outputs:
        assert mariadb.password not in text
    secret = mariadb.password.encode()
    for folder in (tmp_path, airflow_home):
        for path in folder.rglob("*"):
            if path.is_file():
                assert secret not in path.read_bytes(), path
