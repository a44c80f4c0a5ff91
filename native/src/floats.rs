//! Float text as Python's `repr` writes it: the shortest digits that read back as the same
//! double, in fixed notation from 1e-4 up to 1e16 and in scientific notation (`1e+16`, `1e-05`)
//! outside, `.0` on whole numbers; `inf`, `-inf`, `nan`, `-0.0`. And as MySQL writes a double in
//! JSON text: the same digits, fixed from 1e-15 up to 1e15 (`0.0000001`, `1e15`, `1.5e-16`).
//! Rust's own formatting differs from both (`1e16`, `0.00001`), so the digits come from Ryu and
//! the layout from here.

/// `repr(value)` as CPython gives it.
pub fn repr(value: f64) -> String {
    let mut out = Vec::with_capacity(24);
    push_repr(&mut out, value);
    String::from_utf8(out).expect("ASCII")
}

/// `repr(value)` written into `out`.
pub fn push_repr(out: &mut Vec<u8>, value: f64) {
    push_layout(out, value, Layout::Python);
}

/// A double as MySQL writes it in JSON text (`my_gcvt` at the JSON width, then `.0` on a whole
/// number: sql-common/json_dom.cc); `loader.core.doubles.mysql_json_text` in Python.
pub fn push_mysql_json(out: &mut Vec<u8>, value: f64) {
    push_layout(out, value, Layout::MysqlJson);
}

#[derive(Clone, Copy, PartialEq)]
enum Layout {
    Python,
    MysqlJson,
}

fn push_layout(out: &mut Vec<u8>, value: f64, layout: Layout) {
    if value.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if value.is_infinite() {
        out.extend_from_slice(if value > 0.0 { b"inf" } else { b"-inf" });
        return;
    }
    if value == 0.0 {
        out.extend_from_slice(if value.is_sign_negative() {
            b"-0.0"
        } else {
            b"0.0"
        });
        return;
    }
    // Ryu's digits: the shortest that read back as the value, the nearest to it among them, as
    // Python's. Its layout (`1e16`, `0.001`, `123.0`) is not Python's: digits and exponent are
    // taken from it.
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(value).as_bytes();
    let (negative, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (mantissa, exp) = match text.iter().position(|&c| c == b'e') {
        Some(e) => (&text[..e], parse_exponent(&text[e + 1..])),
        None => (text, 0),
    };
    let point = mantissa
        .iter()
        .position(|&c| c == b'.')
        .unwrap_or(mantissa.len());
    let mut digits = [0u8; 40];
    let mut n = 0;
    let mut leading = 0i32; // zeros before the first significant digit, counted from the point
    for (i, &c) in mantissa.iter().enumerate() {
        if c == b'.' || (n == 0 && c == b'0') {
            if c == b'0' && i > point {
                leading += 1;
            }
            continue;
        }
        digits[n] = c;
        n += 1;
    }
    while n > 1 && digits[n - 1] == b'0' {
        n -= 1;
    }
    let digits = &digits[..n];
    // The decimal exponent of the first digit.
    let int_len = mantissa[..point].iter().skip_while(|&&c| c == b'0').count() as i32;
    let exponent = exp
        + if int_len > 0 {
            int_len - 1
        } else {
            -leading - 1
        };
    if negative {
        out.push(b'-');
    }
    let fixed = match layout {
        Layout::Python => (-4..16).contains(&exponent),
        // my_gcvt's choice at the JSON width: fixed while the point is at most 15 places from
        // the first digit, and past that while every digit still comes before the point.
        Layout::MysqlJson => exponent >= -15 && (exponent <= 14 || digits.len() as i32 > exponent + 1),
    };
    if !fixed {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        if layout == Layout::Python {
            out.push(if exponent < 0 { b'-' } else { b'+' });
            crate::digits::push_padded(out, u64::from(exponent.unsigned_abs()), 2);
        } else {
            if exponent < 0 {
                out.push(b'-');
            }
            crate::digits::push_u64(out, u64::from(exponent.unsigned_abs()));
        }
    } else if exponent < 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-exponent - 1) as usize));
        out.extend_from_slice(digits);
    } else {
        let point = exponent as usize + 1;
        if digits.len() <= point {
            out.extend_from_slice(digits);
            out.extend(std::iter::repeat_n(b'0', point - digits.len()));
            out.extend_from_slice(b".0");
        } else {
            out.extend_from_slice(&digits[..point]);
            out.push(b'.');
            out.extend_from_slice(&digits[point..]);
        }
    }
}

fn parse_exponent(text: &[u8]) -> i32 {
    let (negative, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let v = text
        .iter()
        .fold(0i32, |acc, &c| acc * 10 + i32::from(c - b'0'));
    if negative {
        -v
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::repr;

    #[test]
    fn python_layouts() {
        let cases = [
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1.5e16, "1.5e+16"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5e-7, "-2.5e-07"),
            (123.0, "123.0"),
            (0.1, "0.1"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (1106842584250265.25, "1106842584250265.2"),
            (-0.0, "-0.0"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
        ];
        for (value, text) in cases {
            assert_eq!(repr(value), text, "{value:e}");
        }
    }

    #[test]
    fn mysql_json_layouts() {
        let cases = [
            (1e-7, "0.0000001"),
            (1e-15, "0.000000000000001"),
            (1e-16, "1e-16"),
            (1e15, "1e15"),
            (1e16, "1e16"),
            (9007199254740992.0, "9.007199254740992e15"),
            (1234567890123456.8, "1234567890123456.8"),
            (100000.0, "100000.0"),
            (-2.5e-20, "-2.5e-20"),
            (1e300, "1e300"),
            (5e-324, "5e-324"),
            (0.1, "0.1"),
            (-0.0, "-0.0"),
        ];
        for (value, text) in cases {
            let mut out = Vec::new();
            super::push_mysql_json(&mut out, value);
            assert_eq!(String::from_utf8(out).unwrap(), text, "{value:e}");
        }
    }
}
