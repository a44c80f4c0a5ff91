"""CHAR, VARCHAR, BINARY, VARBINARY, BLOB/TEXT, ENUM, SET, GEOMETRY and VECTOR.

``sql/field.cc``: Field_string::pack, Field_varstring::pack, Field_blob::pack, Field_enum,
Field_set. Text is decoded strictly by the column's charset (a codec of ``charsets``); a value
that does not decode raises instead of being mangled. ``codec=None`` keeps bytes (binary
columns, or text whose charset is not known).
"""

from __future__ import annotations

from loader.binlog.constants import ColumnType
from loader.binlog.values import Reader


def _finish(data: bytes, codec: str | None) -> bytes | str:
    return data if codec is None else data.decode(codec)


def string_meta(meta: int) -> tuple[int, int]:
    """(real type, max length in bytes) of a STRING column from its 2-byte metadata.

    The high byte holds the real type (STRING, ENUM or SET) with bits 4-5 of the length
    folded in, inverted, for lengths over 255 (``Field_string::do_save_field_metadata``).
    """
    byte0, byte1 = meta >> 8, meta & 0xFF
    if byte0 and (byte0 & 0x30) != 0x30:
        return byte0 | 0x30, byte1 | (((byte0 & 0x30) ^ 0x30) << 4)
    return byte0, byte1


def varchar_reader(max_len: int, codec: str | None) -> Reader:
    """VARCHAR/VARBINARY: a 1-byte length when the column holds at most 255 bytes, else 2."""
    if max_len < 256:

        def read_varchar1(buf: bytes, off: int) -> tuple[bytes | str, int]:
            end = off + 1 + buf[off]
            if end > len(buf):
                raise IndexError("VARCHAR value runs past the event")
            return _finish(buf[off + 1 : end], codec), end

        return read_varchar1

    def read_varchar2(buf: bytes, off: int) -> tuple[bytes | str, int]:
        end = off + 2 + (buf[off] | buf[off + 1] << 8)
        if end > len(buf):
            raise IndexError("VARCHAR value runs past the event")
        return _finish(buf[off + 2 : end], codec), end

    return read_varchar2


def char_reader(max_len: int, codec: str | None, pad_binary: bool) -> Reader:
    """CHAR/BINARY: length-prefixed like VARCHAR, trailing pad stripped by the server.

    BINARY(n) is padded with zero bytes, which the binlog drops; ``pad_binary`` restores them
    so the value equals what SELECT returns.
    """
    inner = varchar_reader(max_len, codec)
    if not pad_binary:
        return inner

    def read_binary(buf: bytes, off: int) -> tuple[bytes | str, int]:
        value, end = inner(buf, off)
        assert isinstance(value, bytes)
        return value.ljust(max_len, b"\x00"), end

    return read_binary


def blob_reader(pack_len: int, codec: str | None) -> Reader:
    """BLOB/TEXT (also GEOMETRY, JSON text, VECTOR): a 1-4 byte little-endian length, then data."""
    if not 1 <= pack_len <= 4:
        raise ValueError(f"invalid BLOB length size {pack_len}")

    def read_blob(buf: bytes, off: int) -> tuple[bytes | str, int]:
        start = off + pack_len
        end = start + int.from_bytes(buf[off:start], "little")
        if end > len(buf) or start > len(buf):
            raise IndexError("BLOB value runs past the event")
        return _finish(buf[start:end], codec), end

    return read_blob


def enum_reader(size: int, labels: tuple[str, ...] | None) -> Reader:
    """ENUM: 1 or 2 byte index (1-based; 0 is the empty string of an invalid value).

    Returns the label when the labels are known, else the index.
    """
    if size not in (1, 2):
        raise ValueError(f"invalid ENUM size {size}")

    def read_enum(buf: bytes, off: int) -> tuple[int | str, int]:
        end = off + size
        if end > len(buf):
            raise IndexError("ENUM value runs past the event")
        idx = int.from_bytes(buf[off:end], "little")
        if labels is None:
            return idx, end
        if idx == 0:
            return "", end
        if idx > len(labels):
            raise ValueError(f"ENUM index {idx} beyond its {len(labels)} labels")
        return labels[idx - 1], end

    return read_enum


def set_reader(size: int, labels: tuple[str, ...] | None) -> Reader:
    """SET: a 1-8 byte little-endian bitmask; returns 'a,b' when labels are known, else the mask."""
    if not 1 <= size <= 8:
        raise ValueError(f"invalid SET size {size}")

    def read_set(buf: bytes, off: int) -> tuple[int | str, int]:
        end = off + size
        if end > len(buf):
            raise IndexError("SET value runs past the event")
        mask = int.from_bytes(buf[off:end], "little")
        if labels is None:
            return mask, end
        if mask >> len(labels):
            raise ValueError(f"SET bitmask {mask:#x} has bits beyond its {len(labels)} labels")
        return ",".join(label for i, label in enumerate(labels) if mask >> i & 1), end

    return read_set


def string_column_reader(
    meta: int, codec: str | None, labels: tuple[str, ...] | None, binary: bool
) -> tuple[int, Reader]:
    """The reader of a STRING-typed column by its real type; returns (real type, reader)."""
    real_type, max_len = string_meta(meta)
    if real_type == ColumnType.ENUM:
        return real_type, enum_reader(max_len, labels)
    if real_type == ColumnType.SET:
        return real_type, set_reader(max_len, labels)
    return ColumnType.STRING, char_reader(max_len, codec, pad_binary=binary)
