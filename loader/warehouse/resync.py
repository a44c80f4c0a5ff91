"""A load's copy as one step of a table that keeps more than the source's rows (``loader.core.modes``).

A mirror takes the copy's rows. A ``soft_delete`` or ``history`` table loaded again keeps what
it knew: ``soft_delete`` takes the copy's rows and marks deleted the keys the copy lacks (as of
the load: P0's seqno, the load's start); ``history`` keeps its closed versions and the current
ones the copy holds unchanged, closes the others at the load, and opens a version for each copied
row that differs from the current one. The rows are computed here from the copy and the table as
it was, and the load writes them as the table's new rows, as it writes a mirror's copy.
"""

from __future__ import annotations

from typing import Any

from loader.core import modes
from loader.core.naming import RESERVED_COLUMNS
from loader.warehouse import types
from loader.warehouse.tables import PART, quote_identifier

# A constant column's value: a timestamp's is its UTC text.
Value = bool | int | str | None


def copied_mode_values(mode: str, seqno: int, started_at: str) -> list[tuple[str, str, Value]]:
    """A copied row's own columns in ``mode`` (after the change metadata), as ``(name, Spark
    type, value)`` (a timestamp's value is its UTC text): a live row; a version valid from the
    load (``seqno``, P0's, and ``started_at``, its start)."""
    if mode == modes.SOFT_DELETE:
        return [(modes.IS_DELETED, "boolean", False), (modes.DELETED_AT, "timestamp", None)]
    if mode == modes.HISTORY:
        return [
            (modes.VALID_FROM, "timestamp", started_at),
            (modes.VALID_TO, "timestamp", None),
            (modes.VALID_FROM_SEQNO, "bigint", seqno),
            (modes.VALID_TO_SEQNO, "bigint", None),
            (modes.IS_CURRENT, "boolean", True),
        ]
    return []


def copied_change_values(seqno: int, started_at: str, load_id: str) -> list[tuple[str, str, Value]]:
    """A copied row's change metadata but its load time (``modes.LOADED_AT``, the copy's), as
    ``(name, Spark type, value)``: a copy at P0 (``seqno``) in the load's start."""
    return [
        (modes.OP, "string", modes.COPIED),
        (modes.SEQNO, "bigint", seqno),
        (modes.ROWNO, "int", None),
        (modes.COMMIT_TS, "timestamp", started_at),
        (modes.INTERVAL, "string", load_id),
    ]


def _literal(kind: str, value: Value) -> str:
    if value is None:
        return f"CAST(NULL AS {kind.upper()})"
    if kind == "timestamp":
        return f"TIMESTAMP '{value}'"
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "string":
        return types.spark_string(str(value))
    return f"CAST({value} AS {kind.upper()})"


def select_items(values: list[tuple[str, str, Value]]) -> list[str]:
    """The select items of ``copied_change_values`` or ``copied_mode_values``."""
    return [f"{_literal(kind, value)} AS {name}" for name, kind, value in values]


def copied_mode_columns(mode: str, seqno: int, started_at: str) -> list[str]:
    """The select items of ``copied_mode_values``."""
    return select_items(copied_mode_values(mode, seqno, started_at))


def resynced(
    spark: Any,
    copy: Any,
    old: Any,
    mode: str,
    key: list[str],
    seqno: int,
    load_id: str,
    started_at: str,
    partition: str = "",
) -> Any:
    """The rows of a table in ``mode`` (``soft_delete`` or ``history``) after the copy ``copy`` (a
    DataFrame of the copied rows as the load writes them) of a table whose rows were ``old``, with
    the copy's columns in its order. ``partition`` (Hive-format tables) is the SQL of a row's
    partition, for the old rows kept.
    """
    q = quote_identifier
    have = set(old.columns)
    aligned = []
    for field in copy.schema.fields:
        name, kind = field.name, field.dataType.simpleString()
        if name == PART:
            aligned.append(f"{partition} AS {PART}")
        elif name in have:
            aligned.append(f"CAST(o.{q(name)} AS {kind}) AS {q(name)}")
        else:  # a column the re-load brings (or, in an older table, one it did not have)
            aligned.append(f"CAST(NULL AS {kind}) AS {q(name)}")
    old.createOrReplaceTempView("loader_old")
    copy.createOrReplaceTempView("loader_copy")
    spark.sql(f"SELECT {', '.join(aligned)} FROM loader_old o").createOrReplaceTempView("loader_was")
    data = [c for c in copy.columns if c not in RESERVED_COLUMNS]  # the source's columns
    key_join = " AND ".join(f"o.{q(k)} <=> c.{q(k)}" for k in key)
    at, load = f"TIMESTAMP '{started_at}'", types.spark_string(load_id)
    ordered = ", ".join(q(c) for c in copy.columns)
    if mode == modes.SOFT_DELETE:
        marked = {
            modes.OP: f"'{modes.DELETED_OP}'",
            modes.SEQNO: f"CAST({seqno} AS BIGINT)",
            modes.ROWNO: "CAST(NULL AS INT)",
            modes.COMMIT_TS: at,
            modes.INTERVAL: load,
            modes.LOADED_AT: "current_timestamp()",
            modes.IS_DELETED: "true",
            modes.DELETED_AT: at,
        }
        gone = ", ".join(
            f"CASE WHEN o.{modes.IS_DELETED} THEN o.{q(c)} ELSE {marked[c]} END AS {q(c)}"
            if c in marked
            else f"o.{q(c)}"
            for c in copy.columns
        )
        return spark.sql(
            f"SELECT {ordered} FROM loader_copy "
            f"UNION ALL SELECT {gone} FROM loader_was o LEFT ANTI JOIN loader_copy c ON {key_join}"
        )
    if mode != modes.HISTORY:
        raise ValueError(f"a copy replaces the rows of a {mode} table; nothing to resync")
    closed = {
        modes.VALID_TO: at,
        modes.VALID_TO_SEQNO: f"CAST({seqno} AS BIGINT)",
        modes.IS_CURRENT: "false",
        modes.LOADED_AT: "current_timestamp()",
    }
    close = ", ".join(f"{closed[c]} AS {q(c)}" if c in closed else f"o.{q(c)}" for c in copy.columns)
    same_row = " AND ".join([key_join, *(f"o.{q(c)} <=> c.{q(c)}" for c in data)])
    spark.sql(
        f"SELECT o.* FROM loader_was o LEFT SEMI JOIN loader_copy c ON {same_row} WHERE o.{modes.IS_CURRENT}"
    ).createOrReplaceTempView("loader_kept")
    kept_join = " AND ".join(f"k.{q(c)} <=> o.{q(c)}" for c in key)
    return spark.sql(
        f"SELECT {ordered} FROM loader_was WHERE NOT {modes.IS_CURRENT} "
        f"UNION ALL SELECT {ordered} FROM loader_kept "
        f"UNION ALL SELECT {close} FROM loader_was o LEFT ANTI JOIN loader_kept k ON {kept_join} "
        f"WHERE o.{modes.IS_CURRENT} "
        f"UNION ALL SELECT {ordered} FROM loader_copy c LEFT ANTI JOIN loader_kept o ON {key_join}"
    )
