"""Hadoop's local file system without a process per file, for the jobs of a local master.

Without Hadoop's native library, which no Maven artifact carries, Hadoop's local file system
runs ``chmod`` in a child process for every file and folder it creates: about 7 ms each, and a
file on local disk is created with its checksum file, so two. Every local Spark job writes
through it (a merge's data, deletion vectors, manifests and table metadata; a copy's commit; a
Hive-format version). ``ForklessLocalFileSystem.java`` sets the same permissions with java.nio;
``make setup`` compiles it with the Java compiler PySpark ships (Janino: a Java runtime without
the JDK's compiler suffices) into a jar beside the pinned ones, and ``spark_conf`` makes it the
``file:`` file system of jobs on a local master.

    python -m loader.warehouse.local_fs [FOLDER]    # make setup: build the jar into FOLDER
                                                    # (the pinned jars') unless it is there
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from loader.core.config import DEFAULT_JARS

SOURCE = Path(__file__).with_name("ForklessLocalFileSystem.java")
CLASS = "loader.hadoop.ForklessLocalFileSystem"
# The jar's name carries its source's digest: a changed source is built anew, and the class
# archive (keyed by the name) with it.
JAR_PREFIX = "loader-local-fs-"
FILE_SYSTEM = "spark.hadoop.fs.file.impl"
# What the source compiles against, from PySpark's own jars (the version follows PySpark's).
_COMPILE_CLASS_PATH = ("hadoop-client-api-", "hadoop-client-runtime-", "slf4j-api-")
_COMPILER = ("janino-", "commons-compiler-")


def jar_name() -> str:
    """The file name of the jar built from the source as it is now."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return f"{JAR_PREFIX}{digest}.jar"


def built(folder: Path) -> list[str]:
    """The source digests of the jars built into ``folder`` (one after make setup)."""
    return sorted(p.stem.removeprefix(JAR_PREFIX) for p in folder.glob(f"{JAR_PREFIX}*.jar"))


def file_system_conf(master: str, class_path: str) -> dict[str, str]:
    """The setting that makes a job's ``file:`` paths go through the forkless file system: for a
    local master (the driver runs every task) whose driver class path (``class_path``) has the
    jar. The config's own ``[spark] conf`` is applied after it, so a file system chosen there
    stays."""
    if not master.startswith("local"):
        return {}
    if not any(Path(entry).name.startswith(JAR_PREFIX) for entry in class_path.split(os.pathsep)):
        return {}
    return {FILE_SYSTEM: CLASS}


def _jars(folder: Path, prefixes: tuple[str, ...]) -> list[str]:
    found = []
    for prefix in prefixes:
        matches = sorted(folder.glob(f"{prefix}*.jar"))
        if not matches:
            raise FileNotFoundError(f"no {prefix}*.jar in {folder}: PySpark's jars are incomplete")
        found.append(str(matches[-1]))
    return found


def build(dest: Path = DEFAULT_JARS) -> str:
    """Compile the source into ``dest``'s jar unless it is there (an older build is removed);
    what happened, in one line.

    Raises:
        RuntimeError: the compiler failed (its message).
    """
    import pyspark

    target = dest / jar_name()
    if target.is_file():
        return f"forkless local file system: {target} (there already)"
    if not dest.is_dir():
        return f"no forkless local file system: no jar folder {dest} (infra/jars/fetch.sh makes it)"
    spark_jars = Path(pyspark.__file__).parent / "jars"
    with tempfile.TemporaryDirectory(prefix="loader-local-fs-") as tmp:
        classes = Path(tmp) / "classes"
        done = subprocess.run(
            [
                "java",
                "-cp",
                os.pathsep.join(_jars(spark_jars, _COMPILER)),
                # Janino's javac-like command line.
                "org.codehaus.commons.compiler.samples.CompilerDemo",
                "-d",
                str(classes),
                "-classpath",
                os.pathsep.join(_jars(spark_jars, _COMPILE_CLASS_PATH)),
                str(SOURCE),
            ],
            capture_output=True,
            text=True,
        )
        compiled = sorted(classes.rglob("*.class")) if classes.is_dir() else []
        if done.returncode != 0 or not compiled:
            raise RuntimeError(f"compiling {SOURCE} failed: {(done.stdout + done.stderr).strip()}")
        # Written beside the target and renamed: a job never sees half a jar.
        partial = dest / f".{target.name}.partial"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            for path in compiled:
                jar.write(path, path.relative_to(classes).as_posix())
        for old in dest.glob(f"{JAR_PREFIX}*.jar"):
            old.unlink()
        partial.rename(target)
    return f"forkless local file system: {target}"


if __name__ == "__main__":
    try:
        print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_JARS))
    except (RuntimeError, FileNotFoundError) as exc:
        sys.exit(f"make setup: {exc}")
