"""Every real binlog in the shared test data: decoded without error (or, for the damaged ones,
with a decode error), and every row equal to the reference decoder's text or to the upstream
expectations quoted in SOURCES.md."""

from __future__ import annotations

import itertools
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from loader.binlog.files import BinlogFiles
from loader.binlog.rowplan import ABSENT, JsonDiff
from loader.binlog.schema import SourceColumn, SourceTable, StaticSchema
from loader.binlog.transactions import OpenRows, Transaction, TransactionReader
from loader.core.errors import DecodeError, IncidentError
from loader.core.positions import Position
from tests.binlog.reference import TextRow, matches, parse_decoded, prepare, read_reference
from tests.conftest import BINLOG_TESTDATA

FILES = sorted(
    str(p.relative_to(BINLOG_TESTDATA))
    for p in BINLOG_TESTDATA.rglob("*")
    if p.is_file() and ".decoded" not in p.name and p.suffix not in (".md", ".json", ".sql")
)

NEGATIVE = {
    "rust_mysql_common/binlog_truncated_event.000001": "truncated event header",
    "rust_mysql_common/binlog_truncated_prev_gtid_event.000001": "truncated event header",
    "mariadb-server/invalid_row_v2_tag.001": "rows extra data",
    "mariadb-server/mdev-39404-binlog.000001": "CRC32 checksum mismatch",
    "rust_mysql_common/bug40482-bin.000001": "incident event",
}


def _steven(table: str, fsp: int) -> tuple[tuple[str, str], SourceTable]:
    columns = (SourceColumn("id", "int"), SourceColumn("d", "timestamp", fsp=fsp))
    return ("steven", table), SourceTable("steven", table, columns, ("id",))


# MariaDB 10.0's hires TIMESTAMP(n) does not say its precision in the binlog: the schema does
# (from the file's own CREATE TABLE statements).
SCHEMAS = {
    "tiflow/mysql-bin.000001": StaticSchema(
        dict(_steven(t, fsp) for t, fsp in (("t", 3), ("t1", 0), ("t2", 4), ("t3", 0), ("t5", 1), ("t6", 4)))
    )
}


def _fully_decoded_by_reference() -> set[str]:
    """Files the reference decoder read to the end (SOURCES.md's summary says "OK")."""
    out = set()
    for line in (BINLOG_TESTDATA / "SOURCES.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 8 and cells[2].startswith("`") and cells[-2].startswith("OK"):
            out.add(cells[2].strip("`"))
    return out


COMPLETE = _fully_decoded_by_reference()


def decode(path: Path, schema: StaticSchema | None = None) -> list[Transaction]:
    reader = TransactionReader(schema=schema, strict=False)
    return list(reader.read(BinlogFiles(path).events(Position(path.name, 4), None)))


def flat(txs: list[Transaction]) -> list[tuple[str, Any, tuple[Any, ...] | None, tuple[Any, ...] | None]]:
    return [(b.op, b.table, before, after) for tx in txs for b in tx.batches for before, after in b.rows]


def test_all_files_are_covered() -> None:
    assert len(FILES) >= 58
    assert len(COMPLETE) >= 40
    assert set(NEGATIVE) <= set(FILES)


@pytest.mark.parametrize("rel", FILES)
def test_file_decodes_like_the_reference(rel: str, tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / rel, tmp_path)
    if rel in NEGATIVE:
        with pytest.raises((DecodeError, IncidentError), match=NEGATIVE[rel]) as info:
            decode(path)
        assert path.name in str(info.value)
        return
    txs = decode(path, SCHEMAS.get(rel))
    for a, b in itertools.pairwise(txs):
        assert a.end <= b.start and a.seqno < b.seqno
    reference = read_reference(BINLOG_TESTDATA / rel)
    if reference is None:
        return
    expected = parse_decoded(reference)
    ours = flat(txs)
    assert len(ours) >= len(expected)
    if rel in COMPLETE:
        assert len(ours) == len(expected), rel
    for n, (text, (op, plan, before, after)) in enumerate(zip(expected, ours, strict=False)):
        last = n == len(expected) - 1
        _compare(rel, n, text, op, plan, before, after, partial_ok=last)


def _compare(
    rel: str,
    n: int,
    text: TextRow,
    op: str,
    plan: Any,
    before: tuple[Any, ...] | None,
    after: tuple[Any, ...] | None,
    partial_ok: bool,
) -> None:
    where = f"{rel} row {n} ({plan.qualified})"
    assert (text.op, text.schema, text.table) == (op, plan.schema, plan.table), where
    for image, printed in ((before, text.before), (after, text.after)):
        if image is None:
            assert not printed, where
            continue
        present = {i + 1 for i, v in enumerate(image) if v is not ABSENT}
        if not partial_ok:
            assert set(printed) == present, where
        for num, (value_text, label) in printed.items():
            column = plan.columns[num - 1]
            assert matches(image[num - 1], value_text, label, column), (
                f"{where} @{num} {column.name}: ours {image[num - 1]!r}, reference {value_text} ({label})"
            )


def after_images(rel: str, tmp_path: Path) -> list[tuple[Any, ...]]:
    path = prepare(BINLOG_TESTDATA / rel, tmp_path)
    return [after for op, _, _, after in flat(decode(path, SCHEMAS.get(rel))) if after is not None]


def test_json_opaque_values_print_as_mysql_does(tmp_path: Path) -> None:
    values = [row[-1] for row in after_images("rust_mysql_common/json-opaque.binlog", tmp_path)]
    assert values == [
        '{"a": "base64:type15:VQ=="}',
        '{"b": "2012-03-18"}',
        '{"c": "2012-03-18 11:30:45.000000"}',
        '{"c": "87:31:46.654321"}',
        '{"d": 123.456}',
        '{"e": 9.00}',
        '{"e": [0, 1, true, false]}',
        '{"e": null}',
    ]


def test_bit_columns(tmp_path: Path) -> None:
    rows = after_images("rust_mysql_common/mysql_type_bit.000001", tmp_path)
    assert rows and all((r[0], r[2]) == (0x04, 0x20) and r[1] in ("foo", b"foo") for r in rows)


def test_negative_time2_beyond_a_day(tmp_path: Path) -> None:
    assert after_images("rust_mysql_common/time_issue.000001", tmp_path) == [("-507:48:27",)]


def test_unsigned_int_from_minimal_metadata(tmp_path: Path) -> None:
    rows = after_images("rust_mysql_common/minimal_row_metadata.000001", tmp_path)
    assert rows == [(1, ABSENT, "a", ABSENT, 3230202323)]


def test_vector_values_are_float32_bytes(tmp_path: Path) -> None:
    rows = after_images("rust_mysql_common/vector.binlog", tmp_path)
    vectors = [v for r in rows for v in r if isinstance(v, bytes) and len(v) in (8, 12, 16)]
    assert bytes.fromhex("cdcc8c3fcdcc0c4033335340") in vectors
    assert bytes.fromhex("0000803f000080bf00000000") in vectors


def test_full_metadata_names_collations_and_primary_key(tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / "rust_mysql_common/mariadb-bin.000001", tmp_path)
    plan = flat(decode(path))[0][1]
    assert plan.names == ("id", "topic", "event_type", "event", "created")
    assert [c.charset for c in plan.columns] == [None, "utf8mb4", "utf8mb4", None, None]
    assert plan.primary_key == ("id",)


def test_enum_and_set_labels_from_full_metadata(tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / "rust_mysql_common/mysql-enum-string-set.000001", tmp_path)
    rows = flat(decode(path))
    assert [r[0] for r in rows] == ["I", "U", "D"]
    plan = rows[0][1]
    enum_col = next(c for c in plan.columns if c.labels and c.type == 247)
    set_col = next(c for c in plan.columns if c.labels and c.type == 248)
    inserted = rows[0][3]
    assert inserted[enum_col.index] == enum_col.labels[0]
    assert inserted[set_col.index] == f"{set_col.labels[0]},{set_col.labels[2]}"


def test_partial_json_update_applied_to_the_full_before_image(tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / "mariadb-server/mdev35643_mysql_80_binlog.000001", tmp_path)
    updates = [r for r in flat(decode(path)) if r[0] == "U"]
    before, after = updates[-1][2], updates[-1][3]
    assert before is not None and after is not None
    assert '"b": "[zyzzy]' in before[1]
    assert after[1].startswith('{"a": "hulu", "b": "oOo') and after[1].endswith('"c": "bulu"}')


def test_partial_json_without_before_image_keeps_the_diff(tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / "rust_mysql_common/json.binlog.000001", tmp_path)
    partial = [r for r in flat(decode(path)) if r[0] == "U" and isinstance(r[3][1], JsonDiff)]
    assert partial
    assert partial[0][3][1].describe() == [{"op": "replace", "path": '$."age"', "value": "26"}]
    columns = (
        SourceColumn("id", "int"),
        SourceColumn("doc", "json"),
        SourceColumn("name", "varchar", charset="utf8mb4"),
        SourceColumn("age", "int"),
    )
    schema = StaticSchema({("mysql", "t"): SourceTable("mysql", "t", columns, ("id",))})
    with pytest.raises(DecodeError, match="binlog_row_image=FULL"):
        list(TransactionReader(schema=schema).read(BinlogFiles(path).events(Position(path.name, 4), None)))


def test_compressed_transactions_are_decoded_inline(tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / "mysql-binlog-connector-java/mysql-bin.compressed", tmp_path)
    txs = [tx for tx in decode(path) if tx.batches]
    assert len(txs) == 1
    batch = txs[0].batches[0]
    assert batch.table.qualified == "demo.movies" and batch.op == "U"
    # Every row of a compressed transaction sits at its payload event; the commit ends with it.
    assert batch.position.pos < txs[0].end.pos


def test_mariadb_hires_timestamps_with_the_schemas_precision(tmp_path: Path) -> None:
    rows = after_images("tiflow/mysql-bin.000001", tmp_path)
    fractions = {len(r[1].partition(".")[2]) for r in rows if len(r) == 2 and isinstance(r[1], str)}
    assert fractions == {0, 1, 3, 4}


def test_tagged_gtid_of_mysql_9(tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / "rust_mysql_common/binlog_transaction_with_GTID_TAG.000001", tmp_path)
    txs = [tx for tx in decode(path) if tx.batches]
    assert [tx.gtid for tx in txs] == ["55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"]
    assert txs[0].batches[0].rows == [(None, (3, 100, Decimal("250.00")))]


def test_source_schema_that_no_longer_matches_is_an_error(tmp_path: Path) -> None:
    path = prepare(BINLOG_TESTDATA / "binlog-parser/mysql-bin.07", tmp_path)
    wrong_count = StaticSchema(
        {
            ("test_db", "departments"): SourceTable(
                "test_db", "departments", (SourceColumn("a", "char"),), ("a",)
            )
        }
    )
    with pytest.raises(DecodeError, match="the binlog has 2 columns but the source schema has 1"):
        list(
            TransactionReader(schema=wrong_count).read(BinlogFiles(path).events(Position(path.name, 4), None))
        )
    wrong_type = StaticSchema(
        {
            ("test_db", "departments"): SourceTable(
                "test_db",
                "departments",
                (SourceColumn("dept_no", "int"), SourceColumn("dept_name", "varchar", charset="utf8mb3")),
                ("dept_no",),
            )
        }
    )
    with pytest.raises(
        DecodeError, match="dept_no: the binlog has type STRING but the source schema says int"
    ):
        list(
            TransactionReader(schema=wrong_type).read(BinlogFiles(path).events(Position(path.name, 4), None))
        )


@pytest.mark.parametrize("rel", sorted(set(FILES) - set(NEGATIVE)))
def test_rows_handed_out_before_the_commit_add_up_to_the_same_transactions(rel: str, tmp_path: Path) -> None:
    """With ``max_open_changes`` (a large transaction's rows handed out before its commit), the
    rows handed out followed by the committed transaction's are the transaction's rows, and a
    transaction that never commits hands out rows only to take them back."""
    path = prepare(BINLOG_TESTDATA / rel, tmp_path)
    schema = SCHEMAS.get(rel)
    whole = [
        (tx.start, tx.end, tx.seqno, [(b.op, b.rows) for b in tx.batches]) for tx in decode(path, schema)
    ]
    reader = TransactionReader(schema=schema, strict=False, max_open_changes=1)
    pieces: list[tuple[Any, Any, Any, list[Any]]] = []
    held: list[Any] = []
    for item in reader.read(BinlogFiles(path).events(Position(path.name, 4), None)):
        if isinstance(item, OpenRows):
            held = [] if item.rolled_back else held + [(b.op, b.rows) for b in item.batches]
            continue
        pieces.append((item.start, item.end, item.seqno, held + [(b.op, b.rows) for b in item.batches]))
        held = []
    assert pieces == whole
