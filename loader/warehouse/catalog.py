"""A warehouse table's partitions in the Spark catalog: where each points, and repointing many at once.

Through Spark's external catalog (embedded Derby or a Hive metastore) rather than SQL: an
``ALTER TABLE ... PARTITION ... SET LOCATION`` statement changes one partition and refreshes the
table each time (~0.3 s), while one ``alterPartitions`` call changes any number of them in one
metastore transaction, so readers see all of them change together.
"""

from __future__ import annotations

import time
from typing import Any

from loader.core.errors import MaterializeError


class PartitionCatalog:
    """The partitions of one table, partitioned by one integer column.

    The table and its partition list are read from the catalog once and then kept, with the
    changes ``point`` makes: a merge reads the partitions it touches, repoints them and lists
    them again to find superseded versions, and a big table's list takes a second or more.
    Under the source's lease nothing else changes them meanwhile; ``locations(fresh=True)``
    reads the catalog again where a stale answer would cost data.
    """

    def __init__(self, spark: Any, database: str, table: str, column: str) -> None:
        self._jvm = spark.sparkContext._jvm
        self._catalog = spark._jsparkSession.sharedState().externalCatalog()
        self._database = database
        self._table = table
        self._column = column
        self._listed: dict[int, Any] | None = None
        self._catalog_table: Any = None

    def _partitions(self, fresh: bool = False) -> dict[int, Any]:
        if self._listed is None or fresh:
            found = self._catalog.listPartitions(
                self._database, self._table, self._jvm.scala.Option.apply(None)
            )
            self._listed = {}
            partitions = found.iterator()
            while partitions.hasNext():
                partition = partitions.next()
                self._listed[int(partition.spec().apply(self._column))] = partition
        return self._listed

    def _table_entry(self) -> Any:
        if self._catalog_table is None:
            self._catalog_table = self._catalog.getTable(self._database, self._table)
        return self._catalog_table

    def locations(self, fresh: bool = False) -> dict[int, str]:
        """Where each partition points (such as ``file:/...``, not %-escaped); ``fresh``: as the
        catalog says now, not as this object last read or changed it."""
        utils = self._jvm.org.apache.spark.sql.catalyst.catalog.CatalogUtils
        return {p: str(utils.URIToString(part.location())) for p, part in self._partitions(fresh).items()}

    def table_location(self) -> str:
        """The table's root location (a URI such as ``file:/...``, not %-escaped), as
        ``DESCRIBE TABLE EXTENDED`` shows it."""
        utils = self._jvm.org.apache.spark.sql.catalyst.catalog.CatalogUtils
        location = self._table_entry().storage().locationUri()
        if location.isEmpty():
            raise MaterializeError(f"{self._database}.{self._table} has no location in the catalog")
        return str(utils.URIToString(location.get())).rstrip("/")

    def data_schema(self) -> Any:
        """The table's columns without the partition column, as a PySpark ``StructType``."""
        from pyspark.sql.types import _parse_datatype_json_string

        return _parse_datatype_json_string(self._table_entry().dataSchema().json())

    def point(self, locations: dict[int, str]) -> None:
        """Point these partitions at these folders: new ones are added in one call, then the
        existing ones are repointed in one call (one metastore transaction each).

        The partitions it knows (``locations``) are those it read last, with its own changes."""
        existing = self._partitions()
        changed = self._jvm.java.util.ArrayList()
        added = self._jvm.java.util.ArrayList()
        pointed = {}
        for value, location in sorted(locations.items()):
            if value in existing:
                partition = existing[value]
                storage = self._storage(partition.storage(), location)
                # The old version's statistics do not describe the new one.
                pointed[value] = partition.copy(
                    partition.spec(),
                    storage,
                    partition.parameters(),
                    partition.createTime(),
                    partition.lastAccessTime(),
                    self._jvm.scala.Option.apply(None),
                )
                changed.add(pointed[value])
            else:
                spec = self._jvm.java.util.HashMap()
                spec.put(self._column, str(value))
                pointed[value] = self._jvm.org.apache.spark.sql.catalyst.catalog.CatalogTablePartition(
                    self._scala_map(spec),
                    self._storage(self._table_entry().storage(), location),
                    self._scala_map(self._jvm.java.util.HashMap()),
                    int(time.time() * 1000),
                    -1,
                    self._jvm.scala.Option.apply(None),
                )
                added.add(pointed[value])
        utils = self._jvm.org.apache.spark.api.python.PythonUtils
        if not added.isEmpty():
            self._catalog.createPartitions(self._database, self._table, utils.toSeq(added), False)
        if not changed.isEmpty():
            self._catalog.alterPartitions(self._database, self._table, utils.toSeq(changed))
        existing.update(pointed)

    def _storage(self, storage: Any, location: str) -> Any:
        uri = self._jvm.org.apache.spark.sql.catalyst.catalog.CatalogUtils.stringToURI(location)
        # The same storage with another location. Its other fields are copied by position, as
        # their number changes between Spark lines (4.2 added serdeName).
        others = [storage.productElement(i) for i in range(1, storage.productArity())]
        return storage.copy(self._jvm.scala.Option.apply(uri), *others)

    def _scala_map(self, java_map: Any) -> Any:
        return self._jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(java_map)
