"""The class-data-sharing archive make setup builds: every Spark job's driver maps it, beside
the JVM options the loader and the config set."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from loader.core.config import Config
from loader.warehouse.session import (
    FEWER_COMPILATIONS,
    JAVA_OPTIONS,
    PARALLEL_GC,
    QUICK_COMPILER,
    QUICK_COMPILER_CODE_CACHE,
    JobSize,
    archive_path,
    spark_conf,
)


def test_the_configs_java_options_add_to_the_loaders(session_config: Config) -> None:
    cfg = dataclasses.replace(
        session_config,
        spark=dataclasses.replace(session_config.spark, conf={JAVA_OPTIONS: "-Duser.timezone=UTC -Xss4m"}),
    )
    options = spark_conf(cfg)[JAVA_OPTIONS].split()
    # Derby's home keeps its metastore out of the current folder; a [spark] conf that sets
    # driver options used to replace it.
    assert f"-Dderby.system.home={cfg.warehouse.metastore_dir}" in options
    assert options[-3:] == [PARALLEL_GC, "-Duser.timezone=UTC", "-Xss4m"]
    archive = archive_path()
    assert archive is not None and archive.is_file(), "make setup builds the class archive"
    assert f"-XX:SharedArchiveFile={archive}" in options


def test_a_local_driver_collects_with_the_parallel_collector_unless_the_config_chooses_one(
    session_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    def options(master: str, configured: str = "") -> list[str]:
        conf = {JAVA_OPTIONS: configured} if configured else {}
        spark = dataclasses.replace(session_config.spark, master=master, conf=conf)
        return spark_conf(dataclasses.replace(session_config, spark=spark)).get(JAVA_OPTIONS, "").split()

    assert options("local[2]").count(PARALLEL_GC) == 1
    # Two collectors would stop the JVM at its start: the config's choice is the one.
    chosen = options("local[2]", "-XX:+UseG1GC -Xss4m")
    assert PARALLEL_GC not in chosen and "-XX:+UseG1GC" in chosen
    # A cluster's driver runs no tasks: the JVM's default stays.
    assert PARALLEL_GC not in options("spark://127.0.0.1:7077")
    # Nor when the JVM gets a collector from its option variables.
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Dfile.encoding=UTF-8 -XX:+UseSerialGC")
    assert PARALLEL_GC not in options("local[2]")


def test_a_local_job_chooses_its_compilers_by_its_size_unless_the_config_chooses(
    session_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)  # the test suite's own choice

    def options(
        job: JobSize | None, master: str = "local[2]", configured: str = "", never: bool = False
    ) -> list[str]:
        conf = {JAVA_OPTIONS: configured} if configured else {}
        limits = (-1, -1) if never else (100, 1000)
        spark = dataclasses.replace(
            session_config.spark,
            master=master,
            conf=conf,
            quick_compiler_changes=limits[0],
            quick_compiler_table_rows=limits[1],
        )
        return (
            spark_conf(dataclasses.replace(session_config, spark=spark), job=job)
            .get(JAVA_OPTIONS, "")
            .split()
        )

    def compilers(*args: Any, **kwargs: Any) -> list[str]:
        return [o for o in options(*args, **kwargs) if o in (QUICK_COMPILER, FEWER_COMPILATIONS)]

    assert compilers(JobSize(100, 1000)) == [QUICK_COMPILER]
    # With both compilers' room for compiled code (the quick one alone reserves 48 MB, which a
    # job of twenty merges filled), unless the config chose another.
    assert QUICK_COMPILER_CODE_CACHE in options(JobSize(100, 1000))
    chosen = options(JobSize(100, 1000), configured="-XX:ReservedCodeCacheSize=64m")
    assert QUICK_COMPILER in chosen and QUICK_COMPILER_CODE_CACHE not in chosen
    assert QUICK_COMPILER_CODE_CACHE not in options(JobSize(101, 10))
    # A job that may last minutes keeps the optimising compiler, compiling fewer methods.
    assert compilers(JobSize(101, 10)) == [FEWER_COMPILATIONS]
    assert compilers(JobSize(10, 1001)) == [FEWER_COMPILATIONS]
    assert compilers(JobSize(0, 0), never=True) == [FEWER_COMPILATIONS]
    # One of unknown size keeps the JVM's own, as does a cluster's driver (executors work).
    assert compilers(None) == []
    assert compilers(JobSize(10, 10), master="spark://127.0.0.1:7077") == []
    assert compilers(JobSize(10**9, 10), master="spark://127.0.0.1:7077") == []
    # The config's or the JVM's own choice stays the only one.
    assert options(JobSize(10, 10), configured="-XX:-TieredCompilation")[-1:] == ["-XX:-TieredCompilation"]
    assert compilers(JobSize(10, 10), configured="-XX:-TieredCompilation") == []
    assert compilers(JobSize(10**9, 10), configured="-XX:CompileThresholdScaling=2") == []
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=4")
    assert compilers(JobSize(10, 10)) == []
    assert compilers(JobSize(10**9, 10)) == []


@pytest.mark.integration
def test_the_drivers_jvm_collects_with_the_parallel_collector(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert sorted(beans.get(i).getName() for i in range(beans.size())) == ["PS MarkSweep", "PS Scavenge"]


@pytest.mark.integration
def test_the_drivers_jvm_maps_the_archive_and_has_the_pinned_jars_on_its_class_path(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    pid = jvm.java.lang.ProcessHandle.current().pid()
    mapped = Path(f"/proc/{pid}/maps").read_text()
    assert str(archive_path()) in mapped
    # Iceberg's classes come from the JVM's own class path, whose classes the archive holds,
    # not from the class loader Spark adds for spark.jars.
    system = jvm.java.lang.ClassLoader.getSystemClassLoader()
    catalog = jvm.java.lang.Class.forName("org.apache.iceberg.spark.SparkCatalog", False, system)
    assert catalog.getClassLoader().getName() == "app"
