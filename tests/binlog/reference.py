"""Helpers to compare decoded rows with ``mariadb-binlog -vv`` text and to open test binlogs."""

from __future__ import annotations

import calendar
import gzip
import re
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from loader.binlog.charsets import codec_for_charset
from loader.binlog.rowplan import ABSENT, PlanColumn

_ROW_START = re.compile(r"^### (INSERT INTO|UPDATE|DELETE FROM) `(.*)`\.`(.*)`$")
_VALUE = re.compile(r"^###   @(\d+)=(.*) /\* (.*?) meta=(\d+) nullable=(\d) is_null=(\d) \*/$")


@dataclass
class TextRow:
    """One row change as mariadb-binlog printed it."""

    op: str
    schema: str
    table: str
    before: dict[int, tuple[str, str]]  # column number -> (value text, type label)
    after: dict[int, tuple[str, str]]


def parse_decoded(text: str) -> list[TextRow]:
    """Every row change of a ``mariadb-binlog --base64-output=decode-rows -vv`` listing."""
    rows: list[TextRow] = []
    current: TextRow | None = None
    target: dict[int, tuple[str, str]] | None = None
    # Not splitlines(): raw bytes of binary values may look like Unicode line breaks.
    for line in text.split("\n"):
        m = _ROW_START.match(line)
        if m:
            op = {"INSERT INTO": "I", "UPDATE": "U", "DELETE FROM": "D"}[m.group(1)]
            current = TextRow(op, m.group(2), m.group(3), {}, {})
            rows.append(current)
            target = None
            continue
        if current is None:
            continue
        if line == "### WHERE":
            target = current.before
        elif line == "### SET":
            target = current.after
        else:
            v = _VALUE.match(line)
            if v and target is not None:
                target[int(v.group(1))] = (v.group(2).rstrip(), v.group(3))
            elif not line.startswith("###"):
                current = None
    return rows


def read_reference(binlog: Path) -> str | None:
    """The decoded text stored next to a test binlog, if any."""
    for suffix in (".decoded.txt", ".decoded.txt.gz"):
        p = binlog.with_name(binlog.name + suffix)
        if p.exists():
            data = p.read_bytes()
            if suffix.endswith(".gz"):
                data = gzip.decompress(data)
            return data.decode("utf-8", "surrogateescape")
    return None


def prepare(binlog: Path, tmp: Path) -> Path:
    """A copy of a test binlog under a numbered name (seqno needs one), gunzipped if needed."""
    name = binlog.name[:-3] if binlog.name.endswith(".gz") else binlog.name
    if not re.search(r"\.\d+$", name):
        name += ".000001"
    out = tmp / name
    if binlog.name.endswith(".gz"):
        out.write_bytes(gzip.decompress(binlog.read_bytes()))
    else:
        shutil.copyfile(binlog, out)
    return out


def _unescape(text: str) -> bytes:
    """mariadb-binlog escapes control bytes as \\xNN and prints every other byte as it is."""
    return re.sub(
        rb"\\x([0-9a-f]{2})",
        lambda m: bytes((int(m.group(1), 16),)),
        text[1:-1].encode("utf-8", "surrogateescape"),
    )


def matches(value: Any, text: str, label: str, column: PlanColumn) -> bool:
    """Whether a decoded value is what mariadb-binlog printed for it."""
    if value is ABSENT:
        return False
    if text == "NULL":
        return value is None
    if value is None:
        return False
    kind = label.split("(")[0].split("/")[0].strip()
    if kind in ("TINYINT", "SHORTINT", "MEDIUMINT", "INT", "LONGINT"):
        m = re.match(r"^(-?\d+)(?: \((\d+)\))?$", text)
        assert m, text
        return value in (int(m.group(1)), int(m.group(2) or m.group(1)))
    if kind == "FLOAT":
        return f"{value:g}" == text
    if kind == "DOUBLE":
        return abs(float(text) - value) <= 1e-6 * max(1.0, abs(value))
    if kind == "DECIMAL":
        return format(value, "f") == text
    if kind == "YEAR":
        return value == int(text)
    if kind == "DATE":
        return value.replace("-", ":") == text.strip("'")
    if kind in ("DATETIME", "TIME"):
        return value == text.strip("'")
    if kind == "TIMESTAMP":
        if value.startswith("0000-00-00"):
            return float(text) == 0
        whole, _, frac = value.partition(".")
        seconds = calendar.timegm(datetime.strptime(whole, "%Y-%m-%d %H:%M:%S").timetuple())
        return text == (f"{seconds}.{frac}" if frac else str(seconds))
    if kind == "ENUM":
        idx = int(text)
        return value == idx or (
            column.labels is not None and value == (column.labels[idx - 1] if idx else "")
        )
    if kind == "SET":
        mask = int(text[2:-1], 2)
        if isinstance(value, int):
            return value == mask
        assert column.labels is not None
        return value == ",".join(lbl for i, lbl in enumerate(column.labels) if mask >> i & 1)
    if kind == "BIT":
        return value == int(text[2:-1], 2)
    # Strings and blobs: compare the bytes.
    expected = _unescape(text)
    if isinstance(value, str):
        assert column.charset is not None
        codec = codec_for_charset(column.charset)
        assert codec is not None
        raw = value.encode(codec)
    else:
        raw = value
    # The binlog drops BINARY(n)'s zero padding and mariadb-binlog prints it as stored.
    return raw == expected or (column.charset is None and raw.rstrip(b"\0") == expected)
