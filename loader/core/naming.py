"""Warehouse table names: each source table ``(schema, table)`` has exactly one, and no two share one.

MySQL names may hold almost anything (upper and lower case as different names on Linux, ``__``,
dots, spaces, quotes, backticks, unicode, up to 64 characters), while a catalog table name may
only hold ``[a-z0-9_]`` (the Hive metastore lower-cases names; Spark refuses other characters),
so the mapping has two forms:

- **ordinary**: ``<schema>__<table>``, when both names match ``[a-z0-9]+(_[a-z0-9]+)*`` (lower-case
  ASCII letters and digits, single underscores inside) and the result is at most 128 characters.
  ``shop.orders`` becomes ``shop__orders``, as it always has. Such a name splits back at its only
  ``__``, and never contains ``___``.
- **hashed**: ``<readable>___<hash>`` for every other table. ``<hash>`` is the first 12 hex digits
  of the SHA-256 of the exact names (UTF-8, each prefixed by its length in bytes:
  ``b"4:Shop6:Orders"``); ``<readable>`` is there for people only: each name folded to ASCII
  (accents dropped), lower-cased, every run of other characters made one ``_``, cut to 55
  characters (``x`` when nothing is left), and the two joined by ``__``.
  ``Shop.Orders`` becomes ``shop__orders___<hash>``, ``shop.注文`` becomes ``shop__x___<hash>``.

A hashed name always contains ``___`` and an ordinary one never does, so the forms cannot meet;
two hashed names meet only if their hashes do, which ``warehouse_tables`` refuses (never merges).
Every name is at most 128 characters, which Spark's Derby metastore takes (measured) and Hive
metastore schemas allow (``TBLS.TBL_NAME`` is 128 characters or more).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable

from loader.core import modes
from loader.core.errors import ConfigError

MAX_NAME = 128
HASH_DIGITS = 12
READABLE_PART = 55  # per name: 55 + len("__") + 55 + len("___") + 12 <= MAX_NAME
ORDINARY = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
HASHED_SEPARATOR = "___"
LEGACY = re.compile(r"[a-z0-9_]+")  # what Spark accepted as a table name
# The columns every warehouse table has besides the source's, and the prefix of the names the
# merge works with; no source column may take one (Spark tells column names apart without case).
PARTITION_COLUMN = "loader_partition"
# MySQL's text of each date the warehouse's DATE/TIMESTAMP columns cannot hold (zero dates and
# dates with a zero month or day), by column name; NULL when the row has none.
INVALID_DATES_COLUMN = "_loader_invalid_dates"
# The source's name in a table several sources are routed into (``tables.routes``).
SOURCE_COLUMN = "_source"
RESERVED_COLUMNS = (
    *modes.CHANGE_COLUMNS,
    *(column for columns in modes.MODE_COLUMNS.values() for column in columns),
    INVALID_DATES_COLUMN,
    PARTITION_COLUMN,
    SOURCE_COLUMN,
)
WORKING_PREFIX = "_loader_"
# Iceberg's own metadata columns (its MetadataColumns): an Iceberg table's column named like one
# breaks Iceberg's reads and writes of the table.
ICEBERG_METADATA_COLUMNS = (
    "_file",
    "_pos",
    "_deleted",
    "_spec_id",
    "_partition",
    "_row_id",
    "_last_updated_sequence_number",
    "_change_type",
    "_change_ordinal",
    "_commit_snapshot_id",
)


def is_ordinary(schema: str, table: str) -> bool:
    """Whether the table keeps the readable ``<schema>__<table>`` form."""
    return (
        ORDINARY.fullmatch(schema) is not None
        and ORDINARY.fullmatch(table) is not None
        and len(schema) + 2 + len(table) <= MAX_NAME
    )


def name_hash(schema: str, table: str) -> str:
    """The hash part of a hashed name: SHA-256 over the length-prefixed UTF-8 names."""
    digest = hashlib.sha256()
    for name in (schema, table):
        data = name.encode("utf-8", "surrogatepass")
        digest.update(f"{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()[:HASH_DIGITS]


def readable(name: str) -> str:
    """A name folded to ``[a-z0-9_]`` for a reader's benefit (not unique): ``Crème Brûlée`` →
    ``creme_brulee``; ``x`` when no ASCII letter or digit is left."""
    ascii_text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    folded = re.sub(r"[^a-z0-9]+", "_", ascii_text.lower()).strip("_")
    return folded[:READABLE_PART].rstrip("_") or "x"


def warehouse_table(schema: str, table: str) -> str:
    """A source table's name in the warehouse database (the module docstring has the mapping).

    Args:
        schema: the source schema (database) name, exactly as MySQL has it.
        table: the source table name, exactly as MySQL has it.

    Returns:
        ``<schema>__<table>`` for ordinary names, else ``<readable>___<hash>``; only ``[a-z0-9_]``
        and at most 128 characters.
    """
    if is_ordinary(schema, table):
        return f"{schema}__{table}"
    return f"{readable(schema)}__{readable(table)}{HASHED_SEPARATOR}{name_hash(schema, table)}"


def warehouse_tables(
    tables: Iterable[tuple[str, str]], route: Callable[[str, str], tuple[str, str] | None] | None = None
) -> dict[tuple[str, str], str]:
    """The warehouse name of each source table, refusing two tables that would share one.

    Args:
        tables: ``(schema, table)`` pairs, exactly as MySQL has them (repeats are fine).
        route: the shared table a source table is routed into, if any (``TablesConfig.route``):
            its name is the shared table's, which other sources' tables may have, not this one's.

    Returns:
        Each pair's warehouse table name, in the order first given.

    Raises:
        ConfigError: two different source tables map to one warehouse name (a hash collision:
            practically never); the message names both and the remedy.
    """
    out: dict[tuple[str, str], str] = {}
    owner: dict[str, tuple[str, str]] = {}
    for pair in tables:
        if pair in out:
            continue
        name = warehouse_table(*((route and route(*pair)) or pair))
        other = owner.get(name)
        if other is not None:
            raise ConfigError(
                f"source tables {_shown(other)} and {_shown(pair)} would both be the warehouse table "
                f"{name}; they cannot share it (a source has one table in a shared one): exclude one "
                "of them (tables.exclude), route it elsewhere (tables.routes) or rename it"
            )
        owner[name] = pair
        out[pair] = name
    return out


def legacy_warehouse_table(schema: str, table: str) -> str | None:
    """The name loader versions before this mapping gave the table (``<schema>__<table>``, as
    the catalog keeps it: lower-cased), when it differs from today's name and Spark could have
    created it (only ASCII letters, digits and ``_``); else None.

    Such a table (upper-case letters, ``__`` or an underscore at either end of a name) holds the
    data of a warehouse made before the change, under a name materialisation no longer writes.
    """
    old = f"{schema}__{table}".lower()
    if old == warehouse_table(schema, table) or not LEGACY.fullmatch(old):
        return None
    return old


def _shown(pair: tuple[str, str]) -> str:
    """``schema.table`` as MySQL would quote it, so that odd names read unambiguously."""
    return ".".join("`" + name.replace("`", "``") + "`" for name in pair)


def reserved_column_problem(
    schema: str, table: str, columns: Iterable[str], table_format: str = ""
) -> str | None:
    """Why a table cannot be a warehouse table (of ``table_format``, when known) because of a
    column's name, or None."""
    for column in columns:
        low = column.lower()
        if low in RESERVED_COLUMNS or low.startswith(WORKING_PREFIX):
            return (
                f"{schema}.{table}: column {column} is named like the warehouse table's own columns "
                f"({', '.join(RESERVED_COLUMNS)}, {WORKING_PREFIX}...; case does not tell them apart), "
                "so the table cannot be loaded: rename the column, or leave the table out with tables.exclude"
            )
        if table_format == "iceberg" and low in ICEBERG_METADATA_COLUMNS:
            return (
                f"{schema}.{table}: column {column} is named like one of Iceberg's metadata columns "
                f"({', '.join(ICEBERG_METADATA_COLUMNS)}; case does not tell them apart), which an "
                "Iceberg table cannot have, so the table cannot be loaded: rename the column, leave "
                'the table out with tables.exclude, or keep the warehouse in Hive-format tables ([warehouse] format = "hive")'
            )
    return None
