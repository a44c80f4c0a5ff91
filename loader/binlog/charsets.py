"""Collation ids (as the binlog and the client protocol carry them) to Python codecs.

The id table is MariaDB 10.11's ``information_schema.COLLATION_CHARACTER_SET_APPLICABILITY``
plus the ids MySQL 8 added (76, 248-250 gb18030, 255-323 utf8mb4). MariaDB's ids 1024-2047 are
the NO PAD twins of id - 1024; ids from 2048 are its UCA 14.0 collations, charset in bits 8-12.
"""

from __future__ import annotations

import bisect
import codecs
import functools
from typing import Any

from loader.core.errors import DecodeError

BINARY_COLLATION = 63

# (first id, last id, charset), sorted.
_RANGES: tuple[tuple[int, int, str], ...] = (
    (1, 1, "big5"),
    (2, 2, "latin2"),
    (3, 3, "dec8"),
    (4, 4, "cp850"),
    (5, 5, "latin1"),
    (6, 6, "hp8"),
    (7, 7, "koi8r"),
    (8, 8, "latin1"),
    (9, 9, "latin2"),
    (10, 10, "swe7"),
    (11, 11, "ascii"),
    (12, 12, "ujis"),
    (13, 13, "sjis"),
    (14, 14, "cp1251"),
    (15, 15, "latin1"),
    (16, 16, "hebrew"),
    (18, 18, "tis620"),
    (19, 19, "euckr"),
    (20, 20, "latin7"),
    (21, 21, "latin2"),
    (22, 22, "koi8u"),
    (23, 23, "cp1251"),
    (24, 24, "gb2312"),
    (25, 25, "greek"),
    (26, 26, "cp1250"),
    (27, 27, "latin2"),
    (28, 28, "gbk"),
    (29, 29, "cp1257"),
    (30, 30, "latin5"),
    (31, 31, "latin1"),
    (32, 32, "armscii8"),
    (33, 33, "utf8mb3"),
    (34, 34, "cp1250"),
    (35, 35, "ucs2"),
    (36, 36, "cp866"),
    (37, 37, "keybcs2"),
    (38, 38, "macce"),
    (39, 39, "macroman"),
    (40, 40, "cp852"),
    (41, 42, "latin7"),
    (43, 43, "macce"),
    (44, 44, "cp1250"),
    (45, 46, "utf8mb4"),
    (47, 49, "latin1"),
    (50, 52, "cp1251"),
    (53, 53, "macroman"),
    (54, 55, "utf16"),
    (56, 56, "utf16le"),
    (57, 57, "cp1256"),
    (58, 59, "cp1257"),
    (60, 61, "utf32"),
    (62, 62, "utf16le"),
    (63, 63, "binary"),
    (64, 64, "armscii8"),
    (65, 65, "ascii"),
    (66, 66, "cp1250"),
    (67, 67, "cp1256"),
    (68, 68, "cp866"),
    (69, 69, "dec8"),
    (70, 70, "greek"),
    (71, 71, "hebrew"),
    (72, 72, "hp8"),
    (73, 73, "keybcs2"),
    (74, 74, "koi8r"),
    (75, 75, "koi8u"),
    (76, 76, "utf8mb3"),
    (77, 77, "latin2"),
    (78, 78, "latin5"),
    (79, 79, "latin7"),
    (80, 80, "cp850"),
    (81, 81, "cp852"),
    (82, 82, "swe7"),
    (83, 83, "utf8mb3"),
    (84, 84, "big5"),
    (85, 85, "euckr"),
    (86, 86, "gb2312"),
    (87, 87, "gbk"),
    (88, 88, "sjis"),
    (89, 89, "tis620"),
    (90, 90, "ucs2"),
    (91, 91, "ujis"),
    (92, 93, "geostd8"),
    (94, 94, "latin1"),
    (95, 96, "cp932"),
    (97, 98, "eucjpms"),
    (99, 99, "cp1250"),
    (101, 124, "utf16"),
    (128, 151, "ucs2"),
    (159, 159, "ucs2"),
    (160, 183, "utf32"),
    (192, 215, "utf8mb3"),
    (223, 223, "utf8mb3"),
    (224, 247, "utf8mb4"),
    (248, 250, "gb18030"),
    (255, 323, "utf8mb4"),
    (576, 578, "utf8mb3"),
    (608, 610, "utf8mb4"),
    (640, 642, "ucs2"),
    (672, 674, "utf16"),
    (736, 738, "utf32"),
)
_STARTS = [r[0] for r in _RANGES]
_UCA1400 = {8: "utf8mb3", 9: "utf8mb4", 10: "ucs2", 11: "utf16", 12: "utf32"}

# MySQL charset name -> Python codec. None: binary (values stay bytes).
_CODECS: dict[str, str | None] = {
    "binary": None,
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf8": "utf-8",
    "ascii": "ascii",
    "latin1": "mysql-latin1",
    "latin2": "iso8859_2",
    "latin5": "iso8859_9",
    "latin7": "iso8859_13",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "koi8r": "koi8_r",
    "koi8u": "koi8_u",
    "greek": "iso8859_7",
    "hebrew": "iso8859_8",
    "macroman": "mac_roman",
    "macce": "mac_latin2",
    "tis620": "tis_620",
    "sjis": "shift_jis",
    "cp932": "cp932",
    "ujis": "euc_jp",
    "big5": "big5",
    "gbk": "gbk",
    "gb2312": "gb2312",
    "gb18030": "gb18030",
    "euckr": "euc_kr",
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
}


# The codecs above of one byte per character, each byte decoded alone (charmap codecs).
_SINGLE_BYTE = frozenset(
    {"mysql-latin1", "cp1250", "cp1251", "cp1256", "cp1257", "cp850", "cp852", "cp866", "koi8_r", "koi8_u"}
    | {"iso8859_2", "iso8859_7", "iso8859_8", "iso8859_9", "iso8859_13", "mac_roman", "mac_latin2", "tis_620"}
)
UNDEFINED_BYTE = "\ufffe"


@functools.cache
def byte_table(codec: str) -> str | None:
    """For a codec of one byte per character, the 256 characters the bytes decode to
    (``UNDEFINED_BYTE`` where the codec refuses the byte); None for any other codec."""
    if codec not in _SINGLE_BYTE:
        return None
    table = []
    for b in range(256):
        try:
            table.append(bytes((b,)).decode(codec))
        except UnicodeDecodeError:
            table.append(UNDEFINED_BYTE)
    return "".join(table)


def charset_of(collation_id: int) -> str:
    """The charset name of a collation id; raises DecodeError for an id no server defines."""
    if collation_id >= 2048:
        name = _UCA1400.get(collation_id >> 8)
        if name:
            return name
    elif collation_id >= 1024:
        return charset_of(collation_id - 1024)
    else:
        i = bisect.bisect_right(_STARTS, collation_id) - 1
        if i >= 0 and _RANGES[i][0] <= collation_id <= _RANGES[i][1]:
            return _RANGES[i][2]
    raise DecodeError(f"unknown collation id {collation_id}")


def codec_for_charset(charset: str) -> str | None:
    """The Python codec for a MySQL charset name (None for binary).

    Raises:
        DecodeError: for a charset Python cannot decode exactly (armscii8, geostd8, ...).
    """
    try:
        return _CODECS[charset.lower()]
    except KeyError:
        raise DecodeError(f"charset {charset} cannot be decoded exactly; it is not supported") from None


def codec_for_collation(collation_id: int) -> str | None:
    """The Python codec for a collation id (None for binary)."""
    return codec_for_charset(charset_of(collation_id))


# MySQL's latin1 is Windows-1252 whose five undefined bytes map to the C1 control characters
# of the same number; Python's cp1252 refuses them.
_CP1252_DECODE = codecs.getdecoder("cp1252")
_CP1252_ENCODE = codecs.getencoder("cp1252")
_C1 = {0x81, 0x8D, 0x8F, 0x90, 0x9D}


def _latin1_decode(data: Any, errors: str = "strict") -> tuple[str, int]:
    data = bytes(data)
    if not any(b in _C1 for b in data):
        return _CP1252_DECODE(data, errors)
    return "".join(chr(b) if b in _C1 else _CP1252_DECODE(bytes((b,)))[0] for b in data), len(data)


def _latin1_encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
    if not any(ord(c) in _C1 for c in text):
        return _CP1252_ENCODE(text, errors)
    return b"".join(bytes((ord(c),)) if ord(c) in _C1 else _CP1252_ENCODE(c)[0] for c in text), len(text)


def _search(name: str) -> codecs.CodecInfo | None:
    if name in ("mysql-latin1", "mysql_latin1"):
        return codecs.CodecInfo(_latin1_encode, _latin1_decode, name="mysql-latin1")
    return None


codecs.register(_search)
