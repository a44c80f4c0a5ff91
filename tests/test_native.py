"""The native module: built with the package, and byte for byte what the Python code writes."""

from __future__ import annotations

import math
import random
import struct
import sys

import pytest

from loader import _native
from loader.binlog import split
from loader.binlog.reader import native_decoder
from loader.core.config import SourceConfig
from loader.core.errors import ConfigError
from tests.conftest import random_seed


def test_float_text_is_pythons_repr_for_every_kind_of_double() -> None:
    special = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 2.2250738585072014e-308]
    special += [1.7976931348623157e308, 1e16, 9999999999999998.0, 1e15, 1e-4, 9.999999999999999e-5, 1e-5]
    special += [0.1, 0.3, 1 / 3, 123.0, -2.5e-7, 1e22, 1e23, 2.0**53, 2.0**53 + 2, 4.35, 0.5, 100.0]
    rnd = random.Random(random_seed())
    # Every bit pattern is a double: all exponents and mantissas, subnormals and NaNs among them.
    drawn = [struct.unpack("<d", rnd.randbytes(8))[0] for _ in range(100_000)]
    # Decimal-looking values, as DECIMAL-like data stored in FLOAT/DOUBLE columns give.
    drawn += [round(rnd.uniform(-1e6, 1e6), rnd.randint(0, 8)) for _ in range(20_000)]
    drawn += [float(rnd.randint(-(10**18), 10**18)) for _ in range(5_000)]
    for value in special + drawn:
        assert _native.float_text(value) == repr(value), value.hex()


def test_a_native_decoder_not_built_stops_extraction_saying_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert native_decoder(SourceConfig()) is True  # the default
    monkeypatch.setitem(sys.modules, "loader._native", None)  # as if never built
    with pytest.raises(ConfigError) as err:
        native_decoder(SourceConfig())
    assert "not built" in str(err.value) and "make setup" in str(err.value)
    assert 'decoder = "python"' in str(err.value)
    assert native_decoder(SourceConfig(decoder="python")) is False  # the Python decoder needs no module
    # Nor does cutting an interval for several processes: the Python walk of event headers.
    assert split._native_walk() is split._transaction_start_python
