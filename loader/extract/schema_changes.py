"""The statements of a transaction that name a selected table: carried (an ALTER TABLE whose effect
the rows after it show, a new table's CREATE TABLE) and noted in the table's manifest entry, or a
stop that names the statement and the remedy.
"""

from __future__ import annotations

from loader.binlog import statements
from loader.binlog.transactions import Transaction
from loader.core.errors import ExtractError
from loader.core.positions import Position
from loader.core.tables import TableSelector, reload_remedy
from loader.extract.files import TableWriter


def _stale(tx: Transaction, loaded_at: dict[tuple[str, str], Position], name: tuple[str, str]) -> bool:
    since = loaded_at.get(name)
    return since is not None and tx.start < since


def check_statements(
    tx: Transaction,
    selector: TableSelector,
    writers: dict[tuple[str, str], TableWriter],
    loaded_at: dict[tuple[str, str], Position],
    pending: dict[tuple[str, str], list[dict[str, str]]],
    created: dict[tuple[str, str], str],
    schema_changes: str = "evolve",
) -> None:
    """Stop at a statement that changes a selected table in a way rows events do not carry.
    A carried one is noted in the table's manifest entry (``pending`` until its first row); a
    new table's CREATE in ``created``.

    Carried (``schema_changes = "evolve"``): ALTER TABLE without a rename (the rows after it show
    its effect on the columns, checked by ``layout_change_problem``) and CREATE TABLE of a new
    table (its rows all follow). Everything else that names a selected table stops the interval
    at the statement, unless the table was re-loaded after it; with ``"stop"``, every statement.
    """
    for st in tx.statements:
        change = statements.classify(st.query, st.schema)
        hit = list(dict.fromkeys(n for n in change.names if selector(*n) and not _stale(tx, loaded_at, n)))
        hit += [(schema, "*") for schema in change.dropped_schemas if selector.may_select(schema)]
        if not hit:
            continue
        text = st.query.strip()
        stop = _stop_reason(change, hit)
        if stop is None and schema_changes == "stop":
            stop = (
                f'tables.schema_changes = "stop" stops at every schema change ({change.verb})',
                f"review the change, then {reload_remedy(*hit)} "
                '(or set tables.schema_changes = "evolve" to carry the changes the warehouse can follow)',
            )
        if stop is not None:
            shown = text if len(text) <= 300 else text[:300] + "..."
            names = ", ".join(f"{schema}.{table}" for schema, table in hit)
            raise ExtractError(f"{st.position}: {names}: {stop[0]} (statement: {shown}); {stop[1]}")
        if change.verb == "CREATE TABLE" and not change.if_not_exists:
            created.update((name, str(st.position)) for name in hit)
        for name in hit:
            noted = {"position": str(st.position), "query": text}
            writer = writers.get(name)
            if writer is not None:
                writer.entry.statements.append(noted)
            else:
                pending.setdefault(name, []).append(noted)


def _stop_reason(change: statements.Change, hit: list[tuple[str, str]]) -> tuple[str, str] | None:
    """Why ``change`` to the selected tables ``hit`` cannot be carried and what to do, or None
    when it can be carried."""
    if change.dropped_schemas:
        schema = change.dropped_schemas[0]
        return (
            f"DROP DATABASE dropped every table of {schema}",
            f'leave them out with tables.exclude = ["{schema}.*"], or re-load each once it exists again '
            f"(loader initial-load --tables {schema}.<table>)",
        )
    remedy = reload_remedy(*hit)
    if len(hit) == 1:
        gone = f"{remedy} once it exists again, or leave it out with tables.exclude if it is gone for good"
    else:
        gone = f"{remedy} once they exist again, or leave out those gone for good with tables.exclude"
    if change.dml:
        return (
            f"the {change.verb} was logged as a statement, not as row changes (the session's "
            "binlog_format was STATEMENT or MIXED), and the loader carries only row changes",
            f"set binlog_format=ROW for every session that writes to it, then {remedy}",
        )
    if change.added_with_values:
        columns = ", ".join(change.added_with_values)
        return (
            f"ALTER TABLE added {columns} with a value for the rows already there (a default, NOT NULL "
            "or a generated value), which no row change carries",
            remedy,
        )
    if change.reshaped:
        return (
            f"ALTER TABLE {', '.join(change.reshaped)}, which the warehouse table cannot follow "
            "(its columns go by name; only columns added at the end are carried)",
            remedy,
        )
    if change.verb == "ALTER TABLE" and not change.created:
        return None
    if change.verb == "CREATE TABLE":
        if not change.replaced:
            return None
        return "CREATE OR REPLACE TABLE replaced the table, whose old rows the warehouse holds", remedy
    if change.created and any(name in change.created for name in hit):
        return "a table was renamed to a selected name; the warehouse holds the old table's rows", remedy
    if change.created:
        return "the table was renamed; its rows now live under another name", gone
    if change.verb.startswith("DROP"):
        return f"{change.verb} cannot be carried as row changes", gone
    return f"{change.verb} cannot be carried as row changes", remedy
