"""DECIMAL (NEWDECIMAL) binary format (``strings/decimal.c``: bin2decimal).

Digits are stored in groups of nine per 4 big-endian bytes, with a shorter leading and trailing
group; the sign is the inverted top bit, and negative numbers have every byte inverted.
"""

from __future__ import annotations

from decimal import Decimal

from loader.binlog.values import Reader

DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_size(precision: int, scale: int) -> int:
    """Bytes a DECIMAL(precision, scale) value takes."""
    intg = precision - scale
    return intg // 9 * 4 + DIG2BYTES[intg % 9] + scale // 9 * 4 + DIG2BYTES[scale % 9]


def decode_decimal(data: bytes, precision: int, scale: int) -> Decimal:
    """Decode one DECIMAL(precision, scale) value from exactly ``decimal_size`` bytes."""
    intg = precision - scale
    intg0, intg0x = divmod(intg, 9)
    frac0, frac0x = divmod(scale, 9)
    raw = bytearray(data)
    negative = not raw[0] & 0x80
    raw[0] ^= 0x80
    if negative:
        raw = bytearray(b ^ 0xFF for b in raw)
    pos = 0
    parts: list[str] = []
    n = DIG2BYTES[intg0x]
    if n:
        parts.append(str(int.from_bytes(raw[pos : pos + n], "big")))
        pos += n
    for _ in range(intg0):
        parts.append(f"{int.from_bytes(raw[pos : pos + 4], 'big'):09d}")
        pos += 4
    int_part = "".join(parts).lstrip("0") or "0"
    frac_parts: list[str] = []
    for _ in range(frac0):
        frac_parts.append(f"{int.from_bytes(raw[pos : pos + 4], 'big'):09d}")
        pos += 4
    n = DIG2BYTES[frac0x]
    if n:
        frac_parts.append(f"{int.from_bytes(raw[pos : pos + n], 'big'):0{frac0x}d}")
    text = int_part + ("." + "".join(frac_parts) if scale else "")
    return Decimal("-" + text if negative else text)


def decimal_reader(meta: int) -> Reader:
    """NEWDECIMAL reader; the metadata holds precision (high byte) and scale (low byte)."""
    precision, scale = meta >> 8, meta & 0xFF
    if precision < 1 or scale > precision:
        raise ValueError(f"invalid DECIMAL metadata precision={precision} scale={scale}")
    size = decimal_size(precision, scale)

    def read_decimal(buf: bytes, off: int) -> tuple[Decimal, int]:
        end = off + size
        if end > len(buf):
            raise IndexError("DECIMAL value runs past the event")
        return decode_decimal(buf[off:end], precision, scale), end

    return read_decimal
