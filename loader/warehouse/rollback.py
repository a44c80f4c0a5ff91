"""Rollback for on-call: the warehouse tables of one source, and its checkpoint, return to the
state right after one materialised interval, so the later intervals are applied again.

Everything is checked before anything changes (the interval, the loads after it, the staged files
of the intervals to apply again, each table's snapshots); then the ledger goes back (the later
intervals extracted again, the checkpoint at the interval's end), then each table. A crash in
between is mended by running the same rollback again; a materialise run in between applies the
later intervals to the tables already back and skips the others (they hold them): either way
the warehouse stays equal to the log up to the checkpoint.
"""

from __future__ import annotations

from typing import Any

from loader.core import crashpoints
from loader.core.config import Config, WarehouseConfig
from loader.core.errors import ConfigError, LedgerError
from loader.core.results import Rollback, TableRollback
from loader.staging.stores import open_store
from loader.staging.verify import verified_manifest
from loader.state.ledger import Ledger
from loader.state.records import Rewind
from loader.warehouse import iceberg
from loader.warehouse.tables import database_name


def refuse_hive(warehouse: WarehouseConfig, what: str = "rollback") -> None:
    """Hive-format tables keep one version of each partition: there is nothing to go back to.

    Raises:
        ConfigError: when the warehouse is not in Iceberg tables.
    """
    if warehouse.format != "iceberg":
        raise ConfigError(
            f'{what} needs Iceberg tables (warehouse.format = "iceberg"); the warehouse is in '
            f'"{warehouse.format}" format, which keeps no snapshots to return to: re-load the '
            "tables instead (loader initial-load --tables SCHEMA.TABLE,...)"
        )


def check_interval(cfg: Config, interval_id: str, what: str = "rollback") -> Rewind:
    """What the warehouse and the ledger going back to ``interval_id`` means, checked.

    Raises:
        ConfigError: Hive-format tables.
        LedgerError: the interval is not materialised, a load after it copied tables, or (a
            rollback) a load has not copied its tables yet.
    """
    refuse_hive(cfg.warehouse, what)
    ledger = Ledger.of(cfg)
    # A copy committing beside a rollback would be undone, or would undo it (a read as of an
    # interval changes nothing).
    awaiting = ledger.awaiting_copy() if what == "rollback" else {}
    copying = sorted(f"{s}.{t}" for (s, t), load in awaiting.items() if not load.from_now)
    if copying:
        names = ",".join(copying)
        raise LedgerError(
            f"a load has not copied {names} yet: a rollback cannot run beside a copy. Let it finish (or "
            f"run it again: loader initial-load --tables {names}), then roll back"
        )
    return ledger.rewind_check(interval_id)


def run_rollback(spark: Any, cfg: Config, interval_id: str) -> Rollback:
    """Return the tables this source committed to, and the checkpoint, to the state after
    ``interval_id``.

    Raises:
        ConfigError: the warehouse is not in Iceberg tables.
        LedgerError: the interval is not materialised, or a load after it copied tables.
        ManifestError: a later interval's staged files are gone or changed.
        SnapshotError: a table's snapshots from the interval and before were expired.
    """
    plan = check_interval(cfg, interval_id)
    store = open_store(cfg.staging)
    for interval in plan.later:  # applied again: their staged files must still be there, unchanged
        verified_manifest(
            store, interval.id, interval.manifest or "", interval.manifest_sha256, interval.changes
        )
    source = cfg.source.name
    targets = []
    for name, ancestry in iceberg.committed_tables(spark, database_name(cfg.warehouse), {source}):
        where = iceberg.target_after(name, ancestry, source, interval_id)
        if where is not None:
            targets.append((name, where))
    Ledger(store, source).rewind(plan)
    crashpoints.reached("after ledger rewound")
    tables = []
    for name, where in targets:
        iceberg.roll_back(spark, name, where, source, interval_id)
        now = where.snapshot or where.current
        tables.append(
            TableRollback(
                name,
                where.current.label(source),
                "empty" if where.empty else now.label(source),
            )
        )
    return Rollback(interval_id, str(plan.target.effective_end), tables, [i.id for i in plan.later])
