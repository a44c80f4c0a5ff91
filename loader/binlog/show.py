"""Printing decoded changes, like ``mysqlbinlog -v``: as text for people, as JSON lines for tools.

JSON value forms: integers and floats as numbers; DECIMAL as a string (exact); binary values
as base64 strings; DATE/TIME/DATETIME/TIMESTAMP as ISO strings in the column's precision
(TIMESTAMP in UTC); JSON columns as their JSON text; ENUM and SET as their labels; BIT as a
number. ``commit_ts`` is ISO 8601 UTC with microseconds. A column a row image does not carry is
left out.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any

from loader.binlog.rowplan import ABSENT, JsonDiff
from loader.binlog.transactions import Transaction

_OPS = {"I": "INSERT INTO", "U": "UPDATE", "D": "DELETE FROM"}


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso_utc(micros: int) -> str:
    """Microseconds since the epoch as ``2024-01-31T12:00:00.000000Z`` (exact: no float)."""
    return (_EPOCH + timedelta(microseconds=micros)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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


def _other(value: Any) -> str:
    return _encode(json_value(value))


def _float(value: float) -> str:
    # What the encoder writes: the shortest repr, and NaN or Infinity for the others.
    return float.__repr__(value) if value - value == 0 else _encode(value)


# A value's JSON text by its type, as ``_encode(json_value(value))`` writes it; other types
# (a JSON column's partial update, ...) take ``_other``.
_BY_TYPE: dict[type, Callable[[Any], str]] = {
    int: int.__repr__,
    str: encode_basestring,
    float: _float,
    Decimal: lambda v: '"' + format(v, "f") + '"',
    bytes: lambda v: '"' + base64.b64encode(v).decode("ascii") + '"',
}


def _generic_image(names: tuple[str, ...], row: tuple[Any, ...]) -> str:
    return _encode({n: json_value(v) for n, v in zip(names, row, strict=True) if v is not ABSENT})


@functools.lru_cache(maxsize=1024)
def _image_encoder(names: tuple[str, ...]) -> Callable[[tuple[Any, ...]], str]:
    """An image's JSON object in one f-string (generated once per table's column names); an
    image leaving columns out (``ABSENT``) takes the general path."""
    n = len(names)
    env: dict[str, Any] = {"_by": _BY_TYPE.get, "_other": _other, "_absent": ABSENT, "_names": names}
    env["_generic"] = _generic_image
    env.update({f"k{i}": _encode(name) for i, name in enumerate(names)})
    fields = ", ".join(
        f"{{k{i}}}: {{'null' if v{i} is None else _by(type(v{i}), _other)(v{i})}}" for i in range(n)
    )
    unpack = "".join(f"v{i}, " for i in range(n))
    code = (
        "def image(row):\n"
        "    if _absent in row:\n"
        "        return _generic(_names, row)\n"
        + (f"    {unpack}= row\n" if n else "")
        + f'    return f"{{{{{fields}}}}}"\n'
    )
    exec(compile(code, "<json image encoder>", "exec"), env)
    encoder: Callable[[tuple[Any, ...]], str] = env["image"]
    return encoder


def jsonl(tx: Transaction) -> Iterator[str]:
    """One JSON line per decoded change row (updates as one line with before and after).

    Keys in the order op, schema, table, seqno, row_id, position, commit_ts, gtid, before, after;
    the fields a rows event's rows share are encoded once for all of them."""
    shared = f', "commit_ts": {_encode(iso_utc(tx.commit_ts))}, "gtid": {_encode(tx.gtid)}, "before": '
    seqno = _encode(tx.seqno)
    for batch in tx.batches:
        image = _image_encoder(batch.table.names)
        head = (
            f'{{"op": {_encode(batch.op)}, "schema": {_encode(batch.table.schema)}, '
            f'"table": {_encode(batch.table.table)}, "seqno": {seqno}, "row_id": '
        )
        middle = f', "position": {_encode(str(batch.position))}{shared}'
        if batch.encoded is not None:  # the native decoder's JSON images: its lines whole
            yield batch.encoded.json_lines(head.encode(), batch.first_row_id, middle.encode()).decode()
            continue
        for row_id, (before, after) in zip(batch.row_ids(), batch.rows, strict=True):
            before_json = "null" if before is None else image(before)
            after_json = "null" if after is None else image(after)
            yield f'{head}{row_id}{middle}{before_json}, "after": {after_json}}}'


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
