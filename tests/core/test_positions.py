"""Positions compare numerically and seqno follows the log (DESIGN.md section 2)."""

from __future__ import annotations

import pytest

from loader.core.errors import ConfigError
from loader.core.positions import Position, seqno_of


def test_parse_and_format_round_trip() -> None:
    p = Position.parse("mysql-bin.000042:1234")
    assert (p.file, p.pos, p.lognum) == ("mysql-bin.000042", 1234, 42)
    assert str(p) == "mysql-bin.000042:1234"
    assert Position.from_lognum("mysql-bin", 42, 1234) == p


def test_positions_compare_by_lognum_then_logpos_numerically() -> None:
    ordered = [
        Position.parse("mysql-bin.000009:999999"),
        Position.parse("mysql-bin.000010:4"),
        Position.parse("mysql-bin.000010:120"),
        Position.parse("mysql-bin.999999:4"),
        Position.parse("mysql-bin.1000000:4"),
    ]
    assert sorted(reversed(ordered)) == ordered
    assert ordered[0] < ordered[1] <= ordered[1] < ordered[4]


@pytest.mark.parametrize(
    "text", ["mysql-bin.000042", "mysql-bin:12", ":12", "mysql-bin.000042:-1", "a b.1:2"]
)
def test_malformed_positions_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        Position.parse(text)


def test_seqno_increases_along_the_log_and_fits_int64() -> None:
    assert seqno_of("mysql-bin.000001", 4000) < seqno_of("mysql-bin.000001", 4001)
    assert seqno_of("mysql-bin.000001", 2**32 - 1) < seqno_of("mysql-bin.000002", 4)
    assert seqno_of("mysql-bin.000042", 1234) == 42 * 2**32 + 1234
    assert seqno_of("mysql-bin.999999", 2**32 - 1) < 2**63
