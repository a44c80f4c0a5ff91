"""The checksum of a staging file as its manifest records it: ``<algorithm>:<hex digest>``.

Extract writes CRC-32 (zlib's, the checksum S3 and gzip use), taken from the bytes as they are
written; materialisation recomputes it over every file before applying anything. It guards
against what happens to files at rest (truncated, edited, replaced by another interval's file):
whoever could forge a checksum can rewrite the manifest and the ledger beside it, so a
cryptographic hash buys nothing here, and SHA-256 cost a fifth of a fast extraction's CPU.
Manifests of version 1 recorded SHA-256; their files are checked with it.
"""

from __future__ import annotations

import hashlib
import zlib

from loader.core.errors import ManifestError

WRITTEN = "crc32"


class RunningChecksum:
    """The checksum extract records, over the bytes of a file as they are written."""

    def __init__(self) -> None:
        self._crc = 0

    def update(self, data: bytes) -> None:
        self._crc = zlib.crc32(data, self._crc)

    def text(self) -> str:
        return f"{WRITTEN}:{self._crc:08x}"


def checksum(data: bytes, algorithm: str = WRITTEN) -> str:
    """``data``'s checksum with ``algorithm`` (``crc32``, or ``sha256`` of version-1 manifests)."""
    if algorithm == "crc32":
        return f"crc32:{zlib.crc32(data):08x}"
    if algorithm == "sha256":
        return f"sha256:{hashlib.sha256(data).hexdigest()}"
    raise ManifestError(f"checksum algorithm {algorithm!r} is not one this loader knows (crc32, sha256)")


def matches(data: bytes, recorded: str) -> bool:
    """Whether ``data`` has the checksum ``recorded`` (in the algorithm it names)."""
    algorithm = str(recorded).partition(":")[0]  # a malformed manifest's may not be text
    return checksum(data, algorithm) == recorded
