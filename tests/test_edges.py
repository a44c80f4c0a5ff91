"""Source changes at the edges, on the private MariaDB and a local Spark: each is carried exactly
(the warehouse ends equal to the source) or stops the run with the table, the position, the
statement and the remedy, leaving the checkpoint where it was."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pymysql
import pytest

from loader.app import steps
from loader.core.config import Config
from loader.core.errors import ExtractError, LoaderError, MaterializeError
from loader.core.positions import Position
from loader.extract.interval import run_extract
from loader.staging.manifest import Manifest
from loader.state.ledger import Ledger
from loader.warehouse.compare import compare_tables
from loader.warehouse.initial_load import run_initial_load
from loader.warehouse.materialize import run_materialize
from loader.warehouse.tables import table_name
from tests.conftest import (
    TABLE_FORMATS,
    Loaded,
    MariaDB,
    MySQL,
    as_an_older_loader_left_it,
    assert_equal_to_source,
    delta,
    fresh_schema,
    quiet,
    schema_config,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]
# Each edge that reaches the warehouse on both table formats (the Hive catalog's legacy-table
# test on its own). What stops or is refused before the warehouse (in a plan, an extract, the
# staging's check) is the same on both: those tests run on the default format, and each format's
# re-load of a stopped table is tested by the widened-column and column-change tests. So do the
# edges of decoding and planning whose warehouse part another test runs on both formats (named
# at each).
both_formats = pytest.mark.parametrize("table_format", TABLE_FORMATS)
# The edges whose binlog MySQL writes otherwise than MariaDB run on both servers.
flavours = pytest.mark.parametrize("source", ["mariadb", "mysql"], indirect=True)


# The binlog's YEAR column and the integers after it are a decoding edge; each format's storage of
# YEAR and of unsigned integers is compared through a load and a merge by test_initial_load's
# test_loaded_values_equal_what_materialisation_writes and test_checksum's every-type test.
def test_a_year_column_does_not_shift_the_signedness_of_the_integers_after_it(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    cfg = loaded(
        "edge_year",
        ["t (id INT PRIMARY KEY, yr YEAR, qty INT UNSIGNED, d INT, tiny TINYINT UNSIGNED, s SMALLINT)"],
        ["INSERT INTO edge_year.t VALUES (1, 2024, 1, 1, 1, 1)"],
    )
    mariadb.execute(
        "INSERT INTO edge_year.t VALUES (2, 1999, 4294967295, -5, 255, -1), (3, 2155, 0, 2147483647, 128, 0)",
        "UPDATE edge_year.t SET d = -2147483648, tiny = 254 WHERE id = 1",
    )
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    # The table stays readable and exact through the next interval too.
    mariadb.execute("UPDATE edge_year.t SET qty = qty - 1, d = d + 1 WHERE id = 2")
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    assert Ledger.of(cfg).checkpoint().position == Ledger.of(cfg).intervals()[-1].end  # type: ignore[union-attr]


def _warehouse_types(spark: Any, cfg: Config, schema_name: str, table: str) -> dict[str, str]:
    schema = spark.table(table_name(cfg, schema_name, table)).schema
    return {f.name: f.dataType.simpleString() for f in schema.fields}


@both_formats
def test_a_widened_column_is_carried_and_a_changed_one_stops_until_the_table_is_reloaded(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded, table_format: str
) -> None:
    cfg = loaded(
        "edge_type",
        ["t (id INT PRIMARY KEY, a INT, b DATETIME(6), c DECIMAL(10,2))", "u (id INT PRIMARY KEY, v INT)"],
        [
            "INSERT INTO edge_type.t VALUES (1, -1, '2024-01-01 10:00:00.5', 1.25), (2, 2, NULL, NULL)",
            "INSERT INTO edge_type.u VALUES (1, 1)",
        ],
    )

    # Widening keeps every value: carried, and the warehouse column widens in place (Parquet's
    # readers also scale a decimal; Iceberg keeps its scale, a scale change stops there).
    decimal = "decimal(14,4)" if table_format == "hive" else "decimal(14,2)"
    mariadb.execute(
        "UPDATE edge_type.t SET a = 7 WHERE id = 2",
        f"ALTER TABLE edge_type.t MODIFY a BIGINT, MODIFY c {decimal}",
        "INSERT INTO edge_type.t VALUES (3, 1099511627776, '2024-02-29 00:00:00', 12345678.1234)",
    )
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    assert _warehouse_types(spark, cfg, "edge_type", "t")["a"] == "bigint"
    assert _warehouse_types(spark, cfg, "edge_type", "t")["c"] == decimal

    # A type change that rewrites values stops extract at the statement, with the remedy.
    ledger = Ledger.of(cfg)
    checkpoint = ledger.checkpoint()
    mariadb.execute(
        "UPDATE edge_type.t SET a = a + 1 WHERE id = 1",
        "ALTER TABLE edge_type.t MODIFY b VARCHAR(40)",
        "INSERT INTO edge_type.t VALUES (4, 4, 'not a date', 4)",
        "INSERT INTO edge_type.u VALUES (2, 2)",
    )
    with pytest.raises(ExtractError) as stopped:
        steps.extract(cfg, progress=quiet)
    message = str(stopped.value)
    assert "edge_type.t changed in a way the loader cannot carry" in message
    assert "column b changed type from datetime(6) to varchar" in message
    assert "statement: ALTER TABLE edge_type.t MODIFY b VARCHAR(40)" in message
    assert message.endswith("re-load the table: loader initial-load --tables edge_type.t")
    assert re.match(r"mysql-bin\.\d+:\d+: ", message), message  # where in the binlog
    assert ledger.checkpoint() == checkpoint
    failed = steps.status(cfg).last_error
    assert failed is not None and "column b changed type" in failed.error

    # The remedy is one step; the other table's changes of the stopped interval still arrive.
    run_initial_load(spark, cfg, only=["edge_type.t"], progress=quiet)
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    assert _warehouse_types(spark, cfg, "edge_type", "t")["b"] == "string"
    assert steps.status(cfg).intervals["failed"] == 0

    # Changed between intervals: the ALTER comes in an interval without rows of the table, its
    # rows in a later one. Extract compares them with the columns the ledger recorded for it.
    mariadb.execute("ALTER TABLE edge_type.t MODIFY a VARCHAR(30)", "INSERT INTO edge_type.u VALUES (3, 3)")
    delta(spark, cfg)
    mariadb.execute(
        "UPDATE edge_type.t SET a = CONCAT('x', a) WHERE id = 3", "INSERT INTO edge_type.u VALUES (4, 4)"
    )
    checkpoint = ledger.checkpoint()
    with pytest.raises(ExtractError) as stopped:
        steps.extract(cfg, progress=quiet)
    message = str(stopped.value)
    assert re.match(
        r"mysql-bin\.\d+:\d+: edge_type\.t changed since its rows staged or loaded before", message
    )
    assert "column a changed type from bigint to varchar" in message
    assert message.endswith("re-load the table: loader initial-load --tables edge_type.t")
    assert ledger.checkpoint() == checkpoint

    # A ledger written by a loader that kept no columns cannot tell; materialise still refuses to
    # write values of another type, and the same remedy works.
    for interval in ledger.intervals():
        ledger.save(dataclasses.replace(interval, layouts=None))
    for load in ledger.loads():
        ledger.save_load(dataclasses.replace(load, layouts=None))
    run_extract(cfg, progress=quiet)
    with pytest.raises(
        MaterializeError, match=r"column a is bigint in the warehouse but the staged changes have string"
    ):
        run_materialize(spark, cfg)
    assert ledger.checkpoint() == checkpoint
    run_initial_load(spark, cfg, only=["edge_type.t"], progress=quiet)
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)


def _stopped(cfg: Config, *expected: str) -> str:
    """Extract stops with a message naming where, each ``expected`` text, and leaves the checkpoint."""
    checkpoint = Ledger.of(cfg).checkpoint()
    with pytest.raises(LoaderError) as stopped:
        steps.extract(cfg, progress=quiet)
    message = str(stopped.value)
    assert re.match(r"mysql-bin\.\d+:\d+", message), message  # where in the binlog
    for text in expected:
        assert text in message, message
    assert Ledger.of(cfg).checkpoint() == checkpoint
    failed = steps.status(cfg).last_error
    assert failed is not None and expected[0] in failed.error
    return message


def _reload_and_check(spark: Any, cfg: Config, *tables: str) -> None:
    """The one-step remedy, then a delta run: the warehouse equals the source again."""
    run_initial_load(spark, cfg, only=list(tables), progress=quiet)
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)
    assert steps.status(cfg).intervals["failed"] == 0


def test_dml_logged_as_statements_or_partial_rows_stops_until_the_table_is_reloaded(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    cfg = loaded(
        "edge_stmt",
        ["t (id INT PRIMARY KEY, v VARCHAR(20), n INT)", "u (id INT PRIMARY KEY)"],
        ["INSERT INTO edge_stmt.t VALUES (1, 'a', 1)", "INSERT INTO edge_stmt.u VALUES (1)"],
    )
    remedy = "then re-load the table: loader initial-load --tables edge_stmt.t"

    # A session that logs as STATEMENT: the insert arrives as its text, not as rows.
    mariadb.execute(
        "SET SESSION binlog_format = 'STATEMENT'",
        "INSERT INTO edge_stmt.t VALUES (2, 'b', 2)",
        "SET SESSION binlog_format = 'ROW'",
        "INSERT INTO edge_stmt.u VALUES (2)",
    )
    _stopped(
        cfg,
        "edge_stmt.t: the INSERT was logged as a statement",
        "(statement: INSERT INTO edge_stmt.t VALUES (2, 'b', 2))",
        "set binlog_format=ROW for every session that writes to it, " + remedy,
    )
    _reload_and_check(spark, cfg, "edge_stmt.t")

    # MIXED logs a deterministic update as a statement too.
    mariadb.execute(
        "SET SESSION binlog_format = 'MIXED'", "UPDATE edge_stmt.t SET v = 'c', n = n + 1 WHERE id = 1"
    )
    _stopped(cfg, "edge_stmt.t: the UPDATE was logged as a statement", "UPDATE edge_stmt.t SET v = 'c'")
    _reload_and_check(spark, cfg, "edge_stmt.t")

    # LOAD DATA logged as a statement is a query event of its own kind.
    data = tmp_path / "rows.tsv"
    data.write_text("3\td\t3\n4\te\t4\n")
    conn = pymysql.connect(
        host=mariadb.host,
        port=mariadb.port,
        user="app",
        password=mariadb.password,
        autocommit=True,
        local_infile=True,
        ssl_disabled=True,
    )
    with conn.cursor() as cur:
        cur.execute("SET SESSION binlog_format = 'STATEMENT'")
        cur.execute(f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE edge_stmt.t")
    conn.close()
    _stopped(cfg, "edge_stmt.t: the LOAD DATA was logged as a statement")
    _reload_and_check(spark, cfg, "edge_stmt.t")

    # A minimal row image lacks the columns an update did not change.
    mariadb.execute("SET SESSION binlog_row_image = 'MINIMAL'", "UPDATE edge_stmt.t SET n = 40 WHERE id = 4")
    _stopped(cfg, "a row image of edge_stmt.t lacks columns", "set binlog_row_image=FULL", remedy)
    _reload_and_check(spark, cfg, "edge_stmt.t")


# MySQL writes a DROP TABLE's text otherwise, and has no CREATE OR REPLACE: its binlog on one format.
@pytest.mark.parametrize(
    ("source", "table_format"),
    [("mariadb", "hive"), ("mariadb", "iceberg"), ("mysql", "iceberg")],
    indirect=["source"],
)
def test_ddl_in_every_spelling_is_carried_or_stops(
    source: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    fresh_schema(
        source,
        "edge_ddl",
        "t (id INT PRIMARY KEY, v VARCHAR(20))",
        "a (id INT PRIMARY KEY, v INT)",
        "k (id INT PRIMARY KEY)",
        "_x (id INT PRIMARY KEY)",
    )
    source.execute(
        "INSERT INTO edge_ddl.t VALUES (1, 'a'), (2, 'b')",
        "INSERT INTO edge_ddl.a VALUES (1, 1)",
        "INSERT INTO edge_ddl.k VALUES (1)",
    )
    cfg = schema_config(source, tmp_path, spark_config, "edge_ddl")
    cfg = dataclasses.replace(cfg, tables=dataclasses.replace(cfg.tables, exclude=("edge_ddl._*",)))
    run_initial_load(spark, cfg, progress=quiet)

    # A list whose first table is not selected still drops a selected one.
    source.execute(
        "INSERT INTO edge_ddl.k VALUES (2)",
        "DROP TABLE edge_ddl._x, edge_ddl.t",
    )
    _stopped(
        cfg,
        "edge_ddl.t: DROP TABLE cannot be carried",
        "(statement: DROP TABLE `edge_ddl`.`_x`,`edge_ddl`.`t`",
        "re-load the table: loader initial-load --tables edge_ddl.t once it exists again",
    )
    source.execute(
        "CREATE TABLE edge_ddl.t (id INT PRIMARY KEY, v VARCHAR(20))",
        "INSERT INTO edge_ddl.t VALUES (7, 'new')",
    )
    _reload_and_check(spark, cfg, "edge_ddl.t")

    # An online migration's swap, written in a versioned comment (which the server executes).
    source.execute(
        "CREATE TABLE edge_ddl._t_gho LIKE edge_ddl.t",
        "INSERT INTO edge_ddl._t_gho SELECT id, CONCAT(v, '-migrated') FROM edge_ddl.t",
        "/*!50000 RENAME TABLE edge_ddl.t TO edge_ddl._t_del, edge_ddl._t_gho TO edge_ddl.t */",
        "INSERT INTO edge_ddl.k VALUES (3)",
    )
    _stopped(cfg, "edge_ddl.t: a table was renamed to a selected name", "--tables edge_ddl.t")
    _reload_and_check(spark, cfg, "edge_ddl.t")

    if not isinstance(source, MySQL):
        # CREATE OR REPLACE keeps the name but not the rows.
        source.execute(
            "CREATE OR REPLACE TABLE edge_ddl.a (id INT PRIMARY KEY, v INT)",
            "INSERT INTO edge_ddl.a VALUES (5, 5)",
        )
        _stopped(cfg, "edge_ddl.a: CREATE OR REPLACE TABLE replaced the table", "--tables edge_ddl.a")
        _reload_and_check(spark, cfg, "edge_ddl.a")

    # A new table that matches the include patterns is carried: all its rows follow its CREATE.
    source.execute(
        "CREATE TABLE edge_ddl.n (id INT PRIMARY KEY, v INT)",
        "INSERT INTO edge_ddl.n VALUES (1, 1), (2, 2)",
        "ALTER TABLE edge_ddl.n ADD COLUMN w INT",
        "INSERT INTO edge_ddl.n VALUES (3, 3, 3)",
    )
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)


def test_a_backfill_start_past_the_read_log_is_refused_unless_the_gap_is_allowed(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    cfg = loaded(
        "edge_gap",
        ["t (id INT PRIMARY KEY, v INT)"],
        ["INSERT INTO edge_gap.t VALUES (1, 1)"],
    )
    ledger = Ledger.of(cfg)
    checkpoint = ledger.checkpoint()
    assert checkpoint is not None
    past = mariadb.execute("INSERT INTO edge_gap.t VALUES (2, 2)")
    mariadb.execute("INSERT INTO edge_gap.t VALUES (3, 3)")

    # Refused from the command line (exit 1, the reason last), a dry run and the step alike.
    toml = mariadb.config_file(tmp_path, cfg.source.name, "edge_gap.*")
    loader = str(Path(sys.executable).with_name("loader"))
    env = {**os.environ, "LOADER_TEST_PASSWORD": mariadb.password}
    refused = subprocess.run(
        [loader, "run-once", "--config", str(toml), "--from", str(past)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert refused.returncode == 1, refused.stdout + refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    assert f"the start {past} lies past {checkpoint.position}" in last and "--allow-gap" in last
    lognum, logpos = int(past.file.rsplit(".", 1)[1]), past.pos
    dry = subprocess.run(
        [
            loader,
            "run-once",
            "--config",
            str(toml),
            "--dry-run",
            "--lognum",
            str(lognum),
            "--logpos",
            str(logpos),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert dry.returncode == 1 and "lies past" in dry.stderr.strip().splitlines()[-1], dry.stderr
    with pytest.raises(LoaderError, match="would never reach the warehouse"):
        steps.plan(cfg, start=past, dry_run=True)
    with pytest.raises(LoaderError, match="would never reach the warehouse"):
        steps.plan(cfg, start=past)
    assert ledger.intervals() == [] and ledger.checkpoint() == checkpoint

    # Allowed explicitly: the skipped range is recorded and shown, and really is skipped.
    dry = steps.plan(cfg, start=past, dry_run=True, allow_gap=True)
    assert dry.skipped_from == str(checkpoint.position) and ledger.intervals() == []
    planned = steps.plan(cfg, start=past, allow_gap=True)
    assert planned.skipped_from == str(checkpoint.position)
    steps.extract(cfg, planned.interval, progress=quiet)
    run_materialize(spark, cfg)
    status = steps.status(cfg)
    assert status.gaps == [{"interval": planned.interval, "from": str(checkpoint.position), "to": str(past)}]
    assert f"gap allowed by the operator: [{checkpoint.position}, {past})" in status.text()
    warehouse = spark.sql(f"SELECT id FROM {table_name(cfg, 'edge_gap', 't')} ORDER BY id").collect()
    assert [r.id for r in warehouse] == [1, 3]  # row 2 was in the gap

    # A backfill from before the gap replays it: equal again.
    replay = steps.plan(cfg, start=checkpoint.position)
    assert replay.skipped_from is None
    steps.extract(cfg, replay.interval, progress=quiet)
    run_materialize(spark, cfg)
    assert_equal_to_source(spark, cfg)


def test_staging_changed_after_extract_is_refused_until_the_interval_is_extracted_again(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    cfg = loaded(
        "edge_stage",
        ["t (id INT PRIMARY KEY, v VARCHAR(20))", "u (id INT PRIMARY KEY)"],
        ["INSERT INTO edge_stage.t VALUES (1, 'a')", "INSERT INTO edge_stage.u VALUES (1)"],
    )
    mariadb.execute(
        "INSERT INTO edge_stage.t VALUES " + ", ".join(f"({i}, 'row {i}')" for i in range(2, 50)),
        "UPDATE edge_stage.t SET v = 'changed' WHERE id = 1",
        "INSERT INTO edge_stage.u VALUES (2), (3)",
    )
    summary = steps.extract(cfg, progress=quiet)
    assert summary is not None
    ledger = Ledger.of(cfg)
    checkpoint = ledger.checkpoint()
    root = Path(cfg.staging.uri.removeprefix("file:"))
    manifest = Manifest.from_json((root / summary.manifest).read_bytes())
    part = root / next(t for t in manifest.tables if t.table == "t").files[0].path

    def refused(*expected: str) -> None:
        with pytest.raises(LoaderError) as stopped:
            run_materialize(spark, cfg)
        message = str(stopped.value)
        assert message.startswith(f"interval {summary.interval}: "), message
        for text in expected:
            assert text in message, message
        assert message.endswith(f"loader extract --interval {summary.interval}"), message
        assert ledger.checkpoint() == checkpoint
        assert ledger.get(summary.interval).state == "extracted"  # type: ignore[union-attr]
        steps.extract(cfg, summary.interval, progress=quiet)  # the remedy rewrites the staging

    original = part.read_bytes()
    part.write_bytes(original[: original.rindex(b"\n", 0, len(original) - 1) + 1])  # the last row cut
    refused(f"edge_stage.t: staging file {manifest.tables[0].files[0].path}", "extract wrote")
    assert part.read_bytes() == original
    part.write_bytes(original.replace(b"row 2", b"row 9"))  # same size, other value
    refused("edge_stage.t", "was changed after extract (checksum differs)")
    # A manifest with a table taken out is not the one extract wrote.
    manifest_path = root / summary.manifest
    data = json.loads(manifest_path.read_bytes())
    data["tables"] = [t for t in data["tables"] if t["table"] != "u"]
    manifest_path.write_text(json.dumps(data))
    refused(f"its manifest {summary.manifest} is not the one extract wrote")
    part.unlink()
    refused(f"staging file {manifest.tables[0].files[0].path} is missing")

    run_materialize(spark, cfg)
    assert_equal_to_source(spark, cfg)


@both_formats
def test_column_changes_are_carried_when_rows_tell_everything_and_stop_otherwise(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    cfg = loaded(
        "edge_col",
        ["t (id INT PRIMARY KEY, v VARCHAR(20))", "u (id INT PRIMARY KEY)"],
        ["INSERT INTO edge_col.t VALUES (1, 'a'), (2, 'b')", "INSERT INTO edge_col.u VALUES (1)"],
    )

    # A nullable column without a default, at the end: existing rows are NULL there too.
    mariadb.execute("ALTER TABLE edge_col.t ADD COLUMN n INT", "INSERT INTO edge_col.t VALUES (3, 'c', 3)")
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)

    # Existing rows get the default on the source, with no row events: stop at the statement.
    mariadb.execute(
        "ALTER TABLE edge_col.t ADD COLUMN d INT NOT NULL DEFAULT 7",
        "INSERT INTO edge_col.u VALUES (2)",
    )
    _stopped(
        cfg,
        "edge_col.t: ALTER TABLE added d with a value for the rows already there",
        "(statement: ALTER TABLE edge_col.t ADD COLUMN d INT NOT NULL DEFAULT 7)",
        "re-load the table: loader initial-load --tables edge_col.t",
    )
    _reload_and_check(spark, cfg, "edge_col.t")

    # Dropped, renamed and first columns: stop at the statement, whichever interval the rows are in.
    for ddl, expected in [
        ("DROP COLUMN n", "ALTER TABLE drops column n, which the warehouse table cannot follow"),
        ("RENAME COLUMN v TO w", "ALTER TABLE renames column v to w, which"),
        ("CHANGE w vv VARCHAR(20)", "ALTER TABLE renames column w to vv, which"),
        ("ADD COLUMN f INT FIRST", "ALTER TABLE puts column f first, which"),
    ]:
        mariadb.execute(
            f"ALTER TABLE edge_col.t {ddl}", "INSERT INTO edge_col.u SELECT MAX(id) + 1 FROM edge_col.u"
        )
        _stopped(cfg, f"edge_col.t: {expected}", f"(statement: ALTER TABLE edge_col.t {ddl})")
        _reload_and_check(spark, cfg, "edge_col.t")

    # A column put AFTER another, not last: its rows no longer continue the columns the ledger
    # recorded for the table, and extract stops at them, with the statement.
    mariadb.execute(
        "ALTER TABLE edge_col.t ADD COLUMN a2 INT AFTER id",
        "INSERT INTO edge_col.t (id) VALUES (20)",
        "INSERT INTO edge_col.u SELECT MAX(id) + 1 FROM edge_col.u",
    )
    _stopped(
        cfg,
        "edge_col.t changed since its rows staged or loaded before in a way the loader cannot carry",
        "column vv became a2 (renamed or moved columns cannot be carried)",
        "(statement: ALTER TABLE edge_col.t ADD COLUMN a2 INT AFTER id)",
        "re-load the table: loader initial-load --tables edge_col.t",
    )
    _reload_and_check(spark, cfg, "edge_col.t")


# Planning's refusal of a table never loaded; each format's load of one table into a loaded
# warehouse and its new tables carried by a delta are tested by test_ddl_in_every_spelling.
def test_a_table_that_starts_matching_after_the_load_is_loaded_before_its_changes(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    fresh_schema(mariadb, "edge_new", "t (id INT PRIMARY KEY)", "late (id INT PRIMARY KEY, v INT)")
    mariadb.execute(
        "INSERT INTO edge_new.t VALUES (1)",
        "INSERT INTO edge_new.late VALUES " + ", ".join(f"({i}, {i})" for i in range(1, 21)),
    )
    everything = schema_config(mariadb, tmp_path, spark_config, "edge_new")
    only_t = dataclasses.replace(
        everything, tables=dataclasses.replace(everything.tables, include=("edge_new.t",))
    )
    run_initial_load(spark, only_t, progress=quiet)

    # The include patterns now select `late` too: its 20 older rows are not in the warehouse.
    mariadb.execute("UPDATE edge_new.late SET v = 0 WHERE id = 3", "INSERT INTO edge_new.t VALUES (2)")
    _stopped(
        everything,
        "edge_new.late has changes but was never loaded",
        "load it first: loader initial-load --tables edge_new.late",
    )
    _reload_and_check(spark, everything, "edge_new.late")

    # CREATE TABLE IF NOT EXISTS may have found the table there: the same refusal.
    mariadb.execute(
        "CREATE TABLE IF NOT EXISTS edge_new.maybe (id INT PRIMARY KEY)",
        "INSERT INTO edge_new.maybe VALUES (1)",
    )
    _stopped(everything, "edge_new.maybe has changes but was never loaded")
    _reload_and_check(spark, everything, "edge_new.maybe")

    # A plain CREATE TABLE makes an empty table: carried, in this interval and the next ones.
    mariadb.execute("CREATE TABLE edge_new.fresh (id INT PRIMARY KEY)")
    delta(spark, everything)
    mariadb.execute("INSERT INTO edge_new.fresh VALUES (1), (2)")
    delta(spark, everything)
    assert_equal_to_source(spark, everything)


@both_formats
def test_columns_named_like_the_loaders_own_are_carried_or_refused_by_name(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded, table_format: str
) -> None:
    # Named like the staging files' and the merge's own columns: carried.
    cfg = loaded(
        "edge_meta",
        [
            "t (id INT PRIMARY KEY, op CHAR(1), seqno BIGINT, row_id INT, commit_ts DATETIME,"
            " _rank INT, _action VARCHAR(10))"
        ],
        [
            "INSERT INTO edge_meta.t (id, op, seqno, row_id, commit_ts, _rank, _action)"
            " VALUES (1, 'D', 99, 7, '2000-01-01', 1, 'delete'), (2, 'I', 1, 1, NULL, 2, 'insert')"
        ],
    )
    mariadb.execute(
        "UPDATE edge_meta.t SET op = 'I', seqno = 0, _action = 'stale' WHERE id = 1",
        "DELETE FROM edge_meta.t WHERE id = 2",
        "INSERT INTO edge_meta.t (id, op, seqno, row_id) VALUES (3, 'D', -1, -1)",
    )
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)

    # Named like the warehouse table's own columns: refused by name, before anything is copied.
    mariadb.execute("CREATE TABLE edge_meta.bad (id INT PRIMARY KEY, _SeqNo INT)")
    with pytest.raises(LoaderError, match=r"edge_meta\.bad: column _SeqNo is named like the warehouse"):
        run_initial_load(spark, cfg, only=["edge_meta.bad"], progress=quiet)
    mariadb.execute("INSERT INTO edge_meta.bad VALUES (1, 1)")
    _stopped(cfg, "edge_meta.bad: column _SeqNo is named like the warehouse", "tables.exclude")

    # Named like one of Iceberg's metadata columns: refused on Iceberg tables, carried on Hive's.
    pos = loaded("edge_pos", ["keep (id INT PRIMARY KEY)"], [])
    mariadb.execute("CREATE TABLE edge_pos.t (id INT PRIMARY KEY, _Pos INT, _row_id INT)")
    refusal = "edge_pos.t: column _Pos is named like one of Iceberg's metadata columns"
    if table_format == "iceberg":
        with pytest.raises(LoaderError, match=refusal):
            run_initial_load(spark, pos, only=["edge_pos.t"], progress=quiet)
        mariadb.execute("INSERT INTO edge_pos.t VALUES (1, 1, 1)")
        _stopped(pos, refusal, '[warehouse] format = "hive"')
    else:
        run_initial_load(spark, pos, only=["edge_pos.t"], progress=quiet)
        mariadb.execute("INSERT INTO edge_pos.t VALUES (1, 1, 1)", "UPDATE edge_pos.t SET _Pos = 2")
        delta(spark, pos)
        assert_equal_to_source(spark, pos)


@both_formats
def test_tinyint_1_and_boolean_keep_their_numbers_in_the_load_and_the_deltas(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    # Connector/J reports TINYINT(1) as a boolean: 255 must not come back as -1, nor 2 as true.
    cfg = loaded(
        "edge_bool",
        ["t (id INT PRIMARY KEY, u TINYINT(1) UNSIGNED, s TINYINT(1), b BOOLEAN)"],
        [
            "INSERT INTO edge_bool.t VALUES (1, 255, -1, 2), (2, 0, 1, 0), (3, 1, -128, -1), (4, NULL, NULL, NULL)"
        ],
    )
    assert_equal_to_source(spark, cfg)
    loaded_rows = spark.sql(
        f"SELECT id, u, s, b FROM {table_name(cfg, 'edge_bool', 't')} ORDER BY id"
    ).collect()
    assert [tuple(r) for r in loaded_rows] == [
        (1, 255, -1, 2),
        (2, 0, 1, 0),
        (3, 1, -128, -1),
        (4, None, None, None),
    ]
    mariadb.execute("UPDATE edge_bool.t SET u = 254, s = 127, b = 3 WHERE id = 2")
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)


def _invalid_dates(spark: Any, cfg: Config, schema: str, table: str) -> dict[int, tuple[Any, ...]]:
    rows = spark.sql(
        f"SELECT id, d, dt, ts, _loader_invalid_dates FROM {table_name(cfg, schema, table)}"
    ).collect()
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}


@both_formats
def test_zero_and_partial_zero_dates_are_carried_as_their_text(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    cfg = loaded(
        "edge_zero",
        ["t (id INT PRIMARY KEY, d DATE, dt DATETIME(3), ts TIMESTAMP NULL, v INT)"],
        [
            "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
            "INSERT INTO edge_zero.t VALUES (1, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', 1), "
            "(2, '2024-00-00', '2024-01-00 10:00:00.5', NULL, 2), (3, '2024-02-30', '2024-02-30 23:59:59.999', "
            "'2024-01-01 00:00:00', 3), (4, '2024-05-06', '2024-05-06 07:08:09.010', '2024-05-06 07:08:09', 4)",
        ],
    )
    # The initial load: the typed columns are NULL where Spark has no such date, the text is kept.
    loaded_rows = _invalid_dates(spark, cfg, "edge_zero", "t")
    assert loaded_rows[1][:3] == (None, None, None)
    assert loaded_rows[1][3] == {
        "d": "0000-00-00",
        "dt": "0000-00-00 00:00:00.000",
        "ts": "0000-00-00 00:00:00",
    }
    assert loaded_rows[2][3] == {"d": "2024-00-00", "dt": "2024-01-00 10:00:00.500"}
    assert loaded_rows[3][3] == {"d": "2024-02-30", "dt": "2024-02-30 23:59:59.999"}
    assert loaded_rows[4][3] is None and str(loaded_rows[4][0]) == "2024-05-06"
    assert_equal_to_source(spark, cfg)

    # Changes: into and out of invalid dates, through the binlog.
    mariadb.execute(
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
        "INSERT INTO edge_zero.t VALUES (5, '2025-00-01', '0000-00-00 00:00:00', '0000-00-00 00:00:00', 5)",
        "UPDATE edge_zero.t SET d = '2025-01-01' WHERE id = 1",
        "UPDATE edge_zero.t SET dt = '2024-04-31 00:00:00' WHERE id = 4",
    )
    delta(spark, cfg)
    changed = _invalid_dates(spark, cfg, "edge_zero", "t")
    assert str(changed[1][0]) == "2025-01-01"
    assert changed[1][3] == {"dt": "0000-00-00 00:00:00.000", "ts": "0000-00-00 00:00:00"}
    assert changed[4][3] == {"dt": "2024-04-31 00:00:00.000"}
    assert changed[5][3] == {"d": "2025-00-01", "dt": "0000-00-00 00:00:00.000", "ts": "0000-00-00 00:00:00"}
    assert_equal_to_source(spark, cfg)
    # `loader compare` shows them as the source does, and finds the table equal.
    [compared] = compare_tables(spark, cfg)
    assert compared.equal, compared
    assert compared.warehouse_sample[0][1:3] == ["2025-01-01", "0000-00-00 00:00:00.000"]


@pytest.mark.parametrize("table_format", ["hive"])  # an earlier loader's tables were Hive's
def test_a_table_made_before_the_invalid_dates_column_gets_it(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    cfg = loaded(
        "edge_olddates",
        ["t (id INT PRIMARY KEY, d DATE)"],
        ["INSERT INTO edge_olddates.t VALUES (1, '2024-01-01'), (2, '0000-00-00')"],
    )
    # As an earlier loader left it in the catalog: no _loader_invalid_dates.
    as_an_older_loader_left_it(
        spark,
        cfg.warehouse.database,
        "edge_olddates__t",
        "id INT, d DATE, _seqno BIGINT, _commit_ts TIMESTAMP",
    )
    mariadb.execute("INSERT INTO edge_olddates.t VALUES (3, '0000-00-00')")
    delta(spark, cfg)
    rows = {
        r[0]: r[1]
        for r in spark.sql(
            f"SELECT id, _loader_invalid_dates FROM {cfg.warehouse.database}.edge_olddates__t"
        ).collect()
    }
    assert rows[3] == {"d": "0000-00-00"}
    assert_equal_to_source(spark, cfg)


def test_schema_changes_stop_stops_at_every_schema_change_until_the_table_is_reloaded(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, loaded: Loaded
) -> None:
    evolving = loaded(
        "edge_review",
        ["t (id INT PRIMARY KEY, v INT)", "u (id INT PRIMARY KEY)"],
        ["INSERT INTO edge_review.t VALUES (1, 1)", "INSERT INTO edge_review.u VALUES (1)"],
    )
    cfg = dataclasses.replace(evolving, tables=dataclasses.replace(evolving.tables, schema_changes="stop"))
    # A change "evolve" carries (a nullable column at the end) stops under "stop".
    mariadb.execute(
        "ALTER TABLE edge_review.t ADD COLUMN w INT",
        "INSERT INTO edge_review.t VALUES (2, 2, 2)",
        "INSERT INTO edge_review.u VALUES (2)",
    )
    _stopped(
        cfg,
        'edge_review.t: tables.schema_changes = "stop" stops at every schema change (ALTER TABLE)',
        "(statement: ALTER TABLE edge_review.t ADD COLUMN w INT)",
        "review the change, then re-load the table: loader initial-load --tables edge_review.t",
    )
    _reload_and_check(spark, cfg, "edge_review.t")
    # So does a new table the patterns select.
    mariadb.execute("CREATE TABLE edge_review.n (id INT PRIMARY KEY)", "INSERT INTO edge_review.n VALUES (1)")
    _stopped(cfg, 'edge_review.n: tables.schema_changes = "stop" stops at every schema change (CREATE TABLE)')
    _reload_and_check(spark, cfg, "edge_review.n")


@flavours  # (MySQL logs savepoints otherwise; its GTID consistency keeps non-transactional tables out)
def test_rows_undone_by_rollback_to_savepoint_are_not_applied_beside_non_transactional_tables(
    source: MariaDB, spark: Any, loaded: Loaded
) -> None:
    """A transaction that also changes non-transactional tables (MyISAM, Aria) is logged with
    its SAVEPOINT and ROLLBACK TO statements among its rows: the rows they undid are not
    applied; the non-transactional tables keep what the source kept. (MySQL with GTIDs refuses
    non-transactional changes inside a transaction: there the transactional ones alone.)"""
    mixed = not isinstance(source, MySQL)
    cfg = loaded(
        "edge_savepoint",
        [
            "i (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
            *(
                ["m (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "a (id INT PRIMARY KEY, v INT) ENGINE=Aria"]
                * mixed
            ),
        ],
        [
            "INSERT INTO edge_savepoint.i VALUES (1, 1), (2, 2), (3, 3)",
            *(
                ["INSERT INTO edge_savepoint.m VALUES (1, 1)", "INSERT INTO edge_savepoint.a VALUES (1, 1)"]
                * mixed
            ),
        ],
    )
    transactions = [
        # Nested savepoints, the inner undone, then the outer (which undoes the inner's too); a
        # released one keeps its rows; a savepoint set again under an old name moves it.
        [
            "UPDATE i SET v = 10 WHERE id = 1",
            "SAVEPOINT s1",
            "UPDATE i SET v = 20 WHERE id = 2",
            "INSERT INTO m VALUES (2, 2)",
            "SAVEPOINT s2",
            "INSERT INTO i VALUES (4, 4)",
            "DELETE FROM i WHERE id = 3",
            "ROLLBACK TO SAVEPOINT s2",
            "INSERT INTO a VALUES (2, 2)",
            "UPDATE i SET v = 21 WHERE id = 2",
            "ROLLBACK TO SAVEPOINT s1",
            "INSERT INTO i VALUES (5, 5)",
            "SAVEPOINT s3",
            "INSERT INTO i VALUES (6, 6)",
            "RELEASE SAVEPOINT s3",
            "SAVEPOINT s1",
            "UPDATE i SET v = 50 WHERE id = 5",
            "UPDATE m SET v = 50 WHERE id = 1",
            "ROLLBACK TO s1",
            "UPDATE i SET v = 51 WHERE id = 1",
            "COMMIT",
        ],
        # Rolled back whole: the non-transactional changes stay.
        ["UPDATE i SET v = -1", "INSERT INTO m VALUES (3, 3)", "UPDATE a SET v = 9", "ROLLBACK"],
        # A savepoint at the start, rolled back to: MariaDB logs the undone rows as a group of
        # their own that ends in ROLLBACK.
        [
            "SAVEPOINT z",
            "INSERT INTO i VALUES (7, 7)",
            "INSERT INTO m VALUES (4, 4)",
            "ROLLBACK TO SAVEPOINT z",
            "INSERT INTO i VALUES (8, 8)",
            "COMMIT",
        ],
    ]
    conn = source.connect(database="edge_savepoint")
    try:
        with conn.cursor() as cur:
            for statements in transactions:
                cur.execute("BEGIN")
                for statement in statements:
                    if mixed or not re.match(r"(INSERT INTO|UPDATE) [ma] ", statement):
                        cur.execute(statement)
    finally:
        conn.close()
    assert source.rows("SELECT id, v FROM edge_savepoint.i ORDER BY id") == [
        (1, 51),
        (2, 2),
        (3, 3),
        (5, 5),
        (6, 6),
        (8, 8),
    ]
    if mixed:
        assert source.rows("SELECT id, v FROM edge_savepoint.m ORDER BY id") == [
            (1, 50),
            (2, 2),
            (3, 3),
            (4, 4),
        ]
        assert source.rows("SELECT id, v FROM edge_savepoint.a ORDER BY id") == [(1, 9), (2, 9)]
    # A table created with its rows is logged as one group too: the statement, then the rows.
    source.execute(
        "CREATE TABLE edge_savepoint.c (PRIMARY KEY (id)) ENGINE=InnoDB SELECT id, v FROM edge_savepoint.i",
        *["CREATE TABLE edge_savepoint.d (PRIMARY KEY (id)) ENGINE=MyISAM SELECT id, v FROM edge_savepoint.m"]
        * mixed,
    )
    delta(spark, cfg)
    assert_equal_to_source(spark, cfg)


@flavours  # (a MySQL transaction begins with its GTID event, a MariaDB one with its GTID's BEGIN)
def test_a_transaction_longer_than_a_read_run_across_a_range_cut_is_applied_once(
    source: MariaDB, spark: Any, loaded: Loaded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DAG's extract (the server's stream, spooled into ranges for two processes) of an
    interval where a transaction several read runs long spans where a range would be cut: the
    cut moves past it, and the rows before, in and after it reach the warehouse once, in order."""
    from loader.binlog.transport import RUN_BYTES
    from loader.extract import decode

    monkeypatch.setattr(decode, "PARALLEL_FROM_BYTES", 0)  # ~1 MB of binlog here
    cfg = loaded(
        "edge_long_txn",
        ["t (id INT PRIMARY KEY, v LONGTEXT, n INT)"],
        ["INSERT INTO edge_long_txn.t VALUES (0, 'loaded', 0), (1, 'loaded', 1)"],
    )
    table = "edge_long_txn.t"
    before = source.execute(
        f"UPDATE {table} SET n = 10 WHERE id = 0", f"INSERT INTO {table} VALUES (2, 'x', 2)"
    )
    rows = 4 * RUN_BYTES // 40_000
    after_long = source.execute(
        "BEGIN",
        *(f"INSERT INTO {table} VALUES ({i}, REPEAT('v', 40000), {i})" for i in range(3, rows)),
        f"UPDATE {table} SET n = 20 WHERE id = 2",  # changed again after the range before it
        f"DELETE FROM {table} WHERE id = 1",
        "COMMIT",
    )
    source.execute(
        f"UPDATE {table} SET v = 'short', n = -n WHERE id BETWEEN 3 AND 5",  # rows of the long one
        f"DELETE FROM {table} WHERE id = 6",
        f"INSERT INTO {table} VALUES (1, 'back', 1)",
    )
    said: list[str] = []
    summary = run_extract(cfg, workers=2, progress=said.append)
    ranges = [re.search(r"range \d+ \((\S+) to (\S+),", line) for line in said]
    ends = [Position.parse(m.group(2)) for m in ranges if m]
    assert summary is not None and len(ends) > 1, said
    # No range ends inside the long transaction: each ends before it began or after it committed.
    assert all(end <= before or end >= after_long for end in ends), (ends, before, after_long)
    run_materialize(spark, cfg)
    assert_equal_to_source(spark, cfg)
