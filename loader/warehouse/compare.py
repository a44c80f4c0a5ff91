"""Warehouse tables next to their source tables: row counts, whether every row is equal, a sample.

For checking a pipeline by eye (the demo) and by script; it reads whole tables, so it is meant
for small ones.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from loader import modes
from loader.config import Config
from loader.ledger import Ledger
from loader.naming import INVALID_DATES_COLUMN
from loader.results import TableComparison
from loader.source import connect, credentials
from loader.staging.manifest import ColumnSpec
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
from loader.warehouse.types import DATE_KINDS, spark_string, type_parts


def _plain(value: Any) -> Any:
    """One notation for values from either side (Spark returns bytearray, MySQL bytes, ...)."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, dt.timedelta):  # TIME: the warehouse keeps MySQL's text
        sign = "-" if value < dt.timedelta(0) else ""
        total = abs(value)
        hours, rest = divmod(total.days * 86400 + total.seconds, 3600)
        text = f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
        return text + (f".{total.microseconds:06d}" if total.microseconds else "")
    if isinstance(value, decimal.Decimal) and value.as_tuple().exponent == 0:
        return int(value)  # BIGINT UNSIGNED is decimal(20,0) in the warehouse
    if isinstance(value, dt.datetime | dt.date | decimal.Decimal):
        return str(value)
    return value


def _rows_of(name: str, snapshot: int | None, where: str) -> str:
    """The FROM clause of the rows of table ``name`` (in an Iceberg ``snapshot`` of it) that
    ``where`` keeps."""
    version = f" VERSION AS OF {snapshot}" if snapshot is not None else ""
    return f"{name}{version}" + (f" WHERE {where}" if where else "")


def _warehouse_rows(
    spark: Any,
    name: str,
    columns: list[ColumnSpec],
    order: str,
    snapshot: int | None = None,
    kept: str = "",
) -> list[tuple[Any, ...]]:
    """The table's rows (in an Iceberg ``snapshot`` of it, else now) that ``kept`` keeps
    (``tables.rows_to_compare``), in key order; a date the warehouse holds as NULL with its text
    kept aside (MySQL's zero dates) comes back as that text, as the source gives it."""
    has_invalid = INVALID_DATES_COLUMN in spark.table(name).columns
    invalid = [i for i, c in enumerate(columns) if has_invalid and type_parts(c.mysql_type)[0] in DATE_KINDS]
    select = [quote_identifier(c.name) for c in columns] + [
        f"{quote_identifier(INVALID_DATES_COLUMN)}[{spark_string(columns[i].name)}]" for i in invalid
    ]
    out = []
    for row in spark.sql(
        f"SELECT {', '.join(select)} FROM {_rows_of(name, snapshot, kept)} ORDER BY {order}"
    ).collect():
        values = list(row[: len(columns)])
        for i, text in zip(invalid, row[len(columns) :], strict=True):
            if values[i] is None:
                values[i] = text
        out.append(tuple(_plain(v) for v in values))
    return out


def compare_tables(
    spark: Any, cfg: Config, sample: int = 3, as_of: str | None = None
) -> list[TableComparison]:
    """Per selected table: rows in the source and the warehouse, equal or not, the first rows of each.

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
            select = ", ".join(quote_identifier(n) for n in names)
            order = ", ".join(quote_identifier(k) for k in info.key)
            with conn.cursor() as cur:
                cur.execute(f"SELECT {select} FROM {info.sql_name} ORDER BY {order}")
                source = [tuple(_plain(v) for v in row) for row in cur.fetchall()]
            name = table_name(cfg, info.schema, info.table)
            warehouse = []
            mode, kept = modes.MIRROR, None
            if spark.catalog.tableExists(name):
                mode = table_mode(table_properties(spark, name))
                snapshot = None if as_of is None else snapshot_after(spark, name, cfg.source.name, as_of)
                if as_of is None or snapshot is not None:  # None as of an interval: it was empty
                    rows = rows_to_compare(mode, cfg.source.name, cfg.tables, info.schema, info.table)
                    warehouse = _warehouse_rows(spark, name, info.columns, order, snapshot, rows)
                    if mode != modes.MIRROR:  # the rows it keeps besides: deleted, older versions
                        own = source_filter(cfg.source.name, cfg.tables, info.schema, info.table)
                        kept = int(
                            spark.sql(f"SELECT count(*) FROM {_rows_of(name, snapshot, own)}").collect()[0][0]
                        )
            out.append(
                TableComparison(
                    table=info.qualified,
                    warehouse_table=name.replace("`", ""),
                    source_rows=len(source),
                    warehouse_rows=len(warehouse),
                    equal=source == warehouse,
                    columns=names,
                    source_sample=[list(r) for r in source[:sample]],
                    warehouse_sample=[list(r) for r in warehouse[:sample]],
                    as_of=as_of,
                    mode=mode,
                    kept_rows=kept,
                )
            )
    finally:
        conn.close()
    return out
