//! The loader's native module, `loader._native`.

use pyo3::prelude::*;

mod floats;

/// The text Python's `repr` gives a float (the staging files' float text).
#[pyfunction]
fn float_text(value: f64) -> String {
    floats::repr(value)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(float_text, m)?)?;
    Ok(())
}
