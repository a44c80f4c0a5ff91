"""Warehouse tables next to their source tables: row counts, whether every row is equal, a sample.

For checking a pipeline by eye (the demo) and by script; it reads whole tables, so it is meant
for small ones.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from dataclasses import dataclass
from typing import Any

from loader.core import modes
from loader.core.config import Config
from loader.core.naming import INVALID_DATES_COLUMN
from loader.source.connection import connect, credentials
from loader.staging.manifest import ColumnSpec
from loader.state.ledger import Ledger
from loader.warehouse.checks import RowDifference, TableComparison
from loader.warehouse.iceberg import snapshot_after
from loader.warehouse.initial_load import selected_tables
from loader.warehouse.rollback import check_interval
from loader.warehouse.tables import (
    quote_identifier,
    rows_to_compare,
    source_filter,
    table_mode,
    table_name,
    table_properties,
)
from loader.warehouse.types import BINARY_KINDS, DATE_KINDS, INTEGER_KINDS, spark_string, type_parts

_WIDE = decimal.Context(prec=200)  # exact for DECIMAL(65,30) and any text of one


def comparable(value: Any, mysql_type: str) -> Any:
    """A value of a column of ``mysql_type`` in one notation, whichever side gave it: pymysql's
    value of the source, or Spark's of the warehouse column (``_warehouse_select``), so that equal
    values are equal and any other difference stays one. JSON-ready: an int, a float, a text or
    None.

    BIT and integers as numbers; FLOAT and DOUBLE as the value stored (a FLOAT read from the
    source as the double it holds: ``_source_select``); DECIMAL as its exact text with the
    column's scale digits (more when the value has more); TIME, DATE, DATETIME, TIMESTAMP (UTC) as
    MySQL's text with the column's fraction digits (a zero or invalid date as its text); binary
    values as hex.
    """
    if value is None:
        return None
    base, args, _ = type_parts(mysql_type)
    if base == "bit":
        return int.from_bytes(value, "big") if isinstance(value, bytes | bytearray) else int(value)
    if base in BINARY_KINDS:
        return bytes(value).hex() if isinstance(value, bytes | bytearray) else value
    if isinstance(value, bytes | bytearray):  # text of a column read as bytes
        return bytes(value).decode("utf-8", "backslashreplace")
    if base in INTEGER_KINDS or base == "year":
        return int(value)
    if base == "decimal":
        return _decimal_text(value, int(args.split(",")[1]) if "," in args else 0)
    if base in ("float", "double"):
        return float(value)
    if base == "time":
        return _time_text(value, int(args or 0))
    if base in DATE_KINDS:
        return _date_text(value, base, int(args or 0))
    return value


def _decimal_text(value: Any, scale: int) -> str:
    exact = decimal.Decimal(str(value))
    step = decimal.Decimal(1).scaleb(-scale)
    if exact == exact.quantize(step, context=_WIDE):
        exact = exact.quantize(step, context=_WIDE)
    return format(exact, "f")


_TIME = re.compile(r"(-?)(\d+):(\d{2}):(\d{2})(?:\.(\d{1,6}))?")


def _fraction(micros: int, digits: int) -> str:
    """``.ffffff`` cut to ``digits``, unless that would drop a digit that is not zero."""
    text = f"{micros:06d}"
    kept = text[:digits] if not text[digits:].strip("0") else text.rstrip("0")
    return f".{kept}" if kept else ""


def _time_text(value: Any, digits: int) -> str:
    if isinstance(value, dt.timedelta):
        negative = value < dt.timedelta(0)
        total = abs(value)
        seconds, micros = total.days * 86400 + total.seconds, total.microseconds
    else:
        m = _TIME.fullmatch(str(value).strip())
        if m is None:
            return str(value)
        negative = bool(m.group(1))
        seconds = (int(m.group(2)) * 60 + int(m.group(3))) * 60 + int(m.group(4))
        micros = int((m.group(5) or "").ljust(6, "0"))
    hours, rest = divmod(seconds, 3600)
    sign = "-" if negative and (seconds or micros) else ""
    return f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}{_fraction(micros, digits)}"


def _date_text(value: Any, base: str, digits: int) -> str:
    if isinstance(value, dt.datetime):
        text, micros = value.isoformat(" ", "seconds"), value.microsecond
    elif isinstance(value, dt.date):
        text, micros = value.isoformat(), 0
    else:  # MySQL's text: a zero or invalid date, or Spark's of a timestamp
        text, _, fraction = str(value).strip().partition(".")
        micros = int(fraction.ljust(6, "0")[:6]) if fraction.isdigit() else 0
    if base == "date":
        return text[:10]
    if len(text) == 10:
        text += " 00:00:00"
    return text + _fraction(micros, digits)


def _source_select(column: str, mysql_type: str) -> str:
    """MySQL SQL of a source column as ``comparable`` reads it: a FLOAT as the double it holds
    (its text has six digits: -3.40282e38 for the largest), a VECTOR as its bytes (the driver
    knows no VECTOR column)."""
    base = type_parts(mysql_type)[0]
    if base == "float":
        return f"CAST({column} AS DOUBLE)"
    if base == "vector":
        return f"CAST({column} AS BINARY)"
    return column


def _warehouse_select(column: str, mysql_type: str) -> str:
    """Spark SQL of a warehouse column as ``comparable`` reads it: a date, datetime or timestamp
    as its text (a TIMESTAMP in UTC, the session's zone; any year, where Python's dates start at
    year 1)."""
    if type_parts(mysql_type)[0] in DATE_KINDS:
        return f"CAST({column} AS STRING)"
    return column


@dataclass
class _Rows:
    """One side's rows of a table in ``comparable`` notation, by key."""

    count: int
    by_key: dict[tuple[Any, ...], tuple[Any, ...]]


def _rows(rows: list[tuple[Any, ...]], columns: list[ColumnSpec], key: list[int]) -> _Rows:
    by_key = {}
    for row in rows:
        values = tuple(comparable(v, c.mysql_type) for v, c in zip(row, columns, strict=True))
        by_key[tuple(values[i] for i in key)] = values
    return _Rows(len(rows), by_key)


def _key_order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is not None, v) for v in key)


def _row_differences(
    source: _Rows, warehouse: _Rows, names: list[str], key: list[int], shown: int
) -> tuple[int, list[RowDifference]]:
    """The rows that differ (a key only one side has, or a column whose values differ): how many,
    and the first ``shown`` in key order with the columns that differ."""
    keys = sorted(source.by_key.keys() | warehouse.by_key.keys(), key=_key_order)
    count, out = 0, list[RowDifference]()
    for k in keys:
        mine, theirs = source.by_key.get(k), warehouse.by_key.get(k)
        if mine == theirs:
            continue
        count += 1
        if len(out) >= shown:
            continue
        if mine is None or theirs is None:
            out.append(
                RowDifference(
                    list(k),
                    names,
                    None if mine is None else list(mine),
                    None if theirs is None else list(theirs),
                )
            )
            continue
        differ = [i for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b and i not in key]
        out.append(
            RowDifference(
                list(k), [names[i] for i in differ], [mine[i] for i in differ], [theirs[i] for i in differ]
            )
        )
    return count, out


def _rows_of(name: str, snapshot: int | None, where: str) -> str:
    """The FROM clause of the rows of table ``name`` (in an Iceberg ``snapshot`` of it) that
    ``where`` keeps."""
    version = f" VERSION AS OF {snapshot}" if snapshot is not None else ""
    return f"{name}{version}" + (f" WHERE {where}" if where else "")


def _warehouse_rows(
    spark: Any,
    name: str,
    columns: list[ColumnSpec],
    snapshot: int | None = None,
    kept: str = "",
) -> list[tuple[Any, ...]]:
    """The table's rows (in an Iceberg ``snapshot`` of it, else now) that ``kept`` keeps
    (``tables.rows_to_compare``); a date the warehouse holds as NULL with its text kept aside
    (MySQL's zero dates) comes back as that text, as the source gives it."""
    has_invalid = INVALID_DATES_COLUMN in spark.table(name).columns
    invalid = [i for i, c in enumerate(columns) if has_invalid and type_parts(c.mysql_type)[0] in DATE_KINDS]
    select = [_warehouse_select(quote_identifier(c.name), c.mysql_type) for c in columns] + [
        f"{quote_identifier(INVALID_DATES_COLUMN)}[{spark_string(columns[i].name)}]" for i in invalid
    ]
    out = []
    for row in spark.sql(f"SELECT {', '.join(select)} FROM {_rows_of(name, snapshot, kept)}").collect():
        values = list(row[: len(columns)])
        for i, text in zip(invalid, row[len(columns) :], strict=True):
            if values[i] is None:
                values[i] = text
        out.append(tuple(values))
    return out


def _first(rows: _Rows, count: int) -> list[list[Any]]:
    """The first ``count`` rows in key order."""
    return [list(rows.by_key[k]) for k in sorted(rows.by_key, key=_key_order)[:count]]


def compare_tables(
    spark: Any, cfg: Config, sample: int = 3, as_of: str | None = None
) -> list[TableComparison]:
    """Per selected table: rows in the source and the warehouse, equal or not (every value by
    ``comparable``, rows matched by key), the first ``sample`` rows of each and of those that differ.

    ``as_of``: the warehouse tables as they were right after this materialised interval
    (Iceberg snapshots); the source is read as it is now.

    Raises:
        ConfigError: ``as_of`` with Hive-format tables.
        LedgerError: ``as_of`` is not a materialised interval, or a load came after it.
        SnapshotError: a table's snapshots from ``as_of`` and before were expired.
    """
    if as_of is not None:
        check_interval(cfg, as_of, "compare --as-of")
    # Read as of an interval, a table copied later is refused (check_interval) or was there then.
    not_loaded = Ledger.of(cfg).not_loaded() if as_of is None else {}
    conn = connect(credentials(cfg.source))
    out = []
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")  # TIMESTAMPs in UTC, as the warehouse's
        for info in selected_tables(conn, cfg.tables, None):
            if (info.schema, info.table) in not_loaded:
                out.append(
                    TableComparison(
                        info.qualified,
                        table_name(cfg, info.schema, info.table).replace("`", ""),
                        0,
                        0,
                        False,
                        [c.name for c in info.columns],
                        [],
                        [],
                        not_loaded=not_loaded[(info.schema, info.table)],
                    )
                )
                continue
            names = [c.name for c in info.columns]
            key = [names.index(k) for k in info.key]
            select = ", ".join(_source_select(quote_identifier(c.name), c.mysql_type) for c in info.columns)
            with conn.cursor() as cur:
                cur.execute(f"SELECT {select} FROM {info.sql_name}")
                source = _rows(list(cur.fetchall()), info.columns, key)
            name = table_name(cfg, info.schema, info.table)
            warehouse = _Rows(0, {})
            mode, kept = modes.MIRROR, None
            if spark.catalog.tableExists(name):
                mode = table_mode(table_properties(spark, name))
                snapshot = None if as_of is None else snapshot_after(spark, name, cfg.source.name, as_of)
                if as_of is None or snapshot is not None:  # None as of an interval: it was empty
                    rows = rows_to_compare(mode, cfg.source.name, cfg.tables, info.schema, info.table)
                    warehouse = _rows(
                        _warehouse_rows(spark, name, info.columns, snapshot, rows), info.columns, key
                    )
                    if mode != modes.MIRROR:  # the rows it keeps besides: deleted, older versions
                        own = source_filter(cfg.source.name, cfg.tables, info.schema, info.table)
                        kept = int(
                            spark.sql(f"SELECT count(*) FROM {_rows_of(name, snapshot, own)}").collect()[0][0]
                        )
            differing, differences = _row_differences(source, warehouse, names, key, sample)
            if differing == 0 and source.count != warehouse.count:  # a key twice on one side
                differing = abs(source.count - warehouse.count)
            out.append(
                TableComparison(
                    table=info.qualified,
                    warehouse_table=name.replace("`", ""),
                    source_rows=source.count,
                    warehouse_rows=warehouse.count,
                    equal=differing == 0,
                    columns=names,
                    source_sample=_first(source, sample),
                    warehouse_sample=_first(warehouse, sample),
                    as_of=as_of,
                    mode=mode,
                    kept_rows=kept,
                    key=list(info.key),
                    differing_rows=differing,
                    differences=differences,
                )
            )
    finally:
        conn.close()
    return out
