"""Runs of the server's stream: offsets in a run's bytes and positions in its file, across the
gaps the server leaves where it does not send an event; runs joined, and spooled ones replayed
joined."""

from __future__ import annotations

from pathlib import Path

import pytest

from loader.binlog import spool
from loader.binlog.transport import EventRun, joined
from loader.core.positions import Position

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


def test_runs_joined_keep_every_byte_at_its_position_across_the_gaps_between_and_within_them() -> None:
    a = EventRun("b.000001", 100, bytes(range(10)), (5,), (200,))  # [100, 105) and [200, 205)
    b = EventRun("b.000001", 205, bytes(range(10, 14)))  # right after a
    c = EventRun("b.000001", 300, bytes(range(14, 20)), (2,), (400,))  # after a gap: [300, 302), [400, 404)
    run = joined(a, b, c)
    assert run.data == bytes(range(20)) and (run.file, run.pos) == ("b.000001", 100)
    assert (run.gap_offsets, run.gap_positions) == ((5, 14, 16), (200, 300, 400))
    assert [run.position(o) for o in (0, 4, 5, 9, 10, 13, 14, 15, 16, 19, 20)] == [
        100,
        104,
        200,
        204,
        205,
        208,
        300,
        301,
        400,
        403,
        404,
    ]
    assert joined(a, b) == EventRun("b.000001", 100, bytes(range(14)), (5,), (200,))


def test_a_spooled_piece_replays_its_small_runs_joined_up_to_a_runs_size(tmp_path: Path) -> None:
    # The parent spools runs as its socket reads give them; the decoding process takes them
    # joined, each run costing a write per table.
    small = [EventRun("b.000001", 4 + 100 * i, bytes([i]) * 100) for i in range(30)]
    small[10] = EventRun("b.000001", 5000, bytes([10]) * 100)  # after events the server left out
    writer = spool._Writer(str(tmp_path / "piece"))
    for run in small:
        writer.write(run)
    writer.close()
    replayed = list(spool.SpooledEvents(str(tmp_path / "piece")).runs(Position("b.000001", 4), None))
    assert len(replayed) == 1 and isinstance(replayed[0], EventRun)
    run = replayed[0]
    assert run.data == b"".join(r.data for r in small)
    assert [run.position(100 * i) for i in range(30)] == [r.pos for r in small]
    # Runs past the size of one are not joined into it.
    assert len(list(spool._coalesced(small, most=1000))) == 3
