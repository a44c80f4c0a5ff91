"""Generated row-image decoders: one Python function per table plan.

The row loop is the hot path of the whole loader. A generated function decodes a full row
image with the fixed-width and length-prefixed columns read inline (no call per value), and
calls the value readers only for the types that need real work (DECIMAL, temporal, JSON...).
The generated code names nothing from the binlog: column specs become local variables.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from loader.binlog.values import Reader, temporal

ImageDecoder = Callable[[bytes, int], tuple[tuple[Any, ...], int]]


@dataclass(frozen=True, slots=True)
class Fixed:
    """A value read with one struct format ('<i', '<d', ...)."""

    fmt: str
    size: int


@dataclass(frozen=True, slots=True)
class Prefixed:
    """A value prefixed by its length in ``len_bytes`` little-endian bytes; decoded by ``codec``."""

    len_bytes: int
    codec: str | None


@dataclass(frozen=True, slots=True)
class Datetime2:
    """A DATETIME2 of ``fsp`` fractional digits (see ``values.temporal.datetime2_reader``)."""

    fsp: int


@dataclass(frozen=True, slots=True)
class Date:
    """A DATE (see ``values.temporal.date_reader``)."""


@dataclass(frozen=True, slots=True)
class EnumLabel:
    """An ENUM of ``size`` bytes whose labels are known (see ``values.strings.enum_reader``)."""

    size: int
    labels: tuple[str, ...]


Inline = Fixed | Prefixed | Datetime2 | Date | EnumLabel


def generic_image_decoder(readers: Sequence[Reader]) -> ImageDecoder:
    """The plain loop over one reader per column: for rows the generated code does not take."""
    n = len(readers)
    nb = (n + 7) // 8

    def decode_image(data: bytes, off: int) -> tuple[tuple[Any, ...], int]:
        nulls = int.from_bytes(data[off : off + nb], "little")
        off += nb
        values: list[Any] = []
        append = values.append
        for i, read in enumerate(readers):
            if nulls >> i & 1:
                append(None)
            else:
                v, off = read(data, off)
                append(v)
        if off > len(data):
            raise IndexError("row image runs past the event")
        return tuple(values), off

    return decode_image


def compile_image_decoder(
    columns: Sequence[tuple[Inline | None, Reader]], not_null: Sequence[bool] | None = None
) -> ImageDecoder:
    """A function ``(data, off) -> (row, new off)`` for a row image holding every column.

    Columns declared NOT NULL skip the null test, and runs of them with fixed widths are read
    with one struct call. A row that has NULL in such a column anyway is handed to the plain
    loop, so the declaration is an optimisation, never a trust.
    """
    n = len(columns)
    nb = (n + 7) // 8
    not_null = list(not_null) if not_null is not None else [False] * n
    mask = sum(1 << i for i, flag in enumerate(not_null) if flag)
    env: dict[str, Any] = {
        "_from_bytes": int.from_bytes,
        "_generic": generic_image_decoder([reader for _, reader in columns]),
    }
    lines = [
        "def decode_image(data, off):",
        f"    nulls = _from_bytes(data[off:off + {nb}], 'little')",
    ]
    if mask:
        lines.append(f"    if nulls & {mask}:")
        lines.append("        return _generic(data, off)")
    lines.append(f"    off += {nb}")
    i = 0
    while i < n:
        inline, reader = columns[i]
        if not_null[i] and isinstance(inline, Fixed):
            run = [i]
            while run[-1] + 1 < n and not_null[run[-1] + 1] and isinstance(columns[run[-1] + 1][0], Fixed):
                run.append(run[-1] + 1)
            fixed = [columns[j][0] for j in run]
            fmt = "<" + "".join(f.fmt.lstrip("<") for f in fixed if isinstance(f, Fixed))
            size = sum(f.size for f in fixed if isinstance(f, Fixed))
            env[f"u{i}"] = struct.Struct(fmt).unpack_from
            targets = ", ".join(f"v{j}" for j in run)
            lines.append(f"    {targets}{',' if len(run) == 1 else ''} = u{i}(data, off)")
            lines.append(f"    off += {size}")
            i = run[-1] + 1
            continue
        indent = "    "
        if not not_null[i]:
            lines.append(f"    if nulls & {1 << i}:")
            lines.append(f"        v{i} = None")
            lines.append("    else:")
            indent = "        "
        lines.extend(indent + line for line in _read_lines(i, inline, reader, env))
        i += 1
    # Slices never fail on a short buffer: one check per row catches a value that ran past it.
    lines.append("    if off > len(data):")
    lines.append("        raise IndexError('row image runs past the event')")
    values = ", ".join(f"v{i}" for i in range(n))
    lines.append(f"    return ({values}{',' if n == 1 else ''}), off")
    exec(compile("\n".join(lines), "<row decoder>", "exec"), env)
    decoder: ImageDecoder = env["decode_image"]
    return decoder


def _read_lines(i: int, inline: Inline | None, reader: Reader, env: dict[str, Any]) -> list[str]:
    if isinstance(inline, Fixed):
        env[f"u{i}"] = struct.Struct(inline.fmt).unpack_from
        return [f"v{i} = u{i}(data, off)[0]", f"off += {inline.size}"]
    if isinstance(inline, Prefixed):
        if inline.len_bytes == 1:
            out = ["n = data[off]"]
        elif inline.len_bytes == 2:
            out = ["n = data[off] | data[off + 1] << 8"]
        else:
            out = [f"n = _from_bytes(data[off:off + {inline.len_bytes}], 'little')"]
        out.append(f"off += {inline.len_bytes}")
        if inline.codec is None:
            out.append(f"v{i} = data[off:off + n]")
        else:
            env[f"c{i}"] = inline.codec
            out.append(f"v{i} = data[off:off + n].decode(c{i})")
        out.append("off += n")
        return out
    env[f"r{i}"] = reader
    if isinstance(inline, Datetime2):
        # The reader's own steps, inline; the rare negative value takes the reader.
        size = 5 + (inline.fsp + 1) // 2
        scale = (0, 10000, 10000, 100, 100, 1, 1)[inline.fsp]
        env.update(_dt_ofs=temporal.DATETIMEF_INT_OFS, _gd=temporal.DATES.get, _gc=temporal.CLOCKS.get)
        env.update(_dt=temporal.date_text, _ct=temporal.clock_text)
        out = [
            "t = _from_bytes(data[off:off + 5], 'big') - _dt_ofs",
            "if t < 0:",
            f"    v{i}, off = r{i}(data, off)",
            "else:",
            "    d = t >> 17",
            "    c = t & 0x1FFFF",
            f"    v{i} = (_gd(d) or _dt(d)) + ' ' + (_gc(c) or _ct(c))",
        ]
        if inline.fsp:
            out.append(
                f"    v{i} += '.' + str(1000000 + _from_bytes(data[off + 5:off + {size}], 'big') * {scale})"
                f"[1:{1 + inline.fsp}]"
            )
        out.append(f"    off += {size}")
        return out
    if isinstance(inline, EnumLabel):
        # A label by its index (0: the empty string of an invalid value); an index beyond the
        # labels takes the reader, which says so.
        env[f"e{i}"] = ("", *inline.labels)
        index = "data[off]" if inline.size == 1 else "data[off] | data[off + 1] << 8"
        return [
            f"t = {index}",
            f"if t > {len(inline.labels)}:",
            f"    v{i}, off = r{i}(data, off)",
            "else:",
            f"    v{i} = e{i}[t]",
            f"    off += {inline.size}",
        ]
    if isinstance(inline, Date):
        env.update(_gd=temporal.DATES.get, _dt=temporal.date_text)
        return [
            "t = data[off] | data[off + 1] << 8 | data[off + 2] << 16",
            "d = (t >> 9) * 13 + ((t >> 5) & 15) << 5 | t & 31",
            f"v{i} = _gd(d) or _dt(d)",
            "off += 3",
        ]
    return [f"v{i}, off = r{i}(data, off)"]
