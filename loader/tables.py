"""Which tables are loaded: ``schema.table`` patterns with ``*`` and ``?`` wildcards."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from loader.errors import TableKeyError


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


def key_columns(
    keys: Mapping[str, Sequence[str]],
    schema: str,
    table: str,
    primary_key: Sequence[str],
    columns: Sequence[str],
) -> list[str]:
    """The columns a table is merged by: its configured key, else its primary key.

    Raises:
        TableKeyError: the table has neither, or a key column it does not have.
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
    return key


def reload_remedy(schema: str, table: str) -> str:
    """The one step that brings a table back after a change the loader cannot carry."""
    return f"re-load the table: loader initial-load --tables {schema}.{table}"
