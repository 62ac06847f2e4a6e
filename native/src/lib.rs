//! `sidewinder._native`: the per-message hot path in Rust.
//!
//! Every function here has a pure-Python reference in `sidewinder/` that gives the same answer
//! for every input and stays in use when this module is absent (or `SIDEWINDER_NATIVE=0`);
//! `sidewinder/common/native.py` chooses. Bytes from the network are bounds-checked before use.

use pyo3::prelude::*;

#[pymodule]
mod _native {
    /// Bumped when a function's signature changes, so a stale build in the source tree is
    /// refused rather than called with the wrong arguments.
    #[pymodule_export]
    const API_VERSION: u32 = 1;
}
