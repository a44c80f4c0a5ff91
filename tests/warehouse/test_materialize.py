"""Materialisation on a real local Spark: staged intervals from the private MariaDB merged into
partitioned warehouse tables that equal the source, value for value."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from loader.core.config import Config, load_config
from loader.core.errors import MaterializeError
from loader.extract.interval import run_extract
from loader.state.ledger import Ledger
from loader.state.records import Checkpoint
from loader.warehouse import materialize
from loader.warehouse.materialize import at_once, run_materialize
from loader.warehouse.tables import WRITTEN_MARKER, table_name
from tests.conftest import TABLE_FORMATS, MariaDB, as_an_older_loader_left_it, derby_table_rows, quiet

pytestmark = [pytest.mark.integration, pytest.mark.slow]
# The merge rule on both table formats; partitions, versions and their swaps are Hive's.
both_formats = pytest.mark.parametrize("table_format", TABLE_FORMATS)


@pytest.fixture
def table_format() -> str:
    """The tests outside the matrix look at partitions, versions and swaps: Hive's."""
    return "hive"


def _checkpoint_now(mariadb: MariaDB, cfg: Config) -> Ledger:
    """Set the checkpoint at the server's current position, as an initial load would."""
    start = mariadb.execute()
    ledger = Ledger.of(cfg)
    ledger.set_checkpoint(Checkpoint(start, "initial-load"))
    return ledger


@pytest.fixture
def cfg(mariadb: MariaDB, tmp_path: Path, spark_config: Config) -> Config:
    base = mariadb.config(tmp_path, tables={"include": '["mat.*"]'})
    return dataclasses.replace(
        base,
        warehouse=dataclasses.replace(
            spark_config.warehouse, database="mat_wh", partition_rows=10, buckets=4
        ),
    )


def test_intervals_become_tables_equal_to_the_source(
    mariadb: MariaDB, cfg: Config, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Spark's CSV reader, as a table of many changes has them read (the other tests' tables are
    # read by the loader itself).
    monkeypatch.setattr(materialize, "LOCAL_READ_ROWS", 0)
    mariadb.execute(
        "DROP DATABASE IF EXISTS mat",
        "CREATE DATABASE mat",
        "CREATE TABLE mat.t (id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(10,2), d DATETIME(6))",
        "CREATE TABLE mat.c (a VARCHAR(10), b INT, x TEXT, PRIMARY KEY (a, b))",
    )
    _checkpoint_now(mariadb, cfg)
    mariadb.execute(
        "INSERT INTO mat.t SELECT seq, CONCAT('v', seq), seq / 4, '2024-01-01 00:00:00.5' FROM mat.seq_1_to_45",
        "INSERT INTO mat.c VALUES ('x', 1, 'one'), ('x', 2, ''), ('y', 1, NULL)",
    )
    assert run_extract(cfg, progress=lambda _: None) is not None
    mariadb.execute(
        "UPDATE mat.t SET v = 'changed' WHERE id % 7 = 0",
        "UPDATE mat.t SET id = 100 WHERE id = 3",
        "DELETE FROM mat.t WHERE id BETWEEN 20 AND 29",
        "DELETE FROM mat.c WHERE a = 'x' AND b = 2",
        "INSERT INTO mat.c VALUES ('x', 2, 'back')",
    )
    # The second interval staged gzipped (``[staging] gzip``): Spark reads both kinds at once.
    gzipped = dataclasses.replace(cfg, staging=dataclasses.replace(cfg.staging, gzip=True))
    assert run_extract(gzipped, progress=lambda _: None) is not None
    assert len(list(Path(cfg.staging.uri.removeprefix("file://")).rglob("*.csv.gz"))) == 2  # a part a table
    results = run_materialize(spark, cfg)
    assert {r.table for r in results} == {"mat.t", "mat.c"}
    t_result = next(r for r in results if r.table == "mat.t")
    # Both intervals in one pass onto an empty table: 45 keys, 10 deleted, id 3 moved to 100.
    assert (t_result.inserted, t_result.updated, t_result.deleted) == (35, 0, 0)
    t = spark.sql("SELECT id, v, n, d FROM mat_wh.mat__t ORDER BY id").collect()
    assert [(r.id, r.v, r.n, str(r.d)) for r in t] == [
        (i, v, Decimal(str(n)), str(d))
        for i, v, n, d in mariadb.rows("SELECT id, v, n, d FROM mat.t ORDER BY id")
    ]
    c = spark.sql("SELECT a, b, x FROM mat_wh.mat__c ORDER BY a, b").collect()
    assert [tuple(r) for r in c] == mariadb.rows("SELECT a, b, x FROM mat.c ORDER BY a, b")
    # Integer keys are partitioned by ranges of partition_rows keys.
    parts = {r[0] for r in spark.sql("SHOW PARTITIONS mat_wh.mat__t").collect()}
    assert parts == {f"loader_partition={p}" for p in range(0, 5)} | {"loader_partition=10"}
    # Materialised: the checkpoint moved, nothing is pending, a second run changes nothing.
    ledger = Ledger.of(cfg)
    assert [i.state for i in ledger.intervals()] == ["materialised", "materialised"]
    assert ledger.checkpoint().position == ledger.intervals()[-1].end  # type: ignore[union-attr]
    assert run_materialize(spark, cfg) == []
    # Extracting a materialised interval again (a cleared task rerun) leaves it materialised.
    assert run_extract(cfg, interval_id=ledger.intervals()[0].id, progress=lambda _: None) is not None
    assert [i.state for i in ledger.intervals()] == ["materialised", "materialised"]


@both_formats
def test_applying_the_same_intervals_again_gives_the_same_table(
    mariadb: MariaDB, cfg: Config, spark: Any
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS mat",
        "CREATE DATABASE mat",
        "CREATE TABLE mat.r (id INT PRIMARY KEY, v INT)",
    )
    ledger = _checkpoint_now(mariadb, cfg)
    mariadb.execute(
        "INSERT INTO mat.r SELECT seq, seq FROM mat.seq_1_to_30",
        "UPDATE mat.r SET v = 0 WHERE id > 25",
    )
    assert run_extract(cfg, progress=lambda _: None) is not None
    run_materialize(spark, cfg)
    first = spark.sql(f"SELECT * FROM {table_name(cfg, 'mat', 'r')} ORDER BY id").collect()
    mariadb.execute("UPDATE mat.r SET v = -1 WHERE id <= 2", "DELETE FROM mat.r WHERE id = 30")
    assert run_extract(cfg, progress=lambda _: None) is not None
    (result,) = run_materialize(spark, cfg)
    assert (result.inserted, result.updated, result.deleted) == (0, 2, 1)
    first = spark.sql(f"SELECT * FROM {table_name(cfg, 'mat', 'r')} ORDER BY id").collect()
    for interval in ledger.intervals():
        interval.state = "extracted"
        ledger.save(interval)
    run_materialize(spark, cfg)
    again = spark.sql(f"SELECT * FROM {table_name(cfg, 'mat', 'r')} ORDER BY id").collect()
    assert again == first and len(first) == 29


@both_formats
def test_every_row_carries_the_change_that_wrote_it_and_older_tables_get_those_columns(
    mariadb: MariaDB, cfg: Config, spark: Any, table_format: str
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS mat",
        "CREATE DATABASE mat",
        "CREATE TABLE mat.m (id INT PRIMARY KEY, v VARCHAR(10))",
    )
    ledger = _checkpoint_now(mariadb, cfg)
    mariadb.execute("INSERT INTO mat.m VALUES (1, 'a'), (2, 'a'), (3, 'a')")
    assert run_extract(cfg, progress=quiet) is not None
    name = table_name(cfg, "mat", "m")
    if table_format == "iceberg":
        run_materialize(spark, cfg)
    mariadb.execute(  # each statement its own transaction
        "UPDATE mat.m SET v = 'b' WHERE id = 1",
        "UPDATE mat.m SET v = 'c' WHERE id = 1",
        "DELETE FROM mat.m WHERE id = 2",
        "INSERT INTO mat.m VALUES (2, 'again')",
        "UPDATE mat.m SET id = 30 WHERE id = 3",
        "INSERT INTO mat.m VALUES (4, 'new')",
        "UPDATE mat.m SET v = 'newer' WHERE id = 4",
    )
    assert run_extract(cfg, progress=quiet) is not None
    run_materialize(spark, cfg)  # Hive: both intervals in one pass; Iceberg: the second

    def changes() -> dict[int, tuple[Any, ...]]:
        rows = spark.sql(f"SELECT id, v, _op, _seqno, _rowno, _commit_ts, _interval, _loaded_at FROM {name}")
        return {r.id: tuple(r)[1:] for r in rows.collect()}

    _, second = ledger.intervals()
    merged = changes()
    # u: the key had a row before the change's transaction; c: it had none (deleted before, or
    # a new key); the row of an update is its after image, the second change row.
    assert {k: (v, op, row_id, interval) for k, (v, op, _, row_id, _, interval, _) in merged.items()} == {
        1: ("c", "u", 1, second.id),
        2: ("again", "c", 0, second.id),
        4: ("newer", "u", 1, second.id),
        30: ("a", "c", 1, second.id),
    }
    assert merged[1][2] < merged[2][2] < merged[30][2] < merged[4][2]  # seqnos in log order
    assert len({row[6] for row in merged.values()}) == 1  # one merge, one time
    assert all(row[4] is not None and row[6] is not None for row in merged.values())
    # A backfill applies the same changes again in a new interval: nothing is rewritten, the
    # rows keep the interval and the time that wrote them.
    first, _ = ledger.intervals()
    assert run_extract(cfg, start=first.start, progress=quiet) is not None
    run_materialize(spark, cfg)
    assert len(ledger.intervals()) == 3 and changes() == merged

    # A table an older loader made has none of these columns but _seqno and _commit_ts: they
    # are added, NULL in its older rows.
    if table_format == "hive":
        as_an_older_loader_left_it(
            spark,
            cfg.warehouse.database,
            "mat__m",
            "id INT, v STRING, _seqno BIGINT, _commit_ts TIMESTAMP, _loader_invalid_dates MAP<STRING, STRING>",
        )
    else:
        spark.sql(f"ALTER TABLE {name} DROP COLUMNS (_op, _rowno, _interval, _loaded_at)")
    mariadb.execute("INSERT INTO mat.m VALUES (5, 'five')")
    assert run_extract(cfg, progress=quiet) is not None
    run_materialize(spark, cfg)
    after = changes()
    assert (after[5][1], after[5][3], after[5][5]) == ("c", 0, ledger.intervals()[-1].id)
    assert after[1][2] == merged[1][2]  # the older rows keep their seqno
    if table_format == "iceberg":  # (a Hive table's files still hold what this loader wrote)
        assert after[1][1] is None and after[1][5] is None
    assert {k: v[0] for k, v in after.items()} == dict(mariadb.rows("SELECT id, v FROM mat.m"))


@both_formats
def test_a_column_added_at_the_end_appears_with_nulls_for_older_rows(
    mariadb: MariaDB, cfg: Config, spark: Any
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS mat",
        "CREATE DATABASE mat",
        "CREATE TABLE mat.e (id INT PRIMARY KEY, a INT)",
    )
    _checkpoint_now(mariadb, cfg)
    mariadb.execute("INSERT INTO mat.e VALUES (1, 1), (2, 2)")
    assert run_extract(cfg, progress=lambda _: None) is not None
    run_materialize(spark, cfg)
    mariadb.execute(
        "ALTER TABLE mat.e ADD COLUMN note VARCHAR(20) NULL",
        "INSERT INTO mat.e VALUES (3, 3, 'new')",
    )
    mariadb.execute("UPDATE mat.e SET note = 'set' WHERE id = 1")
    assert run_extract(cfg, progress=lambda _: None) is not None
    run_materialize(spark, cfg)
    rows = spark.sql(f"SELECT id, a, note FROM {table_name(cfg, 'mat', 'e')} ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [(1, 1, "set"), (2, 2, None), (3, 3, "new")]


def _write_config(cfg: Config, tmp_path: Path) -> Path:
    path = tmp_path / "loader.toml"
    path.write_text(
        f"""[source]
name = "{cfg.source.name}"
host = "{cfg.source.host}"
port = {cfg.source.port}
user = "{cfg.source.user}"
password_env = "{cfg.source.password_env}"
[tables]
include = ["mat.*"]
[staging]
uri = "{cfg.staging.uri}"
[warehouse]
format = "{cfg.warehouse.format}"
database = "crash_wh"
dir = "{tmp_path / "job-warehouse"}"
partition_rows = 10
swap_batch = 2
[spark]
master = "local[2]"
conf = {{ "spark.sql.shuffle.partitions" = "2" }}
"""
    )
    return path


def test_a_crash_between_partition_swaps_is_repaired_by_running_again(
    mariadb: MariaDB, cfg: Config, spark: Any, tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    from loader.core.crashpoints import AT_ENV

    mariadb.execute(
        "DROP DATABASE IF EXISTS mat",
        "CREATE DATABASE mat",
        "CREATE TABLE mat.k (id INT PRIMARY KEY, v INT)",
    )
    ledger = _checkpoint_now(mariadb, cfg)
    mariadb.execute("INSERT INTO mat.k SELECT seq, seq FROM mat.seq_1_to_40", "UPDATE mat.k SET v = v * 10")
    assert run_extract(cfg, progress=lambda _: None) is not None
    config = _write_config(cfg, tmp_path)
    loader = str(Path(sys.executable).with_name("loader"))
    env = {
        **os.environ,
        cfg.source.password_env: mariadb.password,
        AT_ENV: "materialize: after catalog swap:1",
    }
    crashed = subprocess.run(
        [loader, "materialize", "--config", str(config)], capture_output=True, text=True, env=env
    )
    assert crashed.returncode == 1 and "exit 137" in crashed.stderr
    assert [i.state for i in ledger.intervals()] == ["extracted"]  # the checkpoint did not move
    job = load_config(config)
    half = derby_table_rows(spark, job, "mat__k", ["id", "v"])
    # The first swap call put in two of the five partitions, both at once: ids 1-9 and 10-19.
    assert half == [[i, i * 10] for i in range(1, 20)]
    env.pop(AT_ENV)
    again = subprocess.run(
        [loader, "materialize", "--config", str(config)], capture_output=True, text=True, env=env
    )
    assert again.returncode == 0, again.stderr
    assert derby_table_rows(spark, job, "mat__k", ["id", "v"]) == [[i, i * 10] for i in range(1, 41)]
    assert [i.state for i in ledger.intervals()] == ["materialised"]


def _version_folders(spark: Any, table: str) -> set[str]:
    location = next(
        str(r.data_type)
        for r in spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
        if r.col_name == "Location"
    )
    root = Path(unquote(location.removeprefix("file:"))) / "_versions"
    return {p.name for p in root.iterdir()} if root.exists() else set()


def test_superseded_versions_go_after_the_retention(
    mariadb: MariaDB, cfg: Config, spark: Any, tmp_path: Path
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS mat",
        "CREATE DATABASE mat",
        "CREATE TABLE mat.v (id INT PRIMARY KEY, v INT)",
    )
    # A location with a space: the catalog keeps it %-escaped, the file system does not.
    spark.sql("CREATE DATABASE IF NOT EXISTS mat_wh")
    spark.sql("DROP TABLE IF EXISTS mat_wh.mat__v")
    spark.sql(
        "CREATE TABLE mat_wh.mat__v (id INT, v INT, _seqno BIGINT, _commit_ts TIMESTAMP, "
        "loader_partition BIGINT) USING parquet PARTITIONED BY (loader_partition) "
        f"LOCATION '{tmp_path / 'spaced warehouse' / 'mat__v'}'"
    )
    _checkpoint_now(mariadb, cfg)
    mariadb.execute("INSERT INTO mat.v SELECT seq, seq FROM mat.seq_1_to_25")  # partitions 0, 1, 2
    assert run_extract(cfg, progress=lambda _: None) is not None
    run_materialize(spark, cfg)
    (first,) = _version_folders(spark, "mat_wh.mat__v")
    mariadb.execute("UPDATE mat.v SET v = 0 WHERE id < 10")  # partition 0 only
    assert run_extract(cfg, progress=lambda _: None) is not None
    run_materialize(spark, cfg)  # 24 hours' retention: the first version stays
    assert len(_version_folders(spark, "mat_wh.mat__v")) == 2
    # A version's age is its marker's (its files are new); folders an older loader wrote have
    # no marker, and their newest file tells.
    versions = tmp_path / "spaced warehouse" / "mat__v" / "_versions"
    two_days_ago = time.time() - 48 * 3600
    os.utime(versions / first / WRITTEN_MARKER, (two_days_ago, two_days_ago))
    for name, age in (("older-loader-old", two_days_ago), ("older-loader-new", time.time())):
        (versions / name / "loader_partition=0").mkdir(parents=True)
        for file in (versions / name / "loader_partition=0" / "part-0.parquet", versions / name):
            file.touch()
            os.utime(file, (age, age))
    mariadb.execute("UPDATE mat.v SET v = 1 WHERE id >= 10")  # partitions 1 and 2
    assert run_extract(cfg, progress=lambda _: None) is not None
    run_materialize(spark, cfg)
    # The first version no partition points at any more is gone; the second (partition 0) stays.
    kept = _version_folders(spark, "mat_wh.mat__v")
    assert first not in kept and "older-loader-old" not in kept and "older-loader-new" in kept
    assert len(kept) == 3
    rows = spark.sql("SELECT id, v FROM mat_wh.mat__v ORDER BY id").collect()
    assert [tuple(r) for r in rows] == mariadb.rows("SELECT id, v FROM mat.v ORDER BY id")


@both_formats
def test_a_planned_interval_blocks_the_ones_after_it(mariadb: MariaDB, cfg: Config, spark: Any) -> None:
    from loader.core.errors import MaterializeError

    mariadb.execute(
        "DROP DATABASE IF EXISTS mat",
        "CREATE DATABASE mat",
        "CREATE TABLE mat.b (id INT PRIMARY KEY)",
    )
    ledger = _checkpoint_now(mariadb, cfg)
    mariadb.execute("INSERT INTO mat.b VALUES (1)")
    assert run_extract(cfg, progress=lambda _: None) is not None
    mariadb.execute("INSERT INTO mat.b VALUES (2)")
    assert run_extract(cfg, progress=lambda _: None) is not None
    first, _ = ledger.intervals()
    first.state = "planned"  # as when its extraction failed half way
    ledger.save(first)
    with pytest.raises(MaterializeError, match=f"interval {first.id} is planned.*--interval {first.id}"):
        run_materialize(spark, cfg)
    assert [i.state for i in ledger.intervals()] == ["planned", "extracted"]
    assert not spark.catalog.tableExists(table_name(cfg, "mat", "b"))


def test_partitioning_is_set_per_table(mariadb: MariaDB, cfg: Config, spark: Any) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS mat",
        "CREATE DATABASE mat",
        "CREATE TABLE mat.small_ranges (id INT PRIMARY KEY)",
        "CREATE TABLE mat.hashed (k VARCHAR(10) PRIMARY KEY)",
    )
    _checkpoint_now(mariadb, cfg)
    mariadb.execute(
        "INSERT INTO mat.small_ranges SELECT seq FROM mat.seq_1_to_20",
        "INSERT INTO mat.hashed SELECT CONCAT('k', seq) FROM mat.seq_1_to_200",
    )
    assert run_extract(cfg, progress=lambda _: None) is not None
    wh = dataclasses.replace(
        cfg.warehouse, partition_rows_by_table={"mat.small_*": 4}, buckets_by_table={"mat.hashed": 2}
    )
    run_materialize(spark, dataclasses.replace(cfg, warehouse=wh))
    ranges = {r[0] for r in spark.sql("SHOW PARTITIONS mat_wh.mat__small_ranges").collect()}
    assert ranges == {f"loader_partition={p}" for p in range(6)}  # 1..20 in ranges of 4
    buckets = {r[0] for r in spark.sql("SHOW PARTITIONS mat_wh.mat__hashed").collect()}
    assert buckets == {"loader_partition=0", "loader_partition=1"}
    assert spark.sql("SELECT count(*) FROM mat_wh.mat__hashed").collect()[0][0] == 200


@both_formats
def test_a_table_of_another_source_is_refused_and_one_without_a_source_is_claimed(
    mariadb: MariaDB, cfg: Config, spark: Any
) -> None:
    from loader.core.errors import MaterializeError
    from loader.warehouse.initial_load import run_initial_load

    mariadb.execute(
        "DROP DATABASE IF EXISTS mat_own",
        "CREATE DATABASE mat_own",
        "CREATE TABLE mat_own.t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO mat_own.t VALUES (1, 1)",
    )
    mine = dataclasses.replace(cfg, tables=dataclasses.replace(cfg.tables, include=("mat_own.*",)))
    run_initial_load(spark, mine, progress=quiet)
    name = table_name(mine, "mat_own", "t")

    def rows() -> list[tuple[int, int]]:
        return [(r.id, r.v) for r in spark.sql(f"SELECT id, v FROM {name}").collect()]

    def owner() -> str | None:
        found = spark.sql(f"SHOW TBLPROPERTIES {name}").collect()
        return next((r.value for r in found if r.key == "loader.source"), None)

    assert owner() == mine.source.name
    # Another source of a deployment that selects the same table into the same database: its
    # merge and its load are refused, naming both sources, and the table keeps its rows.
    other = dataclasses.replace(mine, source=dataclasses.replace(mine.source, name="other_source"))
    _checkpoint_now(mariadb, other)
    mariadb.execute("UPDATE mat_own.t SET v = 2")
    assert run_extract(other, progress=quiet) is not None
    with pytest.raises(MaterializeError) as refused:
        run_materialize(spark, other)
    assert f"{name} holds the rows of source {mine.source.name!r}, not of 'other_source'" in str(
        refused.value
    )
    assert "Give one of them its own [warehouse] database in its source file" in str(refused.value)
    with pytest.raises(MaterializeError, match="two sources cannot share a warehouse table"):
        run_initial_load(spark, other, progress=quiet)
    assert rows() == [(1, 1)]
    # A table made before tables named their source is claimed by the source that merges into it.
    spark.sql(f"ALTER TABLE {name} UNSET TBLPROPERTIES ('loader.source')")
    assert owner() is None
    assert run_extract(mine, progress=quiet) is not None
    run_materialize(spark, mine)
    assert owner() == mine.source.name and rows() == [(1, 2)]


def test_merges_at_once_each_keep_their_own_settings_and_views_and_fail_in_order(spark: Any) -> None:
    """Tables merged at once (``[spark] merge_tables_at_once``) set their snapshot properties and
    name their views each in a session of its own; a failure is raised once every merge ended,
    the first in table order, as one after another would raise it."""
    together = threading.Barrier(2)

    def merge(value: int) -> Callable[[Any], tuple[str, int, str]]:
        def run(session: Any) -> tuple[str, int, str]:
            session.conf.set("spark.sql.shuffle.partitions", str(value))
            session.range(value).createOrReplaceTempView("changes")
            together.wait(timeout=120)  # both set before either reads
            return (
                session.conf.get("spark.sql.shuffle.partitions"),
                session.table("changes").count(),
                session.conf.get(late, "unset"),
            )

        return run

    # A setting the session got after it started (as a catalog's, switched in tests) is theirs too.
    late = "spark.sql.catalog.loader_test_late.marker"
    spark.conf.set(late, "set late")
    try:
        assert at_once(spark, 2, [merge(3), merge(5)]) == [("3", 3, "set late"), ("5", 5, "set late")]
    finally:
        spark.conf.unset(late)
    ended: list[str] = []

    def fails(name: str) -> Callable[[Any], None]:
        def run(session: Any) -> None:
            raise MaterializeError(f"{name} failed")

        return run

    def slow(session: Any) -> None:
        session.range(1000).count()
        ended.append("slow")

    with pytest.raises(MaterializeError, match="first failed"):
        at_once(spark, 2, [slow, fails("first"), fails("second")])
    assert ended == ["slow"]
