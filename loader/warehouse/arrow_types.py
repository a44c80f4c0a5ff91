"""The copy without Spark (``[load] engine = "arrow"``): how each column is read from the source
and becomes its warehouse value in Arrow, the same value Spark's copy gives it.

The warehouse types are ``types.spark_type``'s; this module only says how to reach them without
Spark. Values are read as text (``select_sql``: what the Spark copy reads, but FLOAT widened to
DOUBLE, whose text MariaDB writes to the last digit) and cast as ``types.cast_sql`` casts the
staged text: numbers exactly, DATE, DATETIME and TIMESTAMP values a calendar does not hold
(MySQL's zero dates, a zero month or day, February 30th) as NULL with their text in
``naming.INVALID_DATES_COLUMN``, TIMESTAMP text read in UTC (the reading session's zone), binary
values as their bytes, the rest as text.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from loader.warehouse import types

# The Arrow type of each Spark type Iceberg keeps: Iceberg has no integers narrower than int.
_ARROW = {
    "tinyint": pa.int32(),
    "smallint": pa.int32(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.large_string(),
    "binary": pa.large_binary(),
    "date": pa.date32(),
    "timestamp_ntz": pa.timestamp("us"),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "boolean": pa.bool_(),
}
# The format of the date part of DATE, DATETIME and TIMESTAMP text.
_DATE = "%Y-%m-%d"


def arrow_type(spark_type: str) -> pa.DataType:
    """The Arrow type of a warehouse (Spark SQL) column type, as an Iceberg table stores it."""
    if spark_type.startswith("decimal("):
        precision, _, scale = spark_type[len("decimal(") : -1].partition(",")
        return pa.decimal128(int(precision), int(scale))
    if spark_type == "map<string,string>":  # naming.INVALID_DATES_COLUMN's
        return pa.map_(pa.large_string(), pa.large_string())
    return _ARROW[spark_type]


def select_sql(column: str, mysql_type: str) -> str:
    """MySQL SQL reading a column (a backquoted identifier) as the text ``to_arrow`` casts."""
    if types.type_parts(mysql_type)[0] == "float":
        return f"CAST({column} AS DOUBLE)"  # FLOAT's own text keeps 6 digits
    return types.source_select_sql(column, mysql_type)


def valid_dates(text: pa.Array) -> pa.Array:
    """Whether each DATE, DATETIME or TIMESTAMP text's date is on the calendar (false for NULL):
    its date part read and written back unchanged (the reading rolls February 30th over)."""
    day = pc.utf8_slice_codeunits(text, 0, 10)
    read = pc.strptime(day, format=_DATE, unit="s", error_is_null=True)
    return pc.fill_null(pc.equal(pc.strftime(read, format=_DATE), day), False)


def to_arrow(values: pa.Array, mysql_type: str) -> tuple[pa.Array, pa.Array | None]:
    """A column's values as read (``pa.large_binary()``, by ``select_sql``) in its warehouse type,
    and for DATE, DATETIME and TIMESTAMP columns the text of each value the type cannot hold (a
    NULL value then; the text NULL elsewhere; None for other columns and for columns without
    such values)."""
    spark = types.spark_type(mysql_type)
    target = arrow_type(spark)
    base = types.type_parts(mysql_type)[0]
    if spark == "binary":
        return values, None
    text = values.cast(pa.large_string())  # checks that the text is UTF-8
    if spark == "string":
        return text, None
    if base in types.DATE_KINDS:
        # UTC text (TIMESTAMP's) read as such, then marked as UTC.
        read = pa.timestamp("us") if base == "timestamp" else target
        try:
            return text.cast(read).cast(target), None  # every value on the calendar (Arrow checks)
        except pa.ArrowInvalid:
            valid = valid_dates(text)
        none = pa.scalar(None, pa.large_string())
        return pc.if_else(valid, text, none).cast(read).cast(target), pc.if_else(valid, none, text)
    if base == "float":
        return text.cast(pa.float64()).cast(target), None
    return text.cast(target), None


def invalid_dates(lost: list[tuple[str, pa.Array]], rows: int) -> pa.Array:
    """``naming.INVALID_DATES_COLUMN`` of ``rows`` rows: of ``(column name, text lost)``
    (``to_arrow``'s second answer), a map from each column's name to its text, in column order,
    in the rows that lost some; NULL in the other rows."""
    kind = pa.map_(pa.large_string(), pa.large_string())
    if not lost:
        return pa.nulls(rows, kind)
    at = pc.indices_nonzero(functools.reduce(pc.or_, (pc.is_valid(text) for _, text in lost)))
    columns = [(name, text.take(at).to_pylist()) for name, text in lost]
    keys: list[str] = []
    items: list[str] = []
    counts: Any = np.zeros(rows, np.int32)
    for i, row in enumerate(at.to_pylist()):
        for name, text in columns:
            if text[i] is not None:
                keys.append(name)
                items.append(text[i])
                counts[row] += 1
    offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int32)])
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()),
        pa.array(keys, pa.large_string()),
        pa.array(items, pa.large_string()),
        type=kind,
        mask=pa.array(counts == 0),
    )
