"""What every transport yields: raw events with the file and offset they came from."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from loader.binlog.constants import EventType
from loader.core.positions import Position


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One event's bytes and where it starts. ``artificial`` events (the server's fake rotate,
    a format description re-sent for a start inside a file, heartbeats) have no position of
    their own in the log."""

    file: str
    pos: int
    data: bytes
    artificial: bool = False


@dataclass(frozen=True, slots=True)
class EventRun:
    """Whole events of one file one after the other in ``data``, the first at ``pos``: what the
    native reader takes in one call. Events the server does not send (MariaDB's annotations)
    leave gaps: the event after each starts at offset ``gap_offsets[i]`` in ``data`` and at
    ``gap_positions[i]`` in the file."""

    file: str
    pos: int
    data: bytes
    gap_offsets: tuple[int, ...] = ()
    gap_positions: tuple[int, ...] = ()

    def position(self, offset: int) -> int:
        """The file position of the event that starts at ``offset``."""
        i = bisect.bisect_right(self.gap_offsets, offset)
        if i == 0:
            return self.pos + offset
        return self.gap_positions[i - 1] + offset - self.gap_offsets[i - 1]

    def offset_at(self, position: int) -> int:
        """The offset of the first byte at or past the file position ``position`` (after a gap,
        for a position in it; ``len(data)`` for one past the run)."""
        starts = (self.pos, *self.gap_positions)  # of the stretches between gaps
        i = bisect.bisect_right(starts, position)
        if i == 0:
            return 0
        begin = 0 if i == 1 else self.gap_offsets[i - 2]
        end = self.gap_offsets[i - 1] if i <= len(self.gap_offsets) else len(self.data)
        return min(begin + position - starts[i - 1], end)

    def event_at(self, offset: int) -> RawEvent:
        """The event that starts at ``offset``."""
        size = int.from_bytes(self.data[offset + 9 : offset + 13], "little")
        return RawEvent(self.file, self.position(offset), self.data[offset : offset + size])

    def events(self) -> Iterator[tuple[int, RawEvent]]:
        """Each event with its offset."""
        off = 0
        while off < len(self.data):
            event = self.event_at(off)
            yield off, event
            off += len(event.data)

    def head(self, offset: int) -> EventRun:
        """The events before ``offset``, as a run of their own."""
        i = bisect.bisect_left(self.gap_offsets, offset)
        return EventRun(self.file, self.pos, self.data[:offset], self.gap_offsets[:i], self.gap_positions[:i])

    def rest(self, offset: int) -> EventRun:
        """The events from ``offset`` on, as a run of their own."""
        i = bisect.bisect_right(self.gap_offsets, offset)
        return EventRun(
            self.file,
            self.position(offset),
            self.data[offset:],
            tuple(o - offset for o in self.gap_offsets[i:]),
            self.gap_positions[i:],
        )


def joined(first: EventRun, *then: EventRun) -> EventRun:
    """Runs of one file, one after the other, as one."""
    offsets, positions = list(first.gap_offsets), list(first.gap_positions)
    at = len(first.data)
    end = first.position(at)
    for run in then:
        if run.pos != end:
            offsets.append(at)
            positions.append(run.pos)
        offsets.extend(o + at for o in run.gap_offsets)
        positions.extend(run.gap_positions)
        at += len(run.data)
        end = run.position(len(run.data))
    return EventRun(
        first.file,
        first.pos,
        b"".join([first.data, *(r.data for r in then)]),
        tuple(offsets),
        tuple(positions),
    )


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


# Events the reader must see alone: they change how the events after them are read or which
# file they are in.
_ALONE = frozenset({EventType.ROTATE, EventType.STOP, EventType.FORMAT_DESCRIPTION})
# A run's size: large enough that crossing into the native reader costs nothing per event,
# small enough that a run's bytes and what is made of them (its CSV or JSON text, the copies
# of it) stay a few MB.
RUN_BYTES = 1 << 18


def in_runs(events: Iterable[RawEvent | EventRun], most: int = RUN_BYTES) -> Iterator[RawEvent | EventRun]:
    """Events of one file as runs of up to about ``most`` bytes (for the native reader);
    artificial events, rotates, stops and format descriptions alone, as they come (and runs
    as they are)."""
    parts: list[bytes] = []
    offsets: list[int] = []
    positions: list[int] = []
    file, start, size, end = "", 0, 0, 0
    for raw in events:
        if isinstance(raw, EventRun):
            if parts:
                yield EventRun(file, start, b"".join(parts), tuple(offsets), tuple(positions))
                parts, offsets, positions = [], [], []
            yield raw
            continue
        alone = raw.artificial or raw.data[4] in _ALONE
        if parts and (alone or raw.file != file or size >= most):
            yield EventRun(file, start, b"".join(parts), tuple(offsets), tuple(positions))
            parts, offsets, positions = [], [], []
        if alone:
            yield raw
            continue
        if not parts:
            file, start, size, end = raw.file, raw.pos, 0, raw.pos
        elif raw.pos != end:
            offsets.append(size)
            positions.append(raw.pos)
        parts.append(raw.data)
        size += len(raw.data)
        end = raw.pos + len(raw.data)
    if parts:
        yield EventRun(file, start, b"".join(parts), tuple(offsets), tuple(positions))
