//! One column's value in a row image to its CSV field (`loader/binlog/values/` decodes, and
//! `loader/staging/csvformat.py` writes, the same values; both are the reference).

use crate::csvtext::{push_base64, push_json_string, push_quoted};
use crate::decimals::decimal;
use crate::digits::{push_i64, push_u64};
use crate::floats;
use crate::jsontext;
use crate::timetext::{self, FRAC_BYTES, HIRES_DATETIME_BYTES, HIRES_TIME_BYTES};

/// How a string column's bytes become text (strictly: bytes the Python codec refuses are
/// refused).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Text {
    /// Kept as bytes: base64.
    Binary,
    Utf8,
    Ascii,
    /// A charset of one byte per character: the character of each byte, None where the charset
    /// leaves it undefined (`charsets.byte_table`).
    Table(Box<[Option<char>; 256]>),
    Utf16Be,
    Utf16Le,
    Utf32Be,
}

/// A column as the plan reads it (`rowplan._reader` picks the same).
#[derive(Clone, Debug)]
pub enum Col {
    Int {
        size: usize,
        unsigned: bool,
    },
    Float,
    Double,
    Year,
    Bit {
        size: usize,
    },
    Decimal {
        intg: usize,
        scale: usize,
        size: usize,
    },
    Date,
    Time,
    Time2 {
        fsp: usize,
    },
    Datetime,
    Datetime2 {
        fsp: usize,
    },
    Timestamp,
    Timestamp2 {
        fsp: usize,
    },
    TimeHires {
        fsp: usize,
    },
    DatetimeHires {
        fsp: usize,
    },
    TimestampHires {
        fsp: usize,
    },
    /// VARCHAR, CHAR, BINARY, BLOB/TEXT, GEOMETRY, VECTOR: a length in `len_bytes`, then the
    /// bytes; BINARY(n) is padded back to `pad` zero bytes.
    Bytes {
        len_bytes: usize,
        text: Text,
        pad: usize,
    },
    Enum {
        size: usize,
        labels: Vec<Vec<u8>>,
    },
    Set {
        size: usize,
        labels: Vec<Vec<u8>>,
    },
    /// MySQL's binary JSON: a length in `len_bytes`, then the document.
    Json {
        len_bytes: usize,
    },
}

/// A row image's bytes, read forward; every read checks the bounds.
pub struct Cursor<'a> {
    pub data: &'a [u8],
    pub off: usize,
}

impl<'a> Cursor<'a> {
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.off.checked_add(n).filter(|&e| e <= self.data.len());
        match end {
            Some(end) => {
                let s = &self.data[self.off..end];
                self.off = end;
                Ok(s)
            }
            None => Err(format!("{what} value runs past the event")),
        }
    }

    fn le(&mut self, n: usize, what: &str) -> Result<u64, String> {
        Ok(self
            .take(n, what)?
            .iter()
            .rev()
            .fold(0u64, |acc, &b| acc << 8 | u64::from(b)))
    }
}

/// What a value is written as: a field of the staging CSV, or a JSON value of `binlog show`
/// (`loader/binlog/show.py` is that one's reference).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Out {
    Csv,
    Json,
}

impl Out {
    fn text(self, out: &mut Vec<u8>, text: &[u8]) -> Result<(), String> {
        match self {
            Out::Csv => push_quoted(out, text),
            Out::Json => {
                push_json_string(out, text);
                Ok(())
            }
        }
    }

    fn double(self, out: &mut Vec<u8>, v: f64) {
        match self {
            Out::Json if v.is_nan() => out.extend_from_slice(b"NaN"),
            Out::Json if v.is_infinite() => {
                out.extend_from_slice(if v > 0.0 { b"Infinity" } else { b"-Infinity" })
            }
            _ => floats::push_repr(out, v),
        }
    }
}

impl Col {
    /// Read one value and write it as `how` says.
    pub fn encode_as(
        &self,
        cur: &mut Cursor<'_>,
        out: &mut Vec<u8>,
        how: Out,
    ) -> Result<(), String> {
        match self {
            Col::Int { size, unsigned } => {
                let raw = cur.le(*size, "integer")?;
                if *unsigned {
                    push_u64(out, raw);
                } else {
                    let bits = 8 * *size as u32;
                    let v = if bits < 64 && raw >> (bits - 1) & 1 == 1 {
                        raw as i64 - (1i64 << bits)
                    } else {
                        raw as i64
                    };
                    push_i64(out, v);
                }
            }
            Col::Float => {
                let b = cur.take(4, "FLOAT")?;
                how.double(out, f64::from(f32::from_le_bytes(b.try_into().unwrap())));
            }
            Col::Double => {
                let b = cur.take(8, "DOUBLE")?;
                how.double(out, f64::from_le_bytes(b.try_into().unwrap()));
            }
            Col::Year => {
                let v = cur.take(1, "YEAR")?[0];
                push_u64(out, if v == 0 { 0 } else { 1900 + u64::from(v) });
            }
            Col::Bit { size } => {
                let b = cur.take(*size, "BIT")?;
                push_u64(out, b.iter().fold(0u64, |acc, &x| acc << 8 | u64::from(x)));
            }
            // JSON: a string (exact).
            Col::Decimal { intg, scale, size } => {
                if how == Out::Json {
                    out.push(b'"');
                }
                decimal(cur.take(*size, "DECIMAL")?, *intg, *scale, out)?;
                if how == Out::Json {
                    out.push(b'"');
                }
            }
            Col::Date => quoted(out, timetext::date, cur.take(3, "DATE")?),
            Col::Time => quoted(out, timetext::time, cur.take(3, "TIME")?),
            Col::Time2 { fsp } => {
                let b = cur.take(3 + FRAC_BYTES[*fsp], "TIME2")?;
                quoted(out, |o, b| timetext::time2(o, b, *fsp), b);
            }
            Col::Datetime => quoted(out, timetext::datetime, cur.take(8, "DATETIME")?),
            Col::Datetime2 { fsp } => {
                let b = cur.take(5 + FRAC_BYTES[*fsp], "DATETIME2")?;
                quoted(out, |o, b| timetext::datetime2(o, b, *fsp), b);
            }
            Col::Timestamp => quoted(out, timetext::timestamp, cur.take(4, "TIMESTAMP")?),
            Col::Timestamp2 { fsp } => {
                let b = cur.take(4 + FRAC_BYTES[*fsp], "TIMESTAMP2")?;
                quoted(out, |o, b| timetext::timestamp2(o, b, *fsp), b);
            }
            Col::TimeHires { fsp } => {
                let b = cur.take(HIRES_TIME_BYTES[*fsp], "TIME")?;
                quoted(out, |o, b| timetext::time_hires(o, b, *fsp), b);
            }
            Col::DatetimeHires { fsp } => {
                let b = cur.take(HIRES_DATETIME_BYTES[*fsp], "DATETIME")?;
                quoted(out, |o, b| timetext::datetime_hires(o, b, *fsp), b);
            }
            Col::TimestampHires { fsp } => {
                let b = cur.take(4 + FRAC_BYTES[*fsp], "TIMESTAMP")?;
                quoted(out, |o, b| timetext::timestamp_hires(o, b, *fsp), b);
            }
            Col::Bytes {
                len_bytes,
                text,
                pad,
            } => {
                let n = cur.le(*len_bytes, "string")?;
                let value =
                    cur.take(usize::try_from(n).map_err(|_| "string too long")?, "string")?;
                match text {
                    Text::Binary if value.len() < *pad => {
                        let mut padded = value.to_vec();
                        padded.resize(*pad, 0);
                        push_base64(out, &padded);
                    }
                    Text::Binary => push_base64(out, value),
                    Text::Utf8 => {
                        std::str::from_utf8(value).map_err(|e| format!("invalid utf-8: {e}"))?;
                        how.text(out, value)?;
                    }
                    Text::Ascii => {
                        if let Some(b) = value.iter().find(|b| !b.is_ascii()) {
                            return Err(format!("invalid ascii byte {b:#x}"));
                        }
                        how.text(out, value)?;
                    }
                    Text::Table(table) => how.text(out, &by_table(table, value)?)?,
                    Text::Utf16Be => how.text(out, &utf16(value, u16::from_be_bytes)?)?,
                    Text::Utf16Le => how.text(out, &utf16(value, u16::from_le_bytes)?)?,
                    Text::Utf32Be => how.text(out, &utf32_be(value)?)?,
                }
            }
            Col::Enum { size, labels } => {
                let idx = cur.le(*size, "ENUM")? as usize;
                if idx == 0 {
                    out.extend_from_slice(b"\"\"");
                } else {
                    let label = labels
                        .get(idx - 1)
                        .ok_or_else(|| format!("ENUM index {idx} beyond its labels"))?;
                    how.text(out, label)?;
                }
            }
            Col::Set { size, labels } => {
                let mask = cur.le(*size, "SET")?;
                if labels.len() < 64 && mask >> labels.len() != 0 {
                    return Err(format!("SET bitmask {mask:#x} has bits beyond its labels"));
                }
                let members: Vec<&[u8]> = labels
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask >> i & 1 == 1)
                    .map(|(_, l)| l.as_slice())
                    .collect();
                let joined = members.join(&b","[..]);
                how.text(out, &joined)?;
            }
            Col::Json { len_bytes } => {
                let n = cur.le(*len_bytes, "JSON")?;
                let doc = cur.take(usize::try_from(n).map_err(|_| "JSON too long")?, "JSON")?;
                let mut text = Vec::with_capacity(doc.len() * 2 + 4);
                jsontext::push_json_text(&mut text, doc)?;
                how.text(out, &text)?;
            }
        }
        Ok(())
    }
}

/// Temporal text (of the value's bytes `b`) needs no quote doubling.
fn quoted<'a>(out: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>, &'a [u8]), b: &'a [u8]) {
    out.push(b'"');
    f(out, b);
    out.push(b'"');
}

fn by_table(table: &[Option<char>; 256], value: &[u8]) -> Result<Vec<u8>, String> {
    let mut text = String::with_capacity(value.len() + 8);
    for &b in value {
        text.push(
            table[usize::from(b)].ok_or_else(|| format!("byte {b:#x} undefined in its charset"))?,
        );
    }
    Ok(text.into_bytes())
}

fn utf16(value: &[u8], unit: fn([u8; 2]) -> u16) -> Result<Vec<u8>, String> {
    if value.len() % 2 != 0 {
        return Err("UTF-16 text of an odd length".to_owned());
    }
    let units = value.chunks_exact(2).map(|c| unit([c[0], c[1]]));
    let text: String = char::decode_utf16(units)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("invalid UTF-16: {e}"))?;
    Ok(text.into_bytes())
}

fn utf32_be(value: &[u8]) -> Result<Vec<u8>, String> {
    if value.len() % 4 != 0 {
        return Err("UTF-32 text of a length not a multiple of 4".to_owned());
    }
    let mut text = String::with_capacity(value.len());
    for c in value.chunks_exact(4) {
        let v = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        text.push(char::from_u32(v).ok_or_else(|| format!("invalid UTF-32 code point {v:#x}"))?);
    }
    Ok(text.into_bytes())
}
