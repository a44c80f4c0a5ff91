"""Integers, floating point, YEAR and BIT (``sql/field.cc``: Field_tiny ... Field_bit)."""

from __future__ import annotations

import struct

from loader.binlog.values import Reader

_INT_FORMATS = {1: "b", 2: "h", 4: "i", 8: "q"}


def int_reader(size: int, unsigned: bool) -> Reader:
    """Little-endian two's complement integer of 1, 2, 3, 4 or 8 bytes."""
    if size == 3:
        if unsigned:

            def read_u24(buf: bytes, off: int) -> tuple[int, int]:
                return buf[off] | buf[off + 1] << 8 | buf[off + 2] << 16, off + 3

            return read_u24

        def read_i24(buf: bytes, off: int) -> tuple[int, int]:
            v = buf[off] | buf[off + 1] << 8 | buf[off + 2] << 16
            return (v - 0x1000000 if v & 0x800000 else v), off + 3

        return read_i24
    fmt = _INT_FORMATS[size]
    unpack = struct.Struct("<" + (fmt.upper() if unsigned else fmt)).unpack_from

    def read_int(buf: bytes, off: int) -> tuple[int, int]:
        return unpack(buf, off)[0], off + size

    return read_int


def float_reader() -> Reader:
    """FLOAT: 4-byte IEEE 754 single; returned as the Python float of the same value."""
    unpack = struct.Struct("<f").unpack_from

    def read_float(buf: bytes, off: int) -> tuple[float, int]:
        return unpack(buf, off)[0], off + 4

    return read_float


def double_reader() -> Reader:
    """DOUBLE: 8-byte IEEE 754 double."""
    unpack = struct.Struct("<d").unpack_from

    def read_double(buf: bytes, off: int) -> tuple[float, int]:
        return unpack(buf, off)[0], off + 8

    return read_double


def year_reader() -> Reader:
    """YEAR: one byte, years since 1900; 0 is the zero year."""

    def read_year(buf: bytes, off: int) -> tuple[int, int]:
        v = buf[off]
        return (1900 + v if v else 0), off + 1

    return read_year


def bit_reader(meta: int) -> Reader:
    """BIT(n): big-endian bytes, n = bytes * 8 + bits from the metadata; returned as an int."""
    nbits = (meta >> 8) * 8 + (meta & 0xFF)
    size = (nbits + 7) // 8

    def read_bit(buf: bytes, off: int) -> tuple[int, int]:
        end = off + size
        if end > len(buf):
            raise IndexError("BIT value runs past the event")
        return int.from_bytes(buf[off:end], "big"), end

    return read_bit
