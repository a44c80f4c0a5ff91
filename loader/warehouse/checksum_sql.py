"""The SQL of the checksum: one text per value and one hash per row, the same on both sides.

``loader checksum`` compares a source table (MySQL SQL, run on the server) with its warehouse
table (Spark SQL) without moving rows: each side groups its rows into the same key ranges and
computes per range the row count and the XOR of a 64-bit hash of each row (two 32-bit halves of
an MD5, as ``pt-table-checksum`` does). For that the two sides must turn every value into the same
text. ``mysql_text`` and ``spark_text`` are that pair, per MySQL type:

| MySQL | text |
|---|---|
| integers, BIT, YEAR | decimal digits (BIT as its number, YEAR 0 as ``0``) |
| DECIMAL | MySQL's text, scale digits included (``12.50``) |
| FLOAT, DOUBLE | ``digits e exponent`` of the shortest round-trip decimal (``canonical_double``) |
| DATE, DATETIME(n), TIMESTAMP(n) | MySQL's text with n fraction digits, TIMESTAMP in UTC; zero dates stay ``0000-00-00`` |
| TIME(n) | MySQL's text, which the warehouse keeps |
| strings, ENUM, SET, JSON | the MD5 of the UTF-8 text |
| binary strings, BLOB, GEOMETRY | the MD5 of the bytes |

So a value the warehouse lost (a zero date it keeps as NULL, a truncated string) makes its range
differ: the check shows what the warehouse does not hold, it never agrees by construction.

Key ranges are compared the same way on both sides: numeric keys by value, any other key by the
bytes of its text (not the column's collation, which Spark does not know).
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass

from loader.warehouse.types import spark_type, type_parts

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
_STRING_BASES = {"char", "varchar", "text", "enum", "set", "json"}
_BINARY_BASES = {"binary", "varbinary", "blob", "geometry", "vector"}


def canonical_double(value: float | None) -> str | None:
    """A double as ``[-]<digits>e<exponent>`` meaning ``0.<digits> × 10^exponent`` (``0`` for zero).

    The digits are those of the shortest text that reads back as the same double (Python's
    ``repr``, MySQL's ``CAST(x AS CHAR)``), so the form does not depend on how either side lays the
    number out (``1e15`` or ``1000000000000000.0``).
    """
    if value is None:
        return None
    if value == 0:
        return "0"
    sign, digits, exponent = decimal.Decimal(repr(float(value))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0")
    return f"{'-' if sign else ''}{text}e{int(exponent) + len(digits)}"


def _mysql_canonical_double(text: str) -> str:
    """``canonical_double`` in MySQL SQL, from MySQL's text of the double (``1e20``,
    ``0.0000001``, ``-1.2345678901234568e17``, ``123456789012345.67``)."""
    unsigned = f"TRIM(LEADING '-' FROM {text})"
    mantissa = f"SUBSTRING_INDEX({unsigned}, 'e', 1)"
    power = f"IF(LOCATE('e', {unsigned}) > 0, CAST(SUBSTRING_INDEX({unsigned}, 'e', -1) AS SIGNED), 0)"
    whole = f"SUBSTRING_INDEX({mantissa}, '.', 1)"
    fraction = f"IF(LOCATE('.', {mantissa}) > 0, SUBSTRING_INDEX({mantissa}, '.', -1), '')"
    digits = f"CONCAT({whole}, {fraction})"
    leading = f"(LENGTH({digits}) - LENGTH(TRIM(LEADING '0' FROM {digits})))"
    significant = f"TRIM(TRAILING '0' FROM TRIM(LEADING '0' FROM {digits}))"
    return (
        f"IF({significant} = '', '0', CONCAT(IF(LEFT({text}, 1) = '-', '-', ''), {significant}, 'e', "
        f"{power} + LENGTH({whole}) - {leading}))"
    )


def mysql_text(column: str, mysql_type: str) -> str:
    """MySQL SQL giving the check text of a column (a backquoted MySQL identifier); NULL stays NULL."""
    base = type_parts(mysql_type)[0]
    if base in ("float", "double"):
        return _mysql_canonical_double(f"CAST(CAST({column} AS DOUBLE) AS CHAR)")
    if base in ("bit", "year"):
        return f"CAST({column} + 0 AS CHAR)"
    if base in _STRING_BASES:
        return f"MD5(CONVERT({column} USING utf8mb4))"
    if base in _BINARY_BASES:
        return f"MD5({column})"
    return f"CAST({column} AS CHAR)"  # integers, decimals, temporal types: MySQL's own text


def spark_text(column: str, mysql_type: str) -> str:
    """Spark SQL giving, from the warehouse column (a backquoted identifier), what ``mysql_text``
    gives from the source column. ``loader_canonical_double`` is ``canonical_double`` registered
    as a function of the session (``register_functions``)."""
    base, args, _ = type_parts(mysql_type)
    if base in ("float", "double"):
        return f"loader_canonical_double(CAST({column} AS DOUBLE))"
    if base in _STRING_BASES or base in _BINARY_BASES:
        return f"md5({column})"
    if base in ("datetime", "timestamp"):
        digits = int(args or 0)
        return f"date_format({column}, 'yyyy-MM-dd HH:mm:ss{'.' + 'S' * digits if digits else ''}')"
    if spark_type(mysql_type) == "string":  # TIME, DECIMAL beyond 38 digits: MySQL's text kept
        return column
    return f"CAST({column} AS STRING)"


def register_functions(spark: object) -> None:
    """Give a Spark session the functions ``spark_text`` uses.

    The function is defined here, importing nothing of the loader, so that Spark ships it to its
    Python workers by value: they need Python, not the loader's package.
    """
    from pyspark.sql.functions import udf

    def canonical(value: float | None) -> str | None:  # canonical_double, self-contained
        import decimal

        if value is None:
            return None
        if value == 0:
            return "0"
        sign, digits, exponent = decimal.Decimal(repr(float(value))).as_tuple()
        text = "".join(map(str, digits)).rstrip("0")
        return f"{'-' if sign else ''}{text}e{int(exponent) + len(digits)}"

    function = udf(canonical, "string", useArrow=False)  # plain Python on the workers, no pyarrow
    spark.udf.register("loader_canonical_double", function)  # type: ignore[attr-defined]


def _row_hash(pieces: list[str], null_length: str, concat: str, md5: str) -> str:
    # Each value as <length>:<text>, NULL as N: no two rows give the same string.
    parts = [f"COALESCE({concat}({null_length}({p}), ':', {p}), 'N')" for p in pieces]
    return f"{md5}({concat}({', '.join(parts)}))" if parts else f"{md5}('')"


def mysql_row_hash(columns: list[tuple[str, str]]) -> str:
    """MySQL SQL giving the MD5 (hex) of a row of ``(backquoted column, MySQL type)``."""
    return _row_hash([mysql_text(c, t) for c, t in columns], "LENGTH", "CONCAT", "MD5")


def spark_row_hash(columns: list[tuple[str, str]]) -> str:
    """Spark SQL giving what ``mysql_row_hash`` gives, from the warehouse columns."""
    return _row_hash([spark_text(c, t) for c, t in columns], "octet_length", "concat", "md5")


def mysql_hash_halves(row_hash: str) -> tuple[str, str]:
    """The two 32-bit numbers of a row hash that the ranges XOR, in MySQL SQL."""
    return tuple(  # type: ignore[return-value]
        f"CAST(CONV(SUBSTRING({row_hash}, {start}, 8), 16, 10) AS UNSIGNED)" for start in (1, 9)
    )


def spark_hash_halves(row_hash: str) -> tuple[str, str]:
    """What ``mysql_hash_halves`` gives, in Spark SQL."""
    return tuple(  # type: ignore[return-value]
        f"CAST(conv(substr({row_hash}, {start}, 8), 16, 10) AS BIGINT)" for start in (1, 9)
    )


# --- key ranges -----------------------------------------------------------------------------


def orders_by_value(mysql_type: str) -> bool:
    """Whether a key column's ranges compare its values (numbers) rather than its text's bytes."""
    return type_parts(mysql_type)[0] in _NUMERIC_BASES and spark_type(mysql_type) != "string"


def mysql_order_value(column: str, mysql_type: str) -> str:
    """MySQL SQL for what a key column's ranges compare: the number, or the bytes of its text."""
    base = type_parts(mysql_type)[0]
    if orders_by_value(mysql_type):
        return f"({column} + 0)" if base in ("bit", "year") else column
    if base in _BINARY_BASES:
        return column
    if base in _STRING_BASES:
        return f"CAST(CONVERT({column} USING utf8mb4) AS BINARY)"
    return f"CAST({mysql_text(column, mysql_type)} AS BINARY)"


def spark_order_value(column: str, mysql_type: str) -> str:
    """What ``mysql_order_value`` compares, in Spark SQL."""
    base = type_parts(mysql_type)[0]
    if orders_by_value(mysql_type) or base in _BINARY_BASES:
        return column
    if base in _STRING_BASES:
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

    def at_most(self, bound: list[str]) -> str:
        """``(k0, k1, …) <= (v0, v1, …)`` spelled out (both dialects)."""
        terms = []
        for i, (column, value) in enumerate(zip(self.values, bound, strict=True)):
            equal = [f"{self.values[j]} = {bound[j]}" for j in range(i)]
            last = f"{column} <= {value}" if i == len(bound) - 1 else f"{column} < {value}"
            terms.append("(" + " AND ".join([*equal, last]) + ")")
        return "(" + " OR ".join(terms) + ")"

    def range_index(self, bounds: list[list[str]]) -> str:
        """The index of the range a row falls in: 0 up to and including ``bounds[0]``, …,
        ``len(bounds)`` past the last; a balanced CASE tree, so each row makes log2 comparisons."""

        def tree(low: int, high: int) -> str:
            if low == high:
                return str(low)
            middle = (low + high) // 2
            return f"CASE WHEN {self.at_most(bounds[middle])} THEN {tree(low, middle)} ELSE {tree(middle + 1, high)} END"

        return tree(0, len(bounds))
