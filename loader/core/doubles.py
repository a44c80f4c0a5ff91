"""A double's text as each server writes it, from its shortest round-trip digits (``repr``'s).

MariaDB's ``CAST(x AS CHAR)`` (``server_text``) and MySQL's JSON text (``mysql_json_text``:
``my_gcvt`` at the JSON width, then ``.0`` on a whole number; MySQL's own ``CAST(x AS CHAR)`` keeps
only as many digits as 22 characters hold, so the checksum reads MySQL's doubles through JSON). The
binlog decoder writes MySQL's JSON numbers with it, and the checksum's warehouse side the source's
text of a double. Self-contained: Spark ships these functions to its Python workers by value,
where the loader is not installed.
"""

from __future__ import annotations

from typing import overload


def _digits(value: float) -> tuple[str, str, int]:
    """``(sign, digits, point)`` of a double other than zero: ``sign 0.<digits> × 10**point``,
    the digits the shortest that read back as it."""
    text = repr(value)
    sign = "-" if text.startswith("-") else ""
    mantissa, _, exp = text.lstrip("-").partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    significant = digits.strip("0")
    point = len(whole) + int(exp or 0) - (len(digits) - len(digits.lstrip("0")))
    return sign, significant, point


def _laid_out(sign: str, digits: str, point: int, fixed: bool, whole_suffix: str) -> str:
    n = len(digits)
    if not fixed:  # 1.5e-16, 1e15: no '+', no padded exponent
        return f"{sign}{digits[0]}{'.' + digits[1:] if n > 1 else ''}e{point - 1}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point < n:
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits}{'0' * (point - n)}{whole_suffix}"


def server_text(value: float | None) -> str | None:
    """MariaDB's ``CAST(x AS CHAR)``: fixed from 1e-15 up to below 1e15 (``0.0000001``,
    ``123456789012345.67``, ``100``), else ``1e15``, ``1.2345678901234568e17``; zero is ``0``.
    Verified against the server on thousands of doubles (``tests/warehouse/test_checksum.py``)."""
    if value is None:
        return None
    if value == 0:
        return "0"
    sign, digits, point = _digits(value)
    return _laid_out(sign, digits, point, -15 < point <= 15, "")


@overload
def mysql_json_text(value: float) -> str: ...
@overload
def mysql_json_text(value: None) -> None: ...
def mysql_json_text(value: float | None) -> str | None:
    """MySQL's JSON text of a double: fixed from 1e-15 up to below 1e15, and above while every
    digit comes before the point (``0.0000001``, ``100.0``, ``1234567890123456.8``), else ``1e15``,
    ``9.007199254740992e15``; ``0.0``, ``-0.0``. Verified against the server on generated
    documents (``tests/binlog/test_mysql_json.py``)."""
    if value is None:
        return None
    if value == 0:
        return repr(value)
    sign, digits, point = _digits(value)
    return _laid_out(sign, digits, point, point >= -14 and (point <= 15 or len(digits) > point), ".0")
