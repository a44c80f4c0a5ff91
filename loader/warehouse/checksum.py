"""Row counts and checksums per key range, on the source (SQL) and the warehouse (Spark).

The source side runs in one consistent snapshot (``START TRANSACTION WITH CONSISTENT SNAPSHOT``)
at a known binlog position, so its sums are those of the source at that position: MariaDB reports
the snapshot's position (``binlog_snapshot_file``/``_position``); MySQL does not, so there the
snapshot starts under the global read lock, held only while it starts and the position is read
(as ``mysqldump --single-transaction --source-data`` does), waited for at most
``READ_LOCK_WAIT`` seconds. Per table it walks the key's index for range
bounds (about ``range_rows`` rows apart, at most ``MAX_RANGES`` ranges) and then sums every range
in one scan. The warehouse side groups its rows into the same ranges (``checksum_sql``) once the
warehouse is at that position (``steps.checksum`` brings it there), and the ranges whose count or
checksum differ are reported with their key bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loader.core.config import Config, SourceConfig, TablesConfig
from loader.core.driver import pymysql
from loader.core.errors import SourceError, TransientError
from loader.core.naming import INVALID_DATES_COLUMN
from loader.core.positions import Position
from loader.source.connection import connect, credentials, current_position
from loader.state.ledger import Ledger
from loader.warehouse import checksum_sql as sql
from loader.warehouse.checks import DifferingRange, TableChecksum
from loader.warehouse.checksum_sql import DEFAULT_RANGE_ROWS
from loader.warehouse.initial_load import SourceTableInfo, selected_tables
from loader.warehouse.tables import (
    key_comparison,
    quote_identifier,
    rows_to_compare,
    table_mode,
    table_name,
    table_properties,
)

MAX_RANGES = 1000
# How long the checksum waits for MySQL's global read lock (writes queue behind a waiting
# FLUSH TABLES WITH READ LOCK, so the wait is short and a busy source refuses rather than stalls).
READ_LOCK_WAIT = 5
ER_LOCK_WAIT_TIMEOUT, ER_SPECIFIC_ACCESS_DENIED = 1205, 1227
Progress = Callable[[str], None]


@dataclass
class RangeSums:
    """One key range of one side: its rows and the XOR of their 64-bit checksums."""

    index: int
    rows: int
    checksum: int


@dataclass
class TableSums:
    """A source table's ranges and sums, and what the warehouse side needs to sum the same ranges."""

    schema: str
    table: str
    columns: list[list[str]]  # [name, MySQL type]
    key: list[str]
    bounds: list[list[str]]  # each range's last key, as literals of both dialects
    shown_bounds: list[list[str]]
    ranges: list[RangeSums] = field(default_factory=list)

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.ranges)


@dataclass
class SourceSums:
    """Every selected table's sums at one source position."""

    position: str
    tables: list[TableSums]
    dialect: sql.Dialect = field(default_factory=sql.Dialect)  # the source server's check texts


# --- the source side ------------------------------------------------------------------------


def _bounds(conn: Any, info: SourceTableInfo, order: list[str], range_rows: int) -> list[tuple[Any, ...]]:
    """Each range's last key (the key columns' ``order`` values), in the order both sides compare."""
    native = [quote_identifier(k) for k in info.key]
    step = max(range_rows, -(-info.estimated_rows // MAX_RANGES), 1)
    found: list[tuple[Any, ...]] = []
    last: list[str] | None = None
    with conn.cursor() as cur:
        while True:
            where = f"WHERE {key_comparison(native, last, '>')}" if last else ""
            cur.execute(
                f"SELECT {', '.join(native + order)} FROM {info.sql_name} {where} "
                f"ORDER BY {', '.join(native)} LIMIT 1 OFFSET {step - 1}"
            )
            row = cur.fetchone()
            if row is None:
                break
            last = [str(conn.escape(v)) for v in row[: len(native)]]
            found.append(tuple(bytes(v) if isinstance(v, bytearray) else v for v in row[len(native) :]))
    # The index's order is the collation's; the ranges compare bytes (checksum_sql), so re-sort.
    return sorted(set(found))


def _table_sums(conn: Any, info: SourceTableInfo, range_rows: int, dialect: sql.Dialect) -> TableSums:
    types = {c.name: c.mysql_type for c in info.columns}
    order = sql.KeyOrder([sql.mysql_order_value(quote_identifier(k), types[k]) for k in info.key])
    bounds = _bounds(conn, info, order.values, range_rows)
    literals = [[sql.literal(v) for v in b] for b in bounds]
    checksum = sql.mysql_row_checksum([(c.name, c.mysql_type) for c in info.columns], dialect)
    sums = TableSums(
        info.schema,
        info.table,
        [[c.name, c.mysql_type] for c in info.columns],
        list(info.key),
        literals,
        [[sql.shown(v) for v in b] for b in bounds],
    )
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT {order.range_index(literals)} AS r, COUNT(*), BIT_XOR({checksum}) "
            f"FROM {info.sql_name} GROUP BY r ORDER BY r"
        )
        sums.ranges = [RangeSums(int(r), int(n), int(x)) for r, n, x in cur.fetchall()]
    return sums


def source_sums(
    source: SourceConfig,
    tables: TablesConfig,
    only: list[str] | None = None,
    range_rows: int = DEFAULT_RANGE_ROWS,
    progress: Progress = print,
) -> SourceSums:
    """The sums of every table ``tables`` selects (or the named ones) in one snapshot of the
    source.

    Raises:
        SourceError: no snapshot at a known binlog position can be had (MySQL: the account lacks
            RELOAD for the global read lock).
        TransientError: MySQL's global read lock was not had within ``READ_LOCK_WAIT`` seconds.
    """
    creds = credentials(source)
    conn = connect(creds)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
            status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
        if status.get("binlog_snapshot_file"):
            position = Position(status["binlog_snapshot_file"], int(status["binlog_snapshot_position"]))
        else:
            conn.rollback()
            position = _snapshot_under_read_lock(conn, source.name, creds.user)
        dialect = source_dialect(conn)
        summed = []
        for info in selected_tables(conn, tables, only):
            sums = _table_sums(conn, info, range_rows, dialect)
            ranges = len(sums.bounds) + 1
            progress(
                f"{info.qualified}: {sums.rows:,} rows in {ranges} key range{'' if ranges == 1 else 's'} "
                "summed at the source"
            )
            summed.append(sums)
        conn.commit()
    finally:
        conn.close()
    return SourceSums(str(position), summed, dialect)


def source_dialect(conn: Any) -> sql.Dialect:
    """MD5 where the server has it, else SHA-256 (MySQL 9.7 has no MD5); a double's text through
    JSON where the server has JSON values (MySQL), else its CAST text (MariaDB)."""

    def answers(probe: str) -> bool:
        with conn.cursor() as cur:
            try:
                cur.execute(probe)
                cur.fetchall()
            except pymysql.err.MySQLError:
                return False
        return True

    return sql.Dialect(
        "md5" if answers("SELECT MD5('')") else "sha256",
        "json" if answers("SELECT CAST(CAST(1 AS DOUBLE) AS JSON)") else "server",
    )


def _snapshot_under_read_lock(conn: Any, source: str, user: str) -> Position:
    """A consistent snapshot started on a server that does not report its binlog position
    (MySQL), at the position read while the global read lock holds every commit back."""
    with conn.cursor() as cur:
        cur.execute(f"SET SESSION lock_wait_timeout = {READ_LOCK_WAIT}")
        try:
            cur.execute("FLUSH TABLES WITH READ LOCK")
        except pymysql.err.MySQLError as exc:
            code = exc.args[0] if exc.args else None
            if code == ER_LOCK_WAIT_TIMEOUT:
                raise TransientError(
                    f"source {source}: the checksum's snapshot needs MySQL's global read lock for a "
                    f"moment, and statements running on the source held it off for {READ_LOCK_WAIT} s; "
                    "nothing was summed: run the checksum again when they have ended"
                ) from None
            if code == ER_SPECIFIC_ACCESS_DENIED:
                raise SourceError(
                    f"source {source}: the checksum needs a snapshot at a known binlog position, which "
                    "MySQL gives only under the global read lock (FLUSH TABLES WITH READ LOCK, held "
                    f"while the snapshot starts), and the account {user} may not take it: "
                    f"GRANT RELOAD ON *.* TO {user}, or compare with `loader compare` on a quiet source"
                ) from None
            raise
        try:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            position = current_position(conn)
        finally:
            cur.execute("UNLOCK TABLES")
    return position


# --- the warehouse side ---------------------------------------------------------------------


def _warehouse_ranges(
    spark: Any, name: str, sums: TableSums, invalid_dates: str | None, dialect: sql.Dialect, kept: str = ""
) -> dict[int, RangeSums]:
    columns = [(c, t) for c, t in sums.columns]
    types = dict(columns)
    order = sql.KeyOrder([sql.spark_order_value(quote_identifier(k), types[k]) for k in sums.key])
    where = f" WHERE {kept}" if kept else ""  # tables.rows_to_compare
    rows = spark.sql(
        f"SELECT r, count(*), bit_xor(x) FROM "
        f"(SELECT {order.range_index(sums.bounds)} AS r, {sql.spark_row_checksum(columns, invalid_dates, dialect)} AS x FROM {name}{where}) "
        "GROUP BY r"
    ).collect()
    return {int(r[0]): RangeSums(int(r[0]), int(r[1]), sql.unsigned(int(r[2]))) for r in rows}


def compare_sums(spark: Any, cfg: Config, source: SourceSums) -> list[TableChecksum]:
    """Each table's warehouse sums over the source's ranges, and the ranges that differ."""
    sql.register_functions(spark)
    not_loaded = Ledger.of(cfg).not_loaded()
    out = []
    for sums in source.tables:
        name = table_name(cfg, sums.schema, sums.table)
        result = TableChecksum(
            sums.qualified, name.replace("`", ""), sums.rows, 0, len(sums.bounds) + 1, True, sums.key
        )
        out.append(result)
        result.not_loaded = not_loaded.get((sums.schema, sums.table))
        if result.not_loaded:
            result.equal = False
            continue
        if not spark.catalog.tableExists(name):
            result.equal, result.problem = False, "the warehouse has no such table"
            continue
        held = set(spark.table(name).columns)
        missing = [c for c, _ in sums.columns if c not in held]
        if missing:
            result.equal = False
            result.problem = f"the warehouse table has no column {', '.join(missing)}"
            continue
        invalid_dates = INVALID_DATES_COLUMN if INVALID_DATES_COLUMN in held else None
        theirs = _warehouse_ranges(
            spark,
            name,
            sums,
            invalid_dates,
            source.dialect,
            rows_to_compare(
                table_mode(table_properties(spark, name)),
                cfg.source.name,
                cfg.tables,
                sums.schema,
                sums.table,
            ),
        )
        result.warehouse_rows = sum(r.rows for r in theirs.values())
        ours = {r.index: r for r in sums.ranges}
        for index in sorted(set(ours) | set(theirs)):
            mine, other = ours.get(index), theirs.get(index)
            if mine is not None and other is not None and mine == other:
                continue
            result.equal = False
            result.differing.append(
                DifferingRange(
                    after=sums.shown_bounds[index - 1] if index > 0 else None,
                    up_to=sums.shown_bounds[index] if index < len(sums.bounds) else None,
                    source_rows=mine.rows if mine else 0,
                    warehouse_rows=other.rows if other else 0,
                )
            )
    return out
