"""DATE, TIME, DATETIME and TIMESTAMP in every on-disk form the servers write.

Values come back as text in the server's own notation, which keeps zero dates, negative times
and the column's fractional digits exactly: ``2024-01-31``, ``-838:59:59.000000``,
``2024-01-31 23:59:59.123``; TIMESTAMP as UTC in the same notation.

Forms (``mysys/my_time.c``, MariaDB ``sql/field.cc``):
- DATE, TIME, DATETIME, TIMESTAMP: the pre-5.6 forms, no fractional seconds;
- TIME2, DATETIME2, TIMESTAMP2: MySQL 5.6+ / MariaDB 10.1+ big-endian forms, fsp in metadata;
- MariaDB 5.3-10.0 "hires" TIME/DATETIME/TIMESTAMP with fsp > 0: same type codes as the
  pre-5.6 forms but longer values; the fsp is not in the binlog and must come from the schema.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from loader.binlog.values import Reader

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TIMEF_INT_OFS = 0x800000
TIMEF_OFS = 0x800000000000
DATETIMEF_INT_OFS = 0x8000000000
_FRAC_BYTES = (0, 1, 1, 2, 2, 3, 3)
ZERO_TIMESTAMP = "0000-00-00 00:00:00"


def frac_text(micro: int, fsp: int) -> str:
    """``.123`` for 123000 microseconds at fsp 3; empty at fsp 0."""
    return "." + f"{micro:06d}"[:fsp] if fsp else ""


def _read_frac_be(buf: bytes, off: int, fsp: int, signed: bool) -> int:
    n = _FRAC_BYTES[fsp]
    return int.from_bytes(buf[off : off + n], "big", signed=signed)


class _TextCache(dict[int, str]):
    """Text of recently seen dates and times: formatting costs far more than a lookup, and
    real data repeats them a lot. Bounded: cleared when full."""

    LIMIT = 200_000

    def remember(self, key: int, text: str) -> str:
        if len(self) >= self.LIMIT:
            self.clear()
        self[key] = text
        return text


DATES = _TextCache()  # year*13+month << 5 | day -> "YYYY-MM-DD"
CLOCKS = _TextCache()  # hour << 12 | minute << 6 | second -> "HH:MM:SS"


def date_text(ymd: int) -> str:
    ym = ymd >> 5
    return DATES.remember(ymd, f"{ym // 13:04d}-{ym % 13:02d}-{ymd & 31:02d}")


def clock_text(hms: int) -> str:
    return CLOCKS.remember(hms, f"{hms >> 12:02d}:{(hms >> 6) & 63:02d}:{hms & 63:02d}")


def date_reader() -> Reader:
    """DATE: 3 bytes little-endian, day | month << 5 | year << 9."""
    get = DATES.get

    def read_date(buf: bytes, off: int) -> tuple[str, int]:
        v = buf[off] | buf[off + 1] << 8 | buf[off + 2] << 16
        # Same bits as the DATETIME key: year*13+month << 5 | day.
        key = (v >> 9) * 13 + ((v >> 5) & 15) << 5 | v & 31
        return get(key) or date_text(key), off + 3

    return read_date


def format_time(negative: bool, hours: int, minutes: int, seconds: int, micro: int, fsp: int) -> str:
    """``[-]HH:MM:SS[.f]`` as the server prints a TIME."""
    return f"{'-' if negative else ''}{hours:02d}:{minutes:02d}:{seconds:02d}{frac_text(micro, fsp)}"


def time_reader() -> Reader:
    """TIME (pre-5.6): 3-byte signed little-endian integer HHMMSS."""

    def read_time(buf: bytes, off: int) -> tuple[str, int]:
        v = buf[off] | buf[off + 1] << 8 | buf[off + 2] << 16
        if v & 0x800000:
            v -= 0x1000000
        neg = v < 0
        v = -v if neg else v
        return format_time(neg, v // 10000, v // 100 % 100, v % 100, 0, 0), off + 3

    return read_time


def time_packed_text(packed: int, fsp: int) -> str:
    """A TIME from its packed longlong (``TIME_from_longlong_time_packed``)."""
    neg = packed < 0
    if neg:
        packed = -packed
    hms = packed >> 24
    return format_time(neg, (hms >> 12) % 1024, (hms >> 6) % 64, hms % 64, packed % (1 << 24), fsp)


def time2_reader(fsp: int) -> Reader:
    """TIME2: 3 bytes big-endian offset by 0x800000, then 0-3 bytes of fraction."""
    if not 0 <= fsp <= 6:
        raise ValueError(f"invalid TIME2 fsp {fsp}")
    size = 3 + _FRAC_BYTES[fsp]

    def read_time2(buf: bytes, off: int) -> tuple[str, int]:
        if off + size > len(buf):
            raise IndexError("TIME2 value runs past the event")
        if fsp >= 5:
            packed = int.from_bytes(buf[off : off + 6], "big") - TIMEF_OFS
            return time_packed_text(packed, fsp), off + 6
        intpart = int.from_bytes(buf[off : off + 3], "big") - TIMEF_INT_OFS
        frac = 0
        # The fraction is unsigned here, counted back from the next second for negative times
        # (my_time_packed_from_binary).
        if fsp in (1, 2):
            frac = _read_frac_be(buf, off + 3, fsp, signed=False)
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x100
            frac *= 10000
        elif fsp in (3, 4):
            frac = _read_frac_be(buf, off + 3, fsp, signed=False)
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x10000
            frac *= 100
        return time_packed_text((intpart << 24) + frac, fsp), off + size

    return read_time2


def format_datetime(
    year: int, month: int, day: int, hour: int, minute: int, second: int, micro: int, fsp: int
) -> str:
    """``YYYY-MM-DD HH:MM:SS[.f]``."""
    return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}{frac_text(micro, fsp)}"


def datetime_packed_text(packed: int, fsp: int) -> str:
    """A DATETIME from its packed longlong (``TIME_from_longlong_datetime_packed``)."""
    if packed < 0:
        packed = -packed
    micro = packed % (1 << 24)
    ymdhms = packed >> 24
    ymd, hms = ymdhms >> 17, ymdhms % (1 << 17)
    ym = ymd >> 5
    return format_datetime(ym // 13, ym % 13, ymd % 32, hms >> 12, (hms >> 6) % 64, hms % 64, micro, fsp)


def datetime_reader() -> Reader:
    """DATETIME (pre-5.6): 8-byte little-endian integer YYYYMMDDhhmmss."""

    def read_datetime(buf: bytes, off: int) -> tuple[str, int]:
        if off + 8 > len(buf):
            raise IndexError("DATETIME value runs past the event")
        v = int.from_bytes(buf[off : off + 8], "little")
        d, t = divmod(v, 1000000)
        return (
            format_datetime(d // 10000, d // 100 % 100, d % 100, t // 10000, t // 100 % 100, t % 100, 0, 0),
            off + 8,
        )

    return read_datetime


def datetime2_reader(fsp: int) -> Reader:
    """DATETIME2: 5 bytes big-endian (offset 0x8000000000) then 0-3 bytes of fraction."""
    if not 0 <= fsp <= 6:
        raise ValueError(f"invalid DATETIME2 fsp {fsp}")
    size = 5 + _FRAC_BYTES[fsp]
    scale = (0, 10000, 10000, 100, 100, 1, 1)[fsp]
    get_date, get_clock = DATES.get, CLOCKS.get

    def read_datetime2(buf: bytes, off: int) -> tuple[str, int]:
        if off + size > len(buf):
            raise IndexError("DATETIME2 value runs past the event")
        v = int.from_bytes(buf[off : off + 5], "big") - DATETIMEF_INT_OFS
        if v < 0:  # not written by servers; the general path handles the sign
            frac = _read_frac_be(buf, off + 5, fsp, signed=True) * scale if fsp else 0
            return datetime_packed_text((v << 24) + frac, fsp), off + size
        ymd, hms = v >> 17, v & 0x1FFFF
        text = (get_date(ymd) or date_text(ymd)) + " " + (get_clock(hms) or clock_text(hms))
        if fsp:
            micro = int.from_bytes(buf[off + 5 : off + size], "big") * scale
            # str(10**6 + n)[1:] is n zero-padded to six digits, at a third of format()'s cost.
            text += "." + str(1_000_000 + micro)[1 : 1 + fsp]
        return text, off + size

    return read_datetime2


def timestamp_text(seconds: int, micro: int, fsp: int) -> str:
    """Seconds since the epoch as UTC text; 0 is the zero timestamp."""
    if seconds == 0 and micro == 0:
        return ZERO_TIMESTAMP + frac_text(0, fsp)
    t = _EPOCH + timedelta(seconds=seconds)
    return format_datetime(t.year, t.month, t.day, t.hour, t.minute, t.second, micro, fsp)


def timestamp_reader() -> Reader:
    """TIMESTAMP (pre-5.6): 4-byte little-endian seconds since the epoch."""

    def read_timestamp(buf: bytes, off: int) -> tuple[str, int]:
        if off + 4 > len(buf):
            raise IndexError("TIMESTAMP value runs past the event")
        return timestamp_text(int.from_bytes(buf[off : off + 4], "little"), 0, 0), off + 4

    return read_timestamp


def timestamp2_reader(fsp: int) -> Reader:
    """TIMESTAMP2: 4 bytes big-endian seconds then 0-3 bytes of fraction."""
    if not 0 <= fsp <= 6:
        raise ValueError(f"invalid TIMESTAMP2 fsp {fsp}")
    size = 4 + _FRAC_BYTES[fsp]
    scale = (0, 10000, 10000, 100, 100, 1, 1)[fsp]

    def read_timestamp2(buf: bytes, off: int) -> tuple[str, int]:
        if off + size > len(buf):
            raise IndexError("TIMESTAMP2 value runs past the event")
        sec = int.from_bytes(buf[off : off + 4], "big")
        micro = _read_frac_be(buf, off + 4, fsp, signed=False) * scale if fsp else 0
        return timestamp_text(sec, micro, fsp), off + size

    return read_timestamp2


# MariaDB 5.3-10.0 hires forms: the value counts units of 10**-fsp seconds.
_HIRES_DATETIME_BYTES = (5, 6, 6, 7, 7, 7, 8)
_HIRES_TIME_BYTES = (3, 4, 4, 5, 5, 5, 6)
_TIME_MAX_VALUE_SECONDS = 838 * 3600 + 59 * 60 + 59


def maria_timestamp_hires_reader(fsp: int) -> Reader:
    """MariaDB TIMESTAMP(fsp) hires: 4 bytes big-endian seconds, fraction in 10**-fsp units."""
    n = _FRAC_BYTES[fsp]
    mult = 10 ** (6 - fsp)

    def read_ts_hires(buf: bytes, off: int) -> tuple[str, int]:
        if off + 4 + n > len(buf):
            raise IndexError("TIMESTAMP value runs past the event")
        sec = int.from_bytes(buf[off : off + 4], "big")
        micro = int.from_bytes(buf[off + 4 : off + 4 + n], "big") * mult
        return timestamp_text(sec, micro, fsp), off + 4 + n

    return read_ts_hires


def maria_datetime_hires_reader(fsp: int) -> Reader:
    """MariaDB DATETIME(fsp) hires: big-endian packed time in 10**-fsp second units."""
    n = _HIRES_DATETIME_BYTES[fsp]
    mult = 10 ** (6 - fsp)

    def read_dt_hires(buf: bytes, off: int) -> tuple[str, int]:
        if off + n > len(buf):
            raise IndexError("DATETIME value runs past the event")
        total = int.from_bytes(buf[off : off + n], "big") * mult
        t, micro = divmod(total, 1000000)
        t, second = divmod(t, 60)
        t, minute = divmod(t, 60)
        t, hour = divmod(t, 24)
        t, day = divmod(t, 32)
        year, month = divmod(t, 13)
        return format_datetime(year, month, day, hour, minute, second, micro, fsp), off + n

    return read_dt_hires


def maria_time_hires_reader(fsp: int) -> Reader:
    """MariaDB TIME(fsp) hires: big-endian, offset by the zero point, 10**-fsp second units."""
    n = _HIRES_TIME_BYTES[fsp]
    mult = 10 ** (6 - fsp)
    zero_point = (_TIME_MAX_VALUE_SECONDS + 1) * 1000000 // mult

    def read_time_hires(buf: bytes, off: int) -> tuple[str, int]:
        if off + n > len(buf):
            raise IndexError("TIME value runs past the event")
        v = (int.from_bytes(buf[off : off + n], "big") - zero_point) * mult
        neg = v < 0
        t, micro = divmod(-v if neg else v, 1000000)
        return format_time(neg, t // 3600, t // 60 % 60, t % 60, micro, fsp), off + n

    return read_time_hires
