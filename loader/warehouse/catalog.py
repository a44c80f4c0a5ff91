"""A warehouse table's partitions in the Spark catalog: where each points, and repointing many at once.

Through Spark's external catalog (embedded Derby or a Hive metastore) rather than SQL: an
``ALTER TABLE ... PARTITION ... SET LOCATION`` statement changes one partition and refreshes the
table each time (~0.3 s), while one ``alterPartitions`` call changes any number of them in one
metastore transaction, so readers see all of them change together.
"""

from __future__ import annotations

import time
from typing import Any

from loader.errors import MaterializeError


class PartitionCatalog:
    """The partitions of one table, partitioned by one integer column."""

    def __init__(self, spark: Any, database: str, table: str, column: str) -> None:
        self._jvm = spark.sparkContext._jvm
        self._catalog = spark._jsparkSession.sharedState().externalCatalog()
        self._database = database
        self._table = table
        self._column = column

    def _partitions(self) -> dict[int, Any]:
        found = self._catalog.listPartitions(self._database, self._table, self._jvm.scala.Option.apply(None))
        out = {}
        partitions = found.iterator()
        while partitions.hasNext():
            partition = partitions.next()
            out[int(partition.spec().apply(self._column))] = partition
        return out

    def locations(self) -> dict[int, str]:
        """Where each partition points (such as ``file:/...``, not %-escaped), in one catalog call."""
        utils = self._jvm.org.apache.spark.sql.catalyst.catalog.CatalogUtils
        return {p: str(utils.URIToString(part.location())) for p, part in self._partitions().items()}

    def table_location(self) -> str:
        """The table's root location (a URI such as ``file:/...``, not %-escaped), as
        ``DESCRIBE TABLE EXTENDED`` shows it, in one catalog call."""
        utils = self._jvm.org.apache.spark.sql.catalyst.catalog.CatalogUtils
        location = self._catalog.getTable(self._database, self._table).storage().locationUri()
        if location.isEmpty():
            raise MaterializeError(f"{self._database}.{self._table} has no location in the catalog")
        return str(utils.URIToString(location.get())).rstrip("/")

    def point(self, locations: dict[int, str]) -> None:
        """Point these partitions at these folders: new ones are added in one call, then the
        existing ones are repointed in one call (one metastore transaction each)."""
        existing = self._partitions()
        changed = self._jvm.java.util.ArrayList()
        added = self._jvm.java.util.ArrayList()
        table_storage = self._catalog.getTable(self._database, self._table).storage()
        for value, location in sorted(locations.items()):
            if value in existing:
                partition = existing[value]
                storage = self._storage(partition.storage(), location)
                # The old version's statistics do not describe the new one.
                changed.add(
                    partition.copy(
                        partition.spec(),
                        storage,
                        partition.parameters(),
                        partition.createTime(),
                        partition.lastAccessTime(),
                        self._jvm.scala.Option.apply(None),
                    )
                )
            else:
                spec = self._jvm.java.util.HashMap()
                spec.put(self._column, str(value))
                added.add(
                    self._jvm.org.apache.spark.sql.catalyst.catalog.CatalogTablePartition(
                        self._scala_map(spec),
                        self._storage(table_storage, location),
                        self._scala_map(self._jvm.java.util.HashMap()),
                        int(time.time() * 1000),
                        -1,
                        self._jvm.scala.Option.apply(None),
                    )
                )
        utils = self._jvm.org.apache.spark.api.python.PythonUtils
        if not added.isEmpty():
            self._catalog.createPartitions(self._database, self._table, utils.toSeq(added), False)
        if not changed.isEmpty():
            self._catalog.alterPartitions(self._database, self._table, utils.toSeq(changed))

    def _storage(self, storage: Any, location: str) -> Any:
        uri = self._jvm.org.apache.spark.sql.catalyst.catalog.CatalogUtils.stringToURI(location)
        # The same storage with another location. Its other fields are copied by position, as
        # their number changes between Spark lines (4.2 added serdeName).
        others = [storage.productElement(i) for i in range(1, storage.productArity())]
        return storage.copy(self._jvm.scala.Option.apply(uri), *others)

    def _scala_map(self, java_map: Any) -> Any:
        return self._jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(java_map)
