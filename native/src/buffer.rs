//! Python buffers borrowed for the length of one call (the GIL is held throughout).

use std::mem::MaybeUninit;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;

/// A Py_buffer this call exported and releases when dropped.
struct Exported(ffi::Py_buffer);

impl Exported {
    fn get(obj: &Bound<'_, PyAny>, flags: i32) -> PyResult<Self> {
        let mut view = MaybeUninit::<ffi::Py_buffer>::uninit();
        // SAFETY: `obj` is a live object; on success CPython fills `view`, released in drop.
        if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), view.as_mut_ptr(), flags) } != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(Exported(unsafe { view.assume_init() }))
    }
}

impl Drop for Exported {
    fn drop(&mut self) {
        // SAFETY: exported by PyObject_GetBuffer above and released once; the GIL is held by
        // the call this buffer lives in.
        unsafe { ffi::PyBuffer_Release(&mut self.0) };
    }
}

/// Bytes to read: a bytes object's own data, or any C-contiguous buffer (memoryview, ...).
pub struct ReadBuf {
    ptr: *const u8,
    len: usize,
    _export: Option<Exported>,
}

impl ReadBuf {
    pub fn get(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        // SAFETY: type checks and reads of a live object; bytes are immutable and live as long
        // as `obj`, which outlives this call.
        unsafe {
            if ffi::PyBytes_Check(obj.as_ptr()) != 0 {
                let ptr = ffi::PyBytes_AsString(obj.as_ptr());
                let len = ffi::PyBytes_Size(obj.as_ptr());
                if ptr.is_null() || len < 0 {
                    return Err(PyErr::fetch(obj.py()));
                }
                return Ok(ReadBuf {
                    ptr: ptr.cast(),
                    len: len as usize,
                    _export: None,
                });
            }
        }
        let export = Exported::get(obj, ffi::PyBUF_SIMPLE)?;
        Ok(ReadBuf {
            ptr: export.0.buf.cast_const().cast(),
            len: export.0.len as usize,
            _export: Some(export),
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn as_slice(&self) -> &[u8] {
        self.head(self.len)
    }

    /// The first `end` bytes (at most `len`): all a caller may hold when another thread
    /// writes the bytes after them meanwhile (a CommitLog mapping the loop appends into).
    pub fn head(&self, end: usize) -> &[u8] {
        assert!(end <= self.len, "{end} bytes of a {}-byte buffer", self.len);
        if end == 0 {
            return &[];
        }
        // SAFETY: `ptr` points at `len` readable bytes for as long as `self` holds the export
        // (or, for bytes, the caller's reference to the object).
        unsafe { std::slice::from_raw_parts(self.ptr, end) }
    }
}

/// A writable C-contiguous buffer (bytearray, writable memoryview, mmap).
pub struct WriteBuf {
    export: Exported,
}

impl WriteBuf {
    pub fn get(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        match Exported::get(obj, ffi::PyBUF_WRITABLE) {
            Ok(export) => Ok(WriteBuf { export }),
            Err(err) => Err(PyTypeError::new_err(format!(
                "a writable contiguous buffer is needed, not {}: {}",
                obj.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default(),
                err
            ))),
        }
    }

    pub fn len(&self) -> usize {
        self.export.0.len as usize
    }

    /// Whether `data` shares any byte with this buffer.
    pub fn overlaps(&self, data: &[u8]) -> bool {
        let start = self.export.0.buf as usize;
        let end = start + self.len();
        let (a, b) = (data.as_ptr() as usize, data.as_ptr() as usize + data.len());
        !data.is_empty() && a < end && start < b
    }

    /// Where the buffer starts, for writes into memory other threads read (index.rs).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.export.0.buf.cast::<u8>()
    }

    /// # Safety
    /// `start + len <= self.len()`, and nothing else reads or writes those bytes meanwhile.
    pub unsafe fn slice_mut(&mut self, start: usize, len: usize) -> &mut [u8] {
        let base = self.export.0.buf.cast::<u8>();
        unsafe { std::slice::from_raw_parts_mut(base.add(start), len) }
    }
}
