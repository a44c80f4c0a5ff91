//! The replication stream's packets to runs of events, so that the events of a dump reach the
//! native reader without one Python step per packet. Only plain events of the current file go
//! into runs; a packet Python's stream reader must look at (an EOF or error packet, a rotate,
//! a heartbeat, a format description, a stop, an event past the end, anything odd) stops the
//! feed and is handed over whole.

use crate::scan::{FORMAT_DESCRIPTION, HEADER_LEN, ROTATE, STOP};

const HEARTBEAT: u8 = 27;
const HEARTBEAT_V2: u8 = 41;
const MAX_PACKET: usize = 0xFF_FFFF;

/// A run of plain events: where the first starts, the events, where each event after a gap
/// starts (in `data` and in the file), and where the last ends.
pub struct Run {
    pub pos: u64,
    pub data: Vec<u8>,
    pub gap_offsets: Vec<usize>,
    pub gap_positions: Vec<u64>,
    pub end: u64,
}

pub enum Item {
    Run(Run),
    /// A packet's payload for Python's stream reader.
    Packet(Vec<u8>),
}

#[derive(Default)]
pub struct PacketStream {
    buf: Vec<u8>,
    at: usize,
}

impl PacketStream {
    /// The next payload whole, if the buffer holds it (a payload of 16 MB or more continues in
    /// the packets after it).
    fn payload(&self) -> Option<(Vec<u8>, usize)> {
        let mut off = self.at;
        let mut out = Vec::new();
        loop {
            let head = self.buf.get(off..off + 4)?;
            let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
            out.extend_from_slice(self.buf.get(off + 4..off + 4 + len)?);
            off += 4 + len;
            if len < MAX_PACKET {
                return Some((out, off));
            }
        }
    }

    /// Add `chunk` to what was read, and take plain events from the start of it into a run
    /// (up to about `most` bytes), stopping at the first packet Python must see or at an event
    /// that starts at `limit` or later (the end position, in the current file); an event that
    /// ends at or past `limit` is the run's last.
    pub fn feed(&mut self, chunk: &[u8], limit: u64, most: usize) -> Vec<Item> {
        if self.at > 0 && self.at >= self.buf.len() / 2 {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        self.buf.extend_from_slice(chunk);
        let mut run = Run {
            pos: 0,
            data: Vec::new(),
            gap_offsets: Vec::new(),
            gap_positions: Vec::new(),
            end: 0,
        };
        let mut items = Vec::new();
        while let Some((payload, next)) = self.payload() {
            match plain(&payload, limit) {
                Some((pos, end)) => {
                    if run.data.is_empty() {
                        run.pos = pos;
                    } else if pos != run.end {
                        run.gap_offsets.push(run.data.len());
                        run.gap_positions.push(pos);
                    }
                    run.data.extend_from_slice(&payload[1..]);
                    run.end = end;
                    self.at = next;
                    if end >= limit || run.data.len() >= most {
                        break;
                    }
                }
                None => {
                    if run.data.is_empty() {
                        items.push(Item::Packet(payload));
                        self.at = next;
                    }
                    break;
                }
            }
        }
        if !run.data.is_empty() {
            items.insert(0, Item::Run(run));
        }
        items
    }

    /// Bytes read and not handed out yet.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.buf.len() - self.at
    }
}

/// (start, end) in the file of a payload that is a plain event before `limit`; None for what
/// Python's stream reader must see.
fn plain(payload: &[u8], limit: u64) -> Option<(u64, u64)> {
    if payload.first() != Some(&0) || payload.len() < 1 + HEADER_LEN {
        return None;
    }
    let raw = &payload[1..];
    let size = u32::from_le_bytes(raw[9..13].try_into().ok()?) as usize;
    let log_pos = u64::from(u32::from_le_bytes(raw[13..17].try_into().ok()?));
    let typ = raw[4];
    if size != raw.len()
        || log_pos == 0
        || matches!(
            typ,
            ROTATE | STOP | FORMAT_DESCRIPTION | HEARTBEAT | HEARTBEAT_V2
        )
        || log_pos < size as u64
    {
        return None;
    }
    let pos = log_pos - size as u64;
    (pos < limit).then_some((pos, log_pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(typ: u8, log_pos: u32, body: usize) -> Vec<u8> {
        let size = HEADER_LEN + body;
        let mut p = vec![0u8; 4 + 1 + size];
        p[0] = (1 + size) as u8;
        p[5 + 4] = typ;
        p[5 + 9..5 + 13].copy_from_slice(&(size as u32).to_le_bytes());
        p[5 + 13..5 + 17].copy_from_slice(&log_pos.to_le_bytes());
        p
    }

    #[test]
    fn plain_events_run_and_a_rotate_stops_the_feed() {
        let mut s = PacketStream::default();
        let mut chunk = Vec::new();
        chunk.extend(packet(16, 131, 8)); // 104..131
        chunk.extend(packet(16, 200, 8)); // 173..200: after a gap
        chunk.extend(packet(ROTATE, 0, 10));
        chunk.extend(packet(16, 300, 8));
        let items = s.feed(&chunk[..chunk.len() - 3], u64::MAX, 1 << 20);
        assert_eq!(items.len(), 1);
        let Item::Run(run) = &items[0] else { panic!() };
        assert_eq!(
            (
                run.pos,
                run.end,
                run.gap_offsets.clone(),
                run.gap_positions.clone()
            ),
            (104, 200, vec![27], vec![173])
        );
        let items = s.feed(&chunk[chunk.len() - 3..], u64::MAX, 1 << 20);
        assert!(matches!(&items[..], [Item::Packet(p)] if p[5] == ROTATE));
        let items = s.feed(b"", 273, 1 << 20);
        assert!(matches!(&items[..], [Item::Packet(_)])); // starts at the limit
        assert_eq!(s.pending(), 0);
    }
}
