"""Warehouse modes (``[tables] mode``): what a warehouse table holds for its source table's
changes, and the change metadata on each of its rows. This module is the contract and its
reference in plain Python, changes in, rows out; the Spark merges of every mode must give the
same rows, whatever the cut into intervals and however often an interval is applied again.

- ``mirror``: the source table as it is: a deleted key is gone, an updated one has its newest row.
- ``soft_delete``: as ``mirror``, but a deleted key keeps a row, as the delete saw it, with
  ``_is_deleted`` true and ``_deleted_at``; a later insert of the key revives it.
- ``history`` (slowly changing dimension, type 2): every committed version of every row, valid
  from the commit that wrote it (``_valid_from``, ``_valid_from_seqno``) to the one that changed or
  deleted it (``_valid_to``, ``_valid_to_seqno``; NULL while ``_is_current``). A transaction is one
  step: what a key went through inside it is not a version. A change of key closes the old key's
  version and opens one for the new key.

Every row of every mode carries the change that wrote it (in ``history``: that opened its
version): ``_op`` (``c`` insert, ``u`` update: the key had a row before that transaction, ``d``
delete: ``soft_delete``'s deleted rows, ``r`` copied by a load), ``_seqno`` and ``_rowno`` (NULL for
copied rows), ``_commit_ts`` (the source's commit time; a load's start for copied rows),
``_interval`` (the interval that first brought the change, or the load's id) and ``_loaded_at``
(when the warehouse got the row: a clock reading, which this reference leaves out).

A load's copy is one step at its position (P0's seqno), and holds every change up to there that
the table had not taken before it: ``mirror`` takes the copy's rows;
``soft_delete`` takes them and marks deleted the keys the copy does not have; ``history`` closes
the versions of keys the copy does not have or has otherwise, and opens versions for the copy's
rows that differ from the current ones (an unchanged row keeps its version).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MIRROR, SOFT_DELETE, HISTORY = "mirror", "soft_delete", "history"
MODES = (MIRROR, SOFT_DELETE, HISTORY)

# The change that wrote the row: every mode. (Iceberg reserves _row_id and _deleted for its own
# metadata columns: hence _rowno, the change row's number in its transaction, and _is_deleted.)
OP = "_op"
SEQNO = "_seqno"
ROWNO = "_rowno"
COMMIT_TS = "_commit_ts"
INTERVAL = "_interval"
LOADED_AT = "_loaded_at"
CHANGE_COLUMNS = (OP, SEQNO, ROWNO, COMMIT_TS, INTERVAL, LOADED_AT)
# soft_delete
IS_DELETED = "_is_deleted"
DELETED_AT = "_deleted_at"
# history
VALID_FROM = "_valid_from"
VALID_TO = "_valid_to"
VALID_FROM_SEQNO = "_valid_from_seqno"
VALID_TO_SEQNO = "_valid_to_seqno"
IS_CURRENT = "_is_current"
MODE_COLUMNS: Mapping[str, tuple[str, ...]] = {
    MIRROR: (),
    SOFT_DELETE: (IS_DELETED, DELETED_AT),
    HISTORY: (VALID_FROM, VALID_TO, VALID_FROM_SEQNO, VALID_TO_SEQNO, IS_CURRENT),
}

INSERTED, UPDATED, DELETED_OP, COPIED = "c", "u", "d", "r"


@dataclass(frozen=True)
class Change:
    """One staged change row: ``op`` ``I`` (an after image) or ``D`` (a before image)."""

    op: str
    seqno: int
    row_id: int
    commit_ts: Any
    interval: str
    values: Mapping[str, Any]


@dataclass(frozen=True)
class Copy:
    """A load's copy of the table: its rows as the source held them at ``seqno`` (P0's)."""

    seqno: int
    load_id: str
    started_at: Any
    rows: Sequence[Mapping[str, Any]]


Event = Change | Copy


def apply(mode: str, key: Sequence[str], events: Iterable[Event]) -> list[dict[str, Any]]:
    """The table ``mode`` makes of ``events`` (changes and copies, in the order they were applied,
    replays included), as rows of the data columns and the metadata columns but ``_loaded_at``;
    sorted by key (in ``history``, then by ``_valid_from_seqno``).

    Raises:
        ValueError: an unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"no mode {mode!r} (modes: {', '.join(MODES)})")
    table = _Table(mode, tuple(key))
    for step in _steps(events):
        if isinstance(step, Copy):
            table.copy(step)
        else:
            table.transaction(step)
    return table.rows()


def _steps(events: Iterable[Event]) -> list[Copy | list[Change]]:
    """The distinct changes (the first time each was applied: its interval is the one that
    brought it) grouped into transactions, and the copies, in log order (a copy after the
    changes it holds). A change first applied after a copy at or past its position is the
    copy's: the copy holds its effect, and the table learns of it only through the copy (a
    re-load's table takes no change older than its copy)."""
    changes: dict[tuple[int, int], Change] = {}
    copies: dict[str, Copy] = {}
    copied_through = -1
    for event in events:
        if isinstance(event, Copy):
            copies.setdefault(event.load_id, event)
            copied_through = max(copied_through, event.seqno)
        elif event.seqno > copied_through or (event.seqno, event.row_id) in changes:
            changes.setdefault((event.seqno, event.row_id), event)
    transactions: dict[int, list[Change]] = {}
    for (seqno, _), change in sorted(changes.items()):
        transactions.setdefault(seqno, []).append(change)
    ordered: list[tuple[tuple[int, int], Copy | list[Change]]] = [
        ((seqno, 0), rows) for seqno, rows in transactions.items()
    ]
    ordered += [((copy.seqno, 1), copy) for copy in copies.values()]
    return [step for _, step in sorted(ordered, key=lambda pair: pair[0])]


class _Table:
    def __init__(self, mode: str, key: tuple[str, ...]) -> None:
        self.mode = mode
        self.key = key
        self.current: dict[tuple[Any, ...], dict[str, Any]] = {}  # mirror, soft_delete: the rows
        self.versions: list[dict[str, Any]] = []  # history: every version, the current ones too

    def _key_of(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(values[c] for c in self.key)

    def _live(self, k: tuple[Any, ...]) -> bool:
        row = self.current.get(k)
        return row is not None and not row.get(IS_DELETED, False)

    def _row(
        self, values: Mapping[str, Any], op: str, seqno: int, row_id: int | None, ts: Any, interval: str
    ) -> dict[str, Any]:
        row = dict(values)
        row.update({OP: op, SEQNO: seqno, ROWNO: row_id, COMMIT_TS: ts, INTERVAL: interval})
        if self.mode == SOFT_DELETE:
            row.update({IS_DELETED: op == DELETED_OP, DELETED_AT: ts if op == DELETED_OP else None})
        if self.mode == HISTORY:
            row.update(
                {
                    VALID_FROM: ts,
                    VALID_TO: None,
                    VALID_FROM_SEQNO: seqno,
                    VALID_TO_SEQNO: None,
                    IS_CURRENT: True,
                }
            )
        return row

    def transaction(self, changes: list[Change]) -> None:
        seqno, ts = changes[0].seqno, changes[0].commit_ts
        last: dict[tuple[Any, ...], Change] = {}
        for change in changes:  # in row_id order: what each key ends the transaction as
            last[self._key_of(change.values)] = change
        for k, change in last.items():
            existed = self._live(k)
            if self.mode == HISTORY:
                if existed:
                    self._close(k, seqno, ts)
                if change.op == "I":
                    op = UPDATED if existed else INSERTED
                    self.current[k] = self._row(change.values, op, seqno, change.row_id, ts, change.interval)
                    self.versions.append(self.current[k])
                continue
            if change.op == "I":
                op = UPDATED if existed else INSERTED
                self.current[k] = self._row(change.values, op, seqno, change.row_id, ts, change.interval)
            elif self.mode == SOFT_DELETE:
                self.current[k] = self._row(
                    change.values, DELETED_OP, seqno, change.row_id, ts, change.interval
                )
            else:
                self.current.pop(k, None)

    def _close(self, k: tuple[Any, ...], seqno: int, ts: Any) -> None:
        version = self.current.pop(k)
        version.update({VALID_TO: ts, VALID_TO_SEQNO: seqno, IS_CURRENT: False})

    def copy(self, copy: Copy) -> None:
        copied = {self._key_of(r): r for r in copy.rows}
        at, seqno, load = copy.started_at, copy.seqno, copy.load_id
        if self.mode == MIRROR:
            self.current = {k: self._row(r, COPIED, seqno, None, at, load) for k, r in copied.items()}
            return
        if self.mode == SOFT_DELETE:
            for k, row in list(self.current.items()):
                if k not in copied and not row[IS_DELETED]:
                    data = {c: v for c, v in row.items() if not c.startswith("_")}
                    self.current[k] = self._row(data, DELETED_OP, seqno, None, at, load)
            self.current.update({k: self._row(r, COPIED, seqno, None, at, load) for k, r in copied.items()})
            return
        for k in list(self.current):
            row = self.current[k]
            if {c: row[c] for c in copied.get(k, {})} != copied.get(k):
                self._close(k, seqno, at)
        for k, values in copied.items():
            if k not in self.current:
                self.current[k] = self._row(values, COPIED, seqno, None, at, load)
                self.versions.append(self.current[k])

    def rows(self) -> list[dict[str, Any]]:
        if self.mode == HISTORY:
            return sorted(self.versions, key=lambda r: (self._key_of(r), r[VALID_FROM_SEQNO]))
        return [self.current[k] for k in sorted(self.current)]
