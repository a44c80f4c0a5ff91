"""pyspark and pyspark-client share one folder: Python's and the JVM's Spark must be one version."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_python_pyspark_matches_the_jvm_spark(spark: object) -> None:
    assert pyspark.__version__ == spark.version  # type: ignore[attr-defined]


def test_spark_submit_on_path_is_the_same_version() -> None:
    # As in an activated virtual environment (and as Airflow's SparkSubmitOperator finds it):
    # spark-submit through PATH, whose find-spark-home asks PATH's python for pyspark.
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    env.pop("SPARK_HOME", None)
    out = subprocess.run(["spark-submit", "--version"], capture_output=True, text=True, timeout=120, env=env)
    m = re.search(r"version (\d+\.\d+\.\d+)", out.stdout + out.stderr)
    assert m, out.stderr
    assert m.group(1) == pyspark.__version__


def test_spark_session_uses_the_temporary_warehouse(spark: object, spark_config: object) -> None:
    spark.sql("CREATE DATABASE IF NOT EXISTS smoke")  # type: ignore[attr-defined]
    spark.sql("CREATE TABLE IF NOT EXISTS smoke.t (id BIGINT) USING parquet")  # type: ignore[attr-defined]
    spark.sql("INSERT INTO smoke.t VALUES (1), (2)")  # type: ignore[attr-defined]
    assert spark.sql("SELECT SUM(id) FROM smoke.t").collect()[0][0] == 3  # type: ignore[attr-defined]
    wh = Path(spark_config.warehouse.dir)  # type: ignore[attr-defined]
    assert (wh / "tables" / "smoke.db" / "t").is_dir()
    assert (wh / "metastore" / "metastore_db").is_dir()
    assert not Path("metastore_db").exists()
