"""The local file system of the jobs on a local master: Hadoop's, but setting permissions
without a ``chmod`` process; built by make setup."""

from __future__ import annotations

import dataclasses
import stat
import zipfile
from pathlib import Path
from typing import Any

import pytest

from loader.core.config import Config
from loader.warehouse import local_fs
from loader.warehouse.session import CLASS_PATH, spark_conf


def test_a_local_job_creates_local_files_through_the_forkless_file_system_unless_chosen(
    session_config: Config,
) -> None:
    def conf(master: str = "local[2]", **configured: str) -> dict[str, str]:
        spark = dataclasses.replace(session_config.spark, master=master, conf=configured)
        return spark_conf(dataclasses.replace(session_config, spark=spark))

    local = conf()
    assert local[local_fs.FILE_SYSTEM] == local_fs.CLASS
    built = [p for p in local[CLASS_PATH].split(":") if Path(p).name == local_fs.jar_name()]
    assert built and Path(built[0]).is_file(), "make setup builds the jar of the current source"
    # A cluster's executors load spark.jars with a class loader of their own: Hadoop's there.
    assert local_fs.FILE_SYSTEM not in conf("spark://127.0.0.1:7077")
    # The config's choice stays; a class path of its own may not hold the jar.
    chosen = conf(**{local_fs.FILE_SYSTEM: "org.apache.hadoop.fs.LocalFileSystem"})
    assert chosen[local_fs.FILE_SYSTEM] == "org.apache.hadoop.fs.LocalFileSystem"
    assert local_fs.FILE_SYSTEM not in conf(**{CLASS_PATH: "/opt/jars/*"})


def test_the_jar_is_built_once_and_again_when_its_source_changes(tmp_path: Path) -> None:
    older = tmp_path / f"{local_fs.JAR_PREFIX}000000000000.jar"
    older.write_bytes(b"a jar of an older source")
    assert local_fs.build(tmp_path).endswith(str(tmp_path / local_fs.jar_name()))
    assert not older.exists()
    with zipfile.ZipFile(tmp_path / local_fs.jar_name()) as jar:
        assert "loader/hadoop/ForklessLocalFileSystem.class" in jar.namelist()
    assert local_fs.build(tmp_path).endswith("(there already)")
    assert [p.name for p in tmp_path.iterdir()] == [local_fs.jar_name()]


def _mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


@pytest.mark.integration
def test_files_and_folders_get_the_permissions_hadoops_own_file_system_gives(
    spark: Any, tmp_path: Path
) -> None:
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    uri = jvm.java.net.URI("file:///")
    assert jvm.org.apache.hadoop.fs.FileSystem.get(uri, conf).getClass().getName() == local_fs.CLASS
    # What a job writes: the folder by the umask's default, the files too.
    spark.range(3).write.parquet(str(tmp_path / "written"))
    data = [p for p in (tmp_path / "written").iterdir() if p.name.endswith(".parquet")]
    assert data and {_mode(p) for p in data} == {"0o644"} and _mode(tmp_path / "written") == "0o755"
    # Against Hadoop's own (a chmod process each), under another umask and with the sticky bit.
    permission = jvm.org.apache.hadoop.fs.permission.FsPermission
    for umask in ("027", "002"):
        both = {}
        for name, impl in (("ours", local_fs.CLASS), ("hadoop", "org.apache.hadoop.fs.LocalFileSystem")):
            own = jvm.org.apache.hadoop.conf.Configuration(conf)
            own.set("fs.file.impl", impl)
            own.set("fs.permissions.umask-mode", umask)
            fs = jvm.org.apache.hadoop.fs.FileSystem.newInstance(uri, own)
            assert fs.getClass().getName() == impl
            root = tmp_path / f"{name}-{umask}"
            fs.mkdirs(jvm.org.apache.hadoop.fs.Path(f"file://{root}/folder"))
            fs.create(jvm.org.apache.hadoop.fs.Path(f"file://{root}/folder/file"), True).close()
            sticky = jvm.org.apache.hadoop.fs.Path(f"file://{root}/sticky")
            fs.mkdirs(sticky)
            fs.setPermission(sticky, permission.createImmutable(0o1777))
            fs.setPermission(jvm.org.apache.hadoop.fs.Path(f"file://{root}/folder/file"), permission(0o640))
            fs.close()
            both[name] = {
                p.relative_to(root).as_posix(): oct(p.stat().st_mode & 0o7777)
                for p in sorted(root.rglob("*"))
            }
        assert both["ours"] == both["hadoop"]
        assert both["ours"]["sticky"] == "0o1777" and both["ours"]["folder/file"] == "0o640"
