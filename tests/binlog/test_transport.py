"""Runs of the server's stream: offsets in a run's bytes and positions in its file, across the
gaps the server leaves where it does not send an event."""

from __future__ import annotations

import pytest

from loader.binlog.transport import EventRun

# 30 bytes in three stretches: [0, 10) at 100, [10, 20) at 150, [20, 30) at 300.
RUN = EventRun("b.000001", 100, bytes(30), (10, 20), (150, 300))


@pytest.mark.parametrize(
    ("position", "offset"),
    [
        (50, 0),
        (100, 0),
        (105, 5),
        (110, 10),
        (149, 10),
        (150, 10),
        (155, 15),
        (160, 20),
        (299, 20),
        (305, 25),
        (310, 30),
        (400, 30),
    ],
)
def test_a_position_falls_at_its_offset_or_after_the_gap_it_lies_in(position: int, offset: int) -> None:
    assert RUN.offset_at(position) == offset
    if offset < len(RUN.data):
        assert RUN.position(offset) >= position


def test_a_run_without_gaps_is_its_positions_shifted() -> None:
    run = EventRun("b.000001", 4, bytes(8))
    assert [run.offset_at(p) for p in (0, 4, 9, 12, 13)] == [0, 0, 5, 8, 8]
