"""Spark session settings shared by the loader's Spark jobs and the test suite.

One function decides the catalog (embedded Derby or an external Hive metastore), where the
warehouse and Derby's files go, and the settings that keep logs readable, so that a job and
its tests run Spark the same way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from loader.config import Config

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

QUIET_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


def spark_conf(cfg: Config) -> dict[str, str]:
    """Every Spark setting the loader's jobs run with, from the config."""
    wh = cfg.warehouse
    conf = {
        **QUIET_CONF,
        "spark.sql.warehouse.dir": Path(wh.dir, "tables").as_uri(),
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.session.timeZone": "UTC",
        # Derby's metastore cannot filter partitions on a BIGINT column; fall back to listing
        # them (the materialiser reads only the partitions it touches either way).
        "spark.sql.hive.metastorePartitionPruningFallbackOnException": "true",
        # JDBC reads CHAR(n), ENUM and SET as Spark's CHAR(n), padded with spaces; MySQL strips
        # them (and the binlog has none), so the initial load reads them as plain strings.
        "spark.sql.legacy.charVarcharAsString": "true",
    }
    if wh.catalog == "derby":
        # Without these, Derby's metastore_db and derby.log land in the current folder.
        derby_home = Path(wh.dir, "metastore")
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={derby_home / 'metastore_db'};create=true"
        )
        conf["spark.driver.extraJavaOptions"] = f"-Dderby.system.home={derby_home}"
        # A re-load after a column was dropped, moved or changed gives the table new columns;
        # Hive compares column types by position and would refuse (Parquet reads by name).
        # A shared metastore needs the same setting on its server.
        conf["spark.hadoop.hive.metastore.disallow.incompatible.col.type.changes"] = "false"
    else:
        conf["spark.hadoop.hive.metastore.uris"] = wh.metastore_uri
    if cfg.load.jdbc_jar and Path(cfg.load.jdbc_jar).is_file():
        conf["spark.jars"] = cfg.load.jdbc_jar  # the initial load's JDBC driver
    conf.update(cfg.spark.conf)
    return conf


def build_session(cfg: Config, app_name: str = "loader") -> SparkSession:
    """Start (or reuse) the Spark session for this config."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python functions (the checksum's) run in workers of this interpreter, which has the
    # loader's dependencies, unless spark-submit or the environment chose another.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    Path(cfg.warehouse.dir, "metastore").mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder.master(cfg.spark.master).appName(app_name)
    for key, value in spark_conf(cfg).items():
        builder = builder.config(key, value)
    return builder.enableHiveSupport().getOrCreate()
