"""The Spark job's launch: the one builder the command line and the Airflow operator share."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from loader.core.config import Config, load_config
from loader.core.errors import ConfigError, SparkJobError
from loader.source.connection import Credentials
from loader.source.tls import Tls
from loader.warehouse.session import CLASS_PATH, iceberg_secret_conf
from loader.warehouse.submit import (
    APPLICATION,
    PASSWORD_ENV,
    RESULT_ENV,
    SparkJob,
    build_spark_job,
    error_outcome,
    exit_text,
    operator_failure,
    read_outcome,
    write_outcome,
)

PYTHON = "/opt/env/bin/python3"


def _config(
    tmp_path: Path, jar: Path | None = None, jars: str | None = None, table_format: str | None = None
) -> Config:
    path = tmp_path / "loader.toml"
    lines = [f'[warehouse]\nformat = "{table_format}"\n'] if table_format else []
    lines.append('[spark]\nmaster = "local[3]"\n')
    if jars is not None:
        lines.append(f'jars = "{jars}"\n')
    lines.append('[spark.conf]\n"spark.executor.memory" = "3g"\n')
    if jar is not None:
        lines.append(f'[load]\njdbc_jar = "{jar}"\n')
    path.write_text("".join(lines))
    return load_config(path, env={})


def _job(
    cfg: Config,
    tmp_path: Path,
    name: str = "materialize",
    extra: list[str] | None = None,
    source: Credentials | None = None,
) -> SparkJob:
    return build_spark_job(
        cfg,
        name,
        extra or [],
        result_path=str(tmp_path / "outcome.json"),
        python=PYTHON,
        environ={"PATH": "/usr/bin", "SPARK_LOCAL_IP": "10.1.2.3"},
        source=source,
    )


def test_the_command_runs_the_jobs_file_with_the_configs_master_settings_and_config(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    job = _job(cfg, tmp_path, name="compare", extra=["--rows", "5"])
    command = job.command()
    assert command[:3] == ["spark-submit", "--master", "local[3]"]
    assert Path(APPLICATION).is_file() and Path(APPLICATION).name == "spark_jobs.py"
    app = command.index(APPLICATION)
    assert command[app + 1 :] == [
        "compare",
        "--config",
        str((tmp_path / "loader.toml").resolve()),
        "--rows",
        "5",
    ]
    confs = dict(command[i + 1].split("=", 1) for i in range(3, app) if command[i] == "--conf")
    assert confs["spark.executor.memory"] == "3g"  # the user's settings
    assert confs["spark.sql.session.timeZone"] == "UTC"  # the loader's own
    # Driver and executors run the launcher's interpreter, so they import the same loader.
    assert confs["spark.pyspark.python"] == confs["spark.pyspark.driver.python"] == PYTHON


def test_the_environment_puts_the_launchers_tools_first_and_names_the_outcome_file(tmp_path: Path) -> None:
    job = _job(_config(tmp_path), tmp_path)
    assert job.env["PATH"] == "/opt/env/bin:/usr/bin"
    assert job.env["SPARK_LOCAL_IP"] == "10.1.2.3"
    assert job.env[RESULT_ENV] == job.result_path == str(tmp_path / "outcome.json")
    assert "LOADER__SOURCE__HOST" not in job.env  # the job looks the source up itself


def test_the_pinned_jars_and_another_driver_go_with_jars_not_with_a_setting(tmp_path: Path) -> None:
    folder = tmp_path / "jars"
    folder.mkdir()
    for name in ("iceberg-spark-runtime.jar", "sqlite-jdbc.jar", "hadoop-aws.jar", "README.txt"):
        (folder / name).write_bytes(b"")
    driver = tmp_path / "other-driver.jar"
    driver.write_bytes(b"")
    job = _job(_config(tmp_path, driver, jars="jars"), tmp_path)  # relative to the config's folder
    pinned = ["hadoop-aws.jar", "iceberg-spark-runtime.jar", "sqlite-jdbc.jar"]
    assert job.jars == [str(folder / name) for name in pinned] + [str(driver)]
    assert "spark.jars" not in job.conf
    command = job.command()
    assert command[command.index("--jars") + 1] == ",".join(job.jars)


def test_by_default_jobs_run_with_the_jars_set_up_fetched_on_the_drivers_class_path(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    job = _job(cfg, tmp_path)
    pinned = job.conf[CLASS_PATH].split(os.pathsep)
    names = {Path(j).name.rsplit("-", 1)[0] for j in pinned}
    assert {"hadoop-aws", "mariadb-java-client", "iceberg-spark-runtime-4.1_2.13"} <= names
    # A local driver runs the tasks itself: nothing to ship to executors.
    assert job.jars == [] and "--jars" not in job.command()
    # A cluster's executors get them from the driver.
    cluster = dataclasses.replace(cfg, spark=dataclasses.replace(cfg.spark, master="spark://127.0.0.1:7077"))
    shipped = _job(cluster, tmp_path)
    assert shipped.jars == pinned and shipped.conf[CLASS_PATH] == job.conf[CLASS_PATH]
    # A class path the config sets is the driver's; the pinned jars then go with --jars.
    own = {**cfg.spark.conf, CLASS_PATH: "/opt/extra/lib.jar"}
    configured = _job(dataclasses.replace(cfg, spark=dataclasses.replace(cfg.spark, conf=own)), tmp_path)
    assert configured.conf[CLASS_PATH] == "/opt/extra/lib.jar" and configured.jars == pinned


@pytest.mark.parametrize("name", ["materialize", "initial-load"])
def test_jars_that_are_not_there_say_how_to_fetch_them(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match=r"fetched once by make setup \(infra/jars/fetch.sh\)"):
        _job(_config(tmp_path, jars="not-fetched"), tmp_path, name=name)


def test_without_jars_only_a_job_that_reads_the_source_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="Iceberg tables needs the pinned ones"):
        _job(_config(tmp_path, jars="empty"), tmp_path)  # the default format
    cfg = _config(tmp_path, jars="empty", table_format="hive")
    assert _job(cfg, tmp_path).jars == []  # Hive tables on local storage: Spark's own jars do
    with pytest.raises(ConfigError, match="reading the source over JDBC needs the pinned ones"):
        _job(cfg, tmp_path, name="initial-load")


def test_resolved_credentials_reach_the_job_and_the_password_stays_off_the_command_line(
    tmp_path: Path,
) -> None:
    ca = tmp_path / "ca.pem"
    creds = Credentials("db.internal", 3307, "reader", "s3cret", tls=Tls("verify_identity", str(ca)))
    job = _job(_config(tmp_path), tmp_path, name="initial-load", source=creds)
    assert job.env["LOADER__SOURCE__HOST"] == "db.internal"
    assert job.env["LOADER__SOURCE__PORT"] == "3307"
    assert job.env["LOADER__SOURCE__USER"] == "reader"
    assert job.env["LOADER__SOURCE__PASSWORD_ENV"] == PASSWORD_ENV and job.env[PASSWORD_ENV] == "s3cret"
    assert not any("s3cret" in part for part in job.command())
    # The job's config, read with that environment, takes them instead of an Airflow connection.
    seen = load_config(tmp_path / "loader.toml", env=job.env)
    assert (seen.source.host, seen.source.port, seen.source.user) == ("db.internal", 3307, "reader")
    assert seen.source.airflow_conn_id == ""
    # TLS as the launcher resolved it (an Airflow connection's extras, say).
    assert (seen.source.tls, seen.source.tls_ca, seen.source.tls_cert) == ("verify_identity", str(ca), "")


def test_a_job_needs_a_config_file_and_a_known_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs --config"):
        _job(load_config(None, env={}), tmp_path)
    with pytest.raises(ValueError, match="no Spark job 'vacuum'"):
        _job(_config(tmp_path), tmp_path, name="vacuum")


def test_the_outcome_gives_the_summary_or_the_jobs_own_error(tmp_path: Path) -> None:
    job = _job(_config(tmp_path), tmp_path)
    write_outcome(job.result_path, summary=[{"table": "s.t"}])
    assert read_outcome(job, None) == [{"table": "s.t"}]

    write_outcome(job.result_path, error=ConnectionResetError("reset"))
    with pytest.raises(SparkJobError) as failed:
        read_outcome(job, "exit 1")
    assert failed.value.error_class == "ConnectionResetError" and failed.value.transient  # a network error
    assert json.loads(Path(job.result_path).read_text())["error"]["message"] == "reset"


def test_a_job_that_left_no_outcome_says_how_it_ended(tmp_path: Path) -> None:
    job = _job(_config(tmp_path), tmp_path)
    with pytest.raises(
        SparkJobError, match=r"the materialize job failed: it ended without finishing \(exit 137\)"
    ) as failed:
        read_outcome(job, "exit 137")
    assert failed.value.error_class == "" and not failed.value.transient


def test_airflows_report_of_a_failed_spark_submit_is_one_line_with_its_exit() -> None:
    # As the Spark provider's hook raises it: the command line, the exit code, the output's tail.
    message = (
        "Cannot execute: spark-submit --master local[2] --conf spark.x=1 --name loader-materialize "
        "/opt/loader/spark_jobs.py materialize. Error code is: 137.\nLast spark-submit output:\n"
        "26/11/28 18:51:10 INFO SecurityManager: Changing view acls to: root\n" * 3
    )
    assert (
        operator_failure(message) == "exit 137, killed by SIGKILL: spark-submit's output is in the task's log"
    )
    assert (
        operator_failure(message.replace("137", "1")) == "exit 1: spark-submit's output is in the task's log"
    )
    assert operator_failure("Cannot execute: spark-submit\nmore") == "Cannot execute: spark-submit"
    # The local launcher's code for a killed spark-submit, as Python reports it.
    assert (exit_text(-9), exit_text(1), exit_text(300)) == (
        "exit -9, killed by SIGKILL",
        "exit 1",
        "exit 300",
    )


@pytest.mark.integration
def test_a_jobs_error_is_one_line_naming_what_failed(spark: Any, tmp_path: Path) -> None:
    from py4j.protocol import Py4JJavaError

    # From the JVM: the root cause, not the call that failed nor its stack frames.
    with pytest.raises(Py4JJavaError) as jvm:
        spark._jvm.java.io.FileInputStream(str(tmp_path / "missing"))  # type: ignore[attr-defined]
    assert error_outcome(jvm.value) == (
        "FileNotFoundException",
        f"FileNotFoundException: {tmp_path / 'missing'} (No such file or directory)",
        False,
    )
    # Spark's own errors keep their first line (the rest is a JVM stack trace).
    with pytest.raises(Exception) as analysis:
        spark.sql("SELECT * FROM no_such_table_anywhere")
    name, message, transient = error_outcome(analysis.value)
    assert name == "AnalysisException" and not transient
    assert message.startswith("AnalysisException: [TABLE_OR_VIEW_NOT_FOUND]") and "\n" not in message
    # A full or read-only disk: the file and the cause.
    full = OSError(28, "No space left on device", "/staging/part-00001.csv")
    assert error_outcome(full) == (
        "OSError",
        "cannot write or read /staging/part-00001.csv: No space left on device",
        False,
    )


@pytest.mark.parametrize(
    ("kind", "uri", "secret_key"),
    [
        ("jdbc", "jdbc:mariadb://db:3306/iceberg", "jdbc.password"),
        ("rest", "https://polaris:8181/api/catalog", "credential"),
    ],
)
def test_an_iceberg_catalog_servers_secret_stays_off_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, uri: str, secret_key: str
) -> None:
    (tmp_path / "loader.toml").write_text(
        f'[warehouse]\nformat = "iceberg"\niceberg_catalog = "{kind}"\niceberg_catalog_uri = "{uri}"\n'
        'iceberg_catalog_user = "lake"\niceberg_catalog_password_env = "LAKE_SECRET"\n'
    )
    monkeypatch.setenv("LAKE_SECRET", "s3cret")
    cfg = load_config(tmp_path / "loader.toml", env={})
    job = _job(cfg, tmp_path)
    assert job.conf["spark.sql.catalog.iceberg.type"] == kind
    assert job.conf["spark.sql.catalog.iceberg.uri"] == uri
    assert not any("s3cret" in part for part in job.command())
    # The job's session takes it from the variable when it starts (build_session).
    assert iceberg_secret_conf(cfg.warehouse) == {f"spark.sql.catalog.iceberg.{secret_key}": "s3cret"}


def test_a_job_of_one_source_of_a_deployment_is_told_which(tmp_path: Path) -> None:
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "shop_01.toml").write_text('[tables]\ninclude = ["shop.*"]\n')
    (tmp_path / "loader.toml").write_text('[sources]\ndir = "sources"\n')
    cfg = load_config(tmp_path / "loader.toml", env={}, source="shop_01")
    command = _job(cfg, tmp_path, name="rollback", extra=["--to-interval", "3"]).command()
    assert command[command.index(APPLICATION) + 1 :] == [
        "rollback",
        "--config",
        str((tmp_path / "loader.toml").resolve()),
        "--source",
        "shop_01",
        "--to-interval",
        "3",
    ]
