"""The binlog position format and the seqno derived from it (DESIGN.md section 2).

This module is the only place that parses or formats a position; everything else passes
`Position` values around.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from loader.core.errors import ConfigError, LedgerError

_SUFFIX = re.compile(r"\.(\d+)$")
_TEXT = re.compile(r"^(?P<file>[^:\s]+):(?P<pos>\d+)$")
SEQNO_FILE_SHIFT = 32
SEQNO_EPOCH_SHIFT = 52  # binlog file numbers below 2**20 leave 11 bits below the sign bit
MAX_EPOCH = (1 << (63 - SEQNO_EPOCH_SHIFT)) - 1


@dataclass(frozen=True, slots=True, order=False)
class Position:
    """A byte offset in one binlog file, e.g. ``mysql-bin.000042:1234``."""

    file: str
    pos: int

    @property
    def lognum(self) -> int:
        """The numeric suffix of the file name (42 for ``mysql-bin.000042``)."""
        return lognum_of(self.file)

    def key(self) -> tuple[int, int]:
        """The sort key: positions compare by ``(lognum, logpos)`` numerically."""
        return (self.lognum, self.pos)

    def __lt__(self, other: Position) -> bool:
        return self.key() < other.key()

    def __le__(self, other: Position) -> bool:
        return self.key() <= other.key()

    def __gt__(self, other: Position) -> bool:
        return self.key() > other.key()

    def __ge__(self, other: Position) -> bool:
        return self.key() >= other.key()

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"

    @classmethod
    def parse(cls, text: str) -> Position:
        """Parse ``FILE:POS``; raises ConfigError naming the accepted form."""
        m = _TEXT.match(text.strip())
        if not m:
            raise ConfigError(f"position {text!r} is not of the form FILE:POS (mysql-bin.000042:1234)")
        file = m.group("file")
        lognum_of(file)
        return cls(file, int(m.group("pos")))

    @classmethod
    def from_lognum(cls, basename: str, lognum: int, logpos: int) -> Position:
        """Build a position from a file base name (``mysql-bin``) and ``lognum``/``logpos``."""
        if lognum < 0 or logpos < 0:
            raise ConfigError(f"lognum and logpos must be >= 0, got {lognum}/{logpos}")
        return cls(f"{basename}.{lognum:06d}", logpos)


@functools.lru_cache(maxsize=256)  # positions compare per event read: a file's number, once
def lognum_of(file: str) -> int:
    """The numeric suffix of a binlog file name; raises ConfigError when there is none."""
    m = _SUFFIX.search(file)
    if not m:
        raise ConfigError(f"binlog file name {file!r} has no numeric suffix (like mysql-bin.000042)")
    return int(m.group(1))


def seqno_of(file: str, commit_end_pos: int, epoch: int = 0) -> int:
    """seqno = epoch * 2**52 + lognum * 2**32 + end position of the commit event (DESIGN.md
    section 2). ``epoch`` numbers the binlog histories the ledger has read (``ledger.Interval``):
    a later history's changes order after every change of an earlier one, whatever its positions."""
    lognum = lognum_of(file)
    if epoch and not (0 < epoch <= MAX_EPOCH and lognum < 1 << (SEQNO_EPOCH_SHIFT - SEQNO_FILE_SHIFT)):
        raise LedgerError(
            f"binlog history {epoch} at {file}:{commit_end_pos} does not fit a seqno (at most {MAX_EPOCH} "
            f"histories and binlog file numbers below {1 << (SEQNO_EPOCH_SHIFT - SEQNO_FILE_SHIFT)})"
        )
    return (epoch << SEQNO_EPOCH_SHIFT) + (lognum << SEQNO_FILE_SHIFT) + commit_end_pos
