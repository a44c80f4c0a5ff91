//! MySQL's binary JSON (`sql-common/json_binary.cc`) to the JSON text the staging files hold
//! (`loader/binlog/values/jsonb.py` is the reference: members in stored order, `", "` and `": "`
//! separators, numbers as MySQL writes them (doubles through `floats::push_mysql_json`, DECIMAL in
//! fixed notation with its scale's digits), dates and times quoted, other opaque values as
//! `"base64:typeNN:..."`).
//!
//! A document this reader is not sure to print exactly as the reference does (keys out of
//! MySQL's order, which a Python dict would fold, a DECIMAL with a digit group out of range, deep
//! nesting) is refused: the Python decoder then takes the row and says what it makes of it.

use crate::csvtext::{push_base64_text, push_json_string};
use crate::digits::{push_i64, push_u64};
use crate::floats;
use crate::timetext;
use crate::decimals::{decimal, decimal_size};

const SMALL_OBJECT: u8 = 0;
const LARGE_OBJECT: u8 = 1;
const SMALL_ARRAY: u8 = 2;
const LARGE_ARRAY: u8 = 3;
const LITERAL: u8 = 4;
const INT16: u8 = 5;
const UINT16: u8 = 6;
const INT32: u8 = 7;
const UINT32: u8 = 8;
const INT64: u8 = 9;
const UINT64: u8 = 10;
const DOUBLE: u8 = 11;
const STRING: u8 = 12;
const OPAQUE: u8 = 15;

// MySQL's column types an opaque value may carry that print as text.
const TYPE_TIMESTAMP: u8 = 7;
const TYPE_DATE: u8 = 10;
const TYPE_TIME: u8 = 11;
const TYPE_DATETIME: u8 = 12;
const TYPE_NEWDECIMAL: u8 = 246;

/// MySQL refuses documents nested deeper than 100.
const MAX_DEPTH: usize = 100;

type Res = Result<(), String>;

/// The JSON text of a binary JSON document (`jsonb.json_text`); empty data is `null`.
pub fn push_json_text(out: &mut Vec<u8>, data: &[u8]) -> Res {
    if data.is_empty() {
        out.extend_from_slice(b"null");
        return Ok(());
    }
    value(out, data[0], data, 1, data.len(), 0)
}

fn bytes_at(data: &[u8], pos: usize, n: usize, end: usize) -> Result<&[u8], String> {
    match pos.checked_add(n) {
        Some(e) if e <= end && e <= data.len() => Ok(&data[pos..e]),
        _ => Err("binary JSON truncated".to_owned()),
    }
}

fn uint(data: &[u8], pos: usize, n: usize) -> Result<usize, String> {
    Ok(bytes_at(data, pos, n, data.len())?
        .iter()
        .rev()
        .fold(0usize, |acc, &b| acc << 8 | usize::from(b)))
}

/// A length of 1-5 bytes, 7 bits each, low group first; and where its data starts.
fn varlen(data: &[u8], pos: usize) -> Result<(usize, usize), String> {
    let mut v = 0usize;
    for i in 0..5 {
        let b = *data
            .get(pos + i)
            .ok_or("binary JSON truncated in a length")?;
        v |= usize::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((v, pos + i + 1));
        }
    }
    Err("binary JSON length longer than 5 bytes".to_owned())
}

fn value(out: &mut Vec<u8>, t: u8, data: &[u8], pos: usize, end: usize, depth: usize) -> Res {
    match t {
        SMALL_OBJECT | LARGE_OBJECT | SMALL_ARRAY | LARGE_ARRAY => {
            container(out, t, data, pos, end, depth)
        }
        LITERAL => {
            let text: &[u8] = match bytes_at(data, pos, 1, end)?[0] {
                0 => b"null",
                1 => b"true",
                2 => b"false",
                other => return Err(format!("unknown JSON literal {other}")),
            };
            out.extend_from_slice(text);
            Ok(())
        }
        INT16 => {
            let b = bytes_at(data, pos, 2, end)?;
            push_i64(out, i64::from(i16::from_le_bytes([b[0], b[1]])));
            Ok(())
        }
        UINT16 => {
            let b = bytes_at(data, pos, 2, end)?;
            push_u64(out, u64::from(u16::from_le_bytes([b[0], b[1]])));
            Ok(())
        }
        INT32 => {
            let b = bytes_at(data, pos, 4, end)?;
            push_i64(out, i64::from(i32::from_le_bytes(b.try_into().unwrap())));
            Ok(())
        }
        UINT32 => {
            let b = bytes_at(data, pos, 4, end)?;
            push_u64(out, u64::from(u32::from_le_bytes(b.try_into().unwrap())));
            Ok(())
        }
        INT64 => {
            let b = bytes_at(data, pos, 8, end)?;
            push_i64(out, i64::from_le_bytes(b.try_into().unwrap()));
            Ok(())
        }
        UINT64 => {
            let b = bytes_at(data, pos, 8, end)?;
            push_u64(out, u64::from_le_bytes(b.try_into().unwrap()));
            Ok(())
        }
        DOUBLE => {
            let b = bytes_at(data, pos, 8, end)?;
            let v = f64::from_le_bytes(b.try_into().unwrap());
            if !v.is_finite() {
                return Err("JSON double is not finite".to_owned());
            }
            floats::push_mysql_json(out, v);
            Ok(())
        }
        STRING => {
            let (n, start) = varlen(data, pos)?;
            let text = bytes_at(data, start, n, end)?;
            std::str::from_utf8(text).map_err(|e| format!("JSON string: {e}"))?;
            push_json_string(out, text);
            Ok(())
        }
        OPAQUE => {
            let mysql_type = bytes_at(data, pos, 1, end)?[0];
            let (n, start) = varlen(data, pos + 1)?;
            opaque(out, mysql_type, bytes_at(data, start, n, end)?)
        }
        _ => Err(format!("unknown JSON value type {t}")),
    }
}

/// A double as the reference writes it: Python's `repr`, the exponent without `+` or leading
/// zeros (`1e16`, `1e-5`).
fn opaque(out: &mut Vec<u8>, mysql_type: u8, raw: &[u8]) -> Res {
    match mysql_type {
        TYPE_NEWDECIMAL => {
            if raw.len() < 2 {
                return Err("JSON decimal truncated".to_owned());
            }
            let (precision, scale) = (usize::from(raw[0]), usize::from(raw[1]));
            if !(1..=65).contains(&precision)
                || scale > precision
                || scale > 30
                || raw.len() - 2 != decimal_size(precision, scale)
            {
                return Err(format!(
                    "JSON decimal ({precision}, {scale}) of {} bytes",
                    raw.len() - 2
                ));
            }
            let mut fixed = Vec::with_capacity(precision + 3);
            decimal(&raw[2..], precision - scale, scale, &mut fixed)?;
            out.extend_from_slice(&fixed); // MySQL's text: fixed, its scale's digits
            Ok(())
        }
        TYPE_DATE | TYPE_DATETIME | TYPE_TIMESTAMP | TYPE_TIME => {
            if raw.len() < 8 {
                return Err("JSON temporal value truncated".to_owned());
            }
            let packed = i128::from(i64::from_le_bytes(raw[..8].try_into().unwrap()));
            out.push(b'"');
            let start = out.len();
            if mysql_type == TYPE_TIME {
                timetext::time_packed(out, packed, 6);
            } else {
                timetext::datetime_packed(out, packed, 6);
                if mysql_type == TYPE_DATE {
                    out.truncate(start + 10.min(out.len() - start));
                }
            }
            out.push(b'"');
            Ok(())
        }
        _ => {
            out.extend_from_slice(b"\"base64:type");
            push_u64(out, u64::from(mysql_type));
            out.push(b':');
            push_base64_text(out, raw);
            out.push(b'"');
            Ok(())
        }
    }
}

fn container(out: &mut Vec<u8>, t: u8, data: &[u8], base: usize, end: usize, depth: usize) -> Res {
    if depth >= MAX_DEPTH {
        return Err("JSON nested deeper than 100".to_owned());
    }
    let large = t == LARGE_OBJECT || t == LARGE_ARRAY;
    let step = if large { 4 } else { 2 };
    let count = uint(data, base, step)?;
    let size = uint(data, base + step, step)?;
    let cend = base
        .checked_add(size)
        .filter(|&e| e <= end)
        .ok_or("JSON container runs past its document")?;
    let object = t == SMALL_OBJECT || t == LARGE_OBJECT;
    let mut pos = base + 2 * step;
    let mut keys: Vec<&[u8]> = Vec::new();
    if object {
        for _ in 0..count {
            let koff = uint(data, pos, step)?;
            let klen = uint(data, pos + step, 2)?;
            pos += step + 2;
            let key = bytes_at(data, base + koff, klen, cend)
                .map_err(|_| "JSON key runs past its object".to_owned())?;
            std::str::from_utf8(key).map_err(|e| format!("JSON key: {e}"))?;
            // MySQL's order (length, then bytes) leaves no two keys alike; out of it, a key
            // may repeat, which the reference's dict folds.
            if let Some(prev) = keys.last() {
                if (prev.len(), *prev) >= (key.len(), key) {
                    return Err("JSON object keys out of MySQL's order".to_owned());
                }
            }
            keys.push(key);
        }
    }
    out.push(if object { b'{' } else { b'[' });
    for i in 0..count {
        if pos + 1 + step > cend {
            return Err("JSON value entry runs past its container".to_owned());
        }
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        if let Some(key) = keys.get(i) {
            push_json_string(out, key);
            out.extend_from_slice(b": ");
        }
        let vtype = data[pos];
        let inline =
            matches!(vtype, LITERAL | INT16 | UINT16) || (large && matches!(vtype, INT32 | UINT32));
        if inline {
            value(out, vtype, data, pos + 1, pos + 1 + step, depth + 1)?;
        } else {
            let voff = uint(data, pos + 1, step)?;
            if base + voff >= cend {
                return Err("JSON value offset runs past its container".to_owned());
            }
            value(out, vtype, data, base + voff, cend, depth + 1)?;
        }
        pos += 1 + step;
    }
    out.push(if object { b'}' } else { b']' });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(data: &[u8]) -> String {
        let mut out = Vec::new();
        push_json_text(&mut out, data).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn scalars_and_a_small_object() {
        assert_eq!(text(b""), "null");
        assert_eq!(text(&[STRING, 3, 0xC3, 0xA9, b'!']), "\"é!\"");
        // {"a": -5, "bb": true}
        let doc = [
            SMALL_OBJECT,
            2,
            0,
            21,
            0,
            18,
            0,
            1,
            0,
            19,
            0,
            2,
            0,
            INT16,
            0xFB,
            0xFF,
            LITERAL,
            1,
            0,
            b'a',
            b'b',
            b'b',
        ];
        assert_eq!(text(&doc), "{\"a\": -5, \"bb\": true}");
    }

    #[test]
    fn doubles_as_mysql_writes_them() {
        for (v, t) in [
            (1e16, "1e16"),
            (1e15, "1e15"),
            (1e-5, "0.00001"),
            (0.5, "0.5"),
            (-2.5e-300, "-2.5e-300"),
        ] {
            let mut doc = vec![DOUBLE];
            doc.extend_from_slice(&f64::to_le_bytes(v));
            assert_eq!(text(&doc), t);
        }
    }

    #[test]
    fn damage_is_an_error_not_a_panic() {
        assert!(push_json_text(&mut Vec::new(), &[SMALL_OBJECT, 5, 0]).is_err());
        assert!(push_json_text(&mut Vec::new(), &[LARGE_ARRAY, 0xFF, 0xFF, 0xFF, 0xFF]).is_err());
        assert!(push_json_text(&mut Vec::new(), &[OPAQUE, TYPE_NEWDECIMAL, 1, 0]).is_err());
    }
}
