"""Which tables are loaded: ``schema.table`` patterns with ``*`` and ``?`` wildcards."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase


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
