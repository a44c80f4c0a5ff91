"""The CSV dialect of the staging files: how the extractor writes values and how Spark reads them.

This module is the one place that knows the format (DESIGN.md section 3), so the writer and the
reader cannot drift apart:

- RFC 4180: ``,`` between fields, ``"`` around them, a ``"`` inside doubled; ``\\n`` ends a row;
  UTF-8; a header line names the columns.
- NULL is an unquoted empty field. Every non-NULL text value is quoted, so an empty string is
  ``""`` and values holding separators, quotes, CR, LF or NUL stay intact.
- Numbers are written unquoted in exact text: integers in full (unsigned 64-bit included),
  DECIMAL in fixed notation with its scale, FLOAT/DOUBLE as the shortest text that reads back to
  the same binary value.
- Binary values are base64, quoted. Temporal values are text with their microseconds.

Spark's CSV reader turns both an unquoted empty field and ``""`` into NULL unless told apart: it
reads ``""`` as ``EMPTY_MARKER`` (``SPARK_READ_OPTIONS``), which ``read_staged`` maps back to
``''``. A text value equal to the marker itself cannot be staged and is refused. A small table's
changes are parsed by the merge itself (``parse_staged``, pyarrow's CSV parser, which tells the
two apart) and handed to Spark as the same rows.
"""

from __future__ import annotations

import base64
import gzip
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from loader.core.errors import CsvValueError

META_COLUMNS = ("op", "seqno", "row_id", "commit_ts")
# The names ``read_staged`` gives the meta columns: a source column may be named like a header's.
META_READ_AS = {name: f"_loader_{name}" for name in META_COLUMNS}
EMPTY_MARKER = "\x00\ue000loader-empty-string\ue000\x00"
LINE_END = "\n"
_GZIP_MAGIC = b"\x1f\x8b"

# Options for spark.read.csv; the files must be read with an explicit all-string schema.
SPARK_READ_OPTIONS: dict[str, str] = {
    "header": "true",
    "sep": ",",
    "quote": '"',
    "escape": '"',
    "encoding": "UTF-8",
    "multiLine": "true",  # values may hold newlines
    "nullValue": "",
    "emptyValue": EMPTY_MARKER,
    "mode": "FAILFAST",  # a malformed file is an error, never dropped rows
    "ignoreLeadingWhiteSpace": "false",
    "ignoreTrailingWhiteSpace": "false",
    "maxCharsPerColumn": "-1",
    "enforceSchema": "true",
    "unescapedQuoteHandling": "RAISE_ERROR",
}


def quote(text: str) -> str:
    """A text field: always quoted, inner quotes doubled."""
    if text == EMPTY_MARKER:
        raise CsvValueError("a text value equals the staging format's empty-string marker")
    return '"' + text.replace('"', '""') + '"'


def encode_value(value: Any) -> str:
    """One field of a staging file, from a value as the binlog reader decodes it."""
    if value is None:
        return ""
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, bool):  # a bool is an int; never produced by the reader
        raise CsvValueError(f"unexpected boolean value {value!r}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, bytes):
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    raise CsvValueError(f"a value of type {type(value).__name__} cannot be staged: {value!r}")


def header_line(columns: list[str] | tuple[str, ...]) -> str:
    """The header: the meta columns, then the table's columns, every name quoted."""
    return ",".join(quote(c) for c in (*META_COLUMNS, *columns)) + LINE_END


def row_line(op: str, seqno: int, row_id: int, commit_ts: str, values: tuple[Any, ...]) -> str:
    """One change row."""
    return f"{op},{seqno},{row_id},{quote(commit_ts)}," + ",".join(encode_value(v) for v in values) + LINE_END


KINDS = ("int", "float", "decimal", "text", "temporal", "binary", "any")
# The values: a row image (a tuple) of the columns the encoder was made for.
RowEncoder = Callable[[str, int, int, str, Any], str]


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def row_encoder(kinds: list[str]) -> RowEncoder:
    """A fast ``row_line`` for rows whose columns have the given kinds (generated once per layout).

    Kinds: ``int``, ``float``, ``decimal``, ``text``, ``temporal`` (text that needs no quote
    doubling), ``binary``, and ``any`` (``encode_value``'s checks). The result equals
    ``row_line``'s for values of those kinds.
    """
    # One f-string per row: the fields are joined in one step, and text is quoted inline.
    env: dict[str, Any] = {
        "_b64": _b64,
        "_any": encode_value,
        "_format": format,
        "_repr": repr,
        "_bad": quote,  # raises for the empty-string marker
        "_E": "",
        "_Q": '"',
        "_QQ": '""',
        "_F": "f",
        "_EM": EMPTY_MARKER,
    }
    fields = []
    for i, kind in enumerate(kinds):
        v = f"v{i}"
        expr = {
            "int": v,
            "float": f"_repr({v})",
            "decimal": f"_format({v}, _F)",
            "text": f"_bad({v}) if {v} == _EM else _Q + {v}.replace(_Q, _QQ) + _Q",
            "temporal": f"_Q + {v} + _Q",
            "binary": f"_Q + _b64({v}) + _Q",
            "any": f"_any({v})",
        }[kind]
        fields.append(f"{{_E if {v} is None else {expr}}}")
    unpack = ", ".join(f"v{i}" for i in range(len(kinds))) + ("," if len(kinds) == 1 else "")
    lines = ["def encode_row(op, seqno, row_id, commit_ts, values):"]
    if kinds:
        lines.append(f"    {unpack} = values")
    lines.append(f"    return f'{{op}},{{seqno}},{{row_id}},\"{{commit_ts}}\",{','.join(fields)}\\n'")
    code = "\n".join(lines) + "\n"
    exec(compile(code, "<csv row encoder>", "exec"), env)
    encoder: RowEncoder = env["encode_row"]
    return encoder


def _positional(count: int) -> list[str]:
    # Positional names: a source column may be called anything, even like a meta column.
    return [f"_c{i}" for i in range(len(META_COLUMNS) + count)]


def read_staged(spark: Any, paths: list[str], columns: list[str]) -> Any:
    """Read staging files with Spark: every column a string, empty strings restored.

    Args:
        spark: the SparkSession.
        paths: the files, as Spark URIs (see ``staging.uris``).
        columns: the table's columns, in file order (the meta columns come first by themselves).

    Returns:
        A DataFrame with the meta columns (named as ``META_READ_AS`` says) and the table's
        columns, all strings, NULL where the file has NULL; casting to the warehouse types is
        the type map's job.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField(name, StringType()) for name in _positional(len(columns))])
    df = spark.read.options(**SPARK_READ_OPTIONS).schema(schema).csv(paths)
    marker = F.lit(EMPTY_MARKER)
    return df.select(
        *[
            F.when(F.col(f"_c{i}") == marker, F.lit("")).otherwise(F.col(f"_c{i}")).alias(name)
            for i, name in enumerate(_read_names(columns))
        ]
    )


def _read_names(columns: list[str]) -> list[str]:
    return [*(META_READ_AS[m] for m in META_COLUMNS), *columns]


def parse_staged(data: bytes, columns: int, what: str) -> Any:
    """One staging file's rows parsed here, in this process (for a table of few changes: a
    Spark read of its files costs a job and its planning, most of a small merge's time).

    Args:
        data: the file's bytes, gzipped or not (``[staging] gzip``).
        columns: how many table columns its layout has.
        what: the file, for the error.

    Returns:
        A pyarrow table with a column per field, named ``_c0``, ``_c1``… (the meta columns
        first, as ``read_staged`` reads them), every value a string, None where the file has
        NULL, ``''`` for an empty string (a quoted empty field). ``staged_frame`` makes it the
        frame ``read_staged`` gives.

    Raises:
        CsvValueError: naming ``what`` and the fault, for a file that is not in this format.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = _positional(columns)
    try:
        if data[:2] == _GZIP_MAGIC:  # a CSV file starts with its header's quote
            data = gzip.decompress(data)
        parsed = pacsv.read_csv(
            pa.py_buffer(data),
            # The header is read as a row and dropped: skipping it by line count would split a
            # quoted column name holding a newline.
            read_options=pacsv.ReadOptions(column_names=names, block_size=max(1 << 20, len(data) + 1)),
            parse_options=pacsv.ParseOptions(
                delimiter=",", quote_char='"', double_quote=True, escape_char=False, newlines_in_values=True
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={name: pa.string() for name in names},
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError, EOFError) as exc:
        raise CsvValueError(f"staging file {what} cannot be read: {exc}") from None
    return parsed.slice(1)


def staged_frame(spark: Any, parsed: Any, columns: list[str]) -> Any:
    """``read_staged``'s frame of the rows ``parse_staged`` parsed (a pyarrow table)."""
    # Renamed in one call, not a column at a time: each is a round trip to the JVM.
    return spark.createDataFrame(parsed).toDF(*_read_names(columns))
