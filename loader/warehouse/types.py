"""The one MySQL → Spark type map: warehouse column types, and how a staged CSV field becomes one.

Staged fields are strings (``staging.csvformat``); ``cast_sql`` turns one into its warehouse type
exactly. The MySQL types are the short forms the binlog reader writes into manifests
(``rowplan.PlanColumn.mysql_type``: ``int unsigned``, ``decimal(12,2)``, ``datetime(6)``,
``varchar``, ``bit(13)``...); ``normalize`` turns a ``COLUMN_TYPE`` of ``information_schema``
(``int(10) unsigned``, ``enum('a','b')``, ``longtext``) into the same form.

| MySQL | Spark | note |
|---|---|---|
| tinyint, smallint, mediumint, int, bigint | tinyint .. bigint | unsigned ones one size up |
| bigint unsigned | decimal(20,0) | |
| decimal(p,s), p <= 38 | decimal(p,s) | |
| decimal(p,s), p > 38 | string | Spark decimals stop at 38 digits: exact text |
| float, double | float, double | |
| year | smallint | 0 is the zero year |
| bit(n) | bigint; decimal(20,0) for n = 64 | |
| date | date | zero dates and dates with a zero month or day: NULL, their text in ``_loader_invalid_dates`` |
| datetime(n) | timestamp_ntz | the same |
| timestamp(n) | timestamp | UTC; the zero timestamp as dates |
| time(n) | string | exact text `[-]HHH:MM:SS[.ffffff]`; TIME spans ±838 hours |
| char, varchar, text, enum, set, json | string | |
| binary(n), varbinary, blob, geometry, vector | binary | GEOMETRY as SRID + WKB |
"""

from __future__ import annotations

import re

from loader.binlog.constants import GEOMETRY_TYPE_NAMES
from loader.core.errors import TypeMapError

_INT_SPARK = {
    "tinyint": "tinyint",
    "smallint": "smallint",
    "mediumint": "int",
    "int": "int",
    "bigint": "bigint",
}
_INT_UNSIGNED_SPARK = {
    "tinyint": "smallint",
    "smallint": "int",
    "mediumint": "int",
    "int": "bigint",
    "bigint": "decimal(20,0)",
}
INTEGER_KINDS = frozenset(_INT_SPARK)
_STRING = {"char", "varchar", "text", "enum", "set", "json", "time"}
# Binary strings (warehouse ``binary``) and character strings (warehouse ``string``, TIME aside).
BINARY_KINDS = {"binary", "varbinary", "blob", "geometry", "vector"}
_TEXT_ALIASES = {"tinytext": "text", "mediumtext": "text", "longtext": "text"}
_BLOB_ALIASES = {"tinyblob": "blob", "mediumblob": "blob", "longblob": "blob"}
_TYPE = re.compile(r"^([a-z]+)(?:\(([^)]*)\))?( unsigned)?$")


def _parse(mysql_type: str) -> tuple[str, str, bool]:
    m = _TYPE.match(mysql_type.strip().lower())
    if not m:
        raise TypeMapError(f"cannot read the MySQL type {mysql_type!r}")
    return m.group(1), m.group(2) or "", bool(m.group(3))


def type_parts(mysql_type: str) -> tuple[str, str, bool]:
    """A reader's short type as its base name, its arguments and whether it is unsigned:
    ``int unsigned`` → ``("int", "", True)``, ``decimal(12,2)`` → ``("decimal", "12,2", False)``."""
    return _parse(mysql_type)


def normalize(column_type: str, charset: str | None = None) -> str:
    """An ``information_schema.COLUMNS.COLUMN_TYPE`` in the reader's short form."""
    text = column_type.strip().lower().replace(" zerofill", "")
    if text.startswith(("enum(", "set(")):
        return text.split("(", 1)[0]
    m = re.match(r"^([a-z]+)(?:\(([^)]*)\))?( unsigned)?", text)
    if not m:
        raise TypeMapError(f"cannot read the column type {column_type!r}")
    base, args, unsigned = m.group(1), m.group(2), bool(m.group(3))
    if base in _INT_SPARK or base == "integer":
        base = "int" if base == "integer" else base
        return f"{base} unsigned" if unsigned else base
    if base in ("decimal", "numeric"):
        precision, _, scale = (args or "10,0").partition(",")
        return f"decimal({int(precision)},{int(scale or 0)})"
    if base in ("float", "double", "real"):
        return "double" if base in ("double", "real") else "float"
    if base in ("datetime", "timestamp", "time"):
        return f"{base}({args})" if args and args != "0" else base
    if base == "bit":
        return f"bit({args or 1})"
    if base == "binary":
        return f"binary({args or 1})"
    if base in _TEXT_ALIASES:
        return "text"
    if base in _BLOB_ALIASES:
        return "blob"
    if base in GEOMETRY_TYPE_NAMES:
        return "geometry"
    if base in ("char", "varchar") and charset == "binary":
        return "binary" if base == "char" else "varbinary"
    return base


def spark_type(mysql_type: str) -> str:
    """The warehouse (Spark SQL) type of a column."""
    base, args, unsigned = _parse(mysql_type)
    if base in _INT_SPARK:
        return _INT_UNSIGNED_SPARK[base] if unsigned else _INT_SPARK[base]
    if base == "decimal":
        precision, _, scale = args.partition(",")
        return f"decimal({int(precision)},{int(scale)})" if int(precision) <= 38 else "string"
    if base in ("float", "double"):
        return base
    if base == "year":
        return "smallint"
    if base == "bit":
        return "decimal(20,0)" if int(args or 1) == 64 else "bigint"
    if base == "date":
        return "date"
    if base == "datetime":
        return "timestamp_ntz"
    if base == "timestamp":
        return "timestamp"
    if base in _STRING:
        return "string"
    if base in BINARY_KINDS:
        return "binary"
    raise TypeMapError(f"the MySQL type {mysql_type!r} has no warehouse type")


_INT_RANK = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "bigint": 5}
_SPARK_INT_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
TEXT_KINDS = {"char", "varchar", "text", "json", "enum", "set"}


def _keeps_values(old: str, new: str) -> bool:
    """Whether MySQL converts every value of ``old`` to the same value of ``new`` (no rounding,
    truncation, sign or text change), as a widening ALTER does."""
    if old == new:
        return True
    (o_base, o_args, o_unsigned), (n_base, n_args, n_unsigned) = _parse(old), _parse(new)
    if o_base in _INT_RANK and n_base in _INT_RANK:
        if o_unsigned and not n_unsigned:
            return _INT_RANK[n_base] > _INT_RANK[o_base]
        return o_unsigned == n_unsigned and _INT_RANK[n_base] >= _INT_RANK[o_base]
    if (o_base, n_base) == ("float", "double"):
        return True
    if o_base == n_base == "decimal":
        (po, so), (pn, sn) = (map(int, a.split(",")) for a in (o_args, n_args))
        return sn >= so and pn - sn >= po - so
    if o_base in TEXT_KINDS and n_base in TEXT_KINDS:
        return o_base not in ("enum", "set") or n_base in (o_base, "varchar", "text", "char")
    if o_base in ("varbinary", "blob") and n_base in ("varbinary", "blob"):
        return True
    if o_base == n_base and o_base in ("datetime", "time", "timestamp", "bit", "binary"):
        return int(n_args or 0) >= int(o_args or 0)
    return False


def spark_widens(old: str, new: str) -> bool:
    """Whether Spark reads Parquet files written as the Spark type ``old`` as ``new`` exactly (the
    readers widen integers, FLOAT to DOUBLE and decimals; measured on Spark 4.2 with and without
    the vectorised reader), so a warehouse column can change type without rewriting its files."""
    if old == new:
        return True
    if old in _SPARK_INT_DIGITS and new in _SPARK_INT_DIGITS:
        return _SPARK_INT_DIGITS[new] >= _SPARK_INT_DIGITS[old]
    if (old, new) == ("float", "double"):
        return True
    n = _DECIMAL.fullmatch(new)
    if n is None:
        return False
    pn, sn = int(n[1]), int(n[2])
    if old in _SPARK_INT_DIGITS:
        return pn - sn >= _SPARK_INT_DIGITS[old]
    o = _DECIMAL.fullmatch(old)
    return o is not None and sn >= int(o[2]) and pn - sn >= int(o[1]) - int(o[2])


def iceberg_widens(old: str, new: str) -> bool:
    """Whether an Iceberg column of the Spark type ``old`` can become ``new`` in its metadata
    alone (Iceberg's type promotions: int to bigint, float to double, a decimal to more digits
    at the same scale). Iceberg keeps TINYINT and SMALLINT columns as int."""
    if old == new or (old, new) in (("int", "bigint"), ("float", "double")):
        return True
    o, n = _DECIMAL.fullmatch(old), _DECIMAL.fullmatch(new)
    return o is not None and n is not None and o[2] == n[2] and int(n[1]) >= int(o[1])


def type_change_problem(old: str, new: str, table_format: str) -> str | None:
    """Why a column cannot go from the MySQL type ``old`` to ``new`` in a warehouse table of
    ``table_format``, or None.

    A change is carried when MySQL keeps every stored value as it was (the ALTER wrote no row
    events, so nothing else would correct them) and the warehouse column keeps its Spark type or
    widens to one its files can be read as (Parquet's readers), or to one its metadata can
    promote it to (Iceberg's).
    """
    if not _keeps_values(old, new):
        return f"changed type from {old} to {new}, which changes or may change stored values"
    if table_format == "iceberg":
        stored = {"tinyint": "int", "smallint": "int"}  # Iceberg has no narrower integers
        widens = iceberg_widens(
            stored.get(spark_type(old), spark_type(old)), stored.get(spark_type(new), spark_type(new))
        )
    else:
        widens = spark_widens(spark_type(old), spark_type(new))
    if not widens:
        return (
            f"changed type from {old} to {new}, which the warehouse cannot follow in place "
            f"({spark_type(old)} to {spark_type(new)})"
        )
    return None


def cast_sql(column: str, mysql_type: str) -> str:
    """Spark SQL turning the staged string ``column`` (a quoted identifier) into its type.

    Staged values are exact text; invalid dates (MySQL's zero dates) give NULL, not an error
    (``invalid_dates_sql`` keeps their text).
    """
    target = spark_type(mysql_type)
    base = _parse(mysql_type)[0]
    if target == "string":
        return column
    if target == "binary":
        return f"unbase64({column})"
    if base == "timestamp":
        return f"try_to_timestamp({column})"  # the session time zone is UTC
    if base in ("date", "datetime"):
        return f"try_cast({column} AS {target})"
    return f"CAST({column} AS {target})"


DATE_KINDS = ("date", "datetime", "timestamp")  # the types MySQL lets hold invalid dates


def spark_string(text: str) -> str:
    """A Spark SQL string literal of ``text``."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def invalid_dates_sql(columns: list[tuple[str, str, str]]) -> str:
    """Spark SQL for a row's ``naming.INVALID_DATES_COLUMN``: of ``(staged text column, column
    name, MySQL type)``, the DATE, DATETIME and TIMESTAMP values ``cast_sql`` cannot hold (MySQL's
    zero dates, dates with a zero month or day, dates ``ALLOW_INVALID_DATES`` let in), as a map
    from the column's name to the staged text; NULL when the row has none."""
    found = []
    for text, name, mysql_type in columns:
        if _parse(mysql_type)[0] in DATE_KINDS:
            lost = f"({text} IS NOT NULL AND {cast_sql(text, mysql_type)} IS NULL)"
            found.append((spark_string(name), text, lost))
    if not found:
        return "CAST(NULL AS MAP<STRING, STRING>)"
    pairs = ", ".join(
        f"named_struct('k', {name}, 'v', CASE WHEN {lost} THEN {text} END)" for name, text, lost in found
    )
    return (
        f"CASE WHEN {' OR '.join(lost for _, _, lost in found)} "
        f"THEN map_from_entries(filter(array({pairs}), e -> e.v IS NOT NULL)) END"
    )


def source_select_sql(column: str, mysql_type: str) -> str:
    """MySQL SQL reading a column (a backquoted MySQL identifier) for the initial load.

    Values come as the text the binlog reader stages for them, so that ``load_cast_sql`` (that is,
    ``cast_sql``) gives the same warehouse value as a change would; integers (but TINYINT),
    DECIMAL up to 38 digits, floating point and binary values come as themselves, which JDBC
    carries exactly. TIMESTAMP text is in the session's time
    zone, which the load sets to UTC.
    """
    base = _parse(mysql_type)[0]
    if base == "vector":  # its bytes: MariaDB Connector/J knows no VECTOR column (MySQL 9)
        return f"CAST({column} AS BINARY)"
    if _read_natively(mysql_type) or base in BINARY_KINDS:
        return column
    if base == "bit":
        return f"CAST({column} + 0 AS CHAR)"
    if spark_type(mysql_type) == "string" and base not in ("time", "decimal"):
        return column
    return f"CAST({column} AS CHAR)"


def load_cast_sql(column: str, mysql_type: str) -> str:
    """Spark SQL turning what ``source_select_sql`` read into the column's warehouse type."""
    base = _parse(mysql_type)[0]
    if base in BINARY_KINDS:
        return column
    if _read_natively(mysql_type):
        return f"CAST({column} AS {spark_type(mysql_type)})"  # exact: a wider or equal type
    return cast_sql(column, mysql_type)


# Read as JDBC's own numbers (exact, and cheaper than text on both sides). Not TINYINT: the
# driver reports TINYINT(1) as a boolean.
_NATIVE_JDBC = {"smallint", "mediumint", "int", "bigint", "float", "double"}


def _read_natively(mysql_type: str) -> bool:
    """Read as a JDBC number: integers (but TINYINT), floating point, DECIMAL that fits Spark's."""
    base = _parse(mysql_type)[0]
    return base in _NATIVE_JDBC or (base == "decimal" and spark_type(mysql_type) != "string")
