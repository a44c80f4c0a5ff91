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


# json.dumps(value, ensure_ascii=False), without making an encoder per call.
_encode = json.JSONEncoder(ensure_ascii=False).encode
# Values JSON takes as they are; the others go through json_value.
_PLAIN = frozenset({int, str, float, type(None)})


def _image(names: tuple[str, ...], row: tuple[Any, ...] | None) -> str:
    if row is None:
        return "null"
    return _encode(
        {
            n: v if type(v) in _PLAIN else json_value(v)
            for n, v in zip(names, row, strict=True)
            if v is not ABSENT
        }
    )


def jsonl(tx: Transaction) -> Iterator[str]:
    """One JSON line per decoded change row (updates as one line with before and after).

    Keys in the order op, schema, table, seqno, row_id, position, commit_ts, gtid, before, after;
    the fields a rows event's rows share are encoded once for all of them."""
    shared = f', "commit_ts": {_encode(iso_utc(tx.commit_ts))}, "gtid": {_encode(tx.gtid)}, "before": '
    seqno = _encode(tx.seqno)
    for batch in tx.batches:
        names = batch.table.names
        head = (
            f'{{"op": {_encode(batch.op)}, "schema": {_encode(batch.table.schema)}, '
            f'"table": {_encode(batch.table.table)}, "seqno": {seqno}, "row_id": '
        )
        middle = f', "position": {_encode(str(batch.position))}{shared}'
        for row_id, (before, after) in zip(batch.row_ids(), batch.rows, strict=True):
            yield f'{head}{row_id}{middle}{_image(names, before)}, "after": {_image(names, after)}}}'


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
