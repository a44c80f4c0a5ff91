"""A table's partitions in the Spark catalog: where each points, and repointing many in one call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loader.core.config import Config
from loader.warehouse.catalog import PartitionCatalog

pytestmark = pytest.mark.integration


def _version(spark: Any, root: Path, rows: list[tuple[int, str, int]]) -> str:
    """A version folder of the table, partitioned as the loader writes it."""
    frame = spark.createDataFrame(rows, "id INT, v STRING, p BIGINT")
    frame.write.mode("overwrite").partitionBy("p").parquet(str(root))
    return f"file:{root}"  # as the loader passes locations: not %-escaped


def test_partitions_are_added_and_repointed_and_readers_see_the_new_folders(
    spark: Any, spark_config: Config, tmp_path: Path
) -> None:
    db = spark_config.warehouse.database
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    spark.sql(f"DROP TABLE IF EXISTS {db}.catalog_t")
    spark.sql(f"CREATE TABLE {db}.catalog_t (id INT, v STRING, p BIGINT) USING parquet PARTITIONED BY (p)")
    catalog = PartitionCatalog(spark, db, "catalog_t", "p")
    assert catalog.locations() == {}

    # A folder name with a space: the catalog must give it back as it is, not %-escaped.
    first = _version(spark, tmp_path / "v 1", [(1, "a", 0), (2, "b", 0), (11, "k", 1)])
    catalog.point({0: f"{first}/p=0", 1: f"{first}/p=1"})
    located = catalog.locations()
    # What the object keeps after its change is what the metastore holds.
    assert located == PartitionCatalog(spark, db, "catalog_t", "p").locations()
    assert sorted(located) == [0, 1]
    assert located[0].rstrip("/").endswith("/v 1/p=0") and "%20" not in located[0]
    spark.catalog.refreshTable(f"{db}.catalog_t")
    assert sorted(tuple(r) for r in spark.table(f"{db}.catalog_t").collect()) == [
        (1, "a", 0),
        (2, "b", 0),
        (11, "k", 1),
    ]

    # One call repoints an existing partition and adds a new one; the untouched one stays.
    second = _version(spark, tmp_path / "v2", [(1, "A", 0), (21, "u", 2)])
    catalog.point({0: f"{second}/p=0", 2: f"{second}/p=2"})
    located = catalog.locations()
    assert located == catalog.locations(fresh=True)
    assert sorted(located) == [0, 1, 2]
    assert located[0].rstrip("/").endswith("/v2/p=0") and located[1].rstrip("/").endswith("/v 1/p=1")
    spark.catalog.refreshTable(f"{db}.catalog_t")
    assert sorted(tuple(r) for r in spark.table(f"{db}.catalog_t").collect()) == [
        (1, "A", 0),
        (11, "k", 1),
        (21, "u", 2),
    ]

    # The columns the merge reads the partitions' folders with: the table's, without p.
    assert catalog.data_schema() == spark.table(f"{db}.catalog_t").drop("p").schema
