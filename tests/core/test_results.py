"""Step results cross process boundaries as plain JSON (command output, XCom, the Spark job's
outcome) and come back as the same typed records."""

from __future__ import annotations

import dataclasses
import json

from loader.core.results import (
    ExtractedTable,
    ExtractSummary,
    FailedStep,
    LastLoad,
    MergedInterval,
    PlannedInterval,
    RunOnce,
    Status,
    TableMapping,
    TableResult,
    from_dict,
    to_dict,
)
from loader.warehouse.checks import ChecksumReport, DifferingRange, TableChecksum


def _round_trip(value: object) -> object:
    return from_dict(type(value), json.loads(json.dumps(to_dict(value))))


def test_a_run_with_nested_results_comes_back_equal() -> None:
    run = RunOnce(
        PlannedInterval("0000000007", "binlog.000002:4", "binlog.000002:900", False, 896),
        ExtractSummary(
            "0000000007", "binlog.000002:4", "binlog.000002:900", 3, 12, 0.4,
            [ExtractedTable("shop.orders", {"I": 10, "D": 2}, 1, 2048)], "demo/_intervals/0000000007.json",
        ),
        [TableResult("shop.orders", 8, 2, 0, 1, 1.5)],
        4.2,
    )  # fmt: skip
    assert _round_trip(run) == run
    nothing_new = RunOnce(PlannedInterval(None, "binlog.000002:900", "binlog.000002:900"), None, [], 0.1)
    assert _round_trip(nothing_new) == nothing_new


def test_a_runs_summary_is_what_the_ledger_recorded() -> None:
    # Planned to 900, cut at 500 by --max-changes; a killed run's interval materialised with it.
    run = RunOnce(
        PlannedInterval("0000000007", "binlog.000002:4", "binlog.000002:900"),
        ExtractSummary("0000000007", "binlog.000002:4", "binlog.000002:500", 3, 120, 0.4, [], "m.json"),
        [TableResult("shop.orders", 100, 20, 0, 1, 1.5)],
        4.2,
        [
            MergedInterval("0000000006", "binlog.000001:4", "binlog.000002:4", 7),
            MergedInterval("0000000007", "binlog.000002:4", "binlog.000002:500", 120),
        ],
    )
    assert _round_trip(run) == run
    assert run.text().splitlines() == [
        "run-once: interval 0000000007 [binlog.000002:4, binlog.000002:500), 120 changes extracted; "
        "1 tables materialised in 4.2 s",
        "  also materialised interval 0000000006 [binlog.000001:4, binlog.000002:4), 7 changes "
        "(extracted by an earlier run)",
        "  shop.orders                    inserted=100 updated=20 deleted=0 partitions=1 seconds=1.5",
    ]


def test_status_keeps_its_json_shape_and_its_text() -> None:
    status = Status(
        source="demo",
        source_position="binlog.000003:120",
        checkpoint={"position": "binlog.000003:100", "interval": "0000000002", "commit_ts": None},
        lag_seconds=None,
        intervals={"planned": 0, "extracted": 0, "materialised": 1, "failed": 1},
        last_error=FailedStep("0000000003", "extract: column c changed type", "2026-11-23T12:00:00Z"),
        last_load=LastLoad("20261123T110000", "complete", "binlog.000001:4", 3),
    )
    data = to_dict(status)
    assert data["last_error"] == {
        "interval": "0000000003",
        "error": "extract: column c changed type",
        "at": "2026-11-23T12:00:00Z",
    }
    assert data["intervals"]["failed"] == 1
    assert _round_trip(status) == status
    text = status.text()
    assert "checkpoint: binlog.000003:100 (0000000002)" in text
    assert "last error: interval 0000000003 at 2026-11-23T12:00:00Z: extract: column c changed type" in text
    assert "running now: nothing" in text
    assert "lag: unknown (the source cannot tell)" in text
    assert "lag: unknown (no checkpoint yet)" in dataclasses.replace(status, checkpoint=None).text()
    busy = dataclasses.replace(status, lease="loader extract (pid 7 on h) since 2026-11-23T12:00:00Z")
    assert "running now: loader extract (pid 7 on h) since 2026-11-23T12:00:00Z" in busy.text()
    assert "awaiting" not in text
    waiting = dataclasses.replace(status, awaiting_copy=["s.a", "s.b"])
    assert _round_trip(waiting) == waiting
    assert waiting.text().splitlines()[-1] == (
        "awaiting their copy: 2 tables (s.a, s.b): their changes are staged, not merged, until a load "
        "copies them (loader tables says which load)"
    )


def test_a_checksum_report_reads_as_sql_conditions_and_ends_with_the_verdict() -> None:
    report = ChecksumReport(
        "binlog.000003:120",
        [
            TableChecksum("s.a", "wh.s__a", 10, 10, 1, True, ["id"]),
            TableChecksum(
                "s.b",
                "wh.s__b",
                5,
                6,
                3,
                False,
                ["name", "odd col"],
                [
                    DifferingRange(None, ["O'Brien", "2"], 2, 3),
                    DifferingRange(["O'Brien", "2"], ["Z", "-1.5e-7"], 1, 1),
                ],
            ),
        ],
        caught_up="000007",
    )
    assert report.text(show=1).splitlines() == [
        "checksum at binlog.000003:120 (warehouse brought there by interval 000007): 2 tables, 1 equal",
        "s.a → wh.s__a: source 10 rows, warehouse 10 rows, 1 key range, equal",
        "s.b → wh.s__b: source 5 rows, warehouse 6 rows, 3 key ranges, DIFFERENT",
        "  differs where (name, `odd col`) <= ('O''Brien', 2): source 2 rows, warehouse 3 rows",
        "  … and 1 more range",
        "checksum: 1 of 2 tables differ from the source at binlog.000003:120: s.b. Re-load them with "
        "`loader initial-load --tables s.b` (the delta runs go on for the other tables)",
    ]
    assert not report.equal and ChecksumReport("binlog.000003:120", [report.tables[0]]).verdict() is None
    # A table awaiting its copy is not compared: no verdict against it, the report equal.
    waiting = TableChecksum("s.c", "wh.s__c", 4, 0, 1, False, ["id"], not_loaded="not loaded yet: load-1 …")
    report = ChecksumReport("binlog.000003:120", [report.tables[0], waiting])
    assert report.equal and report.verdict() is None
    assert report.text().splitlines() == [
        "checksum at binlog.000003:120: 2 tables, 1 equal, 1 not compared (awaiting their copy)",
        "s.a → wh.s__a: source 10 rows, warehouse 10 rows, 1 key range, equal",
        "s.c → wh.s__c: not compared: not loaded yet: load-1 …",
    ]


def test_loader_tables_says_which_tables_are_loaded_and_which_await_their_copy() -> None:
    mappings = [
        TableMapping("s", "a", "s__a", "binlog.000001:4", mode="history"),
        TableMapping("s", "b", "s__b", None, awaiting_load="load-2"),
        TableMapping("s", "c", "s__c", "binlog.000001:4", awaiting_load="load-3"),
        TableMapping(
            "s",
            "d",
            "s__d",
            "binlog.000001:4",
            last_interval="00000007",
            last_change_by="2026-11-28T10:00:00+00:00",
        ),
    ]
    assert _round_trip(mappings[1]) == mappings[1]
    assert TableMapping.text(mappings, "wh").splitlines() == [
        "4 selected tables -> warehouse database wh",
        "  `s`.`a` -> s__a (history, loaded at binlog.000001:4)",
        "  `s`.`b` -> s__b (mirror, not loaded yet: copy by load-2 pending: its changes wait for it)",
        "  `s`.`c` -> s__c (mirror, loaded at binlog.000001:4; copy by load-3 pending: its changes wait for it)",
        "  `s`.`d` -> s__d (mirror, loaded at binlog.000001:4; last changed by interval 00000007, "
        "committed by 2026-11-28T10:00:00+00:00)",
    ]
    assert _round_trip(mappings[3]) == mappings[3]
