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

from loader.binlog.values import Reader

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


Inline = Fixed | Prefixed


def compile_image_decoder(columns: Sequence[tuple[Inline | None, Reader]]) -> ImageDecoder:
    """A function ``(data, off) -> (row, new off)`` for a row image holding every column."""
    n = len(columns)
    nb = (n + 7) // 8
    env: dict[str, Any] = {"_from_bytes": int.from_bytes}
    lines = [
        "def decode_image(data, off):",
        f"    nulls = _from_bytes(data[off:off + {nb}], 'little')",
        f"    off += {nb}",
    ]
    for i, (inline, reader) in enumerate(columns):
        lines.append(f"    if nulls & {1 << i}:")
        lines.append(f"        v{i} = None")
        lines.append("    else:")
        if isinstance(inline, Fixed):
            env[f"u{i}"] = struct.Struct(inline.fmt).unpack_from
            lines.append(f"        v{i} = u{i}(data, off)[0]")
            lines.append(f"        off += {inline.size}")
        elif isinstance(inline, Prefixed):
            if inline.len_bytes == 1:
                lines.append("        n = data[off]")
            elif inline.len_bytes == 2:
                lines.append("        n = data[off] | data[off + 1] << 8")
            else:
                lines.append(f"        n = _from_bytes(data[off:off + {inline.len_bytes}], 'little')")
            lines.append(f"        off += {inline.len_bytes}")
            if inline.codec is None:
                lines.append(f"        v{i} = data[off:off + n]")
            else:
                env[f"c{i}"] = inline.codec
                lines.append(f"        v{i} = data[off:off + n].decode(c{i})")
            lines.append("        off += n")
        else:
            env[f"r{i}"] = reader
            lines.append(f"        v{i}, off = r{i}(data, off)")
    # Slices never fail on a short buffer: one check per row catches a value that ran past it.
    lines.append("    if off > len(data):")
    lines.append("        raise IndexError('row image runs past the event')")
    values = ", ".join(f"v{i}" for i in range(n))
    lines.append(f"    return ({values}{',' if n == 1 else ''}), off")
    exec(compile("\n".join(lines), "<row decoder>", "exec"), env)
    decoder: ImageDecoder = env["decode_image"]
    return decoder
