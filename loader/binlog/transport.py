"""What every transport yields: raw events with the file and offset they came from."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from loader.positions import Position


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One event's bytes and where it starts. ``artificial`` events (the server's fake rotate,
    a format description re-sent for a start inside a file, heartbeats) have no position of
    their own in the log."""

    file: str
    pos: int
    data: bytes
    artificial: bool = False


class Transport(Protocol):
    """A source of raw binlog events between two positions."""

    def events(self, start: Position, end: Position | None) -> Iterator[RawEvent]:
        """Events from ``start`` (an event boundary) up to, not including, ``end``.

        The format description of ``start``'s file comes first even when ``start`` lies after
        it. ``end=None`` reads to the end of the log as it is now.
        """
        ...

    def close(self) -> None:
        """Release files or connections."""
        ...
