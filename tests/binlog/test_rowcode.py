"""Generated row decoders agree with the plain per-column loop, NULLs included."""

from __future__ import annotations

import struct

import pytest

from loader.binlog.rowcode import EnumLabel, Fixed, Prefixed, compile_image_decoder, generic_image_decoder
from loader.binlog.values import numeric, strings


def test_generated_decoder_matches_the_plain_loop_even_for_null_in_not_null_columns() -> None:
    columns = [
        (Fixed("<q", 8), numeric.int_reader(8, False)),
        (Fixed("<i", 4), numeric.int_reader(4, False)),
        (Prefixed(1, "utf-8"), strings.varchar_reader(10, "utf-8")),
        (Fixed("<H", 2), numeric.int_reader(2, True)),
    ]
    not_null = [True, True, False, True]
    generated = compile_image_decoder(columns, not_null)
    plain = generic_image_decoder([r for _, r in columns])
    rows = {
        "all values": b"\x00" + struct.pack("<qi", -5, 7) + b"\x03h\xc3\xa9" + struct.pack("<H", 65535),
        "a NULL where allowed": b"\x04" + struct.pack("<qi", 1, 2) + struct.pack("<H", 3),
        "a NULL in a NOT NULL column": b"\x01" + struct.pack("<i", 2) + b"\x01x" + struct.pack("<H", 3),
    }
    expected = {
        "all values": ((-5, 7, "hé", 65535), 19),
        "a NULL where allowed": ((1, 2, None, 3), 15),
        "a NULL in a NOT NULL column": ((None, 2, "x", 3), 9),
    }
    for name, data in rows.items():
        assert generated(data, 0) == plain(data, 0) == expected[name], name


def test_an_enum_decoded_in_place_matches_its_reader() -> None:
    labels = ("new", "paid", 'say "hi"')
    for size in (1, 2):
        columns = [(EnumLabel(size, labels), strings.enum_reader(size, labels))]
        generated = compile_image_decoder(columns, [False])
        plain = generic_image_decoder([r for _, r in columns])
        for index, label in ((0, ""), (1, "new"), (3, 'say "hi"')):
            data = b"\x00" + index.to_bytes(size, "little")
            assert generated(data, 0) == plain(data, 0) == ((label,), 1 + size)
        beyond = b"\x00" + (4).to_bytes(size, "little")
        with pytest.raises(ValueError, match="ENUM index 4 beyond its 3 labels"):
            generated(beyond, 0)
