//! The staging files' CSV field text (`loader/staging/csvformat.py` is the definition): text
//! quoted with inner quotes doubled, binary values base64 and quoted, NULL an empty field.

/// What Spark reads an empty quoted field as; a text value equal to it cannot be staged.
pub const EMPTY_MARKER: &[u8] = "\u{0}\u{e000}loader-empty-string\u{e000}\u{0}".as_bytes();

/// `"text"`, inner quotes doubled; `text` is UTF-8.
pub fn push_quoted(out: &mut Vec<u8>, text: &[u8]) -> Result<(), String> {
    if text == EMPTY_MARKER {
        return Err("a text value equals the staging format's empty-string marker".to_owned());
    }
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in text.iter().enumerate() {
        if b == b'"' {
            out.extend_from_slice(&text[start..=i]);
            out.push(b'"');
            start = i + 1;
        }
    }
    out.extend_from_slice(&text[start..]);
    out.push(b'"');
    Ok(())
}

/// A JSON string as Python's `json.dumps(text, ensure_ascii=False)` writes it: `"` and `\\`
/// escaped, the control characters as `\n`, `\t`... or `\u00XX`; `text` is UTF-8.
pub fn push_json_string(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in text.iter().enumerate() {
        let escaped: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0C => b"\\f",
            0..=0x1F => b"",
            _ => continue,
        };
        out.extend_from_slice(&text[start..i]);
        if escaped.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 15)],
            ]);
        } else {
            out.extend_from_slice(escaped);
        }
        start = i + 1;
    }
    out.extend_from_slice(&text[start..]);
    out.push(b'"');
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `"base64"` of `data` (standard alphabet, padded), as Python's `base64.b64encode`.
pub fn push_base64(out: &mut Vec<u8>, data: &[u8]) {
    out.reserve(data.len().div_ceil(3) * 4 + 2);
    out.push(b'"');
    push_base64_text(out, data);
    out.push(b'"');
}

/// The base64 text of `data`, unquoted.
pub fn push_base64_text(out: &mut Vec<u8>, data: &[u8]) {
    let mut chunks = data.chunks_exact(3);
    for c in &mut chunks {
        let n = u32::from(c[0]) << 16 | u32::from(c[1]) << 8 | u32::from(c[2]);
        out.extend_from_slice(&[
            B64[(n >> 18) as usize & 63],
            B64[(n >> 12) as usize & 63],
            B64[(n >> 6) as usize & 63],
            B64[n as usize & 63],
        ]);
    }
    match *chunks.remainder() {
        [a] => {
            let n = u32::from(a) << 16;
            out.extend_from_slice(&[
                B64[(n >> 18) as usize & 63],
                B64[(n >> 12) as usize & 63],
                b'=',
                b'=',
            ]);
        }
        [a, b] => {
            let n = u32::from(a) << 16 | u32::from(b) << 8;
            out.extend_from_slice(&[
                B64[(n >> 18) as usize & 63],
                B64[(n >> 12) as usize & 63],
                B64[(n >> 6) as usize & 63],
                b'=',
            ]);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_doubles_quotes() {
        let mut out = Vec::new();
        push_quoted(&mut out, b"a\"b\"\"").unwrap();
        assert_eq!(out, b"\"a\"\"b\"\"\"\"\"");
        assert!(push_quoted(&mut out, EMPTY_MARKER).is_err());
    }

    #[test]
    fn base64_pads() {
        for (data, text) in [
            (&b""[..], "\"\""),
            (b"f", "\"Zg==\""),
            (b"fo", "\"Zm8=\""),
            (b"foo", "\"Zm9v\""),
        ] {
            let mut out = Vec::new();
            push_base64(&mut out, data);
            assert_eq!(out, text.as_bytes());
        }
    }
}
