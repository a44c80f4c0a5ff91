//! Row images of a rows event to the change rows of the staging files: a plan per table (one
//! `Col` per column, built from the table map once), and the CSV lines of each image.

use crate::values::{Col, Cursor, Out};

/// The columns of one table map, in order.
pub struct Plan {
    pub cols: Vec<Col>,
}

/// The value fields of each change row of one rows event (an update's before image, then its
/// after image), waiting for their transaction's seqno and commit time.
pub struct Encoded {
    /// `I`, `D` or `U`.
    pub kind: u8,
    pub body: Vec<u8>,
    /// Where each line's fields end in `body`.
    pub ends: Vec<usize>,
}

impl Plan {
    /// Every row image from `rows_off` to the end of `data`: each image a null bitmap and the
    /// values of the columns it does not mark NULL (every column present).
    pub fn encode(&self, data: &[u8], rows_off: usize, kind: u8) -> Result<Encoded, String> {
        self.encode_as(data, rows_off, kind, None)
    }

    /// The same images as JSON objects of `binlog show` (`{"name": value, ...}`), the keys
    /// given as their JSON text.
    pub fn encode_json(
        &self,
        data: &[u8],
        rows_off: usize,
        kind: u8,
        keys: &[Vec<u8>],
    ) -> Result<Encoded, String> {
        if keys.len() != self.cols.len() {
            return Err(format!(
                "{} names for {} columns",
                keys.len(),
                self.cols.len()
            ));
        }
        self.encode_as(data, rows_off, kind, Some(keys))
    }

    fn encode_as(
        &self,
        data: &[u8],
        rows_off: usize,
        kind: u8,
        keys: Option<&[Vec<u8>]>,
    ) -> Result<Encoded, String> {
        let nb = self.cols.len().div_ceil(8);
        let images = if kind == b'U' { 2 } else { 1 };
        let how = if keys.is_some() { Out::Json } else { Out::Csv };
        let mut cur = Cursor {
            data,
            off: rows_off,
        };
        let mut body = Vec::with_capacity((data.len() - rows_off.min(data.len())) * 2);
        let mut ends = Vec::new();
        let mut row = 0usize;
        while cur.off < data.len() {
            for _ in 0..images {
                let nulls = cur
                    .take(nb, "null bitmap")
                    .map_err(|e| format!("row {row}: {e}"))?;
                if keys.is_some() {
                    body.push(b'{');
                }
                for (i, col) in self.cols.iter().enumerate() {
                    if let Some(keys) = keys {
                        if i > 0 {
                            body.extend_from_slice(b", ");
                        }
                        body.extend_from_slice(&keys[i]);
                        body.extend_from_slice(b": ");
                    } else if i > 0 {
                        body.push(b',');
                    }
                    if nulls[i >> 3] >> (i & 7) & 1 == 1 {
                        if keys.is_some() {
                            body.extend_from_slice(b"null");
                        }
                        continue;
                    }
                    col.encode_as(&mut cur, &mut body, how)
                        .map_err(|e| format!("row {row}, column {}: {e}", i + 1))?;
                }
                if keys.is_some() {
                    body.push(b'}');
                }
                ends.push(body.len());
            }
            row += 1;
        }
        Ok(Encoded { kind, body, ends })
    }
}

impl Encoded {
    /// Lines (rows) of changes: an update makes two.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Line `i` whole: `op,seqno,row_id,"commit_ts",fields\n`.
    pub fn push_line(
        &self,
        out: &mut Vec<u8>,
        i: usize,
        seqno: u64,
        first_row_id: u64,
        commit_ts: &[u8],
    ) {
        use crate::digits::push_u64;
        let op = match self.kind {
            b'U' if i % 2 == 0 => b'D',
            b'U' => b'I',
            k => k,
        };
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        out.push(op);
        out.push(b',');
        push_u64(out, seqno);
        out.push(b',');
        push_u64(out, first_row_id + i as u64);
        out.extend_from_slice(b",\"");
        out.extend_from_slice(commit_ts);
        out.extend_from_slice(b"\",");
        out.extend_from_slice(&self.body[start..self.ends[i]]);
        out.push(b'\n');
    }

    /// The JSON lines of `binlog show` (JSON images): each row `head`, its row id, `middle`,
    /// its before image, `, "after": `, its after image, `}`; lines joined by newlines. An
    /// update is one line; its row id is its D's.
    pub fn json_lines(&self, head: &[u8], first_row_id: u64, middle: &[u8]) -> Vec<u8> {
        use crate::digits::push_u64;
        let mut out =
            Vec::with_capacity(self.body.len() + self.len() * (head.len() + middle.len() + 32));
        let image = |i: usize| &self.body[if i == 0 { 0 } else { self.ends[i - 1] }..self.ends[i]];
        let step = if self.kind == b'U' { 2 } else { 1 };
        for row in 0..self.len() / step {
            if row > 0 {
                out.push(b'\n');
            }
            out.extend_from_slice(head);
            push_u64(&mut out, first_row_id + (row * step) as u64);
            out.extend_from_slice(middle);
            let (before, after): (&[u8], &[u8]) = match self.kind {
                b'I' => (b"null", image(row)),
                b'D' => (image(row), b"null"),
                _ => (image(2 * row), image(2 * row + 1)),
            };
            out.extend_from_slice(before);
            out.extend_from_slice(b", \"after\": ");
            out.extend_from_slice(after);
            out.push(b'}');
        }
        out
    }

    /// Every line, as the staging file holds them.
    pub fn csv(&self, seqno: u64, first_row_id: u64, commit_ts: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.body.len() + self.len() * (40 + commit_ts.len()));
        for i in 0..self.len() {
            self.push_line(&mut out, i, seqno, first_row_id, commit_ts);
        }
        out
    }
}
