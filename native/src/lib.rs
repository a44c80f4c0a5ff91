//! The loader's native module, `loader._native`: the row path of extraction (row images to the
//! staging files' CSV lines) and the float text it needs.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

mod csvtext;
mod decimals;
mod digits;
mod floats;
mod jsontext;
mod packets;
mod resultset;
mod rows;
mod scan;
mod timetext;
mod values;

use values::{Col, Text};

/// The text Python's `repr` gives a float (the staging files' float text).
#[pyfunction]
fn float_text(value: f64) -> String {
    floats::repr(value)
}

/// The JSON text of a MySQL binary JSON document, as the staging files hold it. Raises
/// ValueError on a document the native path leaves to the Python decoder.
#[pyfunction]
fn json_text(data: &[u8]) -> PyResult<String> {
    let mut out = Vec::with_capacity(data.len() * 2 + 4);
    jsontext::push_json_text(&mut out, data).map_err(PyValueError::new_err)?;
    Ok(String::from_utf8(out).expect("JSON text is UTF-8"))
}

/// One column of a plan as Python describes it: `(kind, a, b, c, labels)`.
type ColumnSpec = (String, usize, usize, usize, Option<Vec<String>>);

fn column(spec: ColumnSpec) -> Result<Col, String> {
    let (kind, a, b, c, labels) = spec;
    let fsp = |v: usize| {
        if v <= 6 {
            Ok(v)
        } else {
            Err(format!("fractional digits {v} of a {kind} column"))
        }
    };
    let texts = labels;
    let labels = || -> Result<Vec<Vec<u8>>, String> {
        Ok(texts
            .clone()
            .ok_or_else(|| format!("a {kind} column without its labels"))?
            .into_iter()
            .map(String::into_bytes)
            .collect())
    };
    Ok(match kind.as_str() {
        "int" if [1, 2, 3, 4, 8].contains(&a) => Col::Int {
            size: a,
            unsigned: b != 0,
        },
        "float" => Col::Float,
        "double" => Col::Double,
        "year" => Col::Year,
        "bit" if (1..=8).contains(&a) => Col::Bit { size: a },
        "decimal" if (1..=65).contains(&a) && b <= a && b <= 30 => Col::Decimal {
            intg: a - b,
            scale: b,
            size: decimals::decimal_size(a, b),
        },
        "date" => Col::Date,
        "time" => Col::Time,
        "datetime" => Col::Datetime,
        "timestamp" => Col::Timestamp,
        "time2" => Col::Time2 { fsp: fsp(a)? },
        "datetime2" => Col::Datetime2 { fsp: fsp(a)? },
        "timestamp2" => Col::Timestamp2 { fsp: fsp(a)? },
        "time_hires" if a > 0 => Col::TimeHires { fsp: fsp(a)? },
        "datetime_hires" if a > 0 => Col::DatetimeHires { fsp: fsp(a)? },
        "timestamp_hires" if a > 0 => Col::TimestampHires { fsp: fsp(a)? },
        "bytes" if (1..=4).contains(&a) => {
            let text = match b {
                0 => Text::Binary,
                1 => Text::Utf8,
                2 => Text::Ascii,
                3 => Text::Table(byte_table(texts.as_deref())?),
                4 => Text::Utf16Be,
                5 => Text::Utf16Le,
                6 => Text::Utf32Be,
                _ => return Err(format!("text encoding {b}")),
            };
            Col::Bytes {
                len_bytes: a,
                text,
                pad: c,
            }
        }
        "enum" if a == 1 || a == 2 => Col::Enum {
            size: a,
            labels: labels()?,
        },
        "json" if (1..=4).contains(&a) => Col::Json { len_bytes: a },
        "set" if (1..=8).contains(&a) => Col::Set {
            size: a,
            labels: labels()?,
        },
        _ => {
            return Err(format!(
                "column spec {kind}({a}, {b}, {c}) cannot be decoded natively"
            ))
        }
    })
}

/// The characters of a one-byte charset's 256 bytes, given as one string (U+FFFE where a byte
/// is undefined: `charsets.UNDEFINED_BYTE`).
fn byte_table(labels: Option<&[String]>) -> Result<Box<[Option<char>; 256]>, String> {
    let chars: Vec<Option<char>> = match labels {
        Some([table]) => table
            .chars()
            .map(|c| (c != '\u{FFFE}').then_some(c))
            .collect(),
        _ => return Err("a one-byte charset without its table".to_owned()),
    };
    let table: [Option<char>; 256] = chars
        .try_into()
        .map_err(|v: Vec<_>| format!("a charset table of {} characters", v.len()))?;
    Ok(Box::new(table))
}

/// `I`, `D` or `U` as a byte.
fn rows_kind(kind: &str) -> PyResult<u8> {
    match kind {
        "I" | "D" | "U" => Ok(kind.as_bytes()[0]),
        _ => Err(PyValueError::new_err(format!("rows kind {kind:?}"))),
    }
}

/// A table map's plan: decodes the row images of its rows events into change rows.
#[pyclass(frozen, module = "loader._native")]
struct RowPlan {
    plan: rows::Plan,
}

#[pymethods]
impl RowPlan {
    #[new]
    fn new(columns: Vec<ColumnSpec>) -> PyResult<Self> {
        let cols = columns
            .into_iter()
            .map(column)
            .collect::<Result<Vec<_>, _>>()
            .map_err(PyValueError::new_err)?;
        Ok(RowPlan {
            plan: rows::Plan { cols },
        })
    }

    /// The change rows of a rows event's images (`data[rows_off:]`, every column present) of
    /// `kind` `I`, `D` or `U`. Raises ValueError on bytes that are not such images.
    fn encode(
        &self,
        py: Python<'_>,
        data: &[u8],
        rows_off: usize,
        kind: &str,
    ) -> PyResult<EncodedRows> {
        let kind = rows_kind(kind)?;
        let encoded = py
            .detach(|| self.plan.encode(data, rows_off, kind))
            .map_err(PyValueError::new_err)?;
        Ok(EncodedRows { rows: encoded })
    }

    /// The images of a rows event as `binlog show`'s JSON objects, `keys` the columns' names
    /// as JSON text. Raises ValueError on bytes that are not such images.
    fn encode_json(
        &self,
        py: Python<'_>,
        data: &[u8],
        rows_off: usize,
        kind: &str,
        keys: Vec<Vec<u8>>,
    ) -> PyResult<EncodedRows> {
        let kind = rows_kind(kind)?;
        let encoded = py
            .detach(|| self.plan.encode_json(data, rows_off, kind, &keys))
            .map_err(PyValueError::new_err)?;
        Ok(EncodedRows { rows: encoded })
    }
}

/// The change rows of one rows event, waiting for their transaction's seqno and commit time.
#[pyclass(frozen, module = "loader._native")]
struct EncodedRows {
    rows: rows::Encoded,
}

#[pymethods]
impl EncodedRows {
    /// Change rows: an update counts two (its D and its I).
    #[getter]
    fn changes(&self) -> usize {
        self.rows.len()
    }

    /// The staging file's lines, row ids from `first_row_id` on.
    fn csv<'py>(
        &self,
        py: Python<'py>,
        seqno: u64,
        first_row_id: u64,
        commit_ts: &str,
    ) -> Bound<'py, PyBytes> {
        PyBytes::new(
            py,
            &self.rows.csv(seqno, first_row_id, commit_ts.as_bytes()),
        )
    }

    /// `binlog show`'s JSON lines of JSON images (see `rows::Encoded::json_lines`).
    fn json_lines<'py>(
        &self,
        py: Python<'py>,
        head: &[u8],
        first_row_id: u64,
        middle: &[u8],
    ) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.rows.json_lines(head, first_row_id, middle))
    }

    /// The same lines, one bytes object each.
    fn lines<'py>(
        &self,
        py: Python<'py>,
        seqno: u64,
        first_row_id: u64,
        commit_ts: &str,
    ) -> Vec<Bound<'py, PyBytes>> {
        (0..self.rows.len())
            .map(|i| {
                let mut line = Vec::new();
                self.rows
                    .push_line(&mut line, i, seqno, first_row_id, commit_ts.as_bytes());
                PyBytes::new(py, &line)
            })
            .collect()
    }
}

/// Bytes of whole events at the start of `data`, before any rotate, stop or format
/// description (which the files transport reads alone).
#[pyfunction]
fn whole_events(data: &[u8]) -> usize {
    scan::whole_events(data)
}

/// `(offset, status)` of the first transaction start at or after `target` in `data`, event
/// headers walked from its start: status 1 found, 0 the walk needs the bytes from `offset` on,
/// 2 a damaged header at `offset`.
#[pyfunction]
fn transaction_start(data: &[u8], target: usize) -> (usize, u8) {
    scan::transaction_start(data, target)
}

/// A plan's columns' names, schema and table as JSON text.
type JsonNames = (Vec<Vec<u8>>, Vec<u8>, Vec<u8>);

/// Whole transactions of runs of events, decoded into staging rows without Python (see
/// `scan.rs`), for the table maps registered with it.
#[pyclass(module = "loader._native")]
struct Scanner {
    fmt: scan::Format,
    tables: HashMap<Vec<u8>, scan::Reg>,
    plans: Vec<Py<RowPlan>>,
    json: Vec<Option<scan::JsonInfo>>,
}

#[pymethods]
impl Scanner {
    /// For a file whose format description says `checksum` (CRC32) and `post_header` lengths.
    #[new]
    fn new(checksum: bool, post_header: Vec<u8>) -> Self {
        Scanner {
            fmt: scan::Format {
                checksum,
                post_header,
            },
            tables: HashMap::new(),
            plans: Vec::new(),
            json: Vec::new(),
        }
    }

    /// A table map (its bytes after the header, before the checksum) whose rows `plan` decodes
    /// into the rows of table number `table`; the plan's number. `json`: its columns' names,
    /// schema and table as JSON text, for `binlog show`'s lines.
    #[pyo3(signature = (table_map, plan, table, json=None))]
    fn register_native(
        &mut self,
        table_map: Vec<u8>,
        plan: Py<RowPlan>,
        table: usize,
        json: Option<JsonNames>,
    ) -> usize {
        self.plans.push(plan);
        self.json
            .push(json.map(|(keys, schema, table)| scan::JsonInfo {
                keys,
                schema,
                table,
            }));
        let id = self.plans.len() - 1;
        self.tables
            .insert(table_map, scan::Reg::Native { plan: id, table });
        id
    }

    /// A table map whose rows are passed over (`python` false: a table not selected) or read
    /// by Python (`python` true).
    fn register_other(&mut self, table_map: Vec<u8>, python: bool) {
        self.tables.insert(
            table_map,
            if python {
                scan::Reg::Python
            } else {
                scan::Reg::Skip
            },
        );
    }

    /// Forget every table map (after a statement or a format description, as Python does).
    fn clear(&mut self) {
        self.tables.clear();
        self.plans.clear();
        self.json.clear();
    }

    /// Whole transactions of `data` from `start` on (see `scan::Scanner::scan`).
    /// `gap_offsets`, `gap_positions`: where each event after a gap starts in `data` and in
    /// the file.
    #[allow(clippy::too_many_arguments)]
    /// `json_file`: `binlog show`'s JSON lines instead of staging rows, positions in this file.
    #[pyo3(signature = (data, start, seqno_base, file_pos, gap_offsets, gap_positions, budget, max_open, json_file=None))]
    fn scan(
        &self,
        py: Python<'_>,
        data: &[u8],
        start: usize,
        seqno_base: u64,
        file_pos: u64,
        gap_offsets: Vec<usize>,
        gap_positions: Vec<u64>,
        budget: u64,
        max_open: u64,
        json_file: Option<Vec<u8>>,
    ) -> ScanResult {
        let plans: Vec<&rows::Plan> = self.plans.iter().map(|p| &p.get().plan).collect();
        let scanner = scan::Scanner {
            fmt: &self.fmt,
            tables: &self.tables,
            plans: &plans,
            json: json_file
                .as_deref()
                .map(|file| (self.json.as_slice(), file)),
        };
        let gaps = gap_offsets.into_iter().zip(gap_positions).collect();
        let limits = scan::Limits {
            seqno_base,
            file_pos,
            gaps,
            budget,
            max_open,
        };
        let out = py.detach(|| scanner.scan(data, start, &limits));
        ScanResult { out }
    }
}

/// What a scan took: counts, the last GTIDs, and each table's rows in segments.
#[pyclass(module = "loader._native")]
struct ScanResult {
    out: scan::ScanOut,
}

fn u64s<'py>(py: Python<'py>, values: &[u64]) -> Bound<'py, PyBytes> {
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    PyBytes::new(py, &raw)
}

#[pymethods]
impl ScanResult {
    #[getter]
    fn consumed(&self) -> usize {
        self.out.consumed
    }
    #[getter]
    fn end_pos(&self) -> u64 {
        self.out.end_pos
    }
    #[getter]
    fn transactions(&self) -> u64 {
        self.out.transactions
    }
    #[getter]
    fn changes(&self) -> u64 {
        self.out.changes
    }
    #[getter]
    fn seqno_min(&self) -> Option<u64> {
        self.out.seqno_min
    }
    #[getter]
    fn seqno_max(&self) -> Option<u64> {
        self.out.seqno_max
    }
    #[getter]
    fn commit_ts_max(&self) -> Option<u64> {
        self.out.commit_ts_max
    }
    #[getter]
    fn gtids(&self) -> Vec<(u32, u32, u64)> {
        self.out.gtids.clone()
    }
    /// MySQL's GTIDs read: (source uuid bytes, first, last) ranges.
    #[getter]
    fn mysql_gtids<'py>(&self, py: Python<'py>) -> Vec<(Bound<'py, PyBytes>, u64, u64)> {
        self.out
            .mysql_gtids
            .iter()
            .map(|(sid, a, b)| (PyBytes::new(py, sid), *a, *b))
            .collect()
    }
    #[getter]
    fn last_gtid(&self) -> Option<usize> {
        self.out.last_gtid
    }
    #[getter]
    fn stop(&self) -> &'static str {
        self.out.stop
    }
    /// `binlog show`'s JSON lines of the transactions taken (a scan given `json_file`).
    #[getter]
    fn json<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.out.json)
    }
    /// `(table, plan, rows, byte ends, changes, deletes, first offset)` per segment; the three
    /// arrays are native-endian u64s, one per rows event, cumulative.
    #[allow(clippy::type_complexity)]
    #[getter]
    fn segments<'py>(
        &self,
        py: Python<'py>,
    ) -> Vec<(
        usize,
        usize,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        usize,
    )> {
        self.out
            .segments
            .iter()
            .map(|s| {
                (
                    s.table,
                    s.plan,
                    PyBytes::new(py, &s.data),
                    u64s(py, &s.ends),
                    u64s(py, &s.changes),
                    u64s(py, &s.deletes),
                    s.first_offset,
                )
            })
            .collect()
    }
}

/// A replication stream's packets to runs of events (see `packets.rs`).
#[pyclass(module = "loader._native")]
#[derive(Default)]
struct PacketStream {
    stream: packets::PacketStream,
}

#[pymethods]
impl PacketStream {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// `chunk` added to what was read; then a run of plain events before `limit`, as
    /// `(first position, events, gap offsets, gap positions, end)`, and/or the payload of a
    /// packet the caller must read (bytes); none when more must be read.
    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        chunk: &[u8],
        limit: u64,
        most: usize,
    ) -> Vec<Bound<'py, PyAny>> {
        self.stream
            .feed(chunk, limit, most)
            .into_iter()
            .map(|item| match item {
                packets::Item::Packet(p) => PyBytes::new(py, &p).into_any(),
                packets::Item::Run(r) => (
                    r.pos,
                    PyBytes::new(py, &r.data),
                    r.gap_offsets,
                    r.gap_positions,
                    r.end,
                )
                    .into_pyobject(py)
                    .expect("a tuple of ints, bytes and lists")
                    .into_any(),
            })
            .collect()
    }
}

/// A text-protocol result set's rows to Arrow-layout columns (see `resultset.rs`).
#[pyclass(module = "loader._native")]
struct TextRows {
    rows: resultset::TextRows,
}

/// One column's buffers for Python: (validity bitmap or None when no value is NULL, 64-bit
/// offsets, the values end to end).
type ColumnBuffers<'py> = (
    Option<Bound<'py, PyBytes>>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
);

#[pymethods]
impl TextRows {
    /// A reader of rows of `width` columns, after the result set's column definitions.
    #[new]
    fn new(width: usize) -> Self {
        Self {
            rows: resultset::TextRows::new(width),
        }
    }

    /// `chunk` of the connection's bytes taken in: `(done, error)`, done once the end-of-rows
    /// packet was read, error the payload of an error packet the server sent instead (bytes).
    /// Raises ValueError on a row that is not one of `width` values.
    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        chunk: &[u8],
    ) -> PyResult<(bool, Option<Bound<'py, PyBytes>>)> {
        let rows = &mut self.rows;
        match py
            .detach(|| rows.feed(chunk))
            .map_err(PyValueError::new_err)?
        {
            resultset::State::More => Ok((false, None)),
            resultset::State::Done => Ok((true, None)),
            resultset::State::Error(payload) => Ok((true, Some(PyBytes::new(py, &payload)))),
        }
    }

    /// The rows read since the last take: `(rows, [column buffers])`.
    fn take<'py>(&mut self, py: Python<'py>) -> (usize, Vec<ColumnBuffers<'py>>) {
        let (rows, columns) = self.rows.take();
        let buffers = columns
            .iter()
            .map(|c| {
                let offsets: Vec<u8> = c.offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
                (
                    (c.nulls > 0).then(|| PyBytes::new(py, &c.validity)),
                    PyBytes::new(py, &offsets),
                    PyBytes::new(py, &c.data),
                )
            })
            .collect();
        (rows, buffers)
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(float_text, m)?)?;
    m.add_function(wrap_pyfunction!(json_text, m)?)?;
    m.add_function(wrap_pyfunction!(whole_events, m)?)?;
    m.add_function(wrap_pyfunction!(transaction_start, m)?)?;
    m.add_class::<RowPlan>()?;
    m.add_class::<EncodedRows>()?;
    m.add_class::<Scanner>()?;
    m.add_class::<ScanResult>()?;
    m.add_class::<PacketStream>()?;
    m.add_class::<TextRows>()?;
    Ok(())
}
