"""Which transaction a recorded position follows, beyond its GTID (DESIGN.md section 2).

A GTID state is a counter: after ``RESET MASTER`` (or a restore, or another server given the
same id) the same state names other transactions. So the ledger keeps, with every position, the
fingerprint of the last transaction before it: where its GTID event lies, its GTID, and its
commit time as the GTID event carries it. A replica logs the primary's transactions with the
primary's GTIDs and times, so a promoted replica still matches; a new history reaching the same
counters does not, unless it commits the same GTID in the same microsecond (MySQL's
``original_commit_timestamp``) or second (MariaDB's event time, its finest).

The text form, kept in the ledger: ``FILE:POS GTID MICROSECONDS``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from loader.binlog import events as ev
from loader.binlog.constants import HEADER_LEN, EventType
from loader.binlog.parser import BinlogParser
from loader.binlog.split import starts_transaction
from loader.binlog.transport import Transport
from loader.core.errors import DecodeError, LedgerError, SourceError
from loader.core.positions import Position


@dataclass(frozen=True)
class Fingerprint:
    """A transaction's GTID event: where it lies, its GTID, and its commit time (µs, UTC)."""

    at: Position
    gtid: str  # "0-1-68" (MariaDB), "uuid:68" or "uuid:tag:68" (MySQL), "ANONYMOUS"
    commit_us: int

    def text(self) -> str:
        return f"{self.at} {self.gtid} {self.commit_us}"

    @classmethod
    def parse(cls, text: str) -> Fingerprint:
        """The ledger's text back.

        Raises:
            LedgerError: not a fingerprint.
        """
        parts = text.split()
        if len(parts) != 3 or not parts[2].isdigit():
            raise LedgerError(f"{text!r} is not a transaction fingerprint (FILE:POS GTID MICROSECONDS)")
        return cls(Position.parse(parts[0]), parts[1], int(parts[2]))

    def same_transaction(self, other: Fingerprint) -> bool:
        """Whether ``other`` is this transaction, wherever it lies (a replica's position differs)."""
        return (self.gtid, self.commit_us) == (other.gtid, other.commit_us)

    def describe(self) -> str:
        """For messages: ``GTID 0-1-68 committed 2026-11-26 17:51:36 UTC (at mysql-bin.000001:900)``."""
        when = dt.datetime.fromtimestamp(self.commit_us / 1_000_000, dt.UTC)
        shown = when.strftime("%Y-%m-%d %H:%M:%S" + (".%f" if self.commit_us % 1_000_000 else ""))
        return f"GTID {self.gtid} committed {shown} UTC (at {self.at})"


def of_event(event: ev.Event, at: Position) -> Fingerprint | None:
    """The fingerprint of the transaction a GTID event at ``at`` starts; None for other events.

    MySQL's ``original_commit_timestamp`` (5.7.31+/8.0.1+) is the primary's commit time in µs and
    survives replication; without it, and on MariaDB, the event's time (seconds) does.
    """
    body, header = event.body, event.header
    if isinstance(body, ev.Gtid):
        commit_us = body.original_commit_ts or header.timestamp * 1_000_000
        return Fingerprint(at, body.text(), commit_us)
    if isinstance(body, ev.MariaGtid):
        return Fingerprint(at, body.text(header.server_id), header.timestamp * 1_000_000)
    return None


def read_fingerprint(transport: Transport, at: Position) -> Fingerprint | None:
    """The fingerprint of the transaction whose GTID event starts at ``at``, read through
    ``transport``; None when no GTID event starts there (another history: no event boundary
    there, or another event). The transport is closed.

    Raises:
        TransientError: the source is out of reach.
    """
    parser = BinlogParser(at.file)
    try:
        for raw in transport.events(at, None):
            if raw.artificial:  # the server's rotate, the file's format description re-sent
                if raw.data[4] == EventType.FORMAT_DESCRIPTION:
                    parser.parse(raw.data, raw.pos)
                continue
            if (raw.file, raw.pos) != (at.file, at.pos):
                return None
            return of_event(parser.parse(raw.data, raw.pos), at)
        return None
    except (DecodeError, SourceError):  # not an event boundary of this server's log
        return None
    finally:
        transport.close()


def first_commit_after(transport: Transport, at: Position) -> int | None:
    """The commit time (µs, UTC, as ``of_event`` reads it) of the first transaction in the log
    at or after ``at`` (an event boundary; a transaction starts where ``split`` says), or None
    when the log holds none after it (only its keeping: rotations, checkpoints). A log without
    GTID events gives the time of the transaction's BEGIN. The transport is closed.

    Raises:
        TransientError: the source is out of reach.
        SourceError, DecodeError: ``at`` is not in the log, or the log cannot be read there.
    """
    parser = BinlogParser(at.file)
    try:
        for raw in transport.events(at, None):
            parser.file = raw.file
            kind = raw.data[4]
            if kind == EventType.FORMAT_DESCRIPTION:  # how the file's later events are read
                parser.parse(raw.data, raw.pos)
            if raw.artificial or not starts_transaction(kind, raw.data[HEADER_LEN:]):
                continue
            found = of_event(parser.parse(raw.data, raw.pos), Position(raw.file, raw.pos))
            return found.commit_us if found else int.from_bytes(raw.data[:4], "little") * 1_000_000
        return None
    finally:
        transport.close()
