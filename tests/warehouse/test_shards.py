"""Shards routed into one shared Iceberg table (``tables.routes``): each source's rows carry its
name in ``_source``, and its loads, merges, rollbacks and checks touch only its own rows."""

from __future__ import annotations

import dataclasses
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from loader.core.config import Config
from loader.core.errors import ExtractError, LoadError, MaterializeError
from loader.extract.interval import run_extract
from loader.staging.stores import open_store
from loader.state import lease
from loader.state.ledger import Ledger
from loader.warehouse import iceberg
from loader.warehouse.compare import compare_tables
from loader.warehouse.initial_load import run_initial_load
from loader.warehouse.materialize import run_materialize
from loader.warehouse.rollback import run_rollback
from loader.warehouse.tables import table_name
from tests.conftest import (
    MariaDB,
    assert_equal_to_source,
    delta,
    fresh_schema,
    maintain,
    quiet,
    schema_config,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ORDERS = "orders (id INT PRIMARY KEY, v VARCHAR(10))"


def _shard(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, n: int, database: str = "shards_wh"
) -> Config:
    """Source ``shard_0<n>``: the schema ``shop_0<n>``, its orders routed into ``shop.orders`` of
    the warehouse ``database``."""
    base = schema_config(mariadb, tmp_path, spark_config, f"shop_0{n}")
    return dataclasses.replace(
        base,
        source=dataclasses.replace(base.source, name=f"shard_0{n}"),
        tables=dataclasses.replace(base.tables, routes={"shop_*.orders": "shop.orders"}),
        warehouse=dataclasses.replace(base.warehouse, database=database),
    )


def test_shards_routed_into_one_table_keep_their_own_rows_through_loads_merges_and_rollbacks(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    fresh_schema(mariadb, "shop_01", ORDERS, "notes (id INT PRIMARY KEY)")
    fresh_schema(mariadb, "shop_02", ORDERS)
    fresh_schema(mariadb, "shop_03", "orders (id INT PRIMARY KEY, v INT)")
    mariadb.execute(
        "INSERT INTO shop_01.orders VALUES (1, 'a1'), (2, 'a2')",
        "INSERT INTO shop_01.notes VALUES (5)",
        "INSERT INTO shop_02.orders VALUES (1, 'b1'), (2, 'b2')",
    )
    a, b = (_shard(mariadb, tmp_path, spark_config, n) for n in (1, 2))
    shared = table_name(a, "shop_01", "orders")
    assert shared == table_name(b, "shop_02", "orders") == "iceberg.`shards_wh`.`shop__orders`"

    def rows() -> list[tuple[Any, ...]]:
        return [tuple(r) for r in spark.sql(f"SELECT _source, id, v FROM {shared} ORDER BY 1, 2").collect()]

    run_initial_load(spark, a, progress=quiet)
    run_initial_load(spark, b, progress=quiet)
    assert rows() == [
        ("shard_01", 1, "a1"),
        ("shard_01", 2, "a2"),
        ("shard_02", 1, "b1"),
        ("shard_02", 2, "b2"),
    ]
    # A table with no route keeps a table of its own.
    assert [r.id for r in spark.sql(f"SELECT id FROM {table_name(a, 'shop_01', 'notes')}").collect()] == [5]
    # Each source's key ranges are split by source first.
    spec = spark.sql(f"SELECT * FROM {shared}.partitions").schema["partition"].dataType.names
    assert spec[0] == "_source"

    # Both shards change the same keys; their merges run at once, each in its own Spark session
    # (as two sources' jobs do), and both commits land: nothing lost, nothing applied twice.
    mariadb.execute(
        "UPDATE shop_01.orders SET v = 'a1x' WHERE id = 1",
        "INSERT INTO shop_01.orders VALUES (3, 'a3')",
        "UPDATE shop_02.orders SET v = 'b1x' WHERE id = 1",
        "DELETE FROM shop_02.orders WHERE id = 2",
    )
    for cfg in (a, b):
        assert run_extract(cfg, progress=quiet) is not None
    failures: list[BaseException] = []

    def merge(cfg: Config) -> None:
        try:
            run_materialize(spark.newSession(), cfg)
        except BaseException as exc:  # reported by the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=merge, args=(cfg,)) for cfg in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert rows() == [
        ("shard_01", 1, "a1x"),
        ("shard_01", 2, "a2"),
        ("shard_01", 3, "a3"),
        ("shard_02", 1, "b1x"),
    ]
    for cfg in (a, b):  # each source's checks see its own rows only
        assert_equal_to_source(spark, cfg)
        assert all(c.equal for c in compare_tables(spark, cfg))

    # A rollback of one shard takes back its own rows only, with the other shard's commits
    # before and after its interval kept; its later interval is then merged again.
    (first,) = Ledger.of(a).intervals()
    mariadb.execute(
        "UPDATE shop_01.orders SET v = 'a2y' WHERE id = 2", "DELETE FROM shop_01.orders WHERE id = 3"
    )
    delta(spark, a)
    mariadb.execute("UPDATE shop_02.orders SET v = 'b1y' WHERE id = 1")
    delta(spark, b)
    assert rows() == [("shard_01", 1, "a1x"), ("shard_01", 2, "a2y"), ("shard_02", 1, "b1y")]
    run_rollback(spark, a, first.id)
    assert rows() == [
        ("shard_01", 1, "a1x"),
        ("shard_01", 2, "a2"),
        ("shard_01", 3, "a3"),
        ("shard_02", 1, "b1y"),
    ]
    assert [i.state for i in Ledger.of(a).intervals()] == ["materialised", "extracted"]
    run_materialize(spark, a)
    assert rows() == [("shard_01", 1, "a1x"), ("shard_01", 2, "a2y"), ("shard_02", 1, "b1y")]
    assert_equal_to_source(spark, a)

    # The shards add a column one after another: the first one's change adds it to the shared
    # table (NULL in the other shard's rows), and the other shard merges and re-loads meanwhile.
    mariadb.execute(
        "ALTER TABLE shop_01.orders ADD COLUMN note VARCHAR(10)",
        "INSERT INTO shop_01.orders VALUES (4, 'a4', 'noted')",
    )
    delta(spark, a)
    notes = f"SELECT _source, id, note FROM {shared} WHERE note IS NOT NULL OR _source = 'shard_02'"
    assert sorted(tuple(r) for r in spark.sql(notes).collect()) == [
        ("shard_01", 4, "noted"),
        ("shard_02", 1, None),
    ]
    mariadb.execute("UPDATE shop_02.orders SET v = 'b1z' WHERE id = 1")
    delta(spark, b)
    assert_equal_to_source(spark, a)
    assert_equal_to_source(spark, b)

    # A re-load of one shard replaces its own rows and keeps the other's.
    mariadb.execute("INSERT INTO shop_02.orders VALUES (9, 'b9')")
    run_initial_load(spark, b, ["shop_02.orders"], progress=quiet)
    assert rows() == [
        ("shard_01", 1, "a1x"),
        ("shard_01", 2, "a2y"),
        ("shard_01", 4, "a4"),
        ("shard_02", 1, "b1z"),
        ("shard_02", 9, "b9"),
    ]
    assert all(c.equal for c in compare_tables(spark, b))

    # A shard whose table has another shape is refused with the difference, the table untouched.
    c = _shard(mariadb, tmp_path, spark_config, 3)
    with pytest.raises((LoadError, MaterializeError)) as refused:
        run_initial_load(spark, c, progress=quiet)
    assert "does not have its shape: v is int, not string" in str(refused.value)
    assert len(rows()) == 5

    # A rollback of a shard to before its column was added: its rows go back (NULL in the
    # column), the other shard's stay; its later interval is merged again, the column's included.
    before_note = Ledger.of(a).intervals()[-2]
    run_rollback(spark, a, before_note.id)
    assert rows() == [
        ("shard_01", 1, "a1x"),
        ("shard_01", 2, "a2y"),
        ("shard_02", 1, "b1z"),
        ("shard_02", 9, "b9"),
    ]
    run_materialize(spark, a)
    assert len(rows()) == 5
    assert_equal_to_source(spark, a)

    # A shard that drops a column stops at its extraction, as any table does; its re-load copies
    # its rows anew, NULL in the column the shared table keeps for the others.
    mariadb.execute(
        "ALTER TABLE shop_01.orders DROP COLUMN note", "UPDATE shop_01.orders SET v = 'a4x' WHERE id = 4"
    )
    with pytest.raises(ExtractError, match=r"ALTER TABLE drops column note, .*re-load the table: loader"):
        run_extract(a, progress=quiet)
    run_initial_load(spark, a, ["shop_01.orders"], progress=quiet)
    delta(spark, a)
    assert spark.sql(f"SELECT count(*) FROM {shared} WHERE note IS NOT NULL").collect()[0][0] == 0
    assert_equal_to_source(spark, a)

    # Maintenance is per warehouse table: the shared table is compacted while neither shard
    # merges (under both shards' leases), each shard's files in a snapshot of its own (marked with
    # the source, for that source's rollbacks); the rows stay.
    def files(source: str) -> set[str]:
        query = f"SELECT file_path FROM {shared}.files WHERE partition._source = '{source}'"
        return {r.file_path for r in spark.sql(query).collect()}

    mariadb.execute(
        "UPDATE shop_01.orders SET v = 'a1w' WHERE id = 1", "UPDATE shop_02.orders SET v = 'b9z' WHERE id = 9"
    )
    delta(spark, a)  # a delete file and a data file more for each shard
    delta(spark, b)
    theirs, ours = files("shard_01"), files("shard_02")
    compacting = dataclasses.replace(b.maintenance, min_input_files=1)
    # While shard 01 runs a step (another run holds its lease), the table waits: skipped, saying why.
    busy = lease.Lease(open_store(a.staging), "shard_01", "a merge of shard_01", 600)
    busy.acquire()
    try:
        waited = maintain(spark, a, b, maintenance=compacting, only="shard_02")
    finally:
        busy.release()
    (skipped,) = waited.skipped
    assert skipped.table == shared.replace("`", "") and skipped.sources == ["shard_01", "shard_02"]
    assert "source shard_01 is busy: a merge of shard_01 (pid" in skipped.skipped
    assert "run maintenance again when they are done" in waited.text().splitlines()[-1]
    assert (files("shard_01"), files("shard_02")) == (theirs, ours)
    (maintained,) = maintain(spark, a, b, maintenance=compacting, only="shard_02").tables
    assert maintained.sources == ["shard_01", "shard_02"] and not maintained.skipped
    assert maintained.rewritten_files > 0 and files("shard_01") != theirs and files("shard_02") != ours
    compactions = [
        s.summary[iceberg.SOURCE]
        for s in iceberg.current_ancestry(spark, shared)
        if iceberg.MAINTENANCE in s.summary
    ]
    assert sorted(compactions) == ["shard_01", "shard_02"]
    assert_equal_to_source(spark, a)
    assert_equal_to_source(spark, b)


class _LateCatalog:
    """Spark's catalog, except that ``name`` is not there until the session creates it: another
    shard's create lands between this shard's looks and its own create (two first merges at
    once)."""

    def __init__(self, catalog: Any, name: str) -> None:
        self._catalog, self._name, self.created = catalog, name, False

    def tableExists(self, name: str) -> bool:
        return (name != self._name or self.created) and bool(self._catalog.tableExists(name))

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._catalog, attribute)


class _LateSession:
    """The Spark session with a ``_LateCatalog``."""

    def __init__(self, spark: Any, name: str) -> None:
        self._spark, self.catalog = spark, _LateCatalog(spark.catalog, name)

    def sql(self, statement: str, *args: Any) -> Any:
        self.catalog.created |= statement.startswith("CREATE TABLE")
        return self._spark.sql(statement, *args)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._spark, attribute)


def test_a_shard_whose_first_merge_finds_the_shared_table_created_meanwhile_joins_it_or_is_refused(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    fresh_schema(mariadb, "shop_06", ORDERS)
    fresh_schema(mariadb, "shop_07", ORDERS)
    fresh_schema(mariadb, "shop_08", "orders (id INT PRIMARY KEY, v INT)")
    a, b, c = (_shard(mariadb, tmp_path, spark_config, n, "race_wh") for n in (6, 7, 8))
    shared = table_name(a, "shop_06", "orders")
    for cfg in (a, b, c):  # each shard's first rows arrive in its first interval
        run_initial_load(spark, cfg, progress=quiet)
        spark.sql(f"DROP TABLE IF EXISTS {shared}")  # the first merges make it
    mariadb.execute(
        "INSERT INTO shop_06.orders VALUES (1, 'a1')",
        "INSERT INTO shop_07.orders VALUES (1, 'b1'), (2, 'b2')",
        "INSERT INTO shop_08.orders VALUES (1, 8)",
    )
    for cfg in (a, b, c):
        run_extract(cfg, progress=quiet)
    run_materialize(spark, a)
    # Shard 07's merge looked before shard 06 created the table: it joins the table 06 made.
    run_materialize(_LateSession(spark, shared), b)
    rows = spark.sql(f"SELECT _source, id, v FROM {shared} ORDER BY 1, 2").collect()
    assert [tuple(r) for r in rows] == [("shard_06", 1, "a1"), ("shard_07", 1, "b1"), ("shard_07", 2, "b2")]
    assert_equal_to_source(spark, a)
    assert_equal_to_source(spark, b)
    # Shard 08's table has another type: refused as when the table was there, the table untouched.
    with pytest.raises(MaterializeError, match="does not have its shape: v is int, not string"):
        run_materialize(_LateSession(spark, shared), c)
    assert spark.sql(f"SELECT count(*) FROM {shared}").collect()[0][0] == 3


def test_a_shard_rolled_back_to_before_its_first_rows_of_a_shared_table_deletes_only_its_own(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    fresh_schema(mariadb, "shop_04", ORDERS)
    fresh_schema(mariadb, "shop_05", "notes (id INT PRIMARY KEY)")
    mariadb.execute("INSERT INTO shop_04.orders VALUES (1, 'a1')", "INSERT INTO shop_05.notes VALUES (1)")
    a, b = (_shard(mariadb, tmp_path, spark_config, n, "late_wh") for n in (4, 5))
    shared = table_name(a, "shop_04", "orders")
    spark.sql(f"DROP TABLE IF EXISTS {shared}")

    def rows() -> list[tuple[Any, ...]]:
        return [tuple(r) for r in spark.sql(f"SELECT _source, id, v FROM {shared} ORDER BY 1, 2").collect()]

    run_initial_load(spark, a, progress=quiet)
    run_initial_load(spark, b, progress=quiet)
    mariadb.execute("INSERT INTO shop_05.notes VALUES (2)")
    delta(spark, b)  # shard 05's first interval: no orders table yet
    # Shard 05's orders table appears later; its rows join the shared table, as shard 04's do.
    mariadb.execute(
        f"CREATE TABLE shop_05.{ORDERS}",
        "INSERT INTO shop_05.orders VALUES (1, 'b1'), (2, 'b2')",
        "INSERT INTO shop_04.orders VALUES (2, 'a2')",
    )
    delta(spark, b)
    delta(spark, a)
    assert rows() == [
        ("shard_04", 1, "a1"),
        ("shard_04", 2, "a2"),
        ("shard_05", 1, "b1"),
        ("shard_05", 2, "b2"),
    ]

    first = Ledger.of(b).intervals()[0]
    done = run_rollback(spark, b, first.id)
    assert {t.table: t.now for t in done.tables}[shared] == "empty"
    assert rows() == [("shard_04", 1, "a1"), ("shard_04", 2, "a2")]
    assert [i.state for i in Ledger.of(b).intervals()] == ["materialised", "extracted"]
    run_materialize(spark, b)
    assert len(rows()) == 4
    assert_equal_to_source(spark, a)
    assert_equal_to_source(spark, b)


def test_shards_of_a_history_table_keep_their_own_versions_and_agree_on_its_mode(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    fresh_schema(mariadb, "shop_01", ORDERS)
    fresh_schema(mariadb, "shop_02", ORDERS)
    mariadb.execute(
        "INSERT INTO shop_01.orders VALUES (1, 'a')", "INSERT INTO shop_02.orders VALUES (1, 'b')"
    )
    a, b = (_shard(mariadb, tmp_path, spark_config, n, database="shards_h_wh") for n in (1, 2))
    a, b = (dataclasses.replace(c, tables=dataclasses.replace(c.tables, mode="history")) for c in (a, b))
    shared = table_name(a, "shop_01", "orders")
    run_initial_load(spark, a, progress=quiet)
    run_initial_load(spark, b, progress=quiet)
    mariadb.execute(
        "UPDATE shop_01.orders SET v = 'a2' WHERE id = 1", "DELETE FROM shop_02.orders WHERE id = 1"
    )
    delta(spark, a)
    delta(spark, b)
    mariadb.execute("INSERT INTO shop_02.orders VALUES (1, 'b3')")
    # A re-load of one shard keeps its versions (unchanged: its current one stays) and leaves
    # the other's alone.
    run_initial_load(spark, a, progress=quiet)
    delta(spark, b)

    def versions() -> list[tuple[Any, ...]]:
        return [
            tuple(r)
            for r in spark.sql(
                f"SELECT _source, id, v, _op, _is_current FROM {shared} ORDER BY 1, 2, _valid_from_seqno"
            ).collect()
        ]

    assert versions() == [
        ("shard_01", 1, "a", "r", False),
        ("shard_01", 1, "a2", "u", True),
        ("shard_02", 1, "b", "r", False),
        ("shard_02", 1, "b3", "c", True),
    ]
    assert_equal_to_source(spark, a)
    assert_equal_to_source(spark, b)
    # A shard in another mode is refused at its first merge, naming the table's.
    fresh_schema(mariadb, "shop_03", ORDERS)
    c = _shard(mariadb, tmp_path, spark_config, 3, database="shards_h_wh")
    with pytest.raises(
        MaterializeError,
        match=re.escape("is a shared table in mode 'history' and shop_03.orders is in mode 'mirror'"),
    ):
        run_initial_load(spark, c, progress=quiet)
