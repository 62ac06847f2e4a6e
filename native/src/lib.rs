//! `sidewinder._native`: the per-message hot path in Rust.
//!
//! Every function here has a pure-Python reference in `sidewinder/` that gives the same answer
//! for every input and stays in use when this module is absent (or `SIDEWINDER_NATIVE=0`);
//! `sidewinder/common/native.py` chooses. Bytes from the network are bounds-checked before use.

use pyo3::prelude::*;

mod hash;

#[pymodule]
mod _native {
    use pyo3::prelude::*;
    use pyo3::types::PyString;

    /// Bumped when a function's signature changes, so a stale build in the source tree is
    /// refused rather than called with the wrong arguments.
    #[pymodule_export]
    const API_VERSION: u32 = 2;

    /// Java's `String.hashCode()` of `text`: the 31-polynomial over its UTF-16 code units, as a
    /// signed int32 (reference: `sidewinder.protocol.message.java_string_hash_py`). Lone
    /// surrogates count as the one code unit they are, as "utf-16-be" with "surrogatepass"
    /// encodes them.
    #[pyfunction]
    fn java_string_hash(text: &Bound<'_, PyString>) -> PyResult<i32> {
        crate::hash::java_string_hash(text)
    }
}
