"""One Spark: pyspark and pyspark-client share a folder, and the pinned jars follow its versions."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
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


def _pom(part: str) -> ET.Element:
    return ET.parse(Path(__file__).parents[1] / "infra" / "jars" / part / "pom.xml").getroot()


def _pinned(part: str) -> dict[str, str]:
    """artifactId -> version of one pom's dependencies, properties substituted."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = _pom(part)
    props = {p.tag.split("}")[1]: p.text or "" for p in root.iterfind("m:properties/*", ns)}
    pinned = {}
    for dep in root.iterfind("m:dependencies/m:dependency", ns):
        version = dep.findtext("m:version", "", ns)
        pinned[dep.findtext("m:artifactId", "", ns)] = re.sub(r"\$\{(.+?)\}", lambda m: props[m[1]], version)
    return pinned


def _bundled(prefix: str) -> str:
    """The version of one of pyspark's own jars, e.g. hadoop-client-api -> 3.4.2."""
    jars = Path(pyspark.__file__).parent / "jars"
    found = [j.name for j in jars.glob(f"{prefix}-[0-9]*.jar")]
    assert len(found) == 1, found
    return found[0][len(prefix) + 1 : -len(".jar")]


def test_pinned_jars_follow_the_spark_they_run_in() -> None:
    spark = _pinned("spark")
    hadoop = _bundled("hadoop-client-api")
    scala = _bundled("scala-library").rsplit(".", 1)[0]
    spark_line = pyspark.__version__.rsplit(".", 1)[0]
    # s3a must be the Hadoop that Spark carries, or its classes do not link.
    assert spark["hadoop-aws"] == hadoop
    assert _pinned("hdfs")["hadoop-hdfs"] == hadoop
    # The table format's runtime is built per Spark line and Scala version.
    assert f"iceberg-spark-runtime-{spark_line}_{scala}" in spark


def test_spark_runs_with_the_pinned_jars(spark: object) -> None:
    # The session the jobs use loads each part from the fetched jars: s3a, JDBC, Iceberg.
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    loader = jvm.Thread.currentThread().getContextClassLoader()
    for name in (
        "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "software.amazon.awssdk.services.s3.S3Client",
        "org.mariadb.jdbc.Driver",
        "org.apache.iceberg.spark.SparkCatalog",
    ):
        assert jvm.Class.forName(name, True, loader).getName() == name
