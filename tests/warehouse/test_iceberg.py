"""Iceberg warehouse tables on a real local Spark: the initial load and the delta intervals from
the private MariaDB land as Iceberg snapshots, one per interval, merged on read, equal to the
source value for value."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loader.core.config import Config
from loader.extract.interval import run_extract
from loader.state.ledger import Ledger
from loader.warehouse import iceberg, materialize
from loader.warehouse.initial_load import run_initial_load
from loader.warehouse.materialize import run_materialize
from tests.conftest import (
    MariaDB,
    assert_equal_to_source,
    dags_test,
    fresh_schema,
    iceberg_catalog_of,
    iceberg_rows,
    iceberg_snapshot_summaries,
    loader_dag_env,
    maintain,
    quiet,
    run_state,
    schema_config,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def iceberg_config(mariadb: MariaDB, tmp_path: Path, spark_config: Config, schema: str) -> Config:
    cfg = schema_config(mariadb, tmp_path, spark_config, schema)
    return dataclasses.replace(cfg, warehouse=dataclasses.replace(cfg.warehouse, format="iceberg"))


def snapshots(spark: Any, table: str) -> list[dict[str, str]]:
    """The summaries of the table's current snapshot and its ancestors, oldest first."""
    rows = spark.sql(
        f"SELECT s.summary FROM {table}.history h JOIN {table}.snapshots s USING (snapshot_id) "
        "WHERE h.is_current_ancestor ORDER BY h.made_current_at"
    ).collect()
    return [dict(r.summary) for r in rows]


def test_intervals_land_as_one_merge_on_read_snapshot_each_and_equal_the_source(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ice.t's merges run as a large table's (adaptive execution), ice.c's as a small one's; both
    # read their changes with Spark's CSV reader, as a table of many changes does.
    monkeypatch.setattr(iceberg, "SMALL_MERGE_ROWS", 20)
    monkeypatch.setattr(materialize, "LOCAL_READ_ROWS", 0)
    merged_as: list[tuple[str, bool]] = []
    merge_changes = iceberg.merge_changes

    def seen(spark: Any, name: str, *args: Any, small: bool = False, **kwargs: Any) -> Any:
        merged_as.append((name, small))
        return merge_changes(spark, name, *args, small=small, **kwargs)

    monkeypatch.setattr(iceberg, "merge_changes", seen)
    fresh_schema(
        mariadb,
        "ice",
        "t (id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(10,2), d DATETIME(6), s TINYINT)",
        "c (a VARCHAR(10), b INT, x TEXT, PRIMARY KEY (a, b))",
    )
    mariadb.execute(
        "INSERT INTO ice.t SELECT seq, CONCAT('v', seq), seq / 4, '2024-01-01 00:00:00.5', seq % 100 "
        "FROM ice.seq_1_to_60",
        "INSERT INTO ice.c VALUES ('x', 1, 'one'), ('x', 2, ''), ('y', 1, NULL)",
    )
    cfg = iceberg_config(mariadb, tmp_path, spark_config, "ice")
    load = run_initial_load(spark, cfg, progress=quiet)
    assert [r.rows for r in load.tables] == [3, 60]
    t = "iceberg.ice_wh.ice__t"
    (copied,) = snapshots(spark, t)
    assert copied["loader.load"] == load.load_id and copied["loader.source"] == cfg.source.name
    copy_files = {r.file_path for r in spark.sql(f"SELECT file_path FROM {t}.data_files").collect()}

    mariadb.execute(
        "UPDATE ice.t SET v = 'changed' WHERE id % 7 = 0",
        "UPDATE ice.t SET id = 100 WHERE id = 3",
        "DELETE FROM ice.t WHERE id BETWEEN 20 AND 24",
        "DELETE FROM ice.c WHERE a = 'x' AND b = 2",
        "INSERT INTO ice.c VALUES ('x', 2, 'back')",
    )
    assert run_extract(cfg, progress=quiet) is not None
    mariadb.execute("INSERT INTO ice.t VALUES (61, 'new', 1.25, '2025-02-03 04:05:06.000007', -5)")
    mariadb.execute("UPDATE ice.t SET v = 'twice' WHERE id = 14")
    assert run_extract(cfg, progress=quiet) is not None
    results = {r.table: r for r in run_materialize(spark, cfg)}
    c = "iceberg.ice_wh.ice__c"
    assert sorted((n.replace("`", ""), small) for n, small in merged_as) == [
        (c, True),
        (t, False),
        (t, False),
    ]
    # ids 7, 14, …, 56 updated (8, of which 21 then deleted) and 14 again; 3 moved to 100.
    assert (results["ice.t"].inserted, results["ice.t"].updated, results["ice.t"].deleted) == (2, 8, 6)
    assert_equal_to_source(spark, cfg)

    ledger = Ledger.of(cfg)
    first, second = ledger.intervals()
    assert [i.state for i in (first, second)] == ["materialised", "materialised"]
    merged = snapshots(spark, t)[1:]
    assert [(s["loader.interval"], s["loader.end"]) for s in merged] == [
        (first.id, str(first.effective_end)),
        (second.id, str(second.effective_end)),
    ]
    # Merge-on-read: each interval wrote its new rows and deletion vectors; the copy's data files
    # are all still there, none rewritten.
    assert [int(s["added-records"]) for s in merged] == [8, 2]  # 7 updated + id 100; 61 and 14
    assert [int(s.get("added-dvs", 0)) > 0 for s in merged] == [True, True]
    now = {r.file_path for r in spark.sql(f"SELECT file_path FROM {t}.data_files").collect()}
    assert copy_files <= now
    assert [r.col_name for r in spark.sql(f"DESCRIBE TABLE {t}").collect()][:5] == ["id", "v", "n", "d", "s"]

    # A backfill replaying the first interval's changes over the newer rows: every row the second
    # interval wrote is newer than the replayed change of its key and stays (the _seqno guard).
    replay = run_extract(cfg, start=first.start, end=first.effective_end, progress=quiet)
    assert replay is not None
    run_materialize(spark, cfg)
    assert spark.sql(f"SELECT v FROM {t} WHERE id = 14").collect()[0].v == "twice"
    assert_equal_to_source(spark, cfg)
    assert ledger.checkpoint().position == second.effective_end  # type: ignore[union-attr]

    # A re-load of one table replaces it in one snapshot; its history keeps the merges.
    mariadb.execute("UPDATE ice.t SET v = 'after' WHERE id = 1")
    reload = run_initial_load(spark, cfg, only=["ice.t"], progress=quiet)
    assert snapshots(spark, t)[-1]["loader.load"] == reload.load_id
    assert spark.sql(f"SHOW TBLPROPERTIES {t} ('format-version')").collect()[0].value == "3"
    assert spark.sql(f"SELECT count(*) FROM {t}.snapshots").collect()[0][0] == 5
    assert run_extract(cfg, progress=quiet) is not None
    run_materialize(spark, cfg)
    assert_equal_to_source(spark, cfg)

    # Another engine reads the same rows: pyiceberg, no Spark, through the embedded catalog's
    # SQLite file (deletion vectors applied).
    for table, columns, key in (("t", "id, v, n, d, s", "id"), ("c", "a, b, x", "a, b")):
        rows = [tuple(r) for r in iceberg_rows(cfg, "ice", table, columns.split(", "))]
        assert rows == sorted(mariadb.rows(f"SELECT {columns} FROM ice.{table} ORDER BY {key}")), table


def test_columns_added_and_widened_follow_the_source(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    fresh_schema(mariadb, "ice_ev", "t (id INT PRIMARY KEY, n INT, p DECIMAL(8,2), f FLOAT)")
    mariadb.execute("INSERT INTO ice_ev.t VALUES (1, 1, 1.5, 0.5), (2, 2, 2.5, 1.5)")
    cfg = iceberg_config(mariadb, tmp_path, spark_config, "ice_ev")
    run_initial_load(spark, cfg, progress=quiet)
    mariadb.execute(
        "ALTER TABLE ice_ev.t MODIFY n BIGINT, MODIFY p DECIMAL(12,2), MODIFY f DOUBLE, ADD COLUMN e VARCHAR(5)",
        "INSERT INTO ice_ev.t VALUES (3, 9000000000, 1234567890.25, 0.1, 'new')",
        "UPDATE ice_ev.t SET e = 'old' WHERE id = 1",
    )
    assert run_extract(cfg, progress=quiet) is not None
    run_materialize(spark, cfg)
    columns = {f.name: f.dataType.simpleString() for f in spark.table("iceberg.ice_ev_wh.ice_ev__t").schema}
    assert [columns[c] for c in ("n", "p", "f", "e")] == ["bigint", "decimal(12,2)", "double", "string"]
    assert_equal_to_source(spark, cfg)


def test_the_merge_reads_only_the_key_ranges_it_changes_and_misses_no_key_at_the_edges(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    # The merge narrows its read of the table to the key ranges (of partition_rows = 10 keys)
    # that hold a changed key; a key put in the wrong range would be inserted a second time.
    # Keys past 2**53 round as doubles, the last BIGINT has no next range, negative keys
    # round down.
    # Tables split by hash buckets are narrowed to their changed keys' first column's values
    # (s: text that SQL must quote and escape; d: a time, as its cast gives it).
    big, top = 2**53 + 1, 2**63 - 1
    fresh_schema(
        mariadb,
        "ice_keys",
        "t (id BIGINT PRIMARY KEY, v VARCHAR(10))",
        "s (k VARCHAR(20), n INT, v VARCHAR(10), PRIMARY KEY (k, n)) CHARACTER SET utf8mb4",
        "d (k DATETIME(6) PRIMARY KEY, v VARCHAR(10))",
    )
    keys = [-11, -10, -1, 0, 9, 10, 19, 40, big - 1, big, big + 1, top - 1, top]
    texts = ["it's", "back\\slash", "ü 🚀", "", "tab\tin", "x", "y"]
    times = ["2024-01-01 00:00:00.000001", "2024-01-01 00:00:00", "1970-01-01 00:00:00.5"]
    mariadb.execute(
        "INSERT INTO ice_keys.t VALUES " + ", ".join(f"({k}, 'old')" for k in keys),
        "INSERT INTO ice_keys.s VALUES "
        + ", ".join(f"({sql_text(k)}, {n}, 'old')" for k in texts for n in (1, 2)),
        "INSERT INTO ice_keys.d VALUES " + ", ".join(f"('{k}', 'old')" for k in times),
    )
    cfg = iceberg_config(mariadb, tmp_path, spark_config, "ice_keys")
    run_initial_load(spark, cfg, progress=quiet)
    changed = [-11, -1, 9, 10, big, big + 1, top]
    mariadb.execute(
        f"UPDATE ice_keys.t SET v = 'new' WHERE id IN ({', '.join(map(str, changed))})",
        f"DELETE FROM ice_keys.t WHERE id IN (-10, 19, {top - 1})",
        f"INSERT INTO ice_keys.t VALUES (-20, 'ins'), (1, 'ins'), ({big + 2}, 'ins')",
        f"UPDATE ice_keys.s SET v = 'new' WHERE k IN ({', '.join(sql_text(k) for k in texts[:5])}) AND n = 1",
        "DELETE FROM ice_keys.s WHERE k = 'x' AND n = 2",
        "INSERT INTO ice_keys.s VALUES ('new one', 1, 'ins'), ('it''s', 3, 'ins')",
        f"UPDATE ice_keys.d SET v = 'new' WHERE k IN ('{times[0]}', '{times[2]}')",
        f"DELETE FROM ice_keys.d WHERE k = '{times[1]}'",
    )
    assert run_extract(cfg, progress=quiet) is not None
    run_materialize(spark, cfg)
    assert spark.table("iceberg.ice_keys_wh.ice_keys__s").count() == len(texts) * 2 + 1
    rows = sorted((r.id, r.v) for r in spark.table("iceberg.ice_keys_wh.ice_keys__t").collect())
    expected = {k: "new" if k in changed else "old" for k in keys if k not in (-10, 19, top - 1)}
    expected.update({-20: "ins", 1: "ins", big + 2: "ins"})
    assert rows == sorted(expected.items())
    assert_equal_to_source(spark, cfg)


def sql_text(text: str) -> str:
    """A MariaDB string literal of ``text``."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def test_rollback_returns_tables_and_checkpoint_to_an_interval_and_the_later_ones_apply_again(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    from loader.core.errors import LedgerError
    from loader.warehouse.compare import compare_tables
    from loader.warehouse.rollback import run_rollback

    fresh_schema(mariadb, "ice_rb", "t (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.execute("INSERT INTO ice_rb.t SELECT seq, 'v' FROM ice_rb.seq_1_to_20")
    cfg = iceberg_config(mariadb, tmp_path, spark_config, "ice_rb")
    # Format version 2 here (position delete files, for readers without version 3): the same rule.
    cfg = dataclasses.replace(cfg, warehouse=dataclasses.replace(cfg.warehouse, iceberg_format_version=2))
    run_initial_load(spark, cfg, progress=quiet)
    t, n = "iceberg.ice_rb_wh.ice_rb__t", "iceberg.ice_rb_wh.ice_rb__n"

    def interval(*statements: str) -> None:
        mariadb.execute(*statements)
        assert run_extract(cfg, progress=quiet) is not None
        run_materialize(spark, cfg)

    interval("UPDATE ice_rb.t SET v = 'one' WHERE id <= 5", "DELETE FROM ice_rb.t WHERE id > 18")
    after_first = spark.sql(f"SELECT * FROM {t} ORDER BY id").collect()
    # A table created in the second interval: all its rows come from later intervals.
    interval(
        "CREATE TABLE ice_rb.n (id INT PRIMARY KEY, x INT)",
        "INSERT INTO ice_rb.n VALUES (1, 1), (2, 2)",
        "UPDATE ice_rb.t SET v = 'two' WHERE id <= 10",
    )
    interval("UPDATE ice_rb.n SET x = 20 WHERE id = 2", "DELETE FROM ice_rb.t WHERE id = 1")
    assert_equal_to_source(spark, cfg)
    for table in (t, n):
        assert spark.sql(f"SHOW TBLPROPERTIES {table} ('format-version')").collect()[0].value == "2"
    assert spark.sql(f"SELECT DISTINCT file_format FROM {t}.delete_files").collect()[0][0] == "PARQUET"
    ledger = Ledger.of(cfg)
    first, second, third = ledger.intervals()

    # Time travel first: the warehouse as it was after each interval, next to the source now.
    then = {c.table: c for c in compare_tables(spark, cfg, sample=1, as_of=first.id)}
    assert (then["ice_rb.t"].warehouse_rows, then["ice_rb.t"].source_rows) == (len(after_first), 17)
    assert then["ice_rb.t"].warehouse_sample == [[1, "one"]] and then["ice_rb.n"].warehouse_rows == 0
    assert [c.equal for c in compare_tables(spark, cfg, as_of=third.id)] == [True, True]

    done = run_rollback(spark, cfg, first.id)
    assert {r.table: (r.was, r.now) for r in done.tables} == {
        "iceberg.`ice_rb_wh`.`ice_rb__n`": (f"interval {third.id}", "empty"),
        "iceberg.`ice_rb_wh`.`ice_rb__t`": (f"interval {third.id}", f"interval {first.id}"),
    }
    assert done.reapply == [second.id, third.id] and done.checkpoint == str(first.effective_end)
    assert spark.sql(f"SELECT * FROM {t} ORDER BY id").collect() == after_first
    assert spark.sql(f"SELECT count(*) FROM {n}").collect()[0][0] == 0
    assert [i.state for i in ledger.intervals()] == ["materialised", "extracted", "extracted"]
    assert ledger.checkpoint().position == first.effective_end  # type: ignore[union-attr]
    again = run_rollback(spark, cfg, first.id)  # a rerun after a crash: nothing left to do
    assert [(r.was == r.now) for r in again.tables] == [True, True] and again.reapply == []

    # The next materialise applies the later intervals again, one snapshot each.
    run_materialize(spark, cfg)
    assert_equal_to_source(spark, cfg)
    assert [s.get("loader.interval") for s in snapshots(spark, t)][-3:] == [first.id, second.id, third.id]
    assert ledger.checkpoint().position == third.effective_end  # type: ignore[union-attr]

    # What cannot be done is refused before anything changes.
    mariadb.execute("UPDATE ice_rb.t SET v = 'four' WHERE id = 2")
    fourth = run_extract(cfg, progress=quiet)
    assert fourth is not None
    with pytest.raises(LedgerError, match=f"interval {fourth.interval} is extracted"):
        run_rollback(spark, cfg, fourth.interval)
    with pytest.raises(LedgerError, match=f"interval {fourth.interval} is extracted"):
        compare_tables(spark, cfg, as_of=fourth.interval)
    with pytest.raises(LedgerError, match="has no interval 99999999"):
        run_rollback(spark, cfg, "99999999")
    run_materialize(spark, cfg)
    reload = run_initial_load(spark, cfg, only=["ice_rb.t"], progress=quiet)
    with pytest.raises(
        LedgerError, match=f"the load {reload.load_id} copied ice_rb.t at .*after interval {third.id}"
    ):
        run_rollback(spark, cfg, third.id)
    assert_equal_to_source(spark, cfg)


def test_maintenance_compacts_away_the_deletes_and_expires_old_snapshots(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    from loader.core.errors import SnapshotError
    from loader.warehouse.compare import compare_tables
    from loader.warehouse.rollback import run_rollback

    fresh_schema(mariadb, "ice_mt", "t (id INT PRIMARY KEY, v INT)")
    mariadb.execute("INSERT INTO ice_mt.t SELECT seq, seq FROM ice_mt.seq_1_to_40")
    cfg = iceberg_config(mariadb, tmp_path, spark_config, "ice_mt")
    cfg = dataclasses.replace(
        cfg,
        maintenance=dataclasses.replace(
            cfg.maintenance, expire_after_hours=0, retain_last=1, min_input_files=2
        ),
    )
    run_initial_load(spark, cfg, progress=quiet)
    t = "iceberg.ice_mt_wh.ice_mt__t"
    for n in range(4):  # merge-on-read: each interval adds data files and deletion vectors
        mariadb.execute(
            f"UPDATE ice_mt.t SET v = v + 100 WHERE id % 4 = {n}",
            f"DELETE FROM ice_mt.t WHERE id = {n + 1}",
        )
        assert run_extract(cfg, progress=quiet) is not None
        run_materialize(spark, cfg)
    first, *_, last = Ledger.of(cfg).intervals()
    deletes_before = spark.sql(f"SELECT count(*) FROM {t}.files WHERE content <> 0").collect()[0][0]
    assert deletes_before > 0

    done = maintain(spark, cfg)
    (table,) = done.tables
    assert table.table == "iceberg.ice_mt_wh.ice_mt__t"
    assert table.delete_files == [deletes_before, 0] and table.data_files[1] < table.data_files[0]
    assert table.rewritten_files > 0 and table.snapshots[1] == 1  # retain_last = 1, all older expired
    assert_equal_to_source(spark, cfg)
    (kept,) = snapshots(spark, t)
    assert (kept["loader.maintenance"], kept["loader.compacts"]) == ("rewrite", last.id)
    assert (
        "delete"
        not in spark.sql(f"SELECT * FROM {t}.files").select("content").distinct().collect().__repr__()
    )

    # The compaction stands for the last interval; earlier states are gone, and said so.
    assert [c.equal for c in compare_tables(spark, cfg, as_of=last.id)] == [True]
    with pytest.raises(
        SnapshotError, match=f"oldest state it keeps is after interval {last.id} \\(compacted\\)"
    ):
        run_rollback(spark, cfg, first.id)
    # The next interval merges on top of the compaction as usual.
    mariadb.execute("UPDATE ice_mt.t SET v = 0 WHERE id = 40")
    assert run_extract(cfg, progress=quiet) is not None
    run_materialize(spark, cfg)
    assert_equal_to_source(spark, cfg)


def test_an_interval_committed_before_a_crash_is_not_merged_again(
    mariadb: MariaDB, tmp_path: Path, airflow_home: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loader.core.config import load_config
    from loader.core.crashpoints import AT_ENV

    fresh_schema(mariadb, "ice_crash", "k (id INT PRIMARY KEY, v INT)", "m (id INT PRIMARY KEY)")
    config = mariadb.config_file(
        tmp_path,
        "crash",
        "ice_crash.*",
        warehouse='format = "iceberg"',
        more='[spark]\nconf = { "spark.sql.shuffle.partitions" = "2" }\n',
    )
    cfg = load_config(config)
    loader = str(Path(sys.executable).with_name("loader"))
    monkeypatch.setenv(cfg.source.password_env, mariadb.password)
    # Without the test suite's choice of compiler (SPARK_SUBMIT_OPTS), the loader's own.
    env = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
    # The load and the merges that are not this test's subject (those killed and their reruns
    # are) run in the worker's session, on this config's catalog.
    with iceberg_catalog_of(spark, cfg):
        run_initial_load(spark, cfg)
    mariadb.execute(
        "INSERT INTO ice_crash.k SELECT seq, seq FROM ice_crash.seq_1_to_30",
        "UPDATE ice_crash.k SET v = v * 10",
        "INSERT INTO ice_crash.m VALUES (1), (2)",
    )
    extracted = subprocess.run(
        [loader, "extract", "--config", str(config)], capture_output=True, text=True, env=env
    )
    assert extracted.returncode == 0, extracted.stderr
    # Killed after the first table's snapshot committed, before the ledger heard of it.
    crashed = subprocess.run(
        [loader, "materialize", "--config", str(config)],
        capture_output=True,
        text=True,
        env={**env, AT_ENV: "materialize: after snapshot committed:1"},
    )
    assert crashed.returncode == 1 and "exit 137" in crashed.stderr
    ledger = Ledger.of(cfg)
    (interval,) = ledger.intervals()
    assert interval.state == "extracted"
    again = subprocess.run(
        [loader, "materialize", "--config", str(config)], capture_output=True, text=True, env=env
    )
    assert again.returncode == 0, again.stderr
    assert [i.state for i in ledger.intervals()] == ["materialised"]
    # A job over the few change rows into the loaded tables (empty when copied) is mostly its
    # start: its driver compiles with the quick compiler only.
    assert "(the JVM's quick compiler only)" in again.stderr
    # Each table's rows after the interval, the one merged before the crash too: how big the next
    # job over them is.
    assert ledger.intervals()[0].table_rows == [["ice_crash", "k", 30], ["ice_crash", "m", 2]]
    merges = [
        [s["loader.interval"], s["added-records"]]
        for s in iceberg_snapshot_summaries(cfg, "ice_crash", "k")
        if "loader.interval" in s
    ]
    assert merges == [[interval.id, "30"]]  # merged once, not again after the crash
    assert iceberg_rows(cfg, "ice_crash", "k", ["id", "v"]) == [[i, i * 10] for i in range(1, 31)]
    assert iceberg_rows(cfg, "ice_crash", "m", ["id"]) == [[1], [2]]

    # loader rollback, killed after the ledger went back and before the tables did: the rerun
    # finishes it, and the next materialise applies the later interval again.
    mariadb.execute("UPDATE ice_crash.k SET v = 0 WHERE id <= 3", "DELETE FROM ice_crash.m WHERE id = 1")
    assert run_extract(cfg, progress=quiet) is not None
    with iceberg_catalog_of(spark, cfg):
        run_materialize(spark, cfg)

    def both() -> list[list[int]]:
        zeros = [i for i, v in iceberg_rows(cfg, "ice_crash", "k", ["id", "v"]) if v == 0]
        return [zeros, [i for (i,) in iceberg_rows(cfg, "ice_crash", "m", ["id"])]]

    rollback = [loader, "rollback", "--to-interval", interval.id, "--config", str(config)]
    crashed = subprocess.run(
        rollback, capture_output=True, text=True, env={**env, AT_ENV: "rollback: after ledger rewound:1"}
    )
    assert crashed.returncode == 1 and "exit 137" in crashed.stderr
    assert [i.state for i in ledger.intervals()] == ["materialised", "extracted"]
    # The rerun, as on-call would do it from Airflow: the rollback DAG with the interval in its form.
    dag_env = loader_dag_env(airflow_home, config, mariadb, extra={cfg.source.password_env: mariadb.password})
    again = dags_test(dag_env, "loader_rollback", "2026-03-01", {"to_interval": interval.id})
    assert run_state(again) == "success", again[-3000:]
    second = ledger.intervals()[1].id
    assert f"2 of 2 tables returned to the state after interval {interval.id}" in again
    assert f"interval {second} → interval {interval.id}" in again
    assert both() == [[], [1, 2]]
    with iceberg_catalog_of(spark, cfg):
        run_materialize(spark, cfg)
    assert both() == [[1, 2, 3], [2]]


def test_a_tables_metadata_is_fetched_whole_in_pieces(spark: Any) -> None:
    # Longer than one piece, with names that are not ASCII (one outside the BMP: two Java chars).
    names = ["naïve ü", "emoji 🚀", *(f"column_{i:04d}" for i in range(600))]
    spark.sql("CREATE NAMESPACE IF NOT EXISTS iceberg.meta_json")
    columns = ", ".join(f"`{n}` STRING" for n in names)
    spark.sql(f"CREATE OR REPLACE TABLE iceberg.meta_json.t (id INT, {columns}) USING iceberg")
    metadata = iceberg.load_table(spark, "iceberg.meta_json.t").operations().current()
    whole = spark._jvm.org.apache.iceberg.TableMetadataParser.toJson(metadata)
    assert len(whole) > 3 * iceberg._REPLY_CHARS
    fetched = iceberg.metadata_json(spark, metadata)
    assert fetched.isascii()
    assert json.loads(fetched) == json.loads(whole)
    assert [f["name"] for f in json.loads(fetched)["schemas"][0]["fields"]][1:3] == names[:2]


def test_a_small_merge_reads_a_table_of_many_small_files_in_one_scan_task(spark: Any) -> None:
    # Each merge into a small table leaves a small data file (and deletion vectors): Iceberg's
    # adaptive split size, never below 16 MB, reads about four of them a task.
    name = "iceberg.scan_split.t"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS iceberg.scan_split")
    spark.sql(
        f"CREATE OR REPLACE TABLE {name} (id INT, v STRING) USING iceberg TBLPROPERTIES "
        "('format-version' = '3', 'write.update.mode' = 'merge-on-read')"
    )
    spark.sql(f"INSERT INTO {name} SELECT id, 'v' FROM range(100)")
    for i in range(12):
        spark.sql(f"UPDATE {name} SET v = 'u' WHERE id = {i}")
    now = iceberg.current_summaries(spark, name)[0]
    assert int(now["total-data-files"]) > 12  # the first rows, then a file a merge

    def scan_tasks() -> int:
        return int(spark.table(name).rdd.getNumPartitions())

    assert scan_tasks() > spark.sparkContext.defaultParallelism  # as Iceberg plans it by itself
    with iceberg.session_conf(spark, iceberg.small_merge_conf(spark, now)):
        assert scan_tasks() == 1  # a few KB of rows
        assert sorted(r.id for r in spark.table(name).where("v = 'u'").collect()) == list(range(12))
    # A split size the config sets is kept.
    with iceberg.session_conf(spark, {iceberg.SPLIT_SIZE: str(1 << 20)}):
        assert iceberg.SPLIT_SIZE not in iceberg.small_merge_conf(spark, now)
