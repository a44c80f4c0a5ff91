//! Dates and times as the staging files write them (`loader/binlog/values/temporal.py` is the
//! reference: the same arithmetic, so out-of-range values give the same text).

use crate::digits::{push_padded, push_u64};

pub const FRAC_BYTES: [usize; 7] = [0, 1, 1, 2, 2, 3, 3];
/// Microseconds per unit of a fraction of `fsp` digits as TIME2/DATETIME2/TIMESTAMP2 store it.
pub const FRAC_SCALE: [i64; 7] = [0, 10000, 10000, 100, 100, 1, 1];
pub const HIRES_DATETIME_BYTES: [usize; 7] = [5, 6, 6, 7, 7, 7, 8];
pub const HIRES_TIME_BYTES: [usize; 7] = [3, 4, 4, 5, 5, 5, 6];
const TIME_MAX_VALUE_SECONDS: i128 = 838 * 3600 + 59 * 60 + 59;
const TIMEF_OFS: i64 = 0x8000_0000_0000;
const TIMEF_INT_OFS: i64 = 0x80_0000;
const DATETIMEF_INT_OFS: i64 = 0x80_0000_0000;

/// `.123` for 123000 µs at fsp 3: the first `fsp` characters of the value written with at
/// least six digits (Python's `f"{micro:06d}"[:fsp]`).
pub fn push_frac(out: &mut Vec<u8>, micro: i128, fsp: usize) {
    if fsp == 0 {
        return;
    }
    out.push(b'.');
    let start = out.len();
    push_padded(out, micro as u64, 6);
    out.truncate(start + fsp.min(out.len() - start));
}

pub fn push_time(
    out: &mut Vec<u8>,
    negative: bool,
    h: i128,
    m: i128,
    s: i128,
    micro: i128,
    fsp: usize,
) {
    if negative {
        out.push(b'-');
    }
    push_hms(out, h as u64, m as u64, s as u64);
    push_frac(out, micro, fsp);
}

/// `HH:MM:SS` (each at least two digits).
fn push_hms(out: &mut Vec<u8>, h: u64, m: u64, s: u64) {
    push_padded(out, h, 2);
    out.push(b':');
    push_padded(out, m, 2);
    out.push(b':');
    push_padded(out, s, 2);
}

#[allow(clippy::too_many_arguments)]
pub fn push_datetime(
    out: &mut Vec<u8>,
    y: i128,
    mo: i128,
    d: i128,
    h: i128,
    mi: i128,
    s: i128,
    micro: i128,
    fsp: usize,
) {
    push_padded(out, y as u64, 4);
    out.push(b'-');
    push_padded(out, mo as u64, 2);
    out.push(b'-');
    push_padded(out, d as u64, 2);
    out.push(b' ');
    push_hms(out, h as u64, mi as u64, s as u64);
    push_frac(out, micro, fsp);
}

/// `date_text`: the key `(year*13+month) << 5 | day`.
pub fn push_date_key(out: &mut Vec<u8>, ymd: i64) {
    let ym = ymd >> 5;
    push_padded(out, (ym / 13) as u64, 4);
    out.push(b'-');
    push_padded(out, (ym % 13) as u64, 2);
    out.push(b'-');
    push_padded(out, (ymd & 31) as u64, 2);
}

fn push_clock(out: &mut Vec<u8>, hms: i64) {
    push_hms(
        out,
        (hms >> 12) as u64,
        ((hms >> 6) & 63) as u64,
        (hms & 63) as u64,
    );
}

/// DATE: 3 bytes little-endian, day | month << 5 | year << 9.
pub fn date(out: &mut Vec<u8>, b: &[u8]) {
    let v = i64::from(b[0]) | i64::from(b[1]) << 8 | i64::from(b[2]) << 16;
    push_date_key(out, (((v >> 9) * 13 + ((v >> 5) & 15)) << 5) | (v & 31));
}

/// TIME (pre-5.6): 3-byte signed little-endian HHMMSS.
pub fn time(out: &mut Vec<u8>, b: &[u8]) {
    let mut v = i128::from(b[0]) | i128::from(b[1]) << 8 | i128::from(b[2]) << 16;
    if v & 0x80_0000 != 0 {
        v -= 0x100_0000;
    }
    let neg = v < 0;
    let v = v.abs();
    push_time(out, neg, v / 10000, v / 100 % 100, v % 100, 0, 0);
}

pub fn time_packed(out: &mut Vec<u8>, packed: i128, fsp: usize) {
    let neg = packed < 0;
    let packed = packed.abs();
    let hms = packed >> 24;
    push_time(
        out,
        neg,
        (hms >> 12) % 1024,
        (hms >> 6) % 64,
        hms % 64,
        packed % (1 << 24),
        fsp,
    );
}

fn be(b: &[u8]) -> i64 {
    b.iter().fold(0i64, |acc, &x| acc << 8 | i64::from(x))
}

fn be_signed(b: &[u8]) -> i64 {
    if b.is_empty() {
        return 0;
    }
    let v = be(b);
    let bits = 8 * b.len() as u32;
    if v >> (bits - 1) & 1 == 1 {
        v - (1i64 << bits)
    } else {
        v
    }
}

/// TIME2: 3 bytes big-endian offset by 0x800000, then 0-3 bytes of fraction.
pub fn time2(out: &mut Vec<u8>, b: &[u8], fsp: usize) {
    if fsp >= 5 {
        time_packed(out, i128::from(be(&b[..6]) - TIMEF_OFS), fsp);
        return;
    }
    let mut intpart = be(&b[..3]) - TIMEF_INT_OFS;
    let mut frac = 0i64;
    if fsp == 1 || fsp == 2 {
        frac = be(&b[3..4]);
        if intpart < 0 && frac != 0 {
            intpart += 1;
            frac -= 0x100;
        }
        frac *= 10000;
    } else if fsp == 3 || fsp == 4 {
        frac = be(&b[3..5]);
        if intpart < 0 && frac != 0 {
            intpart += 1;
            frac -= 0x10000;
        }
        frac *= 100;
    }
    time_packed(out, (i128::from(intpart) << 24) + i128::from(frac), fsp);
}

/// A DATETIME from its packed longlong (`TIME_from_longlong_datetime_packed`).
pub fn datetime_packed(out: &mut Vec<u8>, packed: i128, fsp: usize) {
    let packed = packed.abs();
    let micro = packed % (1 << 24);
    let ymdhms = packed >> 24;
    let (ymd, hms) = (ymdhms >> 17, ymdhms % (1 << 17));
    let ym = ymd >> 5;
    push_datetime(
        out,
        ym / 13,
        ym % 13,
        ymd % 32,
        hms >> 12,
        (hms >> 6) % 64,
        hms % 64,
        micro,
        fsp,
    );
}

/// DATETIME2: 5 bytes big-endian (offset 0x8000000000) then 0-3 bytes of fraction.
pub fn datetime2(out: &mut Vec<u8>, b: &[u8], fsp: usize) {
    let v = be(&b[..5]) - DATETIMEF_INT_OFS;
    let frac = &b[5..5 + FRAC_BYTES[fsp]];
    if v < 0 {
        let f = if fsp > 0 {
            be_signed(frac) * FRAC_SCALE[fsp]
        } else {
            0
        };
        datetime_packed(out, (i128::from(v) << 24) + i128::from(f), fsp);
        return;
    }
    push_date_key(out, v >> 17);
    out.push(b' ');
    push_clock(out, v & 0x1FFFF);
    if fsp > 0 {
        // Python's str(10**6 + micro)[1:1 + fsp]: micro's six digits, unless it holds more.
        let micro = (be(frac) * FRAC_SCALE[fsp]) as u64;
        out.push(b'.');
        if micro < 1_000_000 {
            let start = out.len();
            push_padded(out, micro, 6);
            out.truncate(start + fsp);
        } else {
            let mut text = Vec::with_capacity(12);
            push_u64(&mut text, 1_000_000 + micro);
            out.extend_from_slice(&text[1..(1 + fsp).min(text.len())]);
        }
    }
}

/// DATETIME (pre-5.6): 8-byte little-endian YYYYMMDDhhmmss.
pub fn datetime(out: &mut Vec<u8>, b: &[u8]) {
    let v = i128::from(u64::from_le_bytes(b[..8].try_into().unwrap()));
    let (d, t) = (v / 1_000_000, v % 1_000_000);
    push_datetime(
        out,
        d / 10000,
        d / 100 % 100,
        d % 100,
        t / 10000,
        t / 100 % 100,
        t % 100,
        0,
        0,
    );
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Seconds since the epoch as UTC text; 0 (and no fraction) is the zero timestamp.
pub fn timestamp_text(out: &mut Vec<u8>, seconds: i64, micro: i128, fsp: usize) {
    if seconds == 0 && micro == 0 {
        out.extend_from_slice(b"0000-00-00 00:00:00");
        push_frac(out, 0, fsp);
        return;
    }
    utc_text(out, seconds, micro, fsp);
}

/// Seconds since the epoch as UTC text, `fsp` digits of `micro`.
pub fn utc_text(out: &mut Vec<u8>, seconds: i64, micro: i128, fsp: usize) {
    let (y, m, d) = civil(seconds.div_euclid(86400));
    let s = seconds.rem_euclid(86400);
    push_datetime(
        out,
        y.into(),
        m.into(),
        d.into(),
        (s / 3600).into(),
        (s / 60 % 60).into(),
        (s % 60).into(),
        micro,
        fsp,
    );
}

/// TIMESTAMP (pre-5.6): 4-byte little-endian seconds.
pub fn timestamp(out: &mut Vec<u8>, b: &[u8]) {
    timestamp_text(
        out,
        i64::from(u32::from_le_bytes(b[..4].try_into().unwrap())),
        0,
        0,
    );
}

/// TIMESTAMP2: 4 bytes big-endian seconds then 0-3 bytes of fraction.
pub fn timestamp2(out: &mut Vec<u8>, b: &[u8], fsp: usize) {
    let micro = if fsp > 0 {
        be(&b[4..4 + FRAC_BYTES[fsp]]) * FRAC_SCALE[fsp]
    } else {
        0
    };
    timestamp_text(out, be(&b[..4]), micro.into(), fsp);
}

fn hires_mult(fsp: usize) -> i128 {
    10i128.pow(6 - fsp as u32)
}

/// MariaDB TIMESTAMP(fsp) hires: 4 bytes big-endian seconds, fraction in 10**-fsp units.
pub fn timestamp_hires(out: &mut Vec<u8>, b: &[u8], fsp: usize) {
    let micro = i128::from(be(&b[4..4 + FRAC_BYTES[fsp]])) * hires_mult(fsp);
    timestamp_text(out, be(&b[..4]), micro, fsp);
}

/// MariaDB DATETIME(fsp) hires: big-endian packed time in 10**-fsp second units.
pub fn datetime_hires(out: &mut Vec<u8>, b: &[u8], fsp: usize) {
    let total = i128::from(be(&b[..HIRES_DATETIME_BYTES[fsp]])) * hires_mult(fsp);
    let (t, micro) = (total / 1_000_000, total % 1_000_000);
    let (t, second) = (t / 60, t % 60);
    let (t, minute) = (t / 60, t % 60);
    let (t, hour) = (t / 24, t % 24);
    let (t, day) = (t / 32, t % 32);
    push_datetime(out, t / 13, t % 13, day, hour, minute, second, micro, fsp);
}

/// MariaDB TIME(fsp) hires: big-endian, offset by the zero point, 10**-fsp second units.
pub fn time_hires(out: &mut Vec<u8>, b: &[u8], fsp: usize) {
    let mult = hires_mult(fsp);
    let zero_point = (TIME_MAX_VALUE_SECONDS + 1) * 1_000_000 / mult;
    let v = (i128::from(be(&b[..HIRES_TIME_BYTES[fsp]])) - zero_point) * mult;
    let neg = v < 0;
    let a = v.abs();
    let (t, micro) = (a / 1_000_000, a % 1_000_000);
    push_time(out, neg, t / 3600, t / 60 % 60, t % 60, micro, fsp);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl Fn(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        f(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn civil_dates() {
        assert_eq!(
            text(|o| timestamp_text(o, 0, 0, 3)),
            "0000-00-00 00:00:00.000"
        );
        assert_eq!(text(|o| timestamp_text(o, 1, 0, 0)), "1970-01-01 00:00:01");
        assert_eq!(
            text(|o| timestamp_text(o, 951_782_400, 5, 6)),
            "2000-02-29 00:00:00.000005"
        );
        assert_eq!(
            text(|o| timestamp_text(o, 4_294_967_295, 0, 0)),
            "2106-02-07 06:28:15"
        );
    }

    #[test]
    fn fractions_past_a_second_keep_pythons_digits() {
        assert_eq!(text(|o| push_frac(o, 2_550_000, 2)), ".25");
        assert_eq!(
            text(|o| datetime2(o, &[0x80, 0, 0, 0, 0, 255], 2)),
            "0000-00-00 00:00:00.55"
        );
    }
}
