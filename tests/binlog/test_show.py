"""``loader binlog show``: decoded changes as text or JSON lines, from files or the server."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loader.core.positions import Position
from tests.binlog.reference import prepare
from tests.conftest import BINLOG_TESTDATA, MariaDB

LOADER = str(Path(sys.executable).with_name("loader"))
ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LOADER, "binlog", "show", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_jsonl_from_a_file(tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / "rust_mysql_common/mariadb-bin.000001", tmp_path)
    out = run("--file", str(path), "--format", "jsonl")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert lines and all(line["table"] == "outbox" for line in lines)
    first = lines[0]
    assert set(first) >= {
        "op",
        "schema",
        "table",
        "seqno",
        "row_id",
        "position",
        "commit_ts",
        "before",
        "after",
    }
    assert first["op"] == "I" and first["before"] is None and first["row_id"] == 0
    assert list(first["after"]) == ["id", "topic", "event_type", "event", "created"]
    assert (
        first["seqno"] == (1 << 32) + Position.parse(first["position"]).pos + 0 * 0
        or first["seqno"] > 1 << 32
    )
    # Binary columns come as base64, timestamps as ISO text with the column's precision.
    base64.b64decode(first["after"]["event"], validate=True)
    assert first["commit_ts"].endswith("Z") and "T" in first["commit_ts"]
    assert "transactions" in out.stderr


def test_text_like_mysqlbinlog(tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / "rust_mysql_common/mysql-enum-string-set.000001", tmp_path)
    out = run("--file", str(path))
    assert out.returncode == 0, out.stderr
    assert (
        "### INSERT INTO `" in out.stdout
        and "### UPDATE `" in out.stdout
        and "### DELETE FROM `" in out.stdout
    )
    assert "### WHERE" in out.stdout and "### SET" in out.stdout


def test_range_by_lognum_and_logpos(tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / "mysql-binlog-connector-java/mysql-bin.checksum-crc32", tmp_path)
    text = run("--file", str(path)).stdout
    # The 10th transaction's boundaries, from the text header lines "# FILE:POS .. FILE:POS ...".
    headers = [line.split()[1:4:2] for line in text.splitlines() if line.startswith("# ") and " .. " in line]
    start, end = headers[10][0], headers[12][1]
    by_position = run("--file", str(path), "--format", "jsonl", "--from", start, "--to", end)
    by_lognum = run(
        "--file",
        str(path),
        "--format",
        "jsonl",
        "--lognum",
        "1",
        "--logpos",
        start.split(":")[1],
        "--to",
        end,
    )
    assert by_position.returncode == 0, by_position.stderr
    assert by_position.stdout == by_lognum.stdout
    seqnos = {json.loads(line)["seqno"] for line in by_position.stdout.splitlines()}
    assert len(seqnos) == 3  # the 11th, 12th and 13th transactions


def test_bad_position_is_a_one_line_error(tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / "rust_mysql_common/mariadb-bin.000001", tmp_path)
    out = run("--file", str(path), "--from", f"{path.name}:5")
    assert out.returncode == 1
    assert out.stderr.strip().endswith("is not an event boundary")
    assert out.stderr.count("\n") == 1


@pytest.mark.integration
def test_from_the_server_with_the_config(mariadb: MariaDB, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "LOADER_SOURCE_PASSWORD": mariadb.password,
        "LOADER__SOURCE__PORT": str(mariadb.port),
        # The example verifies the demo's server; this one is verified against its own CA.
        "LOADER__SOURCE__TLS_CA": str(mariadb.datadir / "tls" / "ca.pem"),
    }
    example = ROOT / "loader.example.toml"
    demo = subprocess.run(
        [LOADER, "demo", "--config", str(example), "--output", "json", "--rows", "4", "--seed", "7"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert demo.returncode == 0, demo.stderr
    summary = json.loads(demo.stdout.splitlines()[-1])
    out = run(
        "--config",
        str(example),
        "--from",
        summary["start"],
        "--to",
        summary["end"],
        "--format",
        "jsonl",
        env=env,
    )
    assert out.returncode == 0, out.stderr
    changes = [json.loads(line) for line in out.stdout.splitlines()]
    ops = [c["op"] for c in changes]
    assert ops.count("I") == summary["inserts"]
    assert ops.count("D") == summary["deletes"]
    assert ops.count("U") == summary["updates"]
    assert {c["table"] for c in changes} == {"customers", "order_lines", "events"}
    # Nothing of the rolled-back update shows.
    assert "rolled.back@example.com" not in out.stdout
    # Decimals are exact strings.
    assert all(
        isinstance(c["after"]["balance"], str) for c in changes if c["table"] == "customers" and c["after"]
    )


def test_json_lines_write_every_kind_of_value_as_json_does() -> None:
    from decimal import Decimal
    from types import SimpleNamespace

    from loader.binlog import show
    from loader.binlog.rowplan import ABSENT, JsonDiff
    from loader.binlog.transactions import RowsBatch, Transaction

    names = ("id", 'quo"te', "{brace}", "ü", "d", "b", "f", "j")
    table = SimpleNamespace(schema="s", table="t{x}", names=names)
    rows = [
        (None, (1, 'a"b\\c\n\x00é🚀', "", None, Decimal("-0.50"), b"\x00\xff", float("nan"), JsonDiff(()))),
        (
            (2, "x", "y", "z", Decimal("1E-10"), b"", float("-inf"), True),
            (2, ABSENT, "y", ABSENT, None, b"", -0.0, 1),
        ),
        ((3, "x", "y", "z", Decimal("7"), b"q", 1e300, "{}"), None),
    ]
    batch = RowsBatch(table, "U", rows, 5, Position("mysql-bin.000001", 300))  # type: ignore[arg-type]
    tx = Transaction(
        Position("mysql-bin.000001", 4), Position("mysql-bin.000001", 400), 77, 0, "0-1-2", [batch]
    )
    lines = list(show.jsonl(tx))

    def image(row: tuple[object, ...] | None) -> dict[str, object] | None:
        if row is None:
            return None
        return {n: show.json_value(v) for n, v in zip(names, row, strict=True) if v is not ABSENT}

    expected = [
        json.dumps(
            {
                "op": "U",
                "schema": "s",
                "table": "t{x}",
                "seqno": 77,
                "row_id": 5 + 2 * i,
                "position": "mysql-bin.000001:300",
                "commit_ts": "1970-01-01T00:00:00.000000Z",
                "gtid": "0-1-2",
                "before": image(before),
                "after": image(after),
            },
            ensure_ascii=False,
        )
        for i, (before, after) in enumerate(rows)
    ]
    assert lines == expected
    assert (
        json.loads(lines[0])["after"]["d"] == "-0.50"
        and json.loads(lines[1])["before"]["d"] == "0.0000000001"
    )


@pytest.mark.parametrize(
    "rel",
    [
        "rust_mysql_common/mariadb-bin.000001",
        "mysql-binlog-connector-java/mysql-bin.checksum-crc32",
        "mysql-cdc-rs/binlog.000733",
        "msmp/binlog.000001",
    ],
)
def test_jsonl_from_the_native_reader_is_the_python_decoders(rel: str, tmp_path: Path) -> None:
    """Whole transactions written by the native reader, the rest by the Python reader: the same
    lines as the Python decoder's, and the same counts."""
    path = prepare(BINLOG_TESTDATA / rel, tmp_path)
    native = run("--file", str(path), "--format", "jsonl")
    python = run(
        "--file", str(path), "--format", "jsonl", env={**os.environ, "LOADER__SOURCE__DECODER": "python"}
    )
    assert native.returncode == python.returncode == 0, native.stderr + python.stderr
    assert native.stdout == python.stdout and native.stdout
    assert native.stderr.rsplit(",", 1)[0] == python.stderr.rsplit(",", 1)[0]  # all but the seconds
