"""The initial load against the private MariaDB: P0 first, key ranges over JDBC in Spark, the same
type map as materialisation, and a delta from P0 that makes a copy taken during writes exact."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from loader.core import modes
from loader.core.config import Config
from loader.core.errors import LoaderError, LoadError, TransientError
from loader.extract.interval import run_extract
from loader.staging.stores import open_store
from loader.state.ledger import Ledger
from loader.state.records import Checkpoint
from loader.warehouse.initial_load import run_initial_load
from loader.warehouse.materialize import run_materialize
from loader.warehouse.tables import table_name
from tests.certificates import Certificates
from tests.conftest import TABLE_FORMATS, MariaDB, TlsMariaDB
from tests.proxy import proxy

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _config(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, schema: str, database: str, **load: Any
) -> Config:
    base = mariadb.config(tmp_path / database, tables={"include": f'["{schema}.*"]'})
    return dataclasses.replace(
        base,
        warehouse=dataclasses.replace(
            spark_config.warehouse, database=database, partition_rows=50, buckets=4
        ),
        load=dataclasses.replace(base.load, **load),
    )


def _quiet(_: str) -> None:
    pass


ALL_TYPES = """CREATE TABLE il.types (
    id INT PRIMARY KEY, ti TINYINT, tu TINYINT UNSIGNED, bu BIGINT UNSIGNED, bs BIGINT,
    d10 DECIMAL(10,2), d65 DECIMAL(65,30), f FLOAT, db DOUBLE, dt DATE, dtm DATETIME(6),
    ts TIMESTAMP(3) NULL, tm TIME(6), y YEAR, b13 BIT(13), b64 BIT(64), e ENUM('a','b c'),
    st SET('x','y','z'), j JSON, vc VARCHAR(40), lt TEXT CHARACTER SET latin1, bin BINARY(4),
    vb VARBINARY(10), bl BLOB, g GEOMETRY, ch CHAR(6), cy VARCHAR(20) CHARACTER SET cp1251,
    u16 VARCHAR(20) CHARACTER SET utf16, u32 CHAR(4) CHARACTER SET utf32
)"""
ALL_TYPES_ROWS = [
    "(1, -128, 255, 18446744073709551615, -9223372036854775808, -12345678.90,"
    " 12345678901234567890123456789012345.123456789012345678901234567890, 1.5, 0.1,"
    " '2024-02-29', '2024-01-01 23:59:59.999999', '2038-01-19 03:14:07.499', '-838:59:59.000000', 2155,"
    " b'1010101010101', b'1111111111111111111111111111111111111111111111111111111111111111', 'b c', 'x,z',"
    " '{\"k\": [1, \"two\", null]}', 'emoji 😀 \"quoted\", comma', 'café', 'ab', x'00ff00',"
    " REPEAT('blob', 1000), ST_GeomFromText('POINT(1 2)'), 'ab', 'Привет, «мир»', '😀 ☃ \"q\"', 'ä😀')",
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(3, 0, 0, 0, 0, 0, 0, -0.0, 1e308, '0000-00-00', '0000-00-00 00:00:00', '1970-01-01 00:00:01', '00:00:00.5',"
    " 0, b'0', b'0', 'a', '', '[]', '', '', '', '', '', NULL, '', '', '', '')",
]


@pytest.mark.parametrize("table_format", TABLE_FORMATS)
def test_loaded_values_equal_what_materialisation_writes(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    mariadb.execute("DROP DATABASE IF EXISTS il", "CREATE DATABASE il", ALL_TYPES)
    delta = _config(mariadb, tmp_path, spark_config, "il", "il_delta")
    before = mariadb.execute()
    Ledger(open_store(delta.staging), delta.source.name).set_checkpoint(Checkpoint(before, "test"))
    mariadb.execute(
        "SET SESSION sql_mode = ''", *(f"INSERT INTO il.types VALUES {r}" for r in ALL_TYPES_ROWS)
    )
    # The same rows through the binlog: extracted and materialised ...
    assert run_extract(delta, progress=_quiet) is not None
    run_materialize(spark, delta)
    # ... and copied by the initial load.
    load = _config(mariadb, tmp_path, spark_config, "il", "il_load")
    said: list[str] = []
    summary = run_initial_load(spark, load, progress=said.append)
    assert [(t.table, t.rows) for t in summary.tables] == [("il.types", 3)]
    # Hive-format tables are Spark's to copy, which the load says once (the arrow engine's Iceberg).
    spark_copies = [line for line in said if "copied by Spark" in line]
    if load.warehouse.format == "hive":
        assert spark_copies == [
            f"initial load {summary.load_id}: the tables are copied by Spark: "
            "the warehouse tables are hive-format (this engine writes Iceberg tables)"
        ]
    else:
        assert spark_copies == []
    loaded_table, merged_table = table_name(load, "il", "types"), table_name(delta, "il", "types")
    # Each row names the change that wrote it: the copy (op r, the load's id), or its insert.
    changes = ", ".join(modes.CHANGE_COLUMNS)
    copied = spark.sql(f"SELECT {changes} FROM {loaded_table} ORDER BY id").collect()
    assert {(r._op, r._rowno, r._interval) for r in copied} == {("r", None, summary.load_id)}
    (interval,) = Ledger(open_store(delta.staging), delta.source.name).intervals()
    inserted = spark.sql(f"SELECT {changes} FROM {merged_table} ORDER BY id").collect()
    assert [(r._op, r._rowno, r._interval) for r in inserted] == [("c", 0, interval.id)] * 3
    assert all(r._commit_ts and r._loaded_at for r in [*copied, *inserted])
    loaded = spark.sql(f"SELECT * FROM {loaded_table} ORDER BY id").drop(*modes.CHANGE_COLUMNS).collect()
    merged = spark.sql(f"SELECT * FROM {merged_table} ORDER BY id").drop(*modes.CHANGE_COLUMNS).collect()
    assert spark.table(loaded_table).dtypes == spark.table(merged_table).dtypes
    for a, b in zip(loaded, merged, strict=True):
        assert a.asDict() == b.asDict()
    assert loaded[0].bu == 18446744073709551615 and loaded[0].tm == "-838:59:59.000000"
    assert (loaded[0].st, loaded[0].ch, loaded[2].ch) == ("x,z", "ab", "")
    # Text of other charsets, decoded natively (cp1251 by its byte table, UTF-16, UTF-32).
    assert (loaded[0].cy, loaded[0].u16, loaded[0].u32) == ("Привет, «мир»", '😀 ☃ "q"', "ä😀")


class Writer(threading.Thread):
    """Inserts, updates (key changes too) and deletes rows until stopped, as an application would."""

    def __init__(self, mariadb: MariaDB) -> None:
        super().__init__(daemon=True)
        self.mariadb = mariadb
        self.stop = threading.Event()
        self.statements = 0

    def run(self) -> None:
        import random

        rnd = random.Random(7)
        conn = self.mariadb.connect()
        try:
            with conn.cursor() as cur:
                n = 0
                while not self.stop.is_set():
                    n += 1
                    k = rnd.randint(1, 3000)
                    choice = rnd.random()
                    if choice < 0.3:
                        cur.execute(f"INSERT IGNORE INTO il.ints VALUES ({3000 + n}, 'new {n}', {n})")
                    elif choice < 0.55:
                        cur.execute(f"UPDATE il.ints SET v = 'upd {n}', n = n + 1 WHERE id = {k}")
                    elif choice < 0.65:
                        cur.execute(f"UPDATE IGNORE il.ints SET id = {5000 + n} WHERE id = {k}")
                    elif choice < 0.75:
                        cur.execute(f"DELETE FROM il.ints WHERE id = {k}")
                    elif choice < 0.85:
                        cur.execute(f"UPDATE il.pairs SET x = x + 1 WHERE a = 'g{k % 40}'")
                    elif choice < 0.9:
                        cur.execute(f"DELETE FROM il.pairs WHERE a = 'g{k % 40}' AND b = {k % 50}")
                        cur.execute(f"INSERT IGNORE INTO il.pairs VALUES ('h{k % 40}', {n % 50}, {n})")
                    else:
                        cur.execute(f"REPLACE INTO il.words VALUES ('w{k}', {n})")
                    self.statements += 1
                    time.sleep(0.002)  # an application's pace, leaving the copy some CPU
        finally:
            conn.close()


def _same_as_source(mariadb: MariaDB, spark: Any, cfg: Config, table: str, columns: str, order: str) -> None:
    got = [
        tuple(r)
        for r in spark.sql(f"SELECT {columns} FROM {table_name(cfg, 'il', table)} ORDER BY {order}").collect()
    ]
    want = mariadb.rows(f"SELECT {columns} FROM il.{table} ORDER BY {order}")
    assert got == want, f"{table}: {len(got)} rows in the warehouse, {len(want)} in the source"


@pytest.mark.parametrize("table_format", TABLE_FORMATS)
def test_a_load_during_writes_then_one_delta_equals_the_source(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS il",
        "CREATE DATABASE il",
        "CREATE TABLE il.ints (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        "CREATE TABLE il.pairs (a VARCHAR(5), b INT, x INT, PRIMARY KEY (a, b))",
        "CREATE TABLE il.words (w VARCHAR(10) PRIMARY KEY, n INT)",
        "CREATE TABLE il.empty (id BIGINT PRIMARY KEY)",
        "INSERT INTO il.ints SELECT seq, CONCAT('v', seq), seq FROM il.seq_1_to_3000",
        "INSERT INTO il.pairs SELECT CONCAT('g', seq % 40), seq % 50, seq FROM il.seq_1_to_2000"
        " ON DUPLICATE KEY UPDATE x = VALUES(x)",
        "INSERT INTO il.words SELECT CONCAT('w', seq), seq FROM il.seq_1_to_500",
    )
    cfg = _config(mariadb, tmp_path, spark_config, "il", "il_wh", parallelism=3, fetch_size=100)
    cfg = dataclasses.replace(cfg, warehouse=dataclasses.replace(cfg.warehouse, partition_rows=2000))
    writer = Writer(mariadb)
    writer.start()
    messages: list[str] = []
    try:
        summary = run_initial_load(spark, cfg, progress=messages.append)
    finally:
        writer.stop.set()
        writer.join()
    assert writer.statements > 0
    assert sorted(t.table for t in summary.tables) == ["il.empty", "il.ints", "il.pairs", "il.words"]
    assert all(t.rows > 0 for t in summary.tables if t.table != "il.empty")
    assert any("il.ints: copying ~" in m for m in messages) and any("rows/s" in m for m in messages)
    ledger = Ledger.of(cfg)
    assert str(ledger.checkpoint().position) == summary.p0  # type: ignore[union-attr]
    (load,) = ledger.loads()
    assert load.state == "complete" and load.rows["il.empty"] == 0
    # The delta from P0 makes the copy exact, whatever the writer did during it.
    assert run_extract(cfg, progress=_quiet) is not None
    run_materialize(spark, cfg)
    _same_as_source(mariadb, spark, cfg, "ints", "id, v, n", "id")
    _same_as_source(mariadb, spark, cfg, "pairs", "a, b, x", "a, b")
    _same_as_source(mariadb, spark, cfg, "words", "w, n", "w")
    assert spark.sql(f"SELECT count(*) FROM {table_name(cfg, 'il', 'empty')}").collect()[0][0] == 0
    # Re-loading one table while deltas continue: its own P0; the next intervals (which start at or
    # before it) replay the changes since then.
    mariadb.execute("UPDATE il.words SET n = -n WHERE n % 2 = 0")
    writer = Writer(mariadb)
    writer.start()
    try:
        again = run_initial_load(spark, cfg, only=["il.words"], progress=_quiet)
    finally:
        writer.stop.set()
        writer.join()
    assert [t.table for t in again.tables] == ["il.words"] and not again.first
    assert ledger.checkpoint().interval == "0000000001"  # type: ignore[union-attr]  # not moved back to P0
    while run_extract(cfg, progress=_quiet) is not None:
        pass
    run_materialize(spark, cfg)
    for table, columns, order in (
        ("ints", "id, v, n", "id"),
        ("pairs", "a, b, x", "a, b"),
        ("words", "w, n", "w"),
    ):
        _same_as_source(mariadb, spark, cfg, table, columns, order)


def test_spark_copy_reads_a_source_that_requires_tls_and_a_client_certificate(
    tls_mariadb: TlsMariaDB, tls_certificates: Certificates, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    """Spark's copy (Connector/J in the executors) with the settings of the job's own connections:
    the server refuses plain text and the account a connection without the client certificate."""
    db, certs = tls_mariadb, tls_certificates
    db.execute(
        "DROP DATABASE IF EXISTS il",
        "CREATE DATABASE il",
        "CREATE TABLE il.t (id INT PRIMARY KEY, v VARCHAR(20))",
        "INSERT INTO il.t SELECT seq, CONCAT('v', seq) FROM il.seq_1_to_500",
    )
    cfg = _config(db, tmp_path, spark_config, "il", "il_tls", parallelism=2, engine="spark")
    source = dataclasses.replace(
        cfg.source,
        tls="verify_identity",
        tls_ca=str(certs.ca),
        tls_cert=str(certs.client_cert),
        tls_key=str(certs.client_key),
    )
    db.execute("ALTER USER 'loader'@'127.0.0.1' REQUIRE X509")
    try:
        summary = run_initial_load(spark, dataclasses.replace(cfg, source=source), progress=_quiet)
    finally:
        db.execute("ALTER USER 'loader'@'127.0.0.1' REQUIRE NONE")
    assert [t.rows for t in summary.tables] == [500]
    _same_as_source(db, spark, cfg, "t", "id, v", "id")


@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_a_copy_that_loses_the_source_names_it_commits_nothing_and_the_rerun_loads_the_table(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any, engine: str
) -> None:
    """A key range's read cut in the middle (a proxy between the copy and the server): the load
    fails as transient, naming the source and the table, and its next run copies the table."""
    mariadb.execute(
        "DROP DATABASE IF EXISTS il",
        "CREATE DATABASE il",
        "CREATE TABLE il.cut (id INT PRIMARY KEY, cut_here VARCHAR(100))",
        "INSERT INTO il.cut SELECT seq, REPEAT('x', 100) FROM il.seq_1_to_4000",
    )
    cfg = _config(mariadb, tmp_path, spark_config, "il", f"il_cut_{engine}", parallelism=2, engine=engine)
    # The proxy reads the queries to find the copy's connections: plain text (the server allows
    # it); only the copy's reads select the column by name, the key ranges' queries do not.
    cfg = dataclasses.replace(cfg, source=dataclasses.replace(cfg.source, tls="disabled"))
    with proxy((mariadb.host, mariadb.port), cut_on=b"cut_here", cut_after=50_000) as middle:
        through = dataclasses.replace(cfg, source=dataclasses.replace(cfg.source, port=middle.port))
        with pytest.raises(TransientError) as lost:
            run_initial_load(spark, through, progress=_quiet)
    said = str(lost.value)
    assert said.startswith(f"source {cfg.source.name} (127.0.0.1:{middle.port}): "), said
    assert "il.cut" in said and "Nothing of the table was committed" in said, said
    assert middle.cuts >= 1
    assert not spark.catalog.tableExists(table_name(cfg, "il", "cut"))
    run_initial_load(spark, cfg, progress=_quiet)
    _same_as_source(mariadb, spark, cfg, "cut", "id, cut_here", "id")


def test_each_key_range_is_written_by_the_task_that_read_it_where_ranges_follow_partitions(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    """Spark's copy into Iceberg: an integer key's ranges are spans of the key the table is
    partitioned by, so each range's rows are written where they were read (a file per range and
    partition it covers, in parallel) instead of being gathered a partition per task; a table
    bucketed by a text key keeps one file per bucket. The rows are the source's either way."""
    from tests.conftest import iceberg_table

    mariadb.execute(
        "DROP DATABASE IF EXISTS il",
        "CREATE DATABASE il",
        "CREATE TABLE il.ints (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        "CREATE TABLE il.words (w VARCHAR(10) PRIMARY KEY, n INT)",
        "INSERT INTO il.ints SELECT seq, CONCAT('v', seq), seq FROM il.seq_1_to_3000",
        "INSERT INTO il.words SELECT CONCAT('w', seq), seq FROM il.seq_1_to_500",
    )
    cfg = _config(mariadb, tmp_path, spark_config, "il", "il_ranges", parallelism=3, engine="spark")
    cfg = dataclasses.replace(
        cfg, warehouse=dataclasses.replace(cfg.warehouse, format="iceberg", partition_rows=2000)
    )
    run_initial_load(spark, cfg, progress=_quiet)

    def files(table: str) -> dict[str, int]:
        found: dict[str, int] = {}
        for task in iceberg_table(cfg, "il", table).scan().plan_files():
            found[str(task.file.partition)] = found.get(str(task.file.partition), 0) + 1
        return found

    # Ranges 1-1000, 1001-2000, 2001-3000; partitions 0-1999 and 2000-3999.
    assert sorted(files("ints").values()) == [2, 2]
    assert set(files("words").values()) == {1} and len(files("words")) == 4
    _same_as_source(mariadb, spark, cfg, "ints", "id, v, n", "id")
    _same_as_source(mariadb, spark, cfg, "words", "w, n", "w")


def test_tables_without_a_key_are_refused_unless_one_is_configured(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS il",
        "CREATE DATABASE il",
        "CREATE TABLE il.logs (at DATETIME(6), msg VARCHAR(20))",
        "INSERT INTO il.logs VALUES ('2024-01-01 00:00:00.1', 'a'), ('2024-01-01 00:00:00.2', 'b')",
    )
    cfg = _config(mariadb, tmp_path, spark_config, "il", "il_nokey")
    with pytest.raises(LoaderError, match=r"table il\.logs has no primary key.*keys ="):
        run_initial_load(spark, cfg, progress=_quiet)
    ledger = Ledger.of(cfg)
    assert ledger.checkpoint() is None and ledger.loads() == []  # refused before P0 was recorded
    keyed = dataclasses.replace(cfg, tables=dataclasses.replace(cfg.tables, keys={"il.logs": ("at",)}))
    # A configured key must identify a row: rows sharing it would be merged into one.
    with pytest.raises(
        LoaderError, match=r"the key \['at'\] configured for il\.logs does not identify a row"
    ):
        run_initial_load(spark, keyed, progress=_quiet)
    mariadb.execute("ALTER TABLE il.logs ADD UNIQUE KEY (at)")  # but NULLs may repeat
    with pytest.raises(LoaderError, match="a UNIQUE index allows many NULLs"):
        run_initial_load(spark, keyed, progress=_quiet)
    assert ledger.checkpoint() is None and ledger.loads() == []
    mariadb.execute("ALTER TABLE il.logs MODIFY at DATETIME(6) NOT NULL")
    summary = run_initial_load(spark, keyed, progress=_quiet)
    assert [(t.table, t.rows) for t in summary.tables] == [("il.logs", 2)]
    with pytest.raises(LoadError, match="not among the tables the config selects"):
        run_initial_load(spark, keyed, only=["il.nope"], progress=_quiet)


def test_the_first_load_copies_every_selected_table(
    mariadb: MariaDB, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS il", "CREATE DATABASE il", "CREATE TABLE il.a (id INT PRIMARY KEY)"
    )
    cfg = _config(mariadb, tmp_path, spark_config, "il", "il_first")
    with pytest.raises(LoadError, match="first initial load copies every selected table"):
        run_initial_load(spark, cfg, only=["il.a"], progress=_quiet)


def test_a_million_rows_stream_through_a_small_driver(mariadb: MariaDB, tmp_path: Path) -> None:
    """Spark's copy: 1,000,000 rows of ~400 bytes (~400 MB) in one key range through a 512 MB driver:
    it only works if the copy streams, since the rows alone would not fit."""
    import json
    import os
    import subprocess
    import sys

    mariadb.execute(
        "DROP DATABASE IF EXISTS ilbig",
        "CREATE DATABASE ilbig",
        "CREATE TABLE ilbig.big (id BIGINT PRIMARY KEY, pad VARCHAR(500))",
        "INSERT INTO ilbig.big SELECT seq, CONCAT(seq, REPEAT('x', 400)) FROM ilbig.seq_1_to_1000000",
    )
    config = mariadb.config_file(
        tmp_path,
        "big",
        "ilbig.*",
        more='[load]\nengine = "spark"\nparallelism = 1\n[spark]\nconf = { "spark.driver.memory" = "512m", "spark.sql.shuffle.partitions" = "2" }\n',
    )
    loader = str(Path(sys.executable).with_name("loader"))
    env = {**os.environ, "LOADER_TEST_PASSWORD": mariadb.password}
    done = subprocess.run(
        [loader, "initial-load", "--config", str(config), "--output", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert [(t["table"], t["rows"]) for t in summary["tables"]] == [("ilbig.big", 1_000_000)]
    assert "ilbig.big: copying ~" in done.stderr and "rows/s" in done.stderr


def test_a_client_certificate_for_sparks_copy_on_a_cluster_is_refused_naming_the_source(
    tmp_path: Path,
) -> None:
    """The executors could not read the keystore the driver writes: refused (before the copy
    touches the table), unless [load] jdbc_url brings its own TLS options."""
    from loader.core.config import load_config
    from loader.core.errors import SourceError
    from loader.source.connection import Credentials
    from loader.source.tls import Tls
    from loader.warehouse.initial_load import jdbc_tls

    cfg = load_config(None, env={"LOADER__SPARK__MASTER": "spark://master:7077"})
    creds = Credentials(
        "db", 3306, "loader", "pw", name="shop", tls=Tls("required", cert="/c.pem", key="/k.pem")
    )
    with pytest.raises(
        SourceError, match=r"^source shop \(db:3306\): Spark's copy on spark://master:7077 cannot present"
    ):
        jdbc_tls(cfg, creds, None, "jdbc:mysql://db:3306/")
    assert jdbc_tls(cfg, creds, None, "jdbc:mysql://db:3306/?sslMode=verify-full&keyStore=/ks.p12") == {}
