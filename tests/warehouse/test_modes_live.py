"""The warehouse modes on live MariaDB and Spark, on both table formats: a generated workload
(inserts, updates, key changes, deletes, re-inserts, several changes to a key in one transaction)
over several intervals, with a backfill that applies old intervals again, a merge applied again
as after a crash before the ledger heard of it, and a re-load of the tables, leaves each table as
``loader.core.modes`` makes it of the changes the intervals staged and the re-load's copy."""

from __future__ import annotations

import dataclasses
import random
import time
from pathlib import Path
from typing import Any

import pytest

from loader.app import steps
from loader.core import modes
from loader.core.config import Config
from loader.core.errors import LedgerError, MaterializeError
from loader.core.positions import seqno_of
from loader.extract.interval import run_extract
from loader.staging import csvformat
from loader.staging.stores import open_store
from loader.staging.verify import verified_manifest
from loader.state.ledger import Ledger
from loader.state.records import EXTRACTED
from loader.warehouse.compare import compare_tables
from loader.warehouse.initial_load import copy_tables, finish_load, run_initial_load, start_load
from loader.warehouse.materialize import run_materialize
from loader.warehouse.rollback import run_rollback
from loader.warehouse.tables import table_name
from tests import writer
from tests.conftest import (
    TABLE_FORMATS,
    MariaDB,
    MySQL,
    assert_equal_to_source,
    fresh_schema,
    quiet,
    random_seed,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# One source table per mode, the same statements on each.
TABLES = {"m": modes.MIRROR, "s": modes.SOFT_DELETE, "h": modes.HISTORY}
KEY = ["id"]


@pytest.fixture
def cfg(mariadb: MariaDB, tmp_path: Path, spark_config: Config) -> Config:
    base = mariadb.config(tmp_path, tables={"include": '["mw.*"]'})
    return dataclasses.replace(
        base,
        tables=dataclasses.replace(base.tables, modes={f"mw.{t}": m for t, m in TABLES.items()}),
        warehouse=dataclasses.replace(spark_config.warehouse, database="mw_wh", partition_rows=8, buckets=4),
    )


class _Workload:
    """Random transactions of one to three statements, the same on every table."""

    def __init__(self, mariadb: MariaDB, rnd: random.Random) -> None:
        self.mariadb, self.rnd = mariadb, rnd
        self.live: set[int] = set()
        self.gone: set[int] = set()
        self.next_key = 1

    def _statement(self) -> str:
        rnd, live = self.rnd, sorted(self.live)
        kind = rnd.choice(["insert", "insert", "update", "update", "move", "delete", "reinsert"])
        if kind == "reinsert" and self.gone:
            key = rnd.choice(sorted(self.gone))
            self.gone.discard(key)
            self.live.add(key)
            return f"INSERT INTO mw.{{t}} VALUES ({key}, 'again {rnd.randrange(100)}')"
        if kind in ("update", "move", "delete") and live:
            key = rnd.choice(live)
            if kind == "update":
                return f"UPDATE mw.{{t}} SET v = 'v{rnd.randrange(1000)}' WHERE id = {key}"
            self.live.discard(key)
            self.gone.add(key)
            if kind == "delete":
                return f"DELETE FROM mw.{{t}} WHERE id = {key}"
            new = self._new_key()
            self.gone.discard(new)
            return f"UPDATE mw.{{t}} SET id = {new}, v = 'moved from {key}' WHERE id = {key}"
        key = self._new_key()
        return f"INSERT INTO mw.{{t}} VALUES ({key}, 'new {rnd.randrange(100)}')"

    def _new_key(self) -> int:
        key = self.next_key
        self.next_key += 1
        self.live.add(key)
        return key

    def run(self, transactions: int) -> None:
        for _ in range(transactions):
            statements = [self._statement() for _ in range(self.rnd.randint(1, 3))]
            self.mariadb.execute("BEGIN", *(s.format(t=t) for t in TABLES for s in statements), "COMMIT")


def _staged_changes(
    spark: Any, cfg: Config, ledger: Ledger, table: str, interval_id: str
) -> list[modes.Change]:
    """The change rows an interval staged for ``mw.<table>``, as the reference takes them."""
    store = open_store(cfg.staging)
    interval = next(i for i in ledger.intervals() if i.id == interval_id)
    manifest = verified_manifest(
        store, interval.id, interval.manifest or "", interval.manifest_sha256, interval.changes
    )
    out = []
    for entry in manifest.tables:
        if (entry.schema, entry.table) != ("mw", table):
            continue
        for index, layout in enumerate(entry.layouts):
            paths = [store.spark_uri(f.path) for f in entry.files if f.layout == index]
            if not paths:
                continue
            frame = csvformat.read_staged(spark, paths, [c.name for c in layout]).selectExpr(
                "_loader_op AS op",
                "CAST(_loader_seqno AS BIGINT) AS seqno",
                "CAST(_loader_row_id AS INT) AS row_id",
                "try_to_timestamp(_loader_commit_ts) AS commit_ts",
                "CAST(id AS INT) AS id",
                "v",
            )
            out += [
                modes.Change(r.op, r.seqno, r.row_id, r.commit_ts, interval.id, {"id": r.id, "v": r.v})
                for r in frame.collect()
            ]
    return out


@pytest.mark.parametrize("table_format", TABLE_FORMATS)
def test_a_generated_workload_leaves_each_mode_as_the_reference_makes_it(
    mariadb: MariaDB, cfg: Config, spark: Any, table_format: str
) -> None:
    fresh_schema(mariadb, "mw", *(f"{t} (id INT PRIMARY KEY, v VARCHAR(40))" for t in TABLES))
    rnd = random.Random(random_seed())
    work = _Workload(mariadb, rnd)
    work.run(6)
    ledger = Ledger.of(cfg)
    events: dict[str, list[modes.Event]] = {t: [] for t in TABLES}

    def copied(load_id: str) -> None:
        load = next(x for x in ledger.loads() if x.id == load_id)
        p0 = load.p0
        started = spark.sql(f"SELECT TIMESTAMP '{load.started_at}' AS t").collect()[0].t
        for t in TABLES:
            rows = [{"id": i, "v": v} for i, v in mariadb.rows(f"SELECT id, v FROM mw.{t}")]
            events[t].append(modes.Copy(seqno_of(p0.file, p0.pos, load.epoch), load.id, started, rows))

    copied(run_initial_load(spark, cfg, progress=quiet).load_id)  # no writes during the copy

    marks: dict[str, dict[str, int]] = {}  # per interval: the events each table had after it

    def merge() -> None:
        """Materialise what is extracted; the reference takes the same intervals in order."""
        pending = [i.id for i in ledger.intervals() if i.state == EXTRACTED]
        run_materialize(spark, cfg)
        for interval_id in pending:
            for t in TABLES:
                events[t] += _staged_changes(spark, cfg, ledger, t, interval_id)
            marks.setdefault(interval_id, {t: len(events[t]) for t in TABLES})

    def reference(t: str, upto: dict[str, int] | None = None) -> list[dict[str, Any]]:
        return modes.apply(TABLES[t], KEY, events[t][: upto[t]] if upto else events[t])

    def as_the_reference(upto: dict[str, int] | None = None) -> None:
        """Each table as the reference makes it of what it was given (up to ``upto``)."""
        for t, mode in TABLES.items():
            wanted = reference(t, upto)
            columns = ["id", "v", *modes.CHANGE_COLUMNS[:-1], *modes.MODE_COLUMNS[mode]]
            order = f"id, {modes.VALID_FROM_SEQNO}" if mode == modes.HISTORY else "id"
            got = [
                r.asDict()
                for r in spark.sql(
                    f"SELECT {', '.join(columns)} FROM {table_name(cfg, 'mw', t)} ORDER BY {order}"
                ).collect()
            ]
            assert got == wanted, f"mw.{t} ({mode}): {len(got)} rows, the reference {len(wanted)}"

    def check() -> None:
        """Each table as the reference makes it of what it was given so far; the source's rows."""
        as_the_reference()
        assert_equal_to_source(spark, cfg)  # the checksum of the live rows, the current versions
        compared = {c.table: c for c in compare_tables(spark, cfg)}
        for t, mode in TABLES.items():
            shown = compared[f"mw.{t}"]
            assert shown.equal and shown.mode == mode, shown
            kept = spark.table(table_name(cfg, "mw", t)).count()
            assert shown.kept_rows == (None if mode == modes.MIRROR else kept)
        assert compared["mw.h"].warehouse_text() == (
            f"{compared['mw.h'].source_rows} current versions (of {compared['mw.h'].kept_rows})"
        )

    # Besides the random ones, one key goes through insert, two updates, delete and re-insert,
    # a step per merge (each change of the key is the merge's first).
    one_key = [
        "INSERT INTO mw.{t} VALUES (1000, 'a')",
        "UPDATE mw.{t} SET v = 'b' WHERE id = 1000",
        "UPDATE mw.{t} SET v = 'c' WHERE id = 1000",
        "DELETE FROM mw.{t} WHERE id = 1000",
        "INSERT INTO mw.{t} VALUES (1000, 'd')",
    ]
    for round_, step in enumerate(one_key):
        work.run(rnd.randint(2, 6))
        mariadb.execute(*(step.format(t=t) for t in TABLES))
        assert run_extract(cfg, progress=quiet) is not None
        if round_ != 1:  # Hive takes two intervals in one pass
            merge()
    # A backfill: the second interval on, applied again.
    second = ledger.intervals()[1]
    work.run(3)
    assert run_extract(cfg, start=second.start, progress=quiet) is not None
    merge()
    # A merge committed, then a crash before the ledger marked its interval: applied again.
    work.run(5)
    assert run_extract(cfg, progress=quiet) is not None
    merge()
    last = ledger.intervals()[-1]
    last.state = EXTRACTED
    ledger.save(last)
    merge()
    check()
    if table_format == "iceberg":  # (Hive-format tables keep no snapshots to go back to)
        # The tables as of an earlier interval, then rolled back to it, are the reference's
        # then; the later intervals applied again bring them back.
        back = ledger.intervals()[2].id
        then = {c.table: c for c in compare_tables(spark, cfg, as_of=back)}
        for t, mode in TABLES.items():
            rows = reference(t, marks[back])
            live = [
                r
                for r in rows
                if r.get(modes.IS_DELETED) is not True and r.get(modes.IS_CURRENT) is not False
            ]
            assert then[f"mw.{t}"].warehouse_rows == len(live)
            assert then[f"mw.{t}"].kept_rows == (None if mode == modes.MIRROR else len(rows))
        run_rollback(spark, cfg, back)
        as_the_reference(marks[back])
        merge()
        check()
    # A re-load of every table (the mirror's copy replaces it; the others resync) while an
    # extracted interval waits and later changes are not extracted yet: the copy holds them.
    work.run(5)
    assert run_extract(cfg, progress=quiet) is not None
    work.run(4)
    copied(run_initial_load(spark, cfg, progress=quiet).load_id)
    work.run(6)
    assert run_extract(cfg, progress=quiet) is not None
    merge()
    check()
    # A re-load while the deltas run: P0 recorded, then an interval (begun before P0) merged
    # while the copy is pending passes the tables over; the copy then applies its changes past P0.
    work.run(3)
    load = start_load(cfg, [f"mw.{t}" for t in TABLES], progress=quiet)
    work.run(4)
    assert run_extract(cfg, progress=quiet) is not None
    meanwhile = [i.id for i in ledger.intervals() if i.state == EXTRACTED]
    run_materialize(spark, cfg)
    as_the_reference()  # untouched
    copy_tables(spark, cfg, load.id, progress=quiet)
    copied(load.id)  # (no writes since the copy read the rows)
    for t in TABLES:
        events[t] += [c for i in meanwhile for c in _staged_changes(spark, cfg, ledger, t, i)]
    as_the_reference()
    finish_load(cfg, load.id)
    work.run(5)
    assert run_extract(cfg, progress=quiet) is not None
    merge()
    check()


@pytest.mark.parametrize("table_format", TABLE_FORMATS)
def test_a_table_changes_mode_by_a_reload_and_is_refused_before(
    mariadb: MariaDB, cfg: Config, spark: Any, table_format: str
) -> None:
    fresh_schema(mariadb, "mw", "m (id INT PRIMARY KEY, v VARCHAR(40))")
    mariadb.execute("INSERT INTO mw.m VALUES (1, 'a'), (2, 'a')")
    mirror = dataclasses.replace(cfg, tables=dataclasses.replace(cfg.tables, modes={}))
    run_initial_load(spark, mirror, progress=quiet)
    history = dataclasses.replace(cfg, tables=dataclasses.replace(cfg.tables, modes={"mw.m": "history"}))
    mariadb.execute("UPDATE mw.m SET v = 'b' WHERE id = 1")
    assert run_extract(history, progress=quiet) is not None
    ledger = Ledger.of(cfg)
    before = ledger.checkpoint()
    with pytest.raises(MaterializeError) as refused:
        run_materialize(spark, history)
    name = table_name(cfg, "mw", "m").replace("`", "")
    assert (
        f"{name} is in mode 'mirror' and [tables] makes mw.m 'history': a table takes another mode by a "
        "re-load, which rebuilds it from the source (what 'mirror' kept of earlier changes is not "
        "carried): re-load the table: loader initial-load --tables mw.m, or set its mode back to 'mirror'"
    ) in str(refused.value).replace("`", "")
    assert ledger.checkpoint() == before  # nothing applied, nothing lost
    # The re-load makes it a table of versions, the copy's rows the first; the waiting interval
    # is older than the copy, which holds it; the next changes add versions.
    run_initial_load(spark, history, only=["mw.m"], progress=quiet)
    mariadb.execute("DELETE FROM mw.m WHERE id = 2", "UPDATE mw.m SET v = 'c' WHERE id = 1")
    assert run_extract(history, progress=quiet) is not None
    run_materialize(spark, history)
    rows = spark.sql(
        f"SELECT id, v, _op, _is_current FROM {table_name(cfg, 'mw', 'm')} ORDER BY id, _valid_from_seqno"
    ).collect()
    assert [tuple(r) for r in rows] == [(1, "b", "r", False), (1, "c", "u", True), (2, "a", "r", False)]
    assert_equal_to_source(spark, history)
    # And back: a mirror again after a re-load, its rows the source's.
    run_initial_load(spark, mirror, only=["mw.m"], progress=quiet)
    assert "_is_current" not in spark.table(table_name(cfg, "mw", "m")).columns
    assert_equal_to_source(spark, mirror)


# MySQL's positions come with their GTID state read under a running writer (and the loads' P0
# with them): the flavour matters here.
@pytest.mark.parametrize("source", ["mariadb", "mysql"], indirect=True)
def test_a_source_started_from_now_is_filled_table_by_table_while_the_deltas_run(
    source: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    """The way for a source whose binlog keeps less than a whole load takes: the deltas start at
    the server's position with no copy, then each table is copied by its own re-load, writers
    going on all along; every mode ends equal to the source. (On the default table format: the
    generated test above takes a re-load beside the deltas on both.) On both servers."""
    schemas = ("fn1", "fn2")
    for schema in schemas:
        fresh_schema(source, schema, *writer.TABLES)
    base = source.config(tmp_path, tables={"include": '["fn1.*", "fn2.k"]'})
    cfg = dataclasses.replace(
        base,
        tables=dataclasses.replace(base.tables, modes={"fn1.k": modes.HISTORY, "fn1.c": modes.SOFT_DELETE}),
        warehouse=dataclasses.replace(
            spark_config.warehouse,
            database="fn_mysql_wh" if isinstance(source, MySQL) else "fn_wh",  # (one Spark session)
            partition_rows=8,
            buckets=4,
        ),
    )
    writers = [writer.Writer(source, schema, random_seed() + n) for n, schema in enumerate(schemas)]
    for w in writers:
        w.start()
    time.sleep(0.5)  # rows there before the start

    def delta() -> None:
        run_extract(cfg, progress=quiet)
        run_materialize(spark, cfg)

    ledger = Ledger.of(cfg)
    try:
        started = start_load(cfg, progress=quiet, from_now=True)
        names = ["fn1.k", "fn1.c", "fn2.k"]
        assert sorted(started.tables) == sorted(names)
        shown = {f"{m.schema}.{m.table}": m for m in steps.tables(cfg)}
        assert {n: (m.loaded_at, m.awaiting_load) for n, m in shown.items()} == dict.fromkeys(
            names, (None, started.id)
        )
        time.sleep(0.3)
        delta()  # the changes since the start are staged, none merged: no table has its rows yet
        assert not any(spark.catalog.tableExists(table_name(cfg, *n.split("."))) for n in names)
        for compared in compare_tables(spark, cfg):
            assert not compared.equal and compared.not_loaded == (
                f"not loaded yet: {started.id} has not copied it (its changes wait for the copy)"
            )
        for name in names:  # one by one, the deltas running between and beside
            load = start_load(cfg, [name], progress=quiet)
            with pytest.raises(LedgerError, match=f"a load has not copied {name} yet: a rollback cannot run"):
                run_rollback(spark, cfg, ledger.intervals()[-1].id)
            time.sleep(0.3)
            delta()  # passes the table over: its copy is pending
            copy_tables(spark, cfg, load.id, progress=quiet)  # the writers write on meanwhile
            finish_load(cfg, load.id)
            time.sleep(0.3)
            delta()
    finally:
        for w in writers:
            w.finish()
    assert all(w.transactions > 20 for w in writers)
    delta()
    assert_equal_to_source(spark, cfg)
    compared = {c.table: c for c in compare_tables(spark, cfg)}
    assert all(c.equal and c.not_loaded is None for c in compared.values()), compared
    assert compared["fn1.k"].mode == modes.HISTORY and compared["fn1.c"].mode == modes.SOFT_DELETE
    assert all(m.awaiting_load is None and m.loaded_at for m in steps.tables(cfg))
