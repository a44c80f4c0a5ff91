"""The application layer's own bookkeeping: a Spark job's outcome, and failures noted in the ledger
for every caller (the command line and Airflow launch jobs differently, the steps are the same)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from loader.app import steps
from loader.core.config import Config, load_config
from loader.core.errors import ManifestError, SparkJobError, TransientError, exit_code
from loader.core.positions import Position
from loader.core.results import Materialized, MergedInterval, TableResult
from loader.staging.manifest import ColumnSpec, FileEntry, Manifest, TableEntry
from loader.staging.verify import sha256_hex
from loader.state.ledger import Ledger
from loader.state.records import EXTRACTED, MATERIALISED, Checkpoint, Load, layout_record
from loader.warehouse.materialize import record_materialised
from loader.warehouse.session import JAVA_OPTIONS, QUICK_COMPILER
from loader.warehouse.submit import SparkJob, write_outcome


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    path = tmp_path / "loader.toml"
    path.write_text(f'[staging]\nuri = "{tmp_path / "staging"}"\n')
    return load_config(path, env={})


def _extracted_interval(cfg: Config, tables: list[TableEntry] | None = None) -> str:
    """An extracted interval whose manifest lists ``tables`` (one table changed by one row when
    not given), as extract records it."""
    ledger = Ledger.of(cfg)
    before = ledger.intervals()  # each one after the last
    end = Position.parse(f"binlog.000001:{4000 * (len(before) + 1)}")
    interval = ledger.plan(end, start=None if before else Position.parse("binlog.000001:4"))
    assert interval is not None
    if tables is None:
        columns = [ColumnSpec("id", "int")]
        changed = FileEntry("s/t/part-0.csv", 0, 1, {"I": 1}, 0, "crc32:00000000")
        tables = [TableEntry("s", "t", ["id"], [columns], [changed])]
    manifest = Manifest(interval.id, {}, str(interval.start), str(interval.end), None, None, 0, tables)
    data = manifest.to_json()
    interval.manifest = f"manifests/{interval.id}.json"
    ledger.store.put(interval.manifest, data)
    interval.manifest_sha256 = sha256_hex(data)
    interval.changes = sum(f.rows for t in tables for f in t.files)
    interval.layouts = [layout_record(t.schema, t.table, t.layouts[-1]) for t in tables]
    interval.state = EXTRACTED
    ledger.save(interval)
    return interval.id


def test_a_jobs_summary_comes_back_typed_with_every_interval_it_applied_as_recorded(cfg: Config) -> None:
    ledger = Ledger.of(cfg)
    # A killed run's interval, extracted and never materialised, then this run's, cut short of
    # its planned end by --max-changes.
    killed, cut = _extracted_interval(cfg), _extracted_interval(cfg)
    interval = ledger.get(cut)
    assert interval is not None
    interval.extracted_end = "binlog.000001:5000"
    ledger.save(interval)

    def launch(job: SparkJob) -> str | None:
        assert job.name == "materialize"
        applied = [ledger.get(i) for i in (killed, cut)]
        record_materialised(ledger, [i for i in applied if i is not None], [])  # as the job does
        write_outcome(
            job.result_path,
            [{"table": "s.t", "inserted": 2, "updated": 1, "deleted": 0, "partitions": 1, "seconds": 0.5}],
        )
        return None

    done = steps.materialize(cfg, launch)
    assert done.tables == [TableResult("s.t", 2, 1, 0, 1, 0.5)]
    assert done.intervals == [
        MergedInterval(killed, "binlog.000001:4", "binlog.000001:4000", 1),
        MergedInterval(cut, "binlog.000001:4000", "binlog.000001:5000", 1),  # where it was cut
    ]
    assert done.text(1.25).splitlines()[:3] == [
        "materialize: 2 intervals, 1 tables in 1.2 s",
        f"  materialised interval {killed} [binlog.000001:4, binlog.000001:4000), 1 changes",
        f"  materialised interval {cut} [binlog.000001:4000, binlog.000001:5000), 1 changes",
    ]


def test_a_materialisation_with_no_extracted_interval_starts_no_job(cfg: Config) -> None:
    def launch(job: SparkJob) -> str | None:
        raise AssertionError(f"a {job.name} job was launched with nothing to apply")

    assert steps.materialize(cfg, launch) == Materialized([], [])
    interval = _extracted_interval(cfg)
    ledger = Ledger.of(cfg)
    done = ledger.get(interval)
    assert done is not None
    done.state = MATERIALISED
    ledger.save(done)
    assert steps.materialize(cfg, launch) == Materialized([], [])


def test_intervals_that_changed_no_selected_table_are_applied_without_a_job(cfg: Config) -> None:
    """The binlog moved for other tables only: nothing to merge, so no JVM; the intervals are
    materialised and the checkpoint moves to the last one's end, as the job would leave them."""

    def launch(job: SparkJob) -> str | None:
        raise AssertionError(f"a {job.name} job was launched with nothing to merge")

    ledger = Ledger.of(cfg)
    first = _extracted_interval(cfg, tables=[])
    ledger.record_error(first, "materialize: the metastore did not answer")  # an earlier attempt's
    done = steps.materialize(cfg, launch)
    assert done == Materialized([MergedInterval(first, "binlog.000001:4", "binlog.000001:4000", 0)], [])
    applied = ledger.get(first)
    checkpoint = ledger.checkpoint()
    assert applied is not None and applied.state == MATERIALISED and applied.error is None
    assert checkpoint is not None and checkpoint.position == applied.end and checkpoint.interval == first

    # An interval that changed a table after one that did not: the job applies both.
    quiet, changed = _extracted_interval(cfg, tables=[]), _extracted_interval(cfg)
    launched: list[str] = []

    def job(spark_job: SparkJob) -> str | None:
        launched.append(spark_job.name)
        write_outcome(spark_job.result_path, [])
        return None

    steps.materialize(cfg, job)
    assert launched == ["materialize"]
    assert [ledger.get(i).state for i in (quiet, changed)] == [EXTRACTED, EXTRACTED]  # type: ignore[union-attr]

    for i in (quiet, changed):  # as the job leaves them
        done = ledger.get(i)
        assert done is not None
        done.state = MATERIALISED
        ledger.save(done)

    # An older ledger's interval, without its counts: its manifest decides, and is checked first.
    older = ledger.get(_extracted_interval(cfg, tables=[]))
    assert older is not None
    older.changes, older.layouts = None, None
    ledger.save(older)
    ledger.store.put(older.manifest or "", b"{}")
    with pytest.raises(ManifestError, match=f"interval {older.id}: its manifest .* \\(checksum differs\\)"):
        steps.materialize(cfg, launch)
    noted = ledger.get(older.id)
    assert noted is not None and noted.state == EXTRACTED and "checksum differs" in (noted.error or "")
    assert ledger.checkpoint() == checkpoint  # not moved past what was not applied


def test_a_materialisation_that_dies_without_a_word_is_noted_on_the_waiting_interval(cfg: Config) -> None:
    interval = _extracted_interval(cfg)
    with pytest.raises(
        SparkJobError, match=r"the materialize job failed: it ended without finishing \(exit 137\)"
    ) as failed:
        steps.materialize(cfg, lambda job: "exit 137")
    assert exit_code(failed.value) == 1
    assert str(failed.value).startswith(f"interval {interval}: the materialize job failed") and str(
        failed.value
    ).endswith("run the materialisation again (clear the task, or loader materialize)")
    noted = Ledger.of(cfg).get(interval)
    assert (
        noted is not None
        and noted.error == "materialize: the materialize job failed: it ended without finishing (exit 137)"
    )
    assert steps.status(cfg).intervals["failed"] == 1


def test_a_jobs_own_error_is_reported_as_the_job_said_and_not_noted_twice(cfg: Config) -> None:
    interval = _extracted_interval(cfg)
    Ledger.of(cfg).record_error(interval, "materialize: table s.t: column c changed type")  # the job's note

    def launch(job: SparkJob) -> str | None:
        write_outcome(job.result_path, error=TransientError("S3 put s3://b: SlowDown"))
        return "exit 3"

    with pytest.raises(SparkJobError) as failed:
        steps.materialize(cfg, launch)
    assert str(failed.value) == "the materialize job failed: S3 put s3://b: SlowDown"
    assert failed.value.error_class == "TransientError" and exit_code(failed.value) == 3
    noted = Ledger.of(cfg).get(interval)
    assert noted is not None and noted.error == "materialize: table s.t: column c changed type"


def test_inside_the_job_a_failure_is_noted_and_a_success_clears_old_errors(cfg: Config) -> None:
    interval = _extracted_interval(cfg)
    with pytest.raises(TransientError), steps.materialize_failures_noted(cfg):
        raise TransientError("metastore unreachable")
    ledger = Ledger.of(cfg)
    noted = ledger.get(interval)
    assert noted is not None and noted.error == "materialize: metastore unreachable"

    with steps.materialize_failures_noted(cfg):  # the merge's ledger tail, as the job does it
        record_materialised(ledger, [noted], [])
    cleared = ledger.get(interval)
    assert cleared is not None and cleared.error is None
    assert steps.status(cfg).last_error is None


def test_decoding_uses_every_core_whichever_the_transport() -> None:
    assert steps.decode_workers(3) == 3
    assert steps.decode_workers() == min(steps.MAX_DECODE_WORKERS, os.cpu_count() or 1)


def test_a_first_load_the_arrow_engine_copies_runs_with_the_quick_compiler_only(
    cfg: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)  # the test suite's own choice

    def quick(config: Config) -> bool:
        options: list[list[str]] = []

        def launch(job: SparkJob) -> str | None:
            options.append(job.conf.get(JAVA_OPTIONS, "").split())
            summary = {"load_id": "l", "p0": "binlog.000001:4", "tables": [], "seconds": 0, "first": True}
            write_outcome(job.result_path, summary)
            return None

        steps.run_initial_load(config, launch)
        return QUICK_COMPILER in options[0]

    def changed(**sections: dict[str, object]) -> Config:
        return dataclasses.replace(
            cfg, **{k: dataclasses.replace(getattr(cfg, k), **v) for k, v in sections.items()}
        )

    assert quick(cfg)  # the defaults: the arrow engine, Iceberg tables on local disk
    # Spark copies these tables (the ones shared by sources, Hive-format ones) or every table.
    assert not quick(changed(load={"engine": "spark"}))
    assert not quick(changed(warehouse={"format": "hive"}))
    assert not quick(changed(tables={"routes": {"s.t": "shared.t"}}))
    # After the first load, a load re-loads tables that exist: Spark copies them.
    Ledger.of(cfg).set_checkpoint(Checkpoint("binlog.000001:4", "initial-load"))
    assert not quick(cfg)


def test_a_materialise_job_over_few_rows_runs_with_the_quick_compiler_only(
    cfg: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)  # the test suite's own choice
    ledger = Ledger.of(cfg)
    ledger.save_load(
        Load(
            "load-1",
            Position.parse("binlog.000001:4"),
            ["s.t"],
            "complete",
            rows={"s.t": 4_000_000},
            names=[["s", "t"]],
        )
    )
    interval = ledger.get(_extracted_interval(cfg))
    assert interval is not None

    def quick(changes: int, table: str = "t", config: Config = cfg) -> bool:
        assert interval is not None
        interval.changes = changes
        interval.layouts = [layout_record("s", table, [ColumnSpec("id", "int")])]
        ledger.save(interval)
        options: list[list[str]] = []

        def launch(job: SparkJob) -> str | None:
            options.append(job.conf.get(JAVA_OPTIONS, "").split())
            write_outcome(job.result_path, [])
            return None

        steps.materialize(config, launch)
        return QUICK_COMPILER in options[0]

    # The default limits: 500,000 pending change rows, into tables of 10,000,000 rows together.
    assert quick(500_000)
    assert not quick(500_001)
    ledger.save_load(
        Load(
            "load-2",
            Position.parse("binlog.000001:8"),
            ["s.t"],
            "complete",
            rows={"s.t": 10_000_001},
            names=[["s", "t"]],
        )
    )
    assert not quick(10)
    assert not quick(10, table="u")  # a table of unknown size
    hive = dataclasses.replace(cfg, warehouse=dataclasses.replace(cfg.warehouse, format="hive"))
    ledger.save_load(dataclasses.replace(ledger.loads()[0], id="load-3", p0="binlog.000001:12"))
    assert quick(10)
    assert not quick(10, config=hive)  # Hive tables are not counted after their load
