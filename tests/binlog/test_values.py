"""Value decoders on raw bytes built the way the server writes them."""

from __future__ import annotations

import random
from decimal import Decimal, localcontext

import pytest

from loader.binlog.charsets import charset_of, codec_for_collation
from loader.binlog.values import jsonb
from loader.binlog.values.decimal import DIG2BYTES, decimal_reader, decimal_size, decode_decimal
from loader.binlog.values.strings import string_meta
from loader.binlog.values.temporal import datetime2_reader, time2_reader, timestamp2_reader
from loader.core.errors import DecodeError


def encode_decimal(value: Decimal, precision: int, scale: int) -> bytes:
    """decimal2bin (strings/decimal.c), written independently of the decoder."""
    negative = value < 0
    with localcontext() as ctx:
        ctx.prec = 100  # the default 28 digits would round DECIMAL(65,30) values
        digits = format(abs(value), f".{scale}f")
    int_part, _, frac_part = digits.partition(".")
    intg = precision - scale
    int_part = int_part.rjust(intg, "0")[-intg:] if intg else ""
    out = bytearray()
    lead = intg % 9
    if lead:
        out += int(int_part[:lead]).to_bytes(DIG2BYTES[lead], "big")
    for i in range(lead, intg, 9):
        out += int(int_part[i : i + 9]).to_bytes(4, "big")
    for i in range(0, scale - scale % 9, 9):
        out += int(frac_part[i : i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(frac_part[scale - scale % 9 :]).to_bytes(DIG2BYTES[scale % 9], "big")
    out[0] ^= 0x80
    if negative:
        out = bytearray(b ^ 0xFF for b in out)
    return bytes(out)


@pytest.mark.parametrize(
    ("precision", "scale"), [(1, 0), (4, 2), (9, 9), (10, 4), (18, 0), (30, 25), (65, 30), (65, 0)]
)
def test_decimal_round_trip(precision: int, scale: int) -> None:
    rnd = random.Random(precision * 100 + scale)
    reader = decimal_reader(precision << 8 | scale)
    for _ in range(300):
        digits = "".join(rnd.choice("0123456789") for _ in range(precision))
        value = Decimal(
            f"{rnd.choice('-+')}{digits[: precision - scale] or '0'}.{digits[precision - scale :]}"
        )
        with localcontext() as ctx:
            ctx.prec = 100
            value = value.quantize(Decimal(1).scaleb(-scale)) if scale else Decimal(int(value))
        raw = encode_decimal(value, precision, scale)
        assert len(raw) == decimal_size(precision, scale)
        got, end = reader(raw + b"tail", 0)
        assert got == value and end == len(raw)
        assert format(got, "f") == format(value, "f")
        assert decode_decimal(raw, precision, scale) == value


def test_decimal_group_with_too_many_digits_is_an_error() -> None:
    reader = decimal_reader(4 << 8 | 2)
    with pytest.raises(ValueError, match="more digits"):
        reader(bytes([0x80 | 0x7F, 0x00]), 0)  # 127 in a 2-digit group


def test_time2_negative_fractions_at_every_precision() -> None:
    # TIME '-00:00:00.5' at fsp 1: intpart -1 (+offset), fraction 0x100 - 50 in one byte.
    assert time2_reader(1)(bytes.fromhex("7fffff") + bytes([0x100 - 50]), 0) == ("-00:00:00.5", 4)
    # TIME '-00:00:01.25' at fsp 2.
    assert time2_reader(2)(bytes.fromhex("7ffffe") + bytes([0x100 - 25]), 0) == ("-00:00:01.25", 4)
    # TIME '838:59:59' at fsp 0: 838 << 12 | 59 << 6 | 59, offset 0x800000.
    v = (838 << 12 | 59 << 6 | 59) + 0x800000
    assert time2_reader(0)(v.to_bytes(3, "big"), 0) == ("838:59:59", 3)


def test_datetime2_and_timestamp2() -> None:
    ymd = ((2024 * 13 + 2) << 5) | 29
    hms = 23 << 12 | 59 << 6 | 58
    raw = ((ymd << 17 | hms) + 0x8000000000).to_bytes(5, "big") + (123456).to_bytes(3, "big")
    assert datetime2_reader(6)(raw, 0) == ("2024-02-29 23:59:58.123456", 8)
    assert datetime2_reader(0)(raw[:5], 0) == ("2024-02-29 23:59:58", 5)
    assert timestamp2_reader(3)((1).to_bytes(4, "big") + (999 * 10).to_bytes(2, "big"), 0) == (
        "1970-01-01 00:00:01.999",
        6,
    )
    assert timestamp2_reader(0)(bytes(4), 0) == ("0000-00-00 00:00:00", 4)


def test_string_metadata_of_long_char_columns() -> None:
    assert string_meta(65204) == (254, 180)  # CHAR(60) utf8mb3
    assert string_meta(56832) == (254, 512)  # CHAR(128) utf8mb4: the length's high bits folded in
    assert string_meta(63233) == (247, 1)  # ENUM, 1 byte


def test_charsets() -> None:
    assert charset_of(255) == "utf8mb4" and charset_of(8) == "latin1" and charset_of(2304) == "utf8mb4"
    assert codec_for_collation(63) is None
    # MySQL's latin1 keeps the five bytes Windows-1252 leaves undefined.
    codec = codec_for_collation(8)
    assert codec is not None and b"\x80\x81\xe9".decode(codec) == "\u20ac\x81é"
    with pytest.raises(DecodeError, match="unknown collation id 4000"):
        charset_of(4000)


def _small_object(items: list[tuple[str, int, bytes]]) -> bytes:
    """A small JSON object whose values are inlined (type, 2-byte value)."""
    header = 4 + len(items) * (4 + 3)
    keys = b"".join(k.encode() for k, _, _ in items)
    entries = b""
    key_off = header
    for k, _, _ in items:
        entries += key_off.to_bytes(2, "little") + len(k.encode()).to_bytes(2, "little")
        key_off += len(k.encode())
    for _, t, v in items:
        entries += bytes([t]) + v
    body = entries + keys
    return len(items).to_bytes(2, "little") + (4 + len(body)).to_bytes(2, "little") + body


def test_binary_json_text() -> None:
    doc = bytes([jsonb.SMALL_OBJECT]) + _small_object(
        [("a", jsonb.INT16, (-5).to_bytes(2, "little", signed=True)), ("bb", jsonb.LITERAL, b"\x01\x00")]
    )
    assert jsonb.json_text(doc) == '{"a": -5, "bb": true}'
    assert jsonb.json_text(b"") == "null"
    assert jsonb.json_text(bytes([jsonb.STRING, 3]) + "é!".encode()) == '"é!"'
    with pytest.raises(jsonb.JsonbError):
        jsonb.json_text(bytes([jsonb.SMALL_OBJECT]) + b"\x05\x00")


def test_json_partial_update_paths() -> None:
    doc = {"a": [1, 2], "b c": {"x": 1}}
    diffs = [
        (jsonb.DIFF_REPLACE, jsonb.parse_path("$.a[1]"), 5),
        (jsonb.DIFF_INSERT, jsonb.parse_path('$."b c".new'), "v"),
        (jsonb.DIFF_REMOVE, jsonb.parse_path("$.a[0]"), None),
    ]
    assert jsonb.dumps(jsonb.apply_diffs(doc, diffs)) == '{"a": [5], "b c": {"x": 1, "new": "v"}}'
