"""The class-data-sharing archive make setup builds: every Spark job's driver maps it, beside
the JVM options the loader and the config set."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from loader.config import Config
from loader.warehouse.session import JAVA_OPTIONS, archive_path, spark_conf


def test_the_configs_java_options_add_to_the_loaders(session_config: Config) -> None:
    cfg = dataclasses.replace(
        session_config,
        spark=dataclasses.replace(session_config.spark, conf={JAVA_OPTIONS: "-Duser.timezone=UTC -Xss4m"}),
    )
    options = spark_conf(cfg)[JAVA_OPTIONS].split()
    # Derby's home keeps its metastore out of the current folder; a [spark] conf that sets
    # driver options used to replace it.
    assert f"-Dderby.system.home={cfg.warehouse.metastore_dir}" in options
    assert options[-2:] == ["-Duser.timezone=UTC", "-Xss4m"]
    archive = archive_path()
    assert archive is not None and archive.is_file(), "make setup builds the class archive"
    assert f"-XX:SharedArchiveFile={archive}" in options


@pytest.mark.integration
def test_the_drivers_jvm_maps_the_archive(spark: Any) -> None:
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    mapped = Path(f"/proc/{pid}/maps").read_text()
    assert str(archive_path()) in mapped
