"""Printing decoded changes, like ``mysqlbinlog -v``: as text for people, as JSON lines for tools.

JSON value forms: integers and floats as numbers; DECIMAL as a string (exact); binary values
as base64 strings; DATE/TIME/DATETIME/TIMESTAMP as ISO strings in the column's precision
(TIMESTAMP in UTC); JSON columns as their JSON text; ENUM and SET as their labels; BIT as a
number. ``commit_ts`` is ISO 8601 UTC with microseconds. A column a row image does not carry is
left out.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from loader.binlog.rowplan import ABSENT, JsonDiff
from loader.binlog.transactions import Transaction

_OPS = {"I": "INSERT INTO", "U": "UPDATE", "D": "DELETE FROM"}


def iso_utc(micros: int) -> str:
    """Microseconds since the epoch as ``2024-01-31T12:00:00.000000Z``."""
    return datetime.fromtimestamp(micros / 1_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def json_value(value: Any) -> Any:
    """A decoded value in the documented JSON form."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, JsonDiff):
        return {"json_diff": value.describe()}
    return value


def _image(names: tuple[str, ...], row: tuple[Any, ...] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {n: json_value(v) for n, v in zip(names, row, strict=True) if v is not ABSENT}


def jsonl(tx: Transaction) -> Iterator[str]:
    """One JSON line per decoded change row (updates as one line with before and after)."""
    commit = iso_utc(tx.commit_ts)
    for batch in tx.batches:
        names = batch.table.names
        for row_id, (before, after) in zip(batch.row_ids(), batch.rows, strict=True):
            yield json.dumps(
                {
                    "op": batch.op,
                    "schema": batch.table.schema,
                    "table": batch.table.table,
                    "seqno": tx.seqno,
                    "row_id": row_id,
                    "position": str(batch.position),
                    "commit_ts": commit,
                    "gtid": tx.gtid,
                    "before": _image(names, before),
                    "after": _image(names, after),
                },
                ensure_ascii=False,
            )


def _text_value(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"
    if isinstance(value, bytes):
        return "x'" + value.hex() + "'"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, JsonDiff):
        return "JSON_DIFF " + json.dumps(value.describe())
    return str(value)


def text(tx: Transaction) -> Iterator[str]:
    """The transaction as mysqlbinlog -v style lines."""
    yield f"# {tx.start} .. {tx.end}  seqno={tx.seqno}  commit={iso_utc(tx.commit_ts)}  gtid={tx.gtid or '-'}"
    for st in tx.statements:
        yield f"#   statement at {st.position} in `{st.schema}`: {st.query.strip()}"
    for batch in tx.batches:
        names = batch.table.names
        for row_id, (before, after) in zip(batch.row_ids(), batch.rows, strict=True):
            yield f"### {_OPS[batch.op]} `{batch.table.schema}`.`{batch.table.table}`  (row_id {row_id}, at {batch.position})"
            for label, image in (("WHERE", before), ("SET", after)):
                if image is None:
                    continue
                yield f"### {label}"
                for name, value in zip(names, image, strict=True):
                    if value is not ABSENT:
                        yield f"###   {name}={_text_value(value)}"
