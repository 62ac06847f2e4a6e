//! Java's `String.hashCode()` over a Python str.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// The hash of UTF-8 text: ASCII bytes are code units as they are; other characters are
/// decoded to code points, and those past the BMP count as their two surrogates.
pub fn hash_utf8(text: &str) -> i32 {
    let mut h: i32 = 0;
    let bytes = text.as_bytes();
    if bytes.is_ascii() {
        for &b in bytes {
            h = h.wrapping_mul(31).wrapping_add(b as i32);
        }
        return h;
    }
    for unit in text.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    h
}

/// The hash of code points, which may include lone surrogates (0xD800..=0xDFFF), each one unit.
pub fn hash_code_points(points: &[u32]) -> i32 {
    let mut h: i32 = 0;
    for &point in points {
        if point >= 0x1_0000 {
            let v = point - 0x1_0000;
            let high = 0xD800 + (v >> 10);
            let low = 0xDC00 + (v & 0x3FF);
            h = h.wrapping_mul(31).wrapping_add(high as i32);
            h = h.wrapping_mul(31).wrapping_add(low as i32);
        } else {
            h = h.wrapping_mul(31).wrapping_add(point as i32);
        }
    }
    h
}

pub fn java_string_hash(text: &Bound<'_, PyString>) -> PyResult<i32> {
    let py = text.py();
    let mut size: ffi::Py_ssize_t = 0;
    // SAFETY: `text` is a str; the UTF-8 it returns lives as long as the str (CPython caches it
    // on the object, and an ASCII str's data is its UTF-8), and the str outlives this call.
    let data = unsafe { ffi::PyUnicode_AsUTF8AndSize(text.as_ptr(), &mut size) };
    if !data.is_null() {
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size as usize) };
        // SAFETY: CPython's UTF-8 of a str is valid UTF-8 (it refuses surrogates, below).
        let utf8 = unsafe { std::str::from_utf8_unchecked(bytes) };
        return Ok(hash_utf8(utf8));
    }
    // A str with lone surrogates has no UTF-8: take its code points instead.
    let err = PyErr::fetch(py);
    if !err.is_instance_of::<pyo3::exceptions::PyUnicodeEncodeError>(py) {
        return Err(err);
    }
    let len = unsafe { ffi::PyUnicode_GetLength(text.as_ptr()) };
    if len < 0 {
        return Err(PyErr::fetch(py));
    }
    let copy = unsafe { ffi::PyUnicode_AsUCS4Copy(text.as_ptr()) };
    if copy.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: AsUCS4Copy returned `len` code points (and a NUL) in memory we free below.
    let points = unsafe { std::slice::from_raw_parts(copy.cast_const(), len as usize) };
    let h = hash_code_points(points);
    unsafe { ffi::PyMem_Free(copy.cast()) };
    Ok(h)
}

/// `String.hashCode()` of ASCII text given as its bytes (each byte one code unit), unsigned.
pub fn ascii_bytes_hash(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &b in bytes {
        h = h.wrapping_mul(31).wrapping_add(b as u32);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_java_hashes() {
        assert_eq!(hash_utf8(""), 0);
        assert_eq!(hash_utf8("TagA"), 2598919);
        assert_eq!(hash_utf8("hello"), 99162322);
        // "😀" is U+1F600: the surrogate pair D83D DE00.
        assert_eq!(hash_utf8("😀"), 0xD83D * 31 + 0xDE00);
        assert_eq!(hash_code_points(&[0x1F600]), hash_utf8("😀"));
        assert_eq!(hash_code_points(&[0xD800]), 0xD800);
    }
}
