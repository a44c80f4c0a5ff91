"""The merge rule as Spark SQL, rendered from ``sql/merge.sql`` for a table's key and columns."""

from __future__ import annotations

from pathlib import Path
from string import Template

from loader.errors import LoaderError

SQL_DIR = Path(__file__).resolve().parents[1] / "sql"


class MergeError(LoaderError):
    """The merge cannot be rendered for this table (no key, a key column it does not have)."""


def quote_identifier(name: str) -> str:
    """A Spark SQL identifier, backquoted, with backquotes doubled."""
    return "`" + name.replace("`", "``") + "`"


def merge_sql(columns: list[str], key: list[str], template: str = "merge.sql") -> str:
    """The merge of the views ``changes`` and ``base`` for a table with these columns and key.

    Raises:
        MergeError: naming the key columns the table does not have.
    """
    if not key:
        raise MergeError("the merge needs the table's primary key columns")
    missing = [k for k in key if k not in columns]
    if missing:
        raise MergeError(f"key columns {missing} are not among the table's columns {columns}")
    q = quote_identifier
    text = (SQL_DIR / template).read_text(encoding="utf-8")
    latest = Template((SQL_DIR / "latest_changes.sql").read_text(encoding="utf-8"))
    key_columns = ", ".join(f"c.{q(k)}" for k in key)
    latest_sql = "\n".join(
        line for line in latest.substitute(key_columns=key_columns).splitlines() if not line.startswith("--")
    )
    return Template(text).substitute(
        latest_changes=latest_sql,
        key_join=" AND ".join(f"b.{q(k)} <=> l.{q(k)}" for k in key),
        base_columns=", ".join(f"b.{q(c)}" for c in columns),
        latest_columns=", ".join(f"l.{q(c)}" for c in columns),
        latest_key_is_null=f"l.{q(key[0])} IS NULL AND l.seqno IS NULL",
        base_key_is_null="b._seqno IS NULL",
    )


def merge_counts_sql(columns: list[str], key: list[str]) -> str:
    """Rows the merge of ``changes`` into ``base`` inserts, updates and deletes (one row)."""
    return merge_sql(columns, key, template="merge_counts.sql")
