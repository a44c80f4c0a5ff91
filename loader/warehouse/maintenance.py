"""Upkeep of the Iceberg tables, so that reads stay fast after many merge-on-read intervals: the
data files that carry deletes (deletion vectors) and groups of small files are rewritten with
their deletes applied, then the snapshots older than the configured age are expired with the
files only they used.

A compaction holds the same rows as the snapshot before it; its summary says so
(``loader.maintenance``), so a rollback to the interval below it keeps it. Expiring snapshots
bounds how far ``loader rollback`` and ``compare --as-of`` reach back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from loader.core.config import Config, MaintenanceConfig
from loader.core.errors import LeaseError
from loader.core.naming import SOURCE_COLUMN
from loader.core.results import Maintenance, TableMaintenance
from loader.warehouse import iceberg
from loader.warehouse.tables import database_name


def _files(spark: Any, name: str) -> tuple[int, int]:
    """Live data files and delete files (deletion vectors, position or equality deletes)."""
    row = spark.sql(
        f"SELECT count_if(content = 0) AS data, count_if(content <> 0) AS deletes FROM {name}.files"
    ).collect()[0]
    return int(row.data or 0), int(row.deletes or 0)


def _snapshots(spark: Any, name: str) -> int:
    return int(spark.sql(f"SELECT count(*) FROM {name}.snapshots").collect()[0][0])


@dataclass(frozen=True)
class Writer:
    """A source of the deployment, as maintenance sees it: which tables it may write to."""

    source: str
    database: str  # its warehouse database, as Spark SQL names it
    # The shared tables its routes go into (``TablesConfig.shared_tables``).
    routed: frozenset[str] = frozenset()

    @classmethod
    def of(cls, cfg: Config) -> Writer:
        return cls(cfg.source.name, database_name(cfg.warehouse), cfg.tables.shared_tables())


@dataclass(frozen=True)
class WarehouseTable:
    """A table to maintain, and the sources whose merges must not run meanwhile."""

    name: str  # as Spark SQL names it
    sources: list[str]
    shared: bool


def tables_to_maintain(spark: Any, writers: list[Writer]) -> list[WarehouseTable]:
    """Every table of the writers' databases that one of them committed to, with its writers:
    the source that owns it, or for a shared table every source routed into it or whose commits
    it holds."""
    out = []
    for database in sorted({w.database for w in writers}):
        here = [w for w in writers if w.database == database]
        names = {w.source for w in here}
        for name, ancestry in iceberg.committed_tables(spark, database, names):
            committed = {str(s.summary.get(iceberg.SOURCE)) for s in ancestry} & names
            shared = iceberg.is_shared(spark, name)
            if shared:
                table = name.rsplit(".", 1)[1].strip("`")
                committed |= {w.source for w in here if table in w.routed}
            out.append(WarehouseTable(name, sorted(committed), shared))
    return out


def maintain_table(spark: Any, table: WarehouseTable, mt: MaintenanceConfig) -> TableMaintenance:
    """Compact the table's rows (a shared table's source by source: each compaction names the
    rows it holds for a rollback of that source; a source with no files there has nothing to
    rewrite) and expire its old snapshots. Its sources'
    merges must not run meanwhile (``run_maintenance`` holds their leases)."""
    started = time.monotonic()
    name = table.name
    data_before, deletes_before = _files(spark, name)
    snapshots_before = _snapshots(spark, name)
    jvm = spark._jvm
    actions = jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    rewritten = 0
    for source in table.sources:
        ancestry = iceberg.current_ancestry(spark, name)
        rewrite = actions.rewriteDataFiles(iceberg.load_table(spark, name))
        if table.shared:  # only this source's files: its partitions
            own = jvm.org.apache.iceberg.expressions.Expressions.equal(SOURCE_COLUMN, source)
            rewrite = rewrite.filter(own)
        compacts = iceberg.rows_of(ancestry, source)
        if compacts:
            rewrite = rewrite.snapshotProperty(iceberg.COMPACTS, compacts)
        done = (
            rewrite.option("min-input-files", str(mt.min_input_files))
            .option("delete-file-threshold", "1")  # any file with a delete is rewritten without it
            .option("remove-dangling-deletes", "true")
            .snapshotProperty(iceberg.SOURCE, source)
            .snapshotProperty(iceberg.MAINTENANCE, "rewrite")
            .execute()
        )
        rewritten += int(done.rewrittenDataFilesCount())
    older_than = int((time.time() - mt.expire_after_hours * 3600) * 1000)
    expire = actions.expireSnapshots(iceberg.load_table(spark, name)).expireOlderThan(older_than)
    expire.retainLast(mt.retain_last).execute()
    data_after, deletes_after = _files(spark, name)
    return TableMaintenance(
        table=name.replace("`", ""),
        rewritten_files=rewritten,
        data_files=[data_before, data_after],
        delete_files=[deletes_before, deletes_after],
        snapshots=[snapshots_before, _snapshots(spark, name)],
        seconds=time.monotonic() - started,
        sources=table.sources,
    )


# Holds the leases of the sources named while a table is maintained; raises LeaseError when one is
# held by another run.
Hold = Callable[[list[str]], AbstractContextManager[object]]


def run_maintenance(
    spark: Any, writers: list[Writer], fmt: str, mt: MaintenanceConfig, hold: Hold, only: str | None = None
) -> Maintenance:
    """Maintain every Iceberg table the ``writers`` committed to (``only``: the tables that source
    writes to), one table at a time, each while no merge into it runs: under the leases of all
    its sources. A table one of whose sources is busy is skipped, saying which and why."""
    started = time.monotonic()
    tables = []
    for table in tables_to_maintain(spark, writers):
        if only is not None and only not in table.sources:
            continue
        try:
            with hold(table.sources):
                tables.append(maintain_table(spark, table, mt))
        except LeaseError as exc:
            tables.append(TableMaintenance.skipped_for(table.name.replace("`", ""), table.sources, str(exc)))
    return Maintenance(fmt, tables, time.monotonic() - started)
