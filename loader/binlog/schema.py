"""Table schemas from the source, for binlogs whose table maps lack full metadata.

Loaded once per table before its rows are decoded (never inside the row loop) and dropped
when a DDL touches the table. ``StaticSchema`` serves tests and offline decoding.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class SourceColumn:
    """One column as ``information_schema.COLUMNS`` describes it."""

    name: str
    data_type: str  # lower-case: int, varchar, datetime, enum, ...
    unsigned: bool = False
    charset: str | None = None  # None for non-character columns and binary strings
    labels: tuple[str, ...] | None = None  # ENUM / SET members
    fsp: int = 0  # fractional seconds digits of TIME/DATETIME/TIMESTAMP
    char_length: int | None = None
    column_type: str = ""  # information_schema's COLUMN_TYPE: int(10) unsigned, decimal(12,2), ...


@dataclass(frozen=True, slots=True)
class SourceTable:
    """A table's columns in order, its primary key, and its other keys that identify a row."""

    schema: str
    table: str
    columns: tuple[SourceColumn, ...]
    primary_key: tuple[str, ...]
    # The primary key and UNIQUE indexes whose columns are all NOT NULL (a unique index allows
    # many NULLs)
    unique_keys: tuple[tuple[str, ...], ...] = ()
    # Whether its engine rolls back (information_schema.ENGINES.TRANSACTIONS: InnoDB yes; MyISAM,
    # Aria, MEMORY no); None when not known.
    transactional: bool | None = None


class SchemaProvider(Protocol):
    """Where table schemas come from."""

    def get(self, schema: str, table: str) -> SourceTable | None:
        """The table's schema, or None when it is not known."""
        ...

    def invalidate(self, schema: str, table: str | None = None) -> None:
        """Forget what is cached for a table (or a whole schema) after a DDL."""
        ...


class StaticSchema:
    """A fixed set of table schemas (tests, offline decoding)."""

    def __init__(self, tables: Mapping[tuple[str, str], SourceTable]) -> None:
        self._tables = dict(tables)

    def get(self, schema: str, table: str) -> SourceTable | None:
        return self._tables.get((schema, table))

    def invalidate(self, schema: str, table: str | None = None) -> None:
        """Nothing to forget: the schemas are fixed."""


_LABELS = re.compile(r"'((?:[^']|'')*)'")


def parse_labels(column_type: str) -> tuple[str, ...] | None:
    """The members of ``enum('a','b')`` / ``set('x','y')``; None for other types."""
    lowered = column_type.lower()
    if not (lowered.startswith("enum(") or lowered.startswith("set(")):
        return None
    body = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    return tuple(m.replace("''", "'").replace("\\\\", "\\") for m in _LABELS.findall(body))


class InformationSchema:
    """Reads table schemas from the source's ``information_schema``, caching per table."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._cache: dict[tuple[str, str], SourceTable | None] = {}

    def get(self, schema: str, table: str) -> SourceTable | None:
        key = (schema, table)
        if key not in self._cache:
            self._cache[key] = self._load(schema, table)
        return self._cache[key]

    def invalidate(self, schema: str, table: str | None = None) -> None:
        for key in list(self._cache):
            if key[0] == schema and (table is None or key[1] == table):
                del self._cache[key]

    def _load(self, schema: str, table: str) -> SourceTable | None:
        with self._conn.cursor() as cur:
            cur.execute(
                "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME, DATETIME_PRECISION,"
                " CHARACTER_MAXIMUM_LENGTH, COLUMN_KEY FROM information_schema.COLUMNS"
                " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                (schema, table),
            )
            rows = cur.fetchall()
            if not rows:
                return None
            cur.execute(
                "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE"
                " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY'"
                " ORDER BY ORDINAL_POSITION",
                (schema, table),
            )
            pk = tuple(str(r[0]) for r in cur.fetchall())
            cur.execute(
                "SELECT s.INDEX_NAME, s.COLUMN_NAME, c.IS_NULLABLE FROM information_schema.STATISTICS s"
                " JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = s.TABLE_SCHEMA"
                " AND c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME"
                " WHERE s.TABLE_SCHEMA = %s AND s.TABLE_NAME = %s AND s.NON_UNIQUE = 0"
                " ORDER BY s.INDEX_NAME, s.SEQ_IN_INDEX",
                (schema, table),
            )
            indexes: dict[str, list[tuple[str, bool]]] = {}
            for index, column, nullable in cur.fetchall():
                indexes.setdefault(str(index), []).append((str(column), str(nullable) == "YES"))
            cur.execute(
                "SELECT e.TRANSACTIONS FROM information_schema.TABLES t JOIN information_schema.ENGINES e"
                " ON e.ENGINE = t.ENGINE WHERE t.TABLE_SCHEMA = %s AND t.TABLE_NAME = %s",
                (schema, table),
            )
            engine = cur.fetchone()
        unique = tuple(tuple(c for c, _ in cols) for cols in indexes.values() if not any(n for _, n in cols))
        columns = tuple(
            SourceColumn(
                name=str(name),
                data_type=str(data_type).lower(),
                unsigned="unsigned" in str(column_type).lower(),
                charset=str(charset) if charset else None,
                labels=parse_labels(str(column_type)),
                fsp=int(fsp or 0),
                char_length=int(max_len) if max_len is not None else None,
                column_type=str(column_type),
            )
            for name, data_type, column_type, charset, fsp, max_len, _key in rows
        )
        transactional = None if engine is None or engine[0] is None else str(engine[0]).upper() == "YES"
        return SourceTable(schema, table, columns, pk, unique, transactional)
