//! Whole transactions of a run of binlog events, from their bytes to staging rows, without an
//! event crossing into Python: the shape OLTP traffic has (MariaDB: GTID, table maps, rows
//! events, XID; MySQL: GTID or anonymous GTID, BEGIN, table maps, rows events, XID), for
//! tables whose table map Python has registered. At anything else the scan
//! stops before the transaction it is in, and Python's reader (the reference) takes over from
//! there: a statement, a format description, a table map not seen yet, an image the native path
//! refuses, a transaction too large to hold.

use std::collections::HashMap;

use crate::rows::{Encoded, Plan};
use crate::timetext;

// Event types and the header's length (`loader/binlog/constants.py`).
pub const HEADER_LEN: usize = 19;
const QUERY: u8 = 2;
pub const STOP: u8 = 3;
pub const ROTATE: u8 = 4;
const XID: u8 = 16;
pub const FORMAT_DESCRIPTION: u8 = 15;
const TABLE_MAP: u8 = 19;
const WRITE_ROWS_V1: u8 = 23;
const UPDATE_ROWS_V1: u8 = 24;
const DELETE_ROWS_V1: u8 = 25;
const WRITE_ROWS: u8 = 30;
const UPDATE_ROWS: u8 = 31;
const DELETE_ROWS: u8 = 32;
const ROWS_QUERY: u8 = 29;
const GTID: u8 = 33;
const ANONYMOUS_GTID: u8 = 34;
const GTID_TAGGED: u8 = 42;
const MARIA_ANNOTATE_ROWS: u8 = 160;
const MARIA_BINLOG_CHECKPOINT: u8 = 161;
const MARIA_GTID: u8 = 162;
const MARIA_GTID_LIST: u8 = 163;
const MARIA_FL_STANDALONE: u8 = 1;
const MARIA_FL_GROUP_COMMIT_ID: u8 = 2;

/// What a table map (by its bytes after the header) stands for, as Python registered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reg {
    /// Not selected: its rows are passed over undecoded.
    Skip,
    /// Rows of it take Python's path (no native plan, or passed over before a re-load).
    Python,
    /// Decoded with the plan `plan` into the rows of the table `table` (Python's numbers).
    Native { plan: usize, table: usize },
}

/// How the file's events are written (from its format description).
pub struct Format {
    pub checksum: bool,
    /// Post-header lengths by event type - 1.
    pub post_header: Vec<u8>,
}

impl Format {
    fn post_header_len(&self, typ: u8) -> usize {
        self.post_header
            .get(usize::from(typ).wrapping_sub(1))
            .copied()
            .map_or(0, usize::from)
    }

    fn id_len(&self, typ: u8, default: usize) -> usize {
        let post = match self.post_header_len(typ) {
            0 => default,
            n => n,
        };
        if post == 6 {
            4
        } else {
            6
        }
    }
}

/// One table's staging rows of a scan under one plan, with the byte end, the changes and the
/// deletes (cumulative) after each rows event, so that Python cuts parts where its own writer
/// would.
pub struct Segment {
    pub table: usize,
    pub plan: usize,
    pub data: Vec<u8>,
    pub ends: Vec<u64>,
    pub changes: Vec<u64>,
    pub deletes: Vec<u64>,
    /// Offset in the scanned data of the segment's first rows event.
    pub first_offset: usize,
}

/// What a scan did.
#[derive(Default)]
pub struct ScanOut {
    /// Bytes of whole transactions (and events between them) taken from the start.
    pub consumed: usize,
    /// The file position where the last event taken ends.
    pub end_pos: u64,
    pub transactions: u64,
    pub changes: u64,
    pub seqno_min: Option<u64>,
    pub seqno_max: Option<u64>,
    pub commit_ts_max: Option<u64>,
    /// The last GTID read per domain: (domain, server id, sequence number).
    pub gtids: Vec<(u32, u32, u64)>,
    /// MySQL's GTIDs read, as (source uuid, first, last) ranges in the order read.
    pub mysql_gtids: Vec<([u8; 16], u64, u64)>,
    /// Offset of the GTID event of the last transaction taken.
    pub last_gtid: Option<usize>,
    pub segments: Vec<Segment>,
    /// Why the scan stopped: "end" (the data), "changes" (the budget), or what Python must read.
    pub stop: &'static str,
    /// `binlog show`'s JSON lines of the transactions taken, each ending in a newline.
    pub json: Vec<u8>,
}

impl ScanOut {
    /// A committed transaction of `changes` change rows at `seqno`, committed at `ts` (µs):
    /// the seqno range and the last commit time count those with changes only.
    fn count(&mut self, changes: u64, seqno: u64, ts: u64) {
        if changes > 0 {
            self.changes += changes;
            self.seqno_min.get_or_insert(seqno);
            self.seqno_max = Some(seqno);
            self.commit_ts_max = Some(self.commit_ts_max.map_or(ts, |m| m.max(ts)));
        }
    }
}

/// Limits of a scan.
pub struct Limits {
    /// seqno of a commit ending at offset 0 of the file (its history and file number).
    pub seqno_base: u64,
    /// Where `data[0]` lies in its file.
    pub file_pos: u64,
    /// (offset, file position) of each event after a gap (events the stream left out).
    pub gaps: Vec<(usize, u64)>,
    /// Stop after the transaction that brings the changes to this many.
    pub budget: u64,
    /// A transaction of more changes is left to Python (it hands them out before the commit).
    pub max_open: u64,
}

impl Limits {
    /// The file position of the event starting at `off`.
    fn position(&self, off: usize) -> u64 {
        let i = self.gaps.partition_point(|g| g.0 <= off);
        let (at, pos) = if i == 0 {
            (0, self.file_pos)
        } else {
            self.gaps[i - 1]
        };
        pos + (off - at) as u64
    }
}

struct Event<'a> {
    typ: u8,
    server_id: u32,
    /// After the header, before the checksum.
    body: &'a [u8],
    size: usize,
}

/// The type and size of the event whose header starts at `off`, when the header is whole.
fn header_at(data: &[u8], off: usize) -> Option<(u8, usize)> {
    let head = data.get(off..off + HEADER_LEN)?;
    Some((
        head[4],
        u32::from_le_bytes(head[9..13].try_into().unwrap()) as usize,
    ))
}

/// The event at `off`, whole and with a good checksum; None when it is not (Python says why).
fn event<'a>(data: &'a [u8], off: usize, fmt: &Format) -> Option<Event<'a>> {
    let (_, size) = header_at(data, off)?;
    if size < HEADER_LEN || off + size > data.len() {
        return None;
    }
    let raw = &data[off..off + size];
    let mut end = size;
    if fmt.checksum && raw[4] != FORMAT_DESCRIPTION {
        end = size.checked_sub(4).filter(|&e| e >= HEADER_LEN)?;
        let expected = u32::from_le_bytes(raw[end..].try_into().ok()?);
        if crc32fast::hash(&raw[..end]) != expected {
            return None;
        }
    }
    Some(Event {
        typ: raw[4],
        server_id: u32::from_le_bytes(raw[5..9].try_into().ok()?),
        body: &raw[HEADER_LEN..end],
        size,
    })
}

/// Whether an XID event follows `off` in `data`, its headers read alone: false when the data
/// ends first (before a header, as the decoding would find it); true at an event that cannot
/// be whole here (the decoding says what is wrong there).
fn commit_within(data: &[u8], mut off: usize) -> bool {
    while let Some((typ, size)) = header_at(data, off) {
        if size < HEADER_LEN || off + size > data.len() || typ == XID {
            return true;
        }
        off += size;
    }
    false
}

/// What `transaction_start` found.
pub const NEEDS_MORE: u8 = 0;
pub const FOUND: u8 = 1;
pub const DAMAGED: u8 = 2;
/// Bytes a BEGIN query event may take at most (`split._BEGIN_MAX`).
const BEGIN_MAX: usize = 512;

/// The first event at or after offset `target` of `data` that begins a transaction (a GTID
/// event, or without GTIDs a BEGIN query), walking the headers of the events from offset 0
/// (`loader/binlog/split.py`'s `starts_transaction` is the reference): `(offset, FOUND)`; or
/// where the walk needs the bytes from (`NEEDS_MORE`), or met a header that is not one
/// (`DAMAGED`).
pub fn transaction_start(data: &[u8], target: usize) -> (usize, u8) {
    let mut off = 0;
    while let Some((typ, size)) = header_at(data, off) {
        if size < HEADER_LEN {
            return (off, DAMAGED);
        }
        if off >= target {
            match typ {
                GTID | ANONYMOUS_GTID | GTID_TAGGED | MARIA_GTID => return (off, FOUND),
                QUERY if size <= BEGIN_MAX => match data.get(off + HEADER_LEN..off + size) {
                    None => return (off, NEEDS_MORE),
                    Some(body) if is_begin(body) => return (off, FOUND),
                    Some(_) => {}
                },
                _ => {}
            }
        }
        off += size;
    }
    (off, NEEDS_MORE)
}

/// A query event's body (after its header, its checksum included) is `BEGIN`.
fn is_begin(body: &[u8]) -> bool {
    if body.len() < 13 || body.len() > BEGIN_MAX - HEADER_LEN {
        return false;
    }
    let (db_len, status_len) = (
        usize::from(body[8]),
        usize::from(u16::from_le_bytes([body[11], body[12]])),
    );
    let query = body.get(13 + status_len + db_len + 1..).unwrap_or(b"");
    query == b"BEGIN" || (query.len() == 9 && query.starts_with(b"BEGIN"))
}

/// Bytes of whole events from the start of `data`, up to (not including) an event the reader
/// of files must see alone (a rotate, a stop, a format description).
pub fn whole_events(data: &[u8]) -> usize {
    let mut off = 0;
    while let Some((typ, size)) = header_at(data, off) {
        if size < HEADER_LEN
            || off + size > data.len()
            || matches!(typ, ROTATE | STOP | FORMAT_DESCRIPTION)
        {
            break;
        }
        off += size;
    }
    off
}

fn lenenc(b: &[u8], pos: usize) -> Option<(u64, usize)> {
    let first = *b.get(pos)?;
    let n = match first {
        0..=0xFA => return Some((u64::from(first), pos + 1)),
        0xFC => 2,
        0xFD => 3,
        0xFE => 8,
        _ => return None,
    };
    let raw = b.get(pos + 1..pos + 1 + n)?;
    Some((
        raw.iter()
            .rev()
            .fold(0u64, |acc, &x| acc << 8 | u64::from(x)),
        pos + 1 + n,
    ))
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0u64, |acc, &x| acc << 8 | u64::from(x))
}

/// A rows event of one transaction, decoded, waiting for its commit.
struct Pending {
    table: usize,
    plan: usize,
    kind: u8,
    rows: Encoded,
    offset: usize,
}

enum Step {
    /// The transaction committed: where its XID event starts and ends.
    Committed { xid_at: usize, end: usize },
    /// Python reads the transaction: why.
    Python(&'static str),
}

/// What `binlog show`'s JSON lines of a plan's rows need: its columns' names, its schema and
/// table name, as JSON text.
pub struct JsonInfo {
    pub keys: Vec<Vec<u8>>,
    pub schema: Vec<u8>,
    pub table: Vec<u8>,
}

pub struct Scanner<'p> {
    pub fmt: &'p Format,
    pub tables: &'p HashMap<Vec<u8>, Reg>,
    pub plans: &'p [&'p Plan],
    /// JSON lines instead of staging rows: each plan's names, and the file's name.
    pub json: Option<(&'p [Option<JsonInfo>], &'p [u8])>,
}

impl Scanner<'_> {
    /// Whole transactions from `data[start..]`.
    pub fn scan(&self, data: &[u8], start: usize, limits: &Limits) -> ScanOut {
        let mut out = ScanOut {
            consumed: start,
            stop: "end",
            ..ScanOut::default()
        };
        let mut latest: HashMap<usize, usize> = HashMap::new(); // table -> its current segment
        let mut off = start;
        while off < data.len() {
            let Some(ev) = event(data, off, self.fmt) else {
                out.stop = if off + HEADER_LEN > data.len() {
                    "end"
                } else {
                    "event"
                };
                break;
            };
            match ev.typ {
                MARIA_GTID_LIST | MARIA_BINLOG_CHECKPOINT => {
                    out.end_pos = limits.position(off) + ev.size as u64;
                    off += ev.size;
                    out.consumed = off;
                    continue;
                }
                MARIA_GTID | GTID | ANONYMOUS_GTID => {}
                _ => {
                    out.stop = "event";
                    break;
                }
            }
            let mut pending = Vec::new();
            match self.transaction(data, off, &ev, limits, &mut pending) {
                Step::Python(why) => {
                    out.stop = why;
                    break;
                }
                Step::Committed { xid_at, end } => {
                    self.commit(
                        data,
                        off,
                        xid_at,
                        end,
                        &ev,
                        limits,
                        pending,
                        &mut out,
                        &mut latest,
                    );
                    off = end;
                    out.consumed = off;
                    if out.changes >= limits.budget {
                        out.stop = "changes";
                        break;
                    }
                }
            }
        }
        out
    }

    /// The events of the transaction whose GTID event `gtid` is at `start`, to its XID.
    fn transaction(
        &self,
        data: &[u8],
        start: usize,
        gtid: &Event<'_>,
        limits: &Limits,
        pending: &mut Vec<Pending>,
    ) -> Step {
        let b = gtid.body;
        let mysql = gtid.typ != MARIA_GTID;
        if mysql {
            if b.len() < 25 || (gtid.typ == GTID && le(&b[17..25]) == 0) {
                return Step::Python("event");
            }
        } else if b.len() < 13
            || b[12] & MARIA_FL_STANDALONE != 0
            || (b[12] & MARIA_FL_GROUP_COMMIT_ID != 0 && b.len() < 21)
        {
            return Step::Python("event");
        }
        if !commit_within(data, start + gtid.size) {
            // The run ends inside it: nothing decoded now, to be decoded once with the next run.
            return Step::Python("end");
        }
        let mut maps: HashMap<u64, Reg> = HashMap::new();
        let mut changes = 0u64;
        let mut off = start + gtid.size;
        // MySQL's transaction opens with BEGIN; MariaDB's GTID event opens it.
        let mut begun = !mysql;
        loop {
            let Some(ev) = event(data, off, self.fmt) else {
                return Step::Python(if off + HEADER_LEN > data.len() {
                    "end"
                } else {
                    "event"
                });
            };
            if !begun {
                if ev.typ != QUERY || self.query_text(ev.body) != Some(&b"BEGIN"[..]) {
                    return Step::Python("event");
                }
                begun = true;
                off += ev.size;
                continue;
            }
            match ev.typ {
                MARIA_ANNOTATE_ROWS | ROWS_QUERY => {}
                TABLE_MAP => {
                    let id_len = self.fmt.id_len(TABLE_MAP, 8);
                    match self.tables.get(ev.body) {
                        Some(Reg::Python) => return Step::Python("table"),
                        Some(&reg) if ev.body.len() >= id_len => {
                            maps.insert(le(&ev.body[..id_len]), reg);
                        }
                        _ => return Step::Python("table map"),
                    }
                }
                WRITE_ROWS_V1 | UPDATE_ROWS_V1 | DELETE_ROWS_V1 | WRITE_ROWS | UPDATE_ROWS
                | DELETE_ROWS => match self.rows(&ev, &maps) {
                    Ok(None) => {}
                    Ok(Some((plan, table, kind, pos))) => {
                        let encoded = match self.json {
                            None => self.plans[plan].encode(ev.body, pos, kind),
                            Some((infos, _)) => match &infos[plan] {
                                Some(info) => {
                                    self.plans[plan].encode_json(ev.body, pos, kind, &info.keys)
                                }
                                None => return Step::Python("table"),
                            },
                        };
                        let Ok(rows) = encoded else {
                            return Step::Python("rows");
                        };
                        changes += rows.len() as u64;
                        if changes > limits.max_open {
                            return Step::Python("large");
                        }
                        pending.push(Pending {
                            table,
                            plan,
                            kind,
                            rows,
                            offset: off,
                        });
                    }
                    Err(why) => return Step::Python(why),
                },
                XID if ev.body.len() >= 8 => {
                    return Step::Committed {
                        xid_at: off,
                        end: off + ev.size,
                    }
                }
                _ => return Step::Python("event"),
            }
            off += ev.size;
        }
    }

    /// A query event's statement (`_query` in Python's parser).
    fn query_text<'a>(&self, b: &'a [u8]) -> Option<&'a [u8]> {
        let post = match self.fmt.post_header_len(QUERY) {
            0 => 13,
            n => n,
        };
        let db_len = usize::from(*b.get(8)?);
        let status_len = usize::from(u16::from_le_bytes(b.get(11..13)?.try_into().ok()?));
        b.get(post + status_len + db_len + 1..)
    }

    /// A rows event's plan, table, kind and where its images start; None for a table passed
    /// over; Err when Python must read it.
    #[allow(clippy::type_complexity)]
    fn rows(
        &self,
        ev: &Event<'_>,
        maps: &HashMap<u64, Reg>,
    ) -> Result<Option<(usize, usize, u8, usize)>, &'static str> {
        let v2 = ev.typ >= WRITE_ROWS;
        let id_len = self.fmt.id_len(ev.typ, if v2 { 10 } else { 8 });
        let b = ev.body;
        let table_id = le(b.get(..id_len).ok_or("event")?);
        let (plan, table) = match maps.get(&table_id) {
            Some(Reg::Skip) => return Ok(None),
            Some(Reg::Native { plan, table }) => (*plan, *table),
            _ => return Err("table map"),
        };
        let mut pos = id_len + 2;
        if v2 {
            // Extra data (NDB or partition info) is rare: Python reads it.
            if b.get(pos..pos + 2) != Some(&[2, 0][..]) {
                return Err("rows");
            }
            pos += 2;
        }
        let kind = match ev.typ {
            WRITE_ROWS_V1 | WRITE_ROWS => b'I',
            DELETE_ROWS_V1 | DELETE_ROWS => b'D',
            _ => b'U',
        };
        let (ncols, p) = lenenc(b, pos).ok_or("event")?;
        let ncols = usize::try_from(ncols).map_err(|_| "event")?;
        if ncols != self.plans[plan].cols.len() {
            return Err("rows");
        }
        pos = p;
        let nb = ncols.div_ceil(8);
        let images = if kind == b'U' { 2 } else { 1 };
        for _ in 0..images {
            // Every column in the image, or Python says what is missing.
            let bitmap = b.get(pos..pos + nb).ok_or("event")?;
            let full = (0..ncols).all(|i| bitmap[i >> 3] >> (i & 7) & 1 == 1);
            if !full {
                return Err("rows");
            }
            pos += nb;
        }
        Ok(Some((plan, table, kind, pos)))
    }

    /// A committed transaction's rows into its tables' segments, and its counts.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &self,
        data: &[u8],
        start: usize,
        xid_at: usize,
        end: usize,
        gtid: &Event<'_>,
        limits: &Limits,
        pending: Vec<Pending>,
        out: &mut ScanOut,
        latest: &mut HashMap<usize, usize>,
    ) {
        let end_pos = limits.position(xid_at) + (end - xid_at) as u64;
        out.end_pos = end_pos;
        let seqno = limits.seqno_base + end_pos;
        let b = gtid.body;
        // MySQL's original commit time (µs), when its GTID event has one; else the XID's second
        // (MariaDB's GTID event carries none finer).
        let mut ts = 0u64;
        if gtid.typ == MARIA_GTID {
            let domain = u32::from_le_bytes(b[8..12].try_into().unwrap());
            let seq = u64::from_le_bytes(b[0..8].try_into().unwrap());
            match out.gtids.iter_mut().find(|g| g.0 == domain) {
                Some(g) => *g = (domain, gtid.server_id, seq),
                None => out.gtids.push((domain, gtid.server_id, seq)),
            }
        } else {
            if b.len() >= 25 + 17 && b[25] == 2 && b.len() >= 42 + 7 {
                let immediate = le(&b[42..49]);
                ts = immediate;
                if immediate & 1 << 55 != 0 {
                    ts = immediate & !(1 << 55);
                    if b.len() >= 49 + 7 {
                        ts = le(&b[49..56]);
                    }
                }
            }
            if gtid.typ == GTID {
                let sid: [u8; 16] = b[1..17].try_into().unwrap();
                let gno = le(&b[17..25]);
                match out.mysql_gtids.last_mut() {
                    Some(last) if last.0 == sid && last.2 + 1 == gno => last.2 = gno,
                    _ => out.mysql_gtids.push((sid, gno, gno)),
                }
            }
        }
        if ts == 0 {
            ts = u64::from(u32::from_le_bytes(
                data[xid_at..xid_at + 4].try_into().unwrap(),
            )) * 1_000_000;
        }
        let mut commit_ts = Vec::with_capacity(26);
        timetext::utc_text(
            &mut commit_ts,
            (ts / 1_000_000) as i64,
            i128::from(ts % 1_000_000),
            6,
        );
        out.last_gtid = Some(start);
        out.transactions += 1;
        if let Some((infos, file)) = self.json {
            self.json_lines(infos, file, gtid, seqno, ts, limits, pending, out);
            return;
        }
        let mut row_id = 0u64;
        for p in pending {
            let seg_index = match latest.get(&p.table) {
                Some(&i) if out.segments[i].plan == p.plan => i,
                _ => {
                    out.segments.push(Segment {
                        table: p.table,
                        plan: p.plan,
                        data: Vec::new(),
                        ends: Vec::new(),
                        changes: Vec::new(),
                        deletes: Vec::new(),
                        first_offset: p.offset,
                    });
                    latest.insert(p.table, out.segments.len() - 1);
                    out.segments.len() - 1
                }
            };
            let seg = &mut out.segments[seg_index];
            let n = p.rows.len() as u64;
            for i in 0..p.rows.len() {
                p.rows
                    .push_line(&mut seg.data, i, seqno, row_id, &commit_ts);
            }
            row_id += n;
            let deletes = match p.kind {
                b'D' => n,
                b'U' => n / 2,
                _ => 0,
            };
            seg.ends.push(seg.data.len() as u64);
            seg.changes
                .push(seg.changes.last().copied().unwrap_or(0) + n);
            seg.deletes
                .push(seg.deletes.last().copied().unwrap_or(0) + deletes);
        }
        out.count(row_id, seqno, ts);
    }

    /// A committed transaction's rows as `binlog show`'s JSON lines (`loader/binlog/show.py`).
    #[allow(clippy::too_many_arguments)]
    fn json_lines(
        &self,
        infos: &[Option<JsonInfo>],
        file: &[u8],
        gtid: &Event<'_>,
        seqno: u64,
        ts: u64,
        limits: &Limits,
        pending: Vec<Pending>,
        out: &mut ScanOut,
    ) {
        use crate::csvtext::push_json_string;
        use crate::digits::push_u64;
        let b = gtid.body;
        let mut gtid_text = Vec::with_capacity(48);
        match gtid.typ {
            MARIA_GTID => {
                push_u64(
                    &mut gtid_text,
                    u64::from(u32::from_le_bytes(b[8..12].try_into().unwrap())),
                );
                gtid_text.push(b'-');
                push_u64(&mut gtid_text, u64::from(gtid.server_id));
                gtid_text.push(b'-');
                push_u64(
                    &mut gtid_text,
                    u64::from_le_bytes(b[0..8].try_into().unwrap()),
                );
            }
            GTID => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                for (i, &x) in b[1..17].iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        gtid_text.push(b'-');
                    }
                    gtid_text
                        .extend_from_slice(&[HEX[usize::from(x >> 4)], HEX[usize::from(x & 15)]]);
                }
                gtid_text.push(b':');
                push_u64(&mut gtid_text, le(&b[17..25]));
            }
            _ => gtid_text.extend_from_slice(b"ANONYMOUS"),
        }
        // ISO 8601 UTC with microseconds: `2024-01-31T12:00:00.000000Z`.
        let mut when = Vec::with_capacity(28);
        timetext::utc_text(
            &mut when,
            (ts / 1_000_000) as i64,
            i128::from(ts % 1_000_000),
            6,
        );
        if let Some(space) = when.iter().position(|&c| c == b' ') {
            when[space] = b'T';
        }
        when.push(b'Z');
        let mut row_id = 0u64;
        for p in pending {
            let Some(info) = &infos[p.plan] else { continue };
            let mut head = Vec::with_capacity(96);
            head.extend_from_slice(b"{\"op\": \"");
            head.push(p.kind);
            head.extend_from_slice(b"\", \"schema\": ");
            head.extend_from_slice(&info.schema);
            head.extend_from_slice(b", \"table\": ");
            head.extend_from_slice(&info.table);
            head.extend_from_slice(b", \"seqno\": ");
            push_u64(&mut head, seqno);
            head.extend_from_slice(b", \"row_id\": ");
            let mut middle = Vec::with_capacity(128);
            middle.extend_from_slice(b", \"position\": ");
            let mut position = file.to_vec();
            position.push(b':');
            push_u64(&mut position, limits.position(p.offset));
            push_json_string(&mut middle, &position);
            middle.extend_from_slice(b", \"commit_ts\": \"");
            middle.extend_from_slice(&when);
            middle.extend_from_slice(b"\", \"gtid\": ");
            push_json_string(&mut middle, &gtid_text);
            middle.extend_from_slice(b", \"before\": ");
            out.json
                .extend_from_slice(&p.rows.json_lines(&head, row_id, &middle));
            out.json.push(b'\n');
            row_id += p.rows.len() as u64;
        }
        out.count(row_id, seqno, ts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_events_stop_before_a_partial_or_a_rotate() {
        let mut data = Vec::new();
        for typ in [XID, XID, ROTATE] {
            let mut ev = vec![0u8; HEADER_LEN + 8];
            ev[4] = typ;
            ev[9] = (HEADER_LEN + 8) as u8;
            data.extend_from_slice(&ev);
        }
        assert_eq!(whole_events(&data), 2 * (HEADER_LEN + 8));
        assert_eq!(whole_events(&data[..HEADER_LEN + 10]), HEADER_LEN + 8);
        assert_eq!(whole_events(&data[..5]), 0);
    }
}
