"""The staging CSV dialect: written by the extractor, read by Spark and by the merge's own reader,
every value intact."""

from __future__ import annotations

import base64
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from loader.core.errors import CsvValueError
from loader.staging import csvformat
from loader.staging.csvformat import encode_value, header_line, row_line
from tests.conftest import read_staged_by

TEXTS = [
    "",
    "\\N",
    "null",
    "NULL",
    '"',
    '""',
    "a,b",
    "\r\n",
    "\n",
    "\r",
    "\x00",
    "nul\x00inside",
    "emoji 🚀 and ü",
    " leading and trailing ",
    "\t",
    "'single'",
    ",",
    "x" * 1_000_000,
]
BINARIES = [bytes(range(256)), b"", b"\x00", b'"quote",comma\n']
INTS = [-(2**63), 2**63 - 1, 0, -1]
UNSIGNED = [2**64 - 1, 0, 2**63]
DECIMALS = [
    Decimal("-" + "9" * 35 + "." + "9" * 30),
    Decimal("0E-30"),
    Decimal("1.000000000000000000000000000001"),
]
DOUBLES = [1.7976931348623157e308, 5e-324, -2.2250738585072014e-308, 0.1, -0.0]
FLOATS = [struct.unpack("<f", struct.pack("<f", x))[0] for x in (3.4028234663852886e38, 1.1, -1e-45)]
TEMPORALS = ["2024-02-29 12:34:56.123456", "0000-00-00 00:00:00", "-838:59:59.000000", "9999-12-31"]
COLUMNS = ["txt", "bin", "i64", "u64", "dec", "dbl", "flt", "tmp"]


def _rows() -> list[tuple[Any, ...]]:
    n = max(len(TEXTS), len(BINARIES), len(INTS), len(UNSIGNED), len(DECIMALS), len(DOUBLES), len(FLOATS))

    def pick(values: list[Any], i: int) -> Any:
        return values[i % len(values)]

    rows = [
        (
            pick(TEXTS, i),
            pick(BINARIES, i),
            pick(INTS, i),
            pick(UNSIGNED, i),
            pick(DECIMALS, i),
            pick(DOUBLES, i),
            pick(FLOATS, i),
            pick(TEMPORALS, i),
        )
        for i in range(n)
    ]
    rows.append((None,) * len(COLUMNS))
    return rows


def test_fields() -> None:
    assert encode_value(None) == ""
    assert encode_value("") == '""'
    assert encode_value('a"b') == '"a""b"'
    assert encode_value(2**64 - 1) == "18446744073709551615"
    assert encode_value(Decimal("1E-8")) == "0.00000001"
    assert encode_value(b"\x00\xff") == '"AP8="'
    assert encode_value(0.1) == "0.1"
    assert header_line(["a,b", 'q"']) == '"op","seqno","row_id","commit_ts","a,b","q"""\n'
    assert row_line("D", 7, 0, "2024-01-01 00:00:00.000000", (1, None, "")) == (
        'D,7,0,"2024-01-01 00:00:00.000000",1,,""\n'
    )


def test_the_empty_marker_and_unknown_values_are_refused() -> None:
    with pytest.raises(CsvValueError, match="marker"):
        encode_value(csvformat.EMPTY_MARKER)
    with pytest.raises(CsvValueError, match="cannot be staged"):
        encode_value(object())


def test_the_generated_row_encoder_writes_what_row_line_writes() -> None:
    kinds = ["text", "binary", "int", "int", "decimal", "float", "float", "temporal"]
    encode = csvformat.row_encoder(kinds)
    general = csvformat.row_encoder(["any"] * len(kinds))
    for row in _rows():
        expected = row_line("U", 12, 3, "2024-01-01 00:00:00.000000", row)
        assert encode("U", 12, 3, "2024-01-01 00:00:00.000000", row) == expected
        assert general("U", 12, 3, "2024-01-01 00:00:00.000000", row) == expected
    with pytest.raises(CsvValueError, match="marker"):
        encode("I", 1, 0, "2024-01-01 00:00:00", (csvformat.EMPTY_MARKER, None, 1, 1, None, None, None, None))
    assert csvformat.row_encoder([])("D", 1, 0, "t", ()) == 'D,1,0,"t",\n'


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("reader", ["spark", "here"])
def test_spark_reads_back_every_value(spark: Any, tmp_path: Path, reader: str) -> None:
    rows = _rows()
    path = tmp_path / "part-00000.csv"
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(header_line(COLUMNS))
        for i, row in enumerate(rows):
            f.write(row_line("I", 1 << 32 | 100, i, "2024-01-01 00:00:00.000001", row))
    df = read_staged_by(spark, reader, path, COLUMNS)
    df.createOrReplaceTempView("staged")
    got = spark.sql(
        """SELECT _loader_op AS op, CAST(_loader_seqno AS BIGINT) AS seqno,
                  CAST(_loader_row_id AS INT) AS row_id, _loader_commit_ts AS commit_ts, txt,
                  unbase64(bin) AS bin, CAST(i64 AS BIGINT) AS i64, CAST(u64 AS DECIMAL(20,0)) AS u64,
                  dec, CAST(dbl AS DOUBLE) AS dbl, CAST(flt AS FLOAT) AS flt, tmp
           FROM staged ORDER BY row_id"""
    ).collect()
    assert len(got) == len(rows)
    for i, (row, back) in enumerate(zip(rows, got, strict=True)):
        assert (back.op, back.seqno, back.row_id) == ("I", 1 << 32 | 100, i)
        assert back.commit_ts == "2024-01-01 00:00:00.000001"
        txt, binary, i64, u64, dec, dbl, flt, tmp = row
        assert back.txt == txt, f"row {i}"
        assert (bytes(back.bin) if back.bin is not None else None) == binary, f"row {i}"
        assert back.i64 == i64
        assert (int(back.u64) if back.u64 is not None else None) == u64
        # Spark decimals stop at 38 digits: DECIMAL(65,30) stays exact text here.
        assert back.dec == (format(dec, "f") if dec is not None else None)
        assert back.dbl == dbl and (dbl is None or str(back.dbl) == str(dbl))
        assert back.flt == flt
        assert back.tmp == tmp
    # The file itself is plain RFC 4180 that any CSV reader parses to the same text.
    import csv
    import sys

    csv.field_size_limit(sys.maxsize)

    with open(path, encoding="utf-8", newline="") as f:
        parsed = list(csv.reader(f))
    assert parsed[1][4] == "" and parsed[1][5] == base64.b64encode(BINARIES[0]).decode()


def test_the_merges_own_reader_keeps_quoted_newlines_nulls_and_empty_strings_and_names_a_bad_file() -> None:
    text = (
        header_line(["a\nb", "op"])
        + row_line("I", 5, 0, "t", (None, ""))
        + row_line("D", 6, 1, "t", ("x\r\ny", '"'))
    )
    parsed = csvformat.parse_staged(text.encode(), 2, "s/t/part-00000.csv")
    assert parsed.to_pylist() == [
        {"_c0": "I", "_c1": "5", "_c2": "0", "_c3": "t", "_c4": None, "_c5": ""},
        {"_c0": "D", "_c1": "6", "_c2": "1", "_c3": "t", "_c4": "x\r\ny", "_c5": '"'},
    ]
    with pytest.raises(CsvValueError, match=r"staging file s/t/part-00000.csv cannot be read: .*columns"):
        csvformat.parse_staged(text.encode() + b'I,7,0,"t"\n', 2, "s/t/part-00000.csv")
