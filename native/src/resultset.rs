//! A text-protocol result set's rows to columns of Arrow's layout, so that a table's copy reaches
//! pyarrow without one Python step per row or value. Each column collects its values as bytes
//! (Arrow's large binary: 64-bit offsets, the values end to end, a validity bitmap); Python
//! wraps the buffers as Arrow arrays without copying and casts them to the column's type.

use std::borrow::Cow;

const MAX_PACKET: usize = 0xFF_FFFF;
const NULL: u8 = 0xFB;

/// One column's values so far, in Arrow's large binary layout.
pub struct Column {
    pub offsets: Vec<i64>,
    pub data: Vec<u8>,
    pub validity: Vec<u8>,
    pub nulls: usize,
}

impl Column {
    fn new() -> Self {
        Self {
            offsets: vec![0],
            data: Vec::new(),
            validity: Vec::new(),
            nulls: 0,
        }
    }

    fn push(&mut self, row: usize, value: Option<&[u8]>) {
        if row % 8 == 0 {
            self.validity.push(0);
        }
        match value {
            Some(v) => {
                self.data.extend_from_slice(v);
                *self.validity.last_mut().expect("a byte per 8 rows") |= 1 << (row % 8);
            }
            None => self.nulls += 1,
        }
        self.offsets.push(self.data.len() as i64);
    }
}

/// How reading the result set stands after a feed.
#[derive(Debug, PartialEq, Eq)]
pub enum State {
    /// More packets to come.
    More,
    /// The end-of-rows packet was read.
    Done,
    /// The server sent an error packet (its payload).
    Error(Vec<u8>),
}

/// The rows of one result set, after its column definitions, as they are read.
pub struct TextRows {
    width: usize,
    buf: Vec<u8>,
    at: usize,
    pub rows: usize,
    pub columns: Vec<Column>,
}

/// A length-encoded integer at the start of `data`: (value, bytes it took); None when cut short
/// or not one (0xFB, NULL, is the caller's; 0xFF is not an integer's first byte).
fn lenenc(data: &[u8]) -> Option<(u64, usize)> {
    let first = *data.first()?;
    let take = |n: usize| -> Option<(u64, usize)> {
        let bytes = data.get(1..1 + n)?;
        let mut v = 0u64;
        for (i, b) in bytes.iter().enumerate() {
            v |= u64::from(*b) << (8 * i);
        }
        Some((v, 1 + n))
    };
    match first {
        0..=0xFA => Some((u64::from(first), 1)),
        0xFC => take(2),
        0xFD => take(3),
        0xFE => take(8),
        _ => None,
    }
}

/// The payload of the packet at `at` whole, if `buf` holds it (a payload of 16 MB or more
/// continues in the packets after it), and where the packet after it starts.
fn next_payload(buf: &[u8], at: usize) -> Option<(Cow<'_, [u8]>, usize)> {
    let mut off = at;
    let mut whole: Option<Vec<u8>> = None;
    loop {
        let head = buf.get(off..off + 4)?;
        let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
        let part = buf.get(off + 4..off + 4 + len)?;
        off += 4 + len;
        match whole.as_mut() {
            None if len < MAX_PACKET => return Some((Cow::Borrowed(part), off)),
            None => whole = Some(part.to_vec()),
            Some(w) => w.extend_from_slice(part),
        }
        if len < MAX_PACKET {
            return Some((Cow::Owned(whole.expect("filled above")), off));
        }
    }
}

/// One row packet's values into the columns, as row `row`.
fn take_row(columns: &mut [Column], row: usize, payload: &[u8]) -> Result<(), String> {
    let mut off = 0;
    for (c, column) in columns.iter_mut().enumerate() {
        let rest = payload.get(off..).unwrap_or_default();
        if rest.first() == Some(&NULL) {
            column.push(row, None);
            off += 1;
            continue;
        }
        let (len, took) = lenenc(rest).ok_or_else(|| {
            format!(
                "row {} column {}: not a length-encoded value",
                row + 1,
                c + 1
            )
        })?;
        let start = off + took;
        let end = start.saturating_add(len as usize);
        let value = payload.get(start..end).ok_or_else(|| {
            format!(
                "row {} column {}: the value runs past its packet",
                row + 1,
                c + 1
            )
        })?;
        column.push(row, Some(value));
        off = end;
    }
    if off != payload.len() {
        return Err(format!(
            "row {}: {} bytes after its {} columns",
            row + 1,
            payload.len() - off,
            columns.len()
        ));
    }
    Ok(())
}

impl TextRows {
    pub fn new(width: usize) -> Self {
        Self {
            width,
            buf: Vec::new(),
            at: 0,
            rows: 0,
            columns: (0..width).map(|_| Column::new()).collect(),
        }
    }

    /// `chunk` added to what was read; every whole row packet in it taken into the columns.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<State, String> {
        if self.at > 0 && self.at >= self.buf.len() / 2 {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        self.buf.extend_from_slice(chunk);
        loop {
            let Some((payload, next)) = next_payload(&self.buf, self.at) else {
                return Ok(State::More);
            };
            match payload.first() {
                Some(0xFF) => return Ok(State::Error(payload.into_owned())),
                // The end of the rows: an EOF packet, or an OK packet under CLIENT_DEPRECATE_EOF
                // (a row starting with 0xFE is a value of 16 MB or more: a longer payload).
                Some(0xFE) if payload.len() < 9 => {
                    self.at = next;
                    return Ok(State::Done);
                }
                _ => {}
            }
            take_row(&mut self.columns, self.rows, &payload)?;
            self.rows += 1;
            self.at = next;
        }
    }

    /// The rows taken so far, as columns; the reader starts again empty.
    pub fn take(&mut self) -> (usize, Vec<Column>) {
        let columns = (0..self.width).map(|_| Column::new()).collect();
        let rows = std::mem::take(&mut self.rows);
        (rows, std::mem::replace(&mut self.columns, columns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut p = vec![len as u8, (len >> 8) as u8, (len >> 16) as u8, seq];
        p.extend_from_slice(payload);
        p
    }

    fn value(v: &[u8]) -> Vec<u8> {
        let mut out = if v.len() < 0xFB {
            vec![v.len() as u8]
        } else {
            let mut o = vec![0xFC];
            o.extend_from_slice(&(v.len() as u16).to_le_bytes());
            o
        };
        out.extend_from_slice(v);
        out
    }

    #[test]
    fn rows_become_columns_with_nulls_and_long_values() {
        let long = vec![b'x'; 300];
        let mut stream = Vec::new();
        stream.extend(packet(5, &[value(b"1"), vec![NULL]].concat()));
        stream.extend(packet(6, &[value(b""), value(&long)].concat()));
        stream.extend(packet(7, &[0xFE, 0, 0, 2, 0]));
        let mut rows = TextRows::new(2);
        // Fed a byte at a time: packets cut anywhere are taken once whole.
        for (i, b) in stream.iter().enumerate() {
            let state = rows.feed(&[*b]).unwrap();
            assert_eq!(state == State::Done, i == stream.len() - 1);
        }
        let (n, cols) = rows.take();
        assert_eq!(n, 2);
        assert_eq!(cols[0].offsets, vec![0, 1, 1]);
        assert_eq!(cols[0].data, b"1");
        assert_eq!(cols[0].validity, vec![0b11]);
        assert_eq!(cols[1].offsets, vec![0, 0, 300]);
        assert_eq!(cols[1].validity, vec![0b10]);
        assert_eq!((cols[0].nulls, cols[1].nulls), (0, 1));
        assert_eq!(rows.take().0, 0);
    }

    #[test]
    fn a_value_of_16_mb_spans_packets_and_starts_with_0xfe() {
        let big = vec![7u8; MAX_PACKET + 10];
        let mut payload = vec![0xFE];
        payload.extend_from_slice(&(big.len() as u64).to_le_bytes());
        payload.extend_from_slice(&big);
        let mut stream = packet(1, &payload[..MAX_PACKET]);
        stream.extend(packet(2, &payload[MAX_PACKET..]));
        stream.extend(packet(3, &[0xFE, 0, 0, 2, 0]));
        let mut rows = TextRows::new(1);
        assert_eq!(rows.feed(&stream).unwrap(), State::Done);
        let (n, cols) = rows.take();
        assert_eq!(n, 1);
        assert_eq!(cols[0].data.len(), big.len());
    }

    #[test]
    fn an_error_packet_and_a_short_row_are_reported() {
        let mut rows = TextRows::new(2);
        let err = [
            0xFF, 0x1D, 0x05, b'#', b'7', b'0', b'1', b'0', b'0', b'b', b'y', b'e',
        ];
        assert_eq!(
            rows.feed(&packet(1, &err)).unwrap(),
            State::Error(err.to_vec())
        );
        let mut rows = TextRows::new(2);
        assert!(rows
            .feed(&packet(1, &value(b"only one")))
            .unwrap_err()
            .contains("row 1 column 2"));
    }
}
