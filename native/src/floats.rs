//! Float text as Python's `repr` writes it: the shortest digits that read back as the same
//! double, in fixed notation from 1e-4 up to 1e16 and in scientific notation (`1e+16`, `1e-05`)
//! outside, `.0` on whole numbers; `inf`, `-inf`, `nan`, `-0.0`. Rust's own formatting differs
//! (`1e16`, `0.00001`), so the digits come from it and the layout from here.

/// `repr(value)` as CPython gives it.
pub fn repr(value: f64) -> String {
    if value.is_nan() {
        return "nan".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() {
            "-0.0"
        } else {
            "0.0"
        }
        .to_owned();
    }
    // Rust's shortest round-trip digits, as d.ddde±x. Where two strings of that many digits read
    // back as the value, Python takes the one nearer to it (its even one on a tie), Rust not
    // always: the value correctly rounded to that many digits is Python's, when it reads back.
    let shortest = format!("{value:e}");
    let digit_count = shortest
        .split_once('e')
        .map_or(0, |(m, _)| m.chars().filter(char::is_ascii_digit).count());
    let nearest = format!("{value:.*e}", digit_count.saturating_sub(1));
    let scientific = if nearest.parse::<f64>() == Ok(value) {
        nearest
    } else {
        shortest
    };
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("LowerExp writes an exponent");
    let exponent: i32 = exponent
        .parse()
        .expect("LowerExp writes a decimal exponent");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut out = String::with_capacity(digits.len() + 8);
    out.push_str(sign);
    if !(-4..16).contains(&exponent) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exponent.abs()));
    } else if exponent < 0 {
        out.push_str("0.");
        for _ in 0..(-exponent - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let point = exponent as usize + 1;
        if digits.len() <= point {
            out.push_str(&digits);
            for _ in digits.len()..point {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
    out
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
}
