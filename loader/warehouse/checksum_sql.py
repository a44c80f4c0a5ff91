"""The SQL of the checksum: one text per value and one hash per row, the same on both sides.

``loader checksum`` compares a source table (MySQL SQL, run on the server) with its warehouse
table (Spark SQL) without moving rows: each side groups its rows into the same key ranges and
computes per range the row count and the XOR of a 64-bit checksum of each row (half of an MD5 of
the row's text, as ``pt-table-checksum --function MD5`` does; half of its SHA-256 on a server
without MD5, as MySQL 9.7: ``DIGESTS``). For that the two sides must turn every value into the
same text. ``mysql_text`` and ``spark_text`` are that pair, per MySQL type:

| MySQL | text |
|---|---|
| integers, BIT, YEAR | decimal digits (BIT as its number, YEAR 0 as ``0``) |
| DECIMAL | MySQL's text, scale digits included (``12.50``) |
| FLOAT, DOUBLE | the shortest round-trip decimal, as MariaDB's CAST text or MySQL's JSON text (``loader.core.doubles``) |
| DATE, DATETIME(n), TIMESTAMP(n) | MySQL's text with n fraction digits, TIMESTAMP in UTC; a zero date as its text, which the warehouse keeps in ``_loader_invalid_dates`` |
| TIME(n) | MySQL's text, which the warehouse keeps |
| strings, ENUM, SET, JSON | the digest of the UTF-8 text |
| binary strings, BLOB, GEOMETRY | the digest of the bytes |

So a value the warehouse lost (a truncated string, a date off by a microsecond) makes its range
differ: the check shows what the warehouse does not hold, it never agrees by construction.

Key ranges are compared the same way on both sides: numeric keys by value, any other key by the
bytes of its text (not the column's collation, which Spark does not know).
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass

from loader.core import doubles
from loader.warehouse.tables import key_comparison, quote_identifier
from loader.warehouse.types import BINARY_KINDS, DATE_KINDS, TEXT_KINDS, spark_string, spark_type, type_parts

DEFAULT_RANGE_ROWS = 100_000  # rows per key range the checksum compares (at most 1,000 ranges)
_NUMERIC_BASES = {
    "tinyint",
    "smallint",
    "mediumint",
    "int",
    "bigint",
    "decimal",
    "float",
    "double",
    "year",
    "bit",
}


# The row digests, as (MySQL SQL, Spark SQL) templates of one text: MD5 where the server has it
# (the quicker), SHA-256 where it has not (MySQL 9.7). The source side chooses; the warehouse side
# computes the one it chose.
DIGESTS = {"md5": ("MD5({})", "md5({})"), "sha256": ("SHA2({}, 256)", "sha2({}, 256)")}
# A double's text, as (MySQL SQL, Spark SQL) templates: the server's CAST text (MariaDB's, the
# shortest digits), or its JSON text (MySQL's CAST text drops digits; its JSON keeps them).
DOUBLES = {
    "server": ("CAST({} AS CHAR)", "loader_double_text({})"),
    "json": ("CAST(CAST({} AS JSON) AS CHAR)", "loader_json_double_text({})"),
}


@dataclass(frozen=True)
class Dialect:
    """How the source's SQL gives the check texts: its digest (``DIGESTS``) and its text of a
    double (``DOUBLES``); the warehouse side computes the same."""

    digest: str = "md5"
    doubles: str = "server"


def mysql_text(column: str, mysql_type: str, dialect: Dialect = Dialect()) -> str:
    """MySQL SQL giving the check text of a column (a backquoted MySQL identifier); NULL stays NULL."""
    base = type_parts(mysql_type)[0]
    if base in ("float", "double"):
        return DOUBLES[dialect.doubles][0].format(f"CAST({column} AS DOUBLE)")  # a FLOAT's exact value
    if base in ("bit", "year"):
        return f"CAST({column} + 0 AS CHAR)"
    if base in TEXT_KINDS:
        return DIGESTS[dialect.digest][0].format(f"CONVERT({column} USING utf8mb4)")
    if base in BINARY_KINDS:
        return DIGESTS[dialect.digest][0].format(column)
    return f"CAST({column} AS CHAR)"  # integers, decimals, temporal types: MySQL's own text


def spark_text(column: str, mysql_type: str, invalid: str | None = None, dialect: Dialect = Dialect()) -> str:
    """Spark SQL giving, from the warehouse column (a backquoted identifier), what ``mysql_text``
    gives from the source column; ``invalid``: SQL of the column's entry in the row's
    ``naming.INVALID_DATES_COLUMN`` (MySQL's text of a date the column holds as NULL).
    ``loader_double_text`` and ``loader_json_double_text`` are ``loader.core.doubles``' functions registered in the session
    (``register_functions``)."""
    base, args, _ = type_parts(mysql_type)
    if base in ("float", "double"):
        return DOUBLES[dialect.doubles][1].format(f"CAST({column} AS DOUBLE)")
    if base in TEXT_KINDS or base in BINARY_KINDS:
        return DIGESTS[dialect.digest][1].format(column)
    if base in DATE_KINDS:
        digits = int(args or 0)
        text = (
            f"CAST({column} AS STRING)"
            if base == "date"
            else f"date_format({column}, 'yyyy-MM-dd HH:mm:ss{'.' + 'S' * digits if digits else ''}')"
        )
        return f"coalesce({text}, {invalid})" if invalid else text
    if spark_type(mysql_type) == "string":  # TIME, DECIMAL beyond 38 digits: MySQL's text kept
        return column
    return f"CAST({column} AS STRING)"


def register_functions(spark: object) -> None:
    """Give a Spark session the functions ``spark_text`` uses (plain Python UDFs: the workers need
    Python, neither pyarrow nor the loader's package)."""
    from pyspark.cloudpickle import register_pickle_by_value
    from pyspark.sql.functions import udf

    register_pickle_by_value(doubles)  # ship the functions themselves, not an import of them
    for name, function in (
        ("loader_double_text", doubles.server_text),
        ("loader_json_double_text", doubles.mysql_json_text),
    ):
        spark.udf.register(name, udf(function, "string", useArrow=False))  # type: ignore[attr-defined]


def _row_text(pieces: list[str], concat_ws: str) -> str:
    # No text of any type holds '|' (strings and bytes enter as their digest), so the join is
    # unambiguous; NULL is N, which no text equals. Each piece is computed once.
    return f"{concat_ws}('|', {', '.join(f'COALESCE({p}, {chr(39)}N{chr(39)})' for p in pieces)})"


def mysql_row_checksum(columns: list[tuple[str, str]], dialect: Dialect = Dialect()) -> str:
    """MySQL SQL giving a row's 64-bit checksum (the first 64 bits of the ``digest`` of its text),
    unsigned, for a row of ``(column name, MySQL type)``; ranges XOR them."""
    text = _row_text([mysql_text(quote_identifier(c), t, dialect) for c, t in columns], "CONCAT_WS")
    return f"CAST(CONV(LEFT({DIGESTS[dialect.digest][0].format(text)}, 16), 16, 10) AS UNSIGNED)"


def spark_row_checksum(
    columns: list[tuple[str, str]], invalid_dates: str | None = None, dialect: Dialect = Dialect()
) -> str:
    """What ``mysql_row_checksum`` gives, in Spark SQL, as a signed BIGINT (the same 64 bits:
    ``unsigned`` turns XORs of them into MySQL's numbers), for a row of ``(column name, MySQL
    type)``; ``invalid_dates``: the table's ``naming.INVALID_DATES_COLUMN``, if it has one."""
    text = _row_text(
        [
            spark_text(
                quote_identifier(c),
                t,
                f"{invalid_dates}[{spark_string(c)}]" if invalid_dates else None,
                dialect,
            )
            for c, t in columns
        ],
        "concat_ws",
    )
    return f"CAST(conv(left({DIGESTS[dialect.digest][1].format(text)}, 16), 16, -10) AS BIGINT)"


def unsigned(value: int) -> int:
    """A signed 64-bit number (Spark's BIGINT) as the unsigned one of the same bits (MySQL's)."""
    return value & 0xFFFF_FFFF_FFFF_FFFF


# --- key ranges -----------------------------------------------------------------------------


def orders_by_value(mysql_type: str) -> bool:
    """Whether a key column's ranges compare its values (numbers) rather than its text's bytes."""
    return type_parts(mysql_type)[0] in _NUMERIC_BASES and spark_type(mysql_type) != "string"


def mysql_order_value(column: str, mysql_type: str) -> str:
    """MySQL SQL for what a key column's ranges compare: the number, or the bytes of its text."""
    base = type_parts(mysql_type)[0]
    if orders_by_value(mysql_type):
        return f"({column} + 0)" if base in ("bit", "year") else column
    if base in BINARY_KINDS:
        return column
    if base in TEXT_KINDS:
        return f"CAST(CONVERT({column} USING utf8mb4) AS BINARY)"
    return f"CAST({mysql_text(column, mysql_type)} AS BINARY)"


def spark_order_value(column: str, mysql_type: str) -> str:
    """What ``mysql_order_value`` compares, in Spark SQL."""
    base = type_parts(mysql_type)[0]
    if orders_by_value(mysql_type) or base in BINARY_KINDS:
        return column
    if base in TEXT_KINDS:
        return f"CAST({column} AS BINARY)"
    return f"CAST({spark_text(column, mysql_type)} AS BINARY)"


def literal(value: object) -> str:
    """A value of ``mysql_order_value`` as a literal both MySQL and Spark read as the same value."""
    if isinstance(value, bool):
        raise TypeError("no boolean key values")
    if isinstance(value, int | decimal.Decimal):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if "e" in text else f"{text}e0"  # a DOUBLE literal on both sides
    if isinstance(value, bytes | bytearray):
        return f"X'{bytes(value).hex()}'"
    raise TypeError(f"no key literal for {type(value).__name__}")


def shown(value: object) -> str:
    """A key value as on-call reads it: the number, the text, or 0x… for bytes that are not text."""
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return "0x" + bytes(value).hex()
    return str(value)


@dataclass(frozen=True)
class KeyOrder:
    """How a key is ranged: its columns' order values, as SQL of one side."""

    values: list[str]

    def range_index(self, bounds: list[list[str]]) -> str:
        """The index of the range a row falls in: 0 up to and including ``bounds[0]``, …,
        ``len(bounds)`` past the last; a balanced CASE tree, so each row makes log2 comparisons."""

        def tree(low: int, high: int) -> str:
            if low == high:
                return str(low)
            middle = (low + high) // 2
            return f"CASE WHEN {key_comparison(self.values, bounds[middle], '<=')} THEN {tree(low, middle)} ELSE {tree(middle + 1, high)} END"

        return tree(0, len(bounds))
