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


def _groups(precision: int, scale: int) -> list[tuple[int, int]]:
    """(bits, decimal digits) of each digit group, last group first."""
    intg = precision - scale
    groups = [(DIG2BYTES[intg % 9] * 8, intg % 9)] + [(32, 9)] * (intg // 9)
    groups += [(32, 9)] * (scale // 9) + [(DIG2BYTES[scale % 9] * 8, scale % 9)]
    return [g for g in reversed(groups) if g[0]]


def decimal_reader(meta: int) -> Reader:
    """NEWDECIMAL reader; the metadata holds precision (high byte) and scale (low byte).

    The value is read as one big-endian integer whose digit groups are peeled off with the
    group loop unrolled for this precision and scale (generated once per column); the result
    equals ``decode_decimal``'s, exponent included, and a group holding more digits than it
    may is an error.
    """
    precision, scale = meta >> 8, meta & 0xFF
    if precision < 1 or precision > 65 or scale > precision or scale > 30:
        raise ValueError(f"invalid DECIMAL metadata precision={precision} scale={scale}")
    size = decimal_size(precision, scale)
    bits = size * 8
    sign_bit = 1 << (bits - 1)
    env: dict[str, object] = {
        "_from_bytes": int.from_bytes,
        "_Decimal": Decimal,
        "SIGN": sign_bit,
        "NEG": ((1 << bits) - 1) ^ sign_bit,
    }
    lines = [
        "def read_decimal(buf, off):",
        f"    end = off + {size}",
        "    if end > len(buf):",
        "        raise IndexError('DECIMAL value runs past the event')",
        "    raw = _from_bytes(buf[off:end], 'big')",
        "    neg = not raw & SIGN",
        "    raw ^= NEG if neg else SIGN",
    ]
    groups = _groups(precision, scale)
    terms, checks = [], []
    mult = 1
    for i, (nbits, digits) in enumerate(groups):
        last = i == len(groups) - 1
        lines.append(f"    g{i} = raw" if last else f"    g{i} = raw & {(1 << nbits) - 1}")
        if not last:
            lines.append(f"    raw >>= {nbits}")
        checks.append(f"g{i} >= {10**digits}")
        terms.append(f"g{i}" if mult == 1 else f"g{i} * {mult}")
        mult *= 10**digits
    lines.append(f"    if {' or '.join(checks) or 'False'}:")
    lines.append("        raise ValueError('DECIMAL digit group holds more digits than it may')")
    suffix = f"E-{scale}" if scale else ""
    lines.append(f"    text = str({' + '.join(terms) or '0'}) + {suffix!r}")
    lines.append("    return _Decimal('-' + text if neg else text), end")
    exec(compile("\n".join(lines), "<decimal reader>", "exec"), env)
    reader: Reader = env["read_decimal"]  # type: ignore[assignment]
    return reader
