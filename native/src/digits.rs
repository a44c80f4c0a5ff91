//! Decimal digits written straight into the output, as Python's `str` and `format` write them.

/// `v` in decimal.
pub fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

pub fn push_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_u64(out, v.unsigned_abs());
}

/// `v` with at least `width` digits, zeros in front (Python's `f"{v:0{width}d}"`, v >= 0).
pub fn push_padded(out: &mut Vec<u8>, v: u64, width: usize) {
    match width {
        2 if v < 100 => out.extend_from_slice(&[b'0' + (v / 10) as u8, b'0' + (v % 10) as u8]),
        4 if v < 10000 => out.extend_from_slice(&[
            b'0' + (v / 1000) as u8,
            b'0' + (v / 100 % 10) as u8,
            b'0' + (v / 10 % 10) as u8,
            b'0' + (v % 10) as u8,
        ]),
        _ => {
            let start = out.len();
            push_u64(out, v);
            let written = out.len() - start;
            if written < width {
                out.splice(start..start, std::iter::repeat_n(b'0', width - written));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_python() {
        let mut out = Vec::new();
        push_i64(&mut out, i64::MIN);
        out.push(b' ');
        push_u64(&mut out, u64::MAX);
        out.push(b' ');
        push_padded(&mut out, 7, 2);
        out.push(b' ');
        push_padded(&mut out, 123, 2);
        out.push(b' ');
        push_padded(&mut out, 42, 4);
        out.push(b' ');
        push_padded(&mut out, 42, 6);
        out.push(b' ');
        push_padded(&mut out, 1234567, 6);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "-9223372036854775808 18446744073709551615 07 123 0042 000042 1234567"
        );
    }
}
