//! Row images of a rows event to the change rows of the staging files: a plan per table (one
//! `Col` per column, built from the table map once), and the CSV lines of each image.

use crate::values::{Col, Cursor};

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
        let nb = self.cols.len().div_ceil(8);
        let images = if kind == b'U' { 2 } else { 1 };
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
                for (i, col) in self.cols.iter().enumerate() {
                    if i > 0 {
                        body.push(b',');
                    }
                    if nulls[i >> 3] >> (i & 7) & 1 == 1 {
                        continue;
                    }
                    col.encode(&mut cur, &mut body)
                        .map_err(|e| format!("row {row}, column {}: {e}", i + 1))?;
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

    /// Every line, as the staging file holds them.
    pub fn csv(&self, seqno: u64, first_row_id: u64, commit_ts: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.body.len() + self.len() * (40 + commit_ts.len()));
        for i in 0..self.len() {
            self.push_line(&mut out, i, seqno, first_row_id, commit_ts);
        }
        out
    }
}
