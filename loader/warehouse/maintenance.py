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
from typing import Any

from loader.config import MaintenanceConfig, WarehouseConfig
from loader.naming import SOURCE_COLUMN
from loader.results import Maintenance, TableMaintenance
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


def maintain_table(
    spark: Any, source: str, mt: MaintenanceConfig, name: str, ancestry: list[iceberg.Snapshot]
) -> TableMaintenance:
    """Compact ``source``'s rows of one table (its current ``ancestry`` given) and expire its old
    snapshots."""
    started = time.monotonic()
    data_before, deletes_before = _files(spark, name)
    snapshots_before = _snapshots(spark, name)
    jvm = spark._jvm
    actions = jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    rewrite = actions.rewriteDataFiles(iceberg.load_table(spark, name))
    if iceberg.is_shared(spark, name):  # only this source's files: its partitions
        own = jvm.org.apache.iceberg.expressions.Expressions.equal(SOURCE_COLUMN, source)
        rewrite = rewrite.filter(own)
    compacts = iceberg.rows_of(ancestry, source)
    if compacts:
        rewrite = rewrite.snapshotProperty(iceberg.COMPACTS, compacts)
    rewrite = (
        rewrite.option("min-input-files", str(mt.min_input_files))
        .option("delete-file-threshold", "1")  # any file with a delete is rewritten without it
        .option("remove-dangling-deletes", "true")
        .snapshotProperty(iceberg.SOURCE, source)
        .snapshotProperty(iceberg.MAINTENANCE, "rewrite")
        .execute()
    )
    older_than = int((time.time() - mt.expire_after_hours * 3600) * 1000)
    expire = actions.expireSnapshots(iceberg.load_table(spark, name)).expireOlderThan(older_than)
    expire.retainLast(mt.retain_last).execute()
    data_after, deletes_after = _files(spark, name)
    return TableMaintenance(
        table=name.replace("`", ""),
        rewritten_files=int(rewrite.rewrittenDataFilesCount()),
        data_files=[data_before, data_after],
        delete_files=[deletes_before, deletes_after],
        snapshots=[snapshots_before, _snapshots(spark, name)],
        seconds=time.monotonic() - started,
    )


def run_maintenance(spark: Any, source: str, wh: WarehouseConfig, mt: MaintenanceConfig) -> Maintenance:
    """Maintain every Iceberg table of ``wh`` that ``source`` committed to."""
    started = time.monotonic()
    tables = [
        maintain_table(spark, source, mt, name, ancestry)
        for name, ancestry in iceberg.committed_tables(spark, database_name(wh), source)
    ]
    return Maintenance(wh.format, tables, time.monotonic() - started)
