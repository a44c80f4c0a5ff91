"""A class-data-sharing archive for the Spark driver's JVM, built once by ``make setup``.

Every loader job is a fresh JVM that loads and verifies some twenty thousand classes of Spark,
Hadoop and Hive before it reads a row: about half of a small job's wall time, and most of its
CPU, on a two-core machine. The JVM can instead map those classes from an archive that a
training run dumped (JDK 13+ dynamic CDS), which roughly halves a job's start.

The archive is an optimisation only. It is used when it exists and matches: the JVM checks its
own build and the classpath, and runs without it (silently, see ``session.archive_java_options``) otherwise.

    python -m loader.warehouse.class_archive    # make setup: build it unless it is there
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    # spark-submit runs this file as a script, which puts its folder first on sys.path, where
    # loader/warehouse/types.py would shadow the standard library's types: taken out before any
    # module that imports types is (pathlib does; os and sys are loaded at start-up already).
    _here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != _here]

import subprocess
import tempfile
import time
from pathlib import Path

from loader.warehouse.session import ARCHIVE_DIR, archive_path, spark_conf


def _train(config_path: str) -> None:
    """The training run: touch what the loader's jobs touch (Hive and Iceberg tables, CSV
    staging, the merge's joins and windows, the checksum's hashes), so their classes are loaded
    when the JVM exits and dumps them."""
    from loader.core.config import load_config
    from loader.warehouse.session import build_session
    from loader.warehouse.tables import ICEBERG_CATALOG

    cfg = load_config(config_path)
    spark = build_session(cfg, app_name="loader-class-archive")
    staged = Path(cfg.warehouse.dir).parent / "staged.csv"
    staged.write_text("I,1,1,a,2024-01-01 00:00:00\nU,2,1,b,2024-01-02 00:00:00.5\nD,3,2,,\n")
    changes = spark.read.csv(
        str(staged), schema="op string, seqno long, id long, v string, ts timestamp", header=False
    )
    changes.createOrReplaceTempView("changes")
    latest = spark.sql(
        "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY id ORDER BY seqno DESC) AS rn "
        "FROM changes) WHERE rn = 1"
    )
    latest.createOrReplaceTempView("latest")
    spark.sql("CREATE DATABASE IF NOT EXISTS training")
    spark.sql(
        "CREATE TABLE training.t (id bigint, v string, ts timestamp, _seqno bigint, part bigint) "
        "USING parquet PARTITIONED BY (part)"
    )
    spark.sql("INSERT OVERWRITE training.t SELECT id, v, ts, seqno, id DIV 2 FROM latest WHERE op <> 'D'")
    spark.sql(
        "SELECT count(*), sum(crc32(concat_ws('|', id, v, ts))), max(sha2(v, 256)) FROM training.t t "
        "LEFT ANTI JOIN changes c ON t.id = c.id AND c.op = 'D'"
    ).collect()
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ICEBERG_CATALOG}.training")
    spark.sql(
        f"CREATE TABLE {ICEBERG_CATALOG}.training.t (id bigint, v string, ts timestamp, _seqno bigint) "
        "USING iceberg PARTITIONED BY (truncate(2, id)) "
        "TBLPROPERTIES ('write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
        "'write.merge.mode'='merge-on-read')"
    )
    for _ in range(2):
        spark.sql(
            f"MERGE INTO {ICEBERG_CATALOG}.training.t t USING latest s ON t.id = s.id "
            "WHEN MATCHED AND s.op = 'D' THEN DELETE "
            "WHEN MATCHED AND s.seqno >= t._seqno THEN UPDATE SET v = s.v, ts = s.ts, _seqno = s.seqno "
            "WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT (id, v, ts, _seqno) VALUES (s.id, s.v, s.ts, s.seqno)"
        )
    spark.sql(f"SELECT * FROM {ICEBERG_CATALOG}.training.t.snapshots").collect()
    spark.sql(f"SELECT count(*) FROM {ICEBERG_CATALOG}.training.t").collect()
    spark.stop()


def build(force: bool = False) -> str:
    """Build the archive unless it is there; return what happened, in one line."""
    path = archive_path()
    if path is None:
        return "no Spark class archive: PySpark is not installed"
    if path.is_file() and not force:
        return f"Spark class archive: {path} (there already)"
    from loader.core.config import load_config

    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="loader-class-archive-") as tmp:
        config = Path(tmp) / "loader.toml"
        config.write_text(
            f'[warehouse]\nformat = "iceberg"\ndir = "{tmp}/warehouse"\n[staging]\nuri = "{tmp}/staging"\n'
        )
        cfg = load_config(str(config))
        conf = spark_conf(cfg)
        jars = conf.pop("spark.jars", "")
        # Dumped beside the archive and renamed into place once the JVM has exited: a cut-off
        # archive makes the JVM that maps it crash (SIGBUS), a missing one is only slower.
        partial = path.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        options = conf.get("spark.driver.extraJavaOptions", "").split()
        options = [o for o in options if not o.startswith(("-XX:SharedArchiveFile", "-Xlog:cds"))]
        conf["spark.driver.extraJavaOptions"] = " ".join([*options, f"-XX:ArchiveClassesAtExit={partial}"])
        command = ["spark-submit", "--master", cfg.spark.master]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        if jars:
            command += ["--jars", jars]
        command += [str(Path(__file__).resolve()), "train", str(config)]
        env = {**os.environ, "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        log = path.with_suffix(".log")
        with open(log, "w") as out:
            done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
        if done.returncode != 0 or not partial.is_file():
            partial.unlink(missing_ok=True)
            return (
                f"no Spark class archive: the training run failed (exit {done.returncode}, log {log}); "
                "jobs work without it, their JVMs only start slower"
            )
        partial.replace(path)
    for old in [*ARCHIVE_DIR.glob("*.jsa"), *ARCHIVE_DIR.glob("*.log")]:  # earlier pins': 200 MiB each
        if old.stem != path.stem:
            old.unlink()
    size = path.stat().st_size >> 20
    return f"Spark class archive: {path} ({size} MiB, {time.monotonic() - started:.0f} s)"


if __name__ == "__main__":
    if sys.argv[1:2] == ["train"]:
        _train(sys.argv[2])
    else:
        print(build(force="--force" in sys.argv[1:]))
