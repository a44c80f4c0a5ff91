"""What the checks of the warehouse against the source report: a table compared row by row
(``compare``: its rows matched by key, the rows that differ) or range by range (``checksum``: the
key ranges whose count or checksum differ), and how ``loader compare`` and ``loader checksum``
print them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from loader.core import modes


@dataclass
class RowDifference:
    """A row of a compared table that differs: its key's values, the columns that differ (every
    column when one side lacks the row) and their values on each side (None: that side has no
    row with the key)."""

    key: list[Any]
    columns: list[str]
    source: list[Any] | None
    warehouse: list[Any] | None


@dataclass
class TableComparison:
    """A warehouse table next to its source table."""

    table: str
    warehouse_table: str
    source_rows: int
    warehouse_rows: int
    equal: bool
    columns: list[str]
    source_sample: list[list[Any]]
    warehouse_sample: list[list[Any]]
    as_of: str | None = None  # the warehouse as it was after this interval (Iceberg tables)
    mode: str = modes.MIRROR  # the warehouse table's (``loader.core.modes``)
    # soft_delete, history: every row the table keeps, the deleted ones and older versions too
    # (``warehouse_rows`` counts the live ones, compared with the source's)
    kept_rows: int | None = None
    not_loaded: str | None = None  # why it is not compared: its copy is pending (``Ledger.not_loaded``)
    key: list[str] = field(default_factory=list)  # the columns rows are matched by
    differing_rows: int = 0  # keys one side lacks, or whose rows differ
    differences: list[RowDifference] = field(default_factory=list)  # the first of them, in key order

    def warehouse_text(self) -> str:
        """What the warehouse side holds, for people."""
        if self.kept_rows is not None and self.mode == modes.SOFT_DELETE:
            return f"{self.warehouse_rows:,} live rows ({self.kept_rows:,} with the deleted)"
        if self.kept_rows is not None and self.mode == modes.HISTORY:
            return f"{self.warehouse_rows:,} current versions (of {self.kept_rows:,})"
        return f"{self.warehouse_rows:,} rows"


def comparison_text(tables: list[TableComparison]) -> str:
    """As ``loader compare`` prints it: a line per table; an equal table's first rows of each
    side, a different one's first differing rows (their key, then the columns that differ with
    both values), long values cut; the verdict last."""
    lines = []
    for t in tables:
        if t.not_loaded:
            lines.append(f"{t.table} → {t.warehouse_table}: not compared: {t.not_loaded}")
            continue
        as_of = f" as of interval {t.as_of}" if t.as_of else ""
        verdict = (
            "equal"
            if t.equal
            else f"DIFFERENT: {t.differing_rows:,} {'row differs' if t.differing_rows == 1 else 'rows differ'}"
        )
        lines.append(
            f"{t.table} → {t.warehouse_table}: source {t.source_rows:,} rows, "
            f"warehouse{as_of} {t.warehouse_text()}, {verdict}"
        )
        if t.equal:
            for side, sample in (("source", t.source_sample), ("warehouse", t.warehouse_sample)):
                for row in sample:
                    lines.append(f"  {side:<9} " + _values(t.columns, row))
            continue
        for d in t.differences:
            key = _values(t.key, d.key)
            if d.source is None or d.warehouse is None:
                side, only = ("source", d.source) if d.warehouse is None else ("warehouse", d.warehouse)
                lines.append(f"  key {key}: only in the {side}: {_values(d.columns, only or [])}")
            else:
                changes = "; ".join(
                    f"{c}: source {_shown(a)}, warehouse {_shown(b)}"
                    for c, a, b in zip(d.columns, d.source, d.warehouse, strict=True)
                )
                lines.append(f"  key {key}: {changes}")
        if t.differing_rows > len(t.differences):
            more = t.differing_rows - len(t.differences)
            lines.append(f"  … and {more:,} more row{'' if more == 1 else 's'}")
    differ = [t.table for t in tables if not t.equal and not t.not_loaded]
    if differ:
        names = ",".join(differ)
        lines.append(
            f"compare: {len(differ)} of {len(tables)} tables differ from the source: {names}. "
            f"Re-load them with `loader initial-load --tables {names}` (the delta runs go on for the "
            "other tables)"
        )
    return "\n".join(lines)


SHOWN_CHARACTERS = 60  # of a value ``loader compare`` prints; a longer one is cut, its length said


def _shown(value: Any) -> str:
    """A value as ``loader compare`` prints it: its repr, a long text cut and its length said."""
    if isinstance(value, str) and len(value) > SHOWN_CHARACTERS:
        return f"{value[: SHOWN_CHARACTERS // 2]!r}… ({len(value):,} characters)"
    return repr(value)


def _values(columns: list[str], row: list[Any]) -> str:
    return ", ".join(f"{c}={_shown(v)}" for c, v in zip(columns, row, strict=False))


@dataclass
class DifferingRange:
    """A key range whose rows or checksum differ: keys after ``after`` up to ``up_to``
    (None: from the first key, to the last)."""

    after: list[str] | None
    up_to: list[str] | None
    source_rows: int
    warehouse_rows: int


@dataclass
class TableChecksum:
    """A warehouse table checked against its source table range by range."""

    table: str
    warehouse_table: str
    source_rows: int
    warehouse_rows: int
    ranges: int
    equal: bool
    key: list[str]
    differing: list[DifferingRange] = field(default_factory=list)
    problem: str | None = None  # why no range could be compared
    not_loaded: str | None = None  # why it is not compared: its copy is pending (``Ledger.not_loaded``)


@dataclass
class ChecksumReport:
    """``loader checksum``: the source position compared at and each table's verdict."""

    position: str
    tables: list[TableChecksum]
    caught_up: str | None = None  # the interval that brought the warehouse to the position

    @property
    def equal(self) -> bool:
        """Every table compared is equal (those awaiting their copy are not compared)."""
        return all(t.equal or t.not_loaded for t in self.tables)

    def verdict(self) -> str | None:
        """The line that says what differs and what to do, or None when every table is equal."""
        differ = [t.table for t in self.tables if not t.equal and not t.not_loaded]
        if not differ:
            return None
        names = ",".join(differ)
        return (
            f"checksum: {len(differ)} of {len(self.tables)} tables differ from the source at "
            f"{self.position}: {names}. Re-load them with `loader initial-load --tables {names}` "
            "(the delta runs go on for the other tables)"
        )

    def text(self, show: int = 10) -> str:
        """As ``loader checksum`` prints it: a line per table, its differing ranges (up to ``show``)
        as SQL conditions, and the verdict last."""
        equal = sum(t.equal for t in self.tables)
        waiting = sum(bool(t.not_loaded) for t in self.tables)
        caught_up = f" (warehouse brought there by interval {self.caught_up})" if self.caught_up else ""
        lines = [
            f"checksum at {self.position}{caught_up}: {len(self.tables)} tables, {equal} equal"
            + (f", {waiting} not compared (awaiting their copy)" if waiting else "")
        ]
        for t in self.tables:
            if t.not_loaded:
                lines.append(f"{t.table} → {t.warehouse_table}: not compared: {t.not_loaded}")
                continue
            lines.append(
                f"{t.table} → {t.warehouse_table}: source {t.source_rows:,} rows, warehouse "
                f"{t.warehouse_rows:,} rows, {t.ranges:,} key range{'' if t.ranges == 1 else 's'}, "
                f"{'equal' if t.equal else 'DIFFERENT'}"
            )
            if t.problem:
                lines.append(f"  {t.problem}")
            for r in t.differing[:show]:
                lines.append(
                    f"  differs where {_key_range(t.key, r.after, r.up_to)}: "
                    f"source {r.source_rows:,} rows, warehouse {r.warehouse_rows:,} rows"
                )
            if len(t.differing) > show:
                more = len(t.differing) - show
                lines.append(f"  … and {more:,} more range{'' if more == 1 else 's'}")
        verdict = self.verdict()
        return "\n".join(lines + ([verdict] if verdict else []))


_NUMBER = re.compile(r"-?\d+(\.\d+)?(e-?\d+)?")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _key_range(key: list[str], after: list[str] | None, up_to: list[str] | None) -> str:
    """A key range as a SQL condition on-call can paste: ``id > 2 AND id <= 4``."""

    def spelled(values: list[str]) -> str:
        shown = [v if _NUMBER.fullmatch(v) else "'" + v.replace("'", "''") + "'" for v in values]
        return shown[0] if len(shown) == 1 else f"({', '.join(shown)})"

    names = [k if _IDENTIFIER.fullmatch(k) else "`" + k.replace("`", "``") + "`" for k in key]
    columns = names[0] if len(names) == 1 else f"({', '.join(names)})"
    terms = [f"{columns} > {spelled(after)}"] if after is not None else []
    terms += [f"{columns} <= {spelled(up_to)}"] if up_to is not None else []
    return " AND ".join(terms) or "every key"
