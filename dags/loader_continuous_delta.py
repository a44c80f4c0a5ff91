"""Continuous delta: every 15 minutes (``[source] schedule``, ``LOADER_DELTA_SCHEDULE``), one
interval of binlog changes is planned, extracted into staging, materialised into the warehouse
tables with Spark, and the changed tables are published as Assets; a run triggered with the
Checksum field then compares the warehouse with the source, and one given an interval to abandon
gives it up before planning. One such DAG per source of a deployment. Wiring and Params only;
the tasks live in ``loader``."""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, Param, task

from loader import airflow as tasks

for source in tasks.dag_sources():  # one set of DAGs per source of a deployment
    with DAG(
        dag_id=source.dag_id("loader_continuous_delta"),
        description="binlog changes since the last interval → staging → warehouse tables",
        schedule=source.delta_schedule,
        start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        catchup=False,
        max_active_runs=1,
        default_args={
            "retries": 3,
            "retry_delay": dt.timedelta(seconds=30),
            "retry_exponential_backoff": True,
            "max_retry_delay": dt.timedelta(minutes=10),
        },
        tags=source.tags,
        doc_md=source.modes,
        params={
            "start_lognum": Param(
                None,
                type=["null", "integer"],
                minimum=1,
                title="Backfill from binlog file number",
                description="Replay from this binlog file (the number in mysql-bin.000042) to the present end. "
                "Give it with the position below; leave both empty to continue from the last interval.",
                section="Backfill",
            ),
            "start_logpos": Param(
                None,
                type=["null", "integer"],
                minimum=4,
                title="Backfill from byte position",
                description="The position in that file where a transaction starts (as SHOW BINLOG EVENTS "
                "or loader binlog show prints it).",
                section="Backfill",
            ),
            "allow_gap": Param(
                False,
                type="boolean",
                title="Allow a gap",
                description="Let the backfill start past where the log has been read: the changes in between "
                "are skipped for good and the gap is recorded in the ledger (loader status shows it). "
                "Without it such a start is refused.",
                section="Backfill",
            ),
            "max_changes": Param(
                None,
                type=["null", "integer"],
                minimum=1,
                title="Most changes per interval",
                description="End the interval at the first transaction boundary past this many row changes; "
                "the rest is left for the next run. Empty: no bound.",
            ),
            "checksum": Param(
                False,
                type="boolean",
                title="Checksum",
                description="After materialising, compare row counts and checksums per key range with the "
                "source at one snapshot of it (the warehouse is brought there first). The run fails, naming "
                "the tables and key ranges, if any differ. Reads every selected table on both sides.",
            ),
            "dry_run": Param(
                False,
                type="boolean",
                title="Dry run",
                description="Plan the interval and report it without extracting or writing anything.",
            ),
            "abandon_interval": Param(
                None,
                type=["null", "string"],
                title="Abandon interval",
                description="Before planning, give up this interval (its id, as loader intervals and loader "
                "status show it) and the later ones not materialised: they are never materialised, and this "
                "run plans again from before them. The way out of an interval that cannot be extracted.",
                section="Way out",
            ),
            "abandon_reason": Param(
                None,
                type=["null", "string"],
                title="Reason",
                description="Why the interval is abandoned; kept in the ledger. Required with Abandon interval.",
                section="Way out",
            ),
        },
    ):
        status = task(tasks.log_status, task_id="status", retries=0)(source=source.name)
        planned = task(tasks.plan, task_id="plan")(source=source.name)
        extracted = task(tasks.extract, task_id="extract")(planned, source=source.name)
        materialize = tasks.LoaderSparkJobOperator(
            task_id="materialize",
            job="materialize",
            conn_id="spark_default",
            source=source.name,
            pool=source.pool,
        )
        published = task(tasks.publish, task_id="publish", outlets=[tasks.TABLES_ALIAS])(
            planned, source=source.name
        )
        checksum = tasks.LoaderChecksumOperator(
            task_id="checksum",
            conn_id="spark_default",
            retries=0,
            source=source.name,
            pool=source.pool,
        )
        lag = task(tasks.check_lag, task_id="lag", retries=0, trigger_rule="all_done")(source=source.name)
        status >> planned
        extracted >> materialize >> published >> checksum
        # Not upstream of the run's other leaves: a run whose only leaf succeeds is a success,
        # whatever failed before it (Airflow judges a run by its leaves).
        materialize >> lag
