//! The loader's native module, `loader._native`: the row path of extraction (row images to the
//! staging files' CSV lines) and the float text it needs.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

mod csvtext;
mod floats;
mod rows;
mod temporal;
mod values;

use values::{Col, Text};

/// The text Python's `repr` gives a float (the staging files' float text).
#[pyfunction]
fn float_text(value: f64) -> String {
    floats::repr(value)
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
    let labels = || -> Result<Vec<Vec<u8>>, String> {
        Ok(labels
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
            size: values::decimal_size(a, b),
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
                3 => Text::Latin1,
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
        let kind = match kind {
            "I" | "D" | "U" => kind.as_bytes()[0],
            _ => return Err(PyValueError::new_err(format!("rows kind {kind:?}"))),
        };
        let encoded = py
            .detach(|| self.plan.encode(data, rows_off, kind))
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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(float_text, m)?)?;
    m.add_class::<RowPlan>()?;
    m.add_class::<EncodedRows>()?;
    Ok(())
}
