"""The merge rule as Spark SQL, rendered from the templates in ``sql/`` for a table's key and columns.

The rule runs in three steps, each a readable template (DESIGN.md section 4):

1. ``latest_changes.sql``: the latest change of each key (``ranked_changes.sql`` ranks them);
2. ``decide.sql``: what happens to each changed key (insert, update, delete, stale, none), which
   scans only the key and ``_seqno`` columns of the base rows;
3. ``merge.sql``: the table's new rows; ``merge_counts.sql`` counts the effect from step 2.

``apply_merge`` runs them over the views ``changes`` and ``base``. On an Iceberg table, step 1
feeds one ``MERGE INTO`` (``merge_into.sql``, ``merge_into_sql``) that applies steps 2 and 3 in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any

from loader.core import modes
from loader.core.errors import MergeError
from loader.warehouse.tables import live_rows, quote_identifier

# Package data, so that an installed loader (a wheel on Airflow workers or a cluster) has it.
SQL_DIR = resources.files("loader.warehouse") / "sql"
# Up to this many changed keys, the changes are broadcast to the tasks scanning the base table
# (a map-only join); above it, Spark chooses (a shuffle join keeps memory bounded).
BROADCAST_MAX_KEYS = 2_000_000


@dataclass(frozen=True)
class MergeSql:
    """The merge rule's statements for one table."""

    latest: str  # over the view `changes`
    decide: str  # over `latest` and `base`
    merge: str  # over `base` and `decided`
    counts: str  # over `decided`


def _render(template: str, **values: str) -> str:
    text = Template((SQL_DIR / template).read_text(encoding="utf-8")).substitute(values)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).strip()


def ranked_sql(columns: list[str], key: list[str]) -> str:
    """Step 1 over the view ``changes``, before its filter: every change with its rank among
    its key's changes (``_loader_rank`` 1 is the latest).

    Raises:
        MergeError: naming the key columns the table does not have.
    """
    if not key:
        raise MergeError("the merge needs the table's primary key columns")
    missing = [k for k in key if k not in columns]
    if missing:
        raise MergeError(f"key columns {missing} are not among the table's columns {columns}")
    return _render("ranked_changes.sql", key_columns=", ".join(f"c.{quote_identifier(k)}" for k in key))


def latest_sql(columns: list[str], key: list[str]) -> str:
    """Step 1 over the view ``changes``: the latest change of each key (see ``ranked_sql``)."""
    return _render("latest_changes.sql", ranked=ranked_sql(columns, key))


def op_sql(had_row: str) -> str:
    """The ``_op`` (``loader.core.modes``) of the row a key's latest change (alias ``l``) writes:
    ``d`` for a delete (a row ``soft_delete`` keeps), ``u`` when the key had a row before the
    change's transaction (an earlier change of the merge says so, ``_loader_prev_op``; else
    ``had_row``, SQL telling whether the table has a live row of the key), ``c`` otherwise."""
    told = {"true": " OR l._loader_prev_op IS NULL", "false": ""}.get(
        had_row, f" OR (l._loader_prev_op IS NULL AND {had_row})"
    )
    return (
        f"CASE WHEN l._loader_op = 'D' THEN '{modes.DELETED_OP}' "
        f"WHEN l._loader_prev_op = 'I'{told} THEN '{modes.UPDATED}' ELSE '{modes.INSERTED}' END"
    )


def mode_values(mode: str) -> dict[str, str]:
    """The mode's own columns of the row a key's latest change (alias ``l``) writes, as SQL."""
    if mode == modes.SOFT_DELETE:
        return {
            modes.IS_DELETED: "l._loader_op = 'D'",
            modes.DELETED_AT: "CASE WHEN l._loader_op = 'D' THEN l._loader_commit_ts END",
        }
    if mode == modes.MIRROR:
        return {}
    raise MergeError(f"no merge of the latest changes for mode {mode!r}")


def _listed(items: list[str]) -> str:
    """``items`` after the columns before them in a select or column list."""
    return "".join(f", {item}" for item in items)


def _filtered(join: str, target_filter: str) -> str:
    """A join condition on the target's rows narrowed by ``target_filter`` (if any)."""
    return f"{join} AND {target_filter}" if target_filter else join


def merge_sql(
    columns: list[str], key: list[str], broadcast: bool = True, mode: str = modes.MIRROR
) -> MergeSql:
    """The merge of the views ``changes`` and ``base`` for a table in ``mode`` with these
    columns and key.

    Raises:
        MergeError: naming the key columns the table does not have.
    """
    latest = latest_sql(columns, key)
    q = quote_identifier

    def hint(alias: str) -> str:
        return f"/*+ BROADCAST({alias}) */ " if broadcast else ""

    key_join = " AND ".join(f"b.{q(k)} <=> l.{q(k)}" for k in key)
    values = mode_values(mode)
    written = ["'insert'", "'update'"] + (["'delete'", "'none'"] if mode == modes.SOFT_DELETE else [])
    return MergeSql(
        latest=latest,
        decide=_render(
            "decide.sql",
            broadcast_latest=hint("l"),
            broadcast_matched=hint("b"),
            base_key_columns=", ".join(f"b.{q(k)}" for k in key),
            base_live=live_rows(mode, "b") or "true",
            key_join=key_join,
        ),
        merge=_render(
            "merge.sql",
            broadcast_decided=hint("l"),
            base_columns=", ".join(f"b.{q(c)}" for c in columns),
            base_mode_columns=_listed([f"b.{c}" for c in values]),
            latest_columns=", ".join(f"l.{q(c)}" for c in columns),
            op=op_sql("l._loader_had_row"),
            mode_values=_listed([f"{v} AS {c}" for c, v in values.items()]),
            written_actions=", ".join(written),
            key_join=key_join,
        ),
        counts=_render("merge_counts.sql"),
    )


def key_range_sql(column: str, width: int) -> str:
    """The number of the key range holding ``column``'s value (``floor(key / width)``), in
    decimals: a BIGINT divided as a double rounds keys past 2**53 into the next range."""
    return f"floor(CAST({column} AS DECIMAL(21, 0)) / {width})"


# Above this many separate key ranges, the target is narrowed to the one range around them all.
MAX_KEY_RANGES = 64


def key_ranges_sql(column: str, ranges: list[int], width: int) -> str:
    """A predicate that holds for every key in the key ranges ``ranges`` (range ``r`` holds the
    keys ``r * width`` to ``r * width + width - 1``, as ``floor(key / width)`` numbers them).

    Adjacent ranges are joined; past ``MAX_KEY_RANGES`` separate runs, one range from the first
    to the last stands for them (it holds more keys, never fewer).
    """
    runs: list[list[int]] = []
    for r in sorted(set(ranges)):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    if len(runs) > MAX_KEY_RANGES:
        runs = [[runs[0][0], runs[-1][1]]]
    terms = [f"({column} >= {lo * width} AND {column} < {(hi + 1) * width})" for lo, hi in runs]
    return "(" + " OR ".join(terms) + ")" if terms else ""


# Up to this many changed values of its first key column, the merge of a table split by hash
# buckets names them, so that Iceberg reads only the buckets (and the Parquet row groups) that
# can hold them; more touch every bucket of a table of the default 16 anyway.
MAX_KEY_VALUES = 1_000


def key_values_sql(column: str, values: list[str]) -> str:
    """A predicate that holds for every row whose ``column`` is one of ``values`` (SQL
    expressions of its type, one per changed value); empty for none or past ``MAX_KEY_VALUES``
    (no narrowing)."""
    if not values or len(values) > MAX_KEY_VALUES:
        return ""
    return f"{column} IN ({', '.join(values)})"


def merge_into_sql(
    target: str, columns: list[str], key: list[str], target_filter: str = "", mode: str = modes.MIRROR
) -> str:
    """The ``MERGE INTO`` that applies the latest change of each key (the view ``latest``: the
    rows of ``ranked_sql`` ranked 1) to ``target``, an Iceberg table in ``mode`` with these columns.

    The key is compared with ``=`` (primary key columns are never NULL). ``target_filter``, a
    predicate on the target's rows (alias ``t``) that every changed key's row satisfies, is added
    to the join: Spark pushes it into the target's scan, so Iceberg reads only the files whose
    partitions and key bounds can hold a changed key (without it, the whole table is read and
    shuffled for the join whatever the change).
    """
    q = quote_identifier
    key_join = " AND ".join(f"t.{q(k)} = l.{q(k)}" for k in key)
    values = mode_values(mode)
    mirror = mode == modes.MIRROR
    return _render(
        "merge_into.sql",
        target=target,
        key_join=_filtered(key_join, target_filter),
        when_deleted=(
            "WHEN MATCHED AND t._seqno < l._loader_seqno AND l._loader_op = 'D' THEN DELETE" if mirror else ""
        ),
        written=" AND l._loader_op = 'I'" if mirror else "",
        update_columns=", ".join(f"{q(c)} = l.{q(c)}" for c in columns),
        matched_op=op_sql(live_rows(mode, "t") or "true"),
        update_mode_columns=_listed([f"{c} = {v}" for c, v in values.items()]),
        columns=", ".join(q(c) for c in columns),
        mode_columns=_listed(list(values)),
        latest_columns=", ".join(f"l.{q(c)}" for c in columns),
        new_op=op_sql("false"),
        mode_values=_listed(list(values.values())),
    )


def history_changes_sql(key: list[str], target: str, target_filter: str = "") -> str:
    """What the view ``changes`` does to ``target`` (a table, or a view of its rows, alias ``t``)
    in mode ``history``: its versions to close and to open (``history_changes.sql``).
    ``target_filter`` (a predicate on ``t``) narrows the reading of the table as
    ``merge_into_sql``'s does."""
    q = quote_identifier

    def keyed(alias: str) -> str:
        return ", ".join(f"{alias}.{q(k)}" for k in key)

    target_join = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in key)
    return _render(
        "history_changes.sql",
        change_key=keyed("c"),
        target_key=keyed("t"),
        target=target,
        target_join=_filtered(target_join, target_filter),
        applied_join=" AND ".join(f"a.{q(k)} = s.{q(k)}" for k in key),
        fresh_key=keyed("f"),
    )


def _history_values(columns: list[str]) -> dict[str, str]:
    """What both history merges write of a new version (alias ``l``, a row of ``history``): its
    columns, and its ``_op`` (the key had a row before: a current version, or an earlier step)."""
    q = quote_identifier
    return {
        "columns": ", ".join(q(c) for c in columns),
        "latest_columns": ", ".join(f"l.{q(c)}" for c in columns),
        "op": op_sql("l._loader_current IS NOT NULL"),
    }


def history_merge_into_sql(target: str, columns: list[str], key: list[str], target_filter: str = "") -> str:
    """The ``MERGE INTO`` that applies the view ``history`` (``history_changes_sql``) to
    ``target``, an Iceberg table in mode ``history`` with these columns."""
    q = quote_identifier
    key_join = " AND ".join(f"t.{q(k)} = l.{q(k)}" for k in key)
    return _render(
        "history_merge_into.sql",
        target=target,
        key_join=_filtered(key_join, target_filter),
        **_history_values(columns),
    )


@dataclass
class MergeResult:
    """The merged rows (a lazy DataFrame) and what the merge does, counted."""

    rows: Any
    inserted: int
    updated: int
    deleted: int
    _decided: Any

    def release(self) -> None:
        """Drop the cached change decisions once the rows are written."""
        self._decided.unpersist()


def apply_merge(
    spark: Any, columns: list[str], key: list[str], changed_keys: int, mode: str = modes.MIRROR
) -> MergeResult:
    """Merge the view ``changes`` into the view ``base`` of a table in ``mode``; registers
    ``latest`` and ``decided``.

    ``changed_keys`` (an upper bound is enough) decides whether the changes are broadcast.
    """
    if mode == modes.HISTORY:
        return _apply_history(spark, columns, key)
    sql = merge_sql(columns, key, broadcast=changed_keys <= BROADCAST_MAX_KEYS, mode=mode)
    spark.sql(sql.latest).createOrReplaceTempView("latest")
    decided = spark.sql(sql.decide).cache()
    decided.createOrReplaceTempView("decided")
    effect = spark.sql(sql.counts).collect()[0]
    return MergeResult(
        spark.sql(sql.merge), int(effect.inserted), int(effect.updated), int(effect.deleted), decided
    )


def _apply_history(spark: Any, columns: list[str], key: list[str]) -> MergeResult:
    """``apply_merge`` in mode ``history``: every base row stays, some closed, and new versions
    come; registers ``history``."""
    q = quote_identifier
    history = spark.sql(history_changes_sql(key, "base")).cache()
    history.createOrReplaceTempView("history")
    counts = {r[0]: int(r[1]) for r in history.groupBy("_loader_action").count().collect()}
    merge = _render(
        "history_merge.sql",
        base_columns=", ".join(f"b.{q(c)}" for c in columns),
        key_join=" AND ".join(f"b.{q(k)} <=> l.{q(k)}" for k in key),
        **_history_values(columns),
    )
    return MergeResult(spark.sql(merge), counts.get("open", 0), counts.get("close", 0), 0, history)
