"""Value readers: small pure functions over a row image.

Every reader has the form ``read(buf, off) -> (value, new_off)`` and is built once per column by
a factory that takes the column's metadata, so the row loop does no type dispatch. Layouts
mirror the server's ``sql/field.cc``, ``mysys/my_time.c``, ``strings/decimal.c`` and
``sql-common/json_binary.cc``; each module names the part it mirrors.
"""

from collections.abc import Callable
from typing import Any

Reader = Callable[[bytes, int], tuple[Any, int]]


def lenenc(data: bytes, pos: int) -> tuple[int, int]:
    """A length-encoded integer (1, 3, 4 or 9 bytes) at ``pos``; returns (value, next pos).

    Raises:
        ValueError: on a bad prefix or when it runs past ``data``.
    """
    if pos >= len(data):
        raise ValueError("length-encoded integer runs past its data")
    first = data[pos]
    if first < 0xFB:
        return first, pos + 1
    size = _LENENC_SIZES.get(first)
    if size is None:
        raise ValueError(f"bad length-encoded integer prefix {first:#x}")
    end = pos + 1 + size
    if end > len(data):
        raise ValueError("length-encoded integer runs past its data")
    return int.from_bytes(data[pos + 1 : end], "little"), end


_LENENC_SIZES = {0xFC: 2, 0xFD: 3, 0xFE: 8}
