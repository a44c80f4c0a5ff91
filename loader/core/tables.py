"""Which tables are loaded: ``schema.table`` patterns with ``*`` and ``?`` wildcards."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from loader.core.errors import TableKeyError


def table_list(text: str | None) -> list[str] | None:
    """A comma-separated ``schema.table`` list as given on a command line; None when empty."""
    tables = [t.strip() for t in (text or "").split(",") if t.strip()]
    return tables or None


@dataclass(frozen=True)
class TableSelector:
    """Include/exclude patterns; a table is selected when it matches an include and no exclude.

    Patterns match ``schema.table`` case-sensitively, as MySQL names are on Linux.
    """

    include: Sequence[str] = ("*.*",)
    exclude: Sequence[str] = ()

    def __call__(self, schema: str, table: str) -> bool:
        name = f"{schema}.{table}"
        return any(fnmatchcase(name, p) for p in self.include) and not any(
            fnmatchcase(name, p) for p in self.exclude
        )

    def may_select(self, schema: str) -> bool:
        """Whether some table of ``schema`` may be selected (an include's schema part matches)."""
        return any(fnmatchcase(schema, p.split(".", 1)[0]) for p in self.include)


def key_columns(
    keys: Mapping[str, Sequence[str]],
    schema: str,
    table: str,
    primary_key: Sequence[str],
    columns: Sequence[str],
    unique_keys: Sequence[Sequence[str]] | None = None,
) -> list[str]:
    """The columns a table is merged by: its configured key, else its primary key.

    Args:
        unique_keys: the table's keys that identify a row (primary key, UNIQUE indexes over NOT
            NULL columns), when known: a configured key must be one of them.

    Raises:
        TableKeyError: the table has neither, a key column it does not have, or a configured
            key that does not identify a row (two rows sharing it would be merged into one).
    """
    name = f"{schema}.{table}"
    key = list(keys.get(name) or primary_key)
    if not key:
        raise TableKeyError(
            f"table {name} has no primary key; give its key columns in the config "
            f'([tables] keys = {{ "{name}" = ["col", ...] }})'
        )
    missing = [k for k in key if k not in columns]
    if missing:
        raise TableKeyError(f"key columns {missing} of {name} are not among its columns")
    if unique_keys is not None and keys.get(name) and not any(set(u) == set(key) for u in unique_keys):
        raise TableKeyError(
            f"the key {key} configured for {name} does not identify a row: it is not the table's "
            "primary key or a UNIQUE index over NOT NULL columns, so rows sharing it would be merged "
            "into one (a UNIQUE index allows many NULLs). Give the columns of such a key in "
            "[tables] keys, or add a primary key to the table"
        )
    return key


def reload_remedy(*tables: tuple[str, str]) -> str:
    """The one step that brings tables back after a change the loader cannot carry."""
    names = ",".join(f"{schema}.{table}" for schema, table in tables)
    return f"re-load the table{'s' if len(tables) > 1 else ''}: loader initial-load --tables {names}"
