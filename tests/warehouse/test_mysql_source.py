"""A MySQL source through the warehouse stages, in the worker's Spark: an initial load and a delta
of every column type (MySQL's JSON numbers and partial JSON updates among them), then ``compare``
and the checksum equal, and each value changed behind the binlog's back found by the checksum. The
checksum's snapshot starts under MySQL's global read lock; without the privilege to take it, or
when running statements hold it off, it stops with an error that says so."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

from loader.core.config import Config
from loader.core.errors import SourceError, TransientError
from loader.warehouse import checksum
from loader.warehouse.checksum import compare_sums, source_sums
from loader.warehouse.compare import compare_tables
from loader.warehouse.initial_load import run_initial_load
from tests.conftest import MySQL, assert_equal_to_source, delta, fresh_schema, quiet, schema_config
from tests.warehouse.test_checksum import EVERY_TYPE, TAMPER, _row

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCHEMA = "my_source"
DOCS = "docs (id INT PRIMARY KEY, doc JSON)"
# Numbers whose text MySQL writes otherwise than the shortest round trip does.
DOC_ROWS = [
    """(1, '{"f": 1e-7, "big": 1e15, "n": [9007199254740992.0, 1.5e-16, 0.1]}')""",
    """(2, JSON_OBJECT('d', CAST('0.0000001' AS DECIMAL(10,7)), 'z', CAST(0 AS DECIMAL(12,10))))""",
    """(3, '[1, 2.5, "ü", {"k": null}]')""",
]


@pytest.mark.parametrize("table_format", ["iceberg"])
def test_a_mysql_source_loads_every_type_and_checks_equal(
    mysql: MySQL, tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    names = ["a", "B", "é", "Z", "ß", "aa", "Ab", "c"]
    keys = [(name, n) for name in names for n in (1, 2, 3)]
    fresh_schema(mysql, SCHEMA, EVERY_TYPE, DOCS)
    mysql.execute(
        f"INSERT INTO {SCHEMA}.t VALUES {', '.join(_row(name, n) for name, n in keys)}",
        f"INSERT INTO {SCHEMA}.docs VALUES {', '.join(DOC_ROWS)}",
    )
    cfg = schema_config(mysql, tmp_path, spark_config, SCHEMA)
    run_initial_load(spark, cfg, progress=quiet)

    mysql.execute(
        f"INSERT INTO {SCHEMA}.t VALUES {_row('nulls', 1)}",
        f"UPDATE {SCHEMA}.t SET ti = NULL, de = NULL, fl = NULL, db = NULL, da = NULL, tx = NULL, "
        "bl = NULL, js = NULL, ge = NULL WHERE name = 'nulls'",
        f"UPDATE {SCHEMA}.t SET db = db * 3, tx = CONCAT(tx, '😀'), dt = NULL WHERE n = 2",
        f"DELETE FROM {SCHEMA}.t WHERE name = 'c' AND n = 3",
        f"INSERT INTO {SCHEMA}.t VALUES {_row('c', 3)}",
        # Partial updates: the binlog holds only the change, applied to the row's before image.
        "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
        f"UPDATE {SCHEMA}.docs SET doc = JSON_SET(doc, '$.f', 2.5e-7, '$.n[0]', 1e-15) WHERE id = 1",
        f"UPDATE {SCHEMA}.docs SET doc = JSON_REPLACE(doc, '$.d', CAST('0.0000100' AS DECIMAL(10,7))) WHERE id = 2",
        f"INSERT INTO {SCHEMA}.docs VALUES (4, '[1e-7, 1e300, -0.0]')",
    )
    delta(spark, cfg)
    compared = {c.table: c for c in compare_tables(spark, cfg, sample=50)}
    assert sorted(compared) == [f"{SCHEMA}.docs", f"{SCHEMA}.t"]
    for table, c in compared.items():
        assert c.equal and c.source_rows == c.warehouse_rows > 0, (table, c.differences)
    assert_equal_to_source(spark, cfg)

    # One column of each row changed without the binlog, and one row gone: every change is found.
    mysql.execute(
        "SET sql_log_bin = 0",
        *(
            f"UPDATE {SCHEMA}.t SET {column} = {change} WHERE name = '{name}' AND n = {n}"
            for (column, change), (name, n) in zip(TAMPER.items(), keys, strict=True)
        ),
        f"DELETE FROM {SCHEMA}.t WHERE name = 'nulls'",
        "SET sql_log_bin = 1",
    )
    checked = {
        c.table: c
        for c in compare_sums(spark, cfg, source_sums(cfg.source, cfg.tables, range_rows=1, progress=quiet))
    }
    table = checked[f"{SCHEMA}.t"]
    assert checked[f"{SCHEMA}.docs"].equal and not table.equal
    differing = {(r.up_to[0], int(r.up_to[1])) for r in table.differing if r.up_to}
    assert [c for c, key in zip(TAMPER, keys, strict=True) if key not in differing] == []


def test_the_checksum_says_what_mysqls_read_lock_needs(
    mysql: MySQL, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh_schema(mysql, "my_lock", "t (id INT PRIMARY KEY)")
    mysql.execute("INSERT INTO my_lock.t VALUES (1)")
    mysql.as_root(
        f"CREATE USER IF NOT EXISTS 'no_reload'@'127.0.0.1' IDENTIFIED BY '{mysql.password}'; "
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'no_reload'@'127.0.0.1'"
    )
    cfg = mysql.config(tmp_path, tables={"include": '["my_lock.*"]'})
    without = dataclasses.replace(cfg, source=dataclasses.replace(cfg.source, user="no_reload"))
    with pytest.raises(SourceError, match=r"GRANT RELOAD ON \*\.\* TO no_reload"):
        source_sums(without.source, without.tables, progress=quiet)

    # A statement holding a table: the lock is waited for READ_LOCK_WAIT seconds, then refused.
    monkeypatch.setattr(checksum, "READ_LOCK_WAIT", 1)
    holder = mysql.connect()
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.cursor() as cur:
            cur.execute("LOCK TABLES my_lock.t WRITE")
            locked.set()
            release.wait(30)
            cur.execute("UNLOCK TABLES")

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert locked.wait(10)
        with pytest.raises(TransientError, match="held it off for 1 s; nothing was summed"):
            source_sums(cfg.source, cfg.tables, progress=quiet)
    finally:
        release.set()
        thread.join()
        holder.close()
    (sums,) = source_sums(cfg.source, cfg.tables, progress=quiet).tables
    assert sums.rows == 1
