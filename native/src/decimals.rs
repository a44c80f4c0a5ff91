//! DECIMAL in MySQL's binary form (`strings/decimal.c`): its size and its text. Row values
//! (`values`) and JSON documents (`jsonb`, whose decimals carry their precision and scale) both
//! read it.

use crate::digits::{push_padded, push_u64};

const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];

/// Bytes a DECIMAL(precision, scale) value takes.
pub fn decimal_size(precision: usize, scale: usize) -> usize {
    let intg = precision - scale;
    intg / 9 * 4 + DIG2BYTES[intg % 9] + scale / 9 * 4 + DIG2BYTES[scale % 9]
}

/// DECIMAL (`strings/decimal.c`: bin2decimal): digit groups of nine per 4 big-endian bytes, a
/// shorter leading and trailing group; the sign the inverted top bit, negatives all inverted.
/// Written as `format(Decimal, "f")` writes it: `-0.50`, `12`, `-0`.
pub fn decimal(raw: &[u8], intg: usize, scale: usize, out: &mut Vec<u8>) -> Result<(), String> {
    let negative = raw[0] & 0x80 == 0;
    let mut bytes = raw.to_vec();
    bytes[0] ^= 0x80;
    if negative {
        for b in &mut bytes {
            *b ^= 0xFF;
        }
        bytes[0] &= 0x7F;
    }
    let mut pos = 0;
    let mut group = |n: usize, digits: usize| -> Result<u64, String> {
        let v = bytes[pos..pos + n]
            .iter()
            .fold(0u64, |acc, &b| acc << 8 | u64::from(b));
        pos += n;
        if v >= 10u64.pow(digits as u32) {
            return Err("DECIMAL digit group holds more digits than it may".to_owned());
        }
        Ok(v)
    };
    if negative {
        out.push(b'-');
    }
    // The integer part without its leading zeros ("0" when it is all zeros).
    let start = out.len();
    let mut seen = false;
    let mut int_group = |out: &mut Vec<u8>, v: u64, width: usize| {
        if seen {
            push_padded(out, v, width);
        } else if v > 0 {
            push_u64(out, v);
            seen = true;
        }
    };
    if intg % 9 > 0 {
        let v = group(DIG2BYTES[intg % 9], intg % 9)?;
        int_group(out, v, intg % 9);
    }
    for _ in 0..intg / 9 {
        let v = group(4, 9)?;
        int_group(out, v, 9);
    }
    if out.len() == start {
        out.push(b'0');
    }
    if scale > 0 {
        out.push(b'.');
        for _ in 0..scale / 9 {
            push_padded(out, group(4, 9)?, 9);
        }
        if scale % 9 > 0 {
            push_padded(out, group(DIG2BYTES[scale % 9], scale % 9)?, scale % 9);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(raw: &[u8], precision: usize, scale: usize) -> String {
        let mut out = Vec::new();
        decimal(raw, precision - scale, scale, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn decimals_as_python_formats_them() {
        // DECIMAL(5,2) 123.45 and -123.45 (decimal.c's own example layout).
        assert_eq!(dec(&[0x80, 0x7B, 0x2D], 5, 2), "123.45");
        assert_eq!(dec(&[0x7F, 0x84, 0xD2], 5, 2), "-123.45");
        assert_eq!(dec(&[0x80, 0x00, 0x00], 5, 2), "0.00");
        assert_eq!(dec(&[0x7F, 0xFF, 0xFF], 5, 2), "-0.00");
    }
}
