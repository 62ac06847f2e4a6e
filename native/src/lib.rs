//! `sidewinder._native`: the per-message hot path in Rust.
//!
//! Every function here has a pure-Python reference in `sidewinder/` that gives the same answer
//! for every input and stays in use when this module is absent (or `SIDEWINDER_NATIVE=0`);
//! `sidewinder/common/native.py` chooses. Bytes from the network are bounds-checked before use.

use pyo3::prelude::*;

mod buffer;
mod hash;
mod record;
mod send_header;

#[pymodule]
mod _native {
    use pyo3::prelude::*;
    use pyo3::types::PyString;

    /// Bumped when a function's signature changes, so a stale build in the source tree is
    /// refused rather than called with the wrong arguments.
    #[pymodule_export]
    const API_VERSION: u32 = 5;

    /// Java's `String.hashCode()` of `text`: the 31-polynomial over its UTF-16 code units, as a
    /// signed int32 (reference: `sidewinder.protocol.message.java_string_hash_py`). Lone
    /// surrogates count as the one code unit they are, as "utf-16-be" with "surrogatepass"
    /// encodes them.
    #[pyfunction]
    fn java_string_hash(text: &Bound<'_, PyString>) -> PyResult<i32> {
        crate::hash::java_string_hash(text)
    }

    /// `String.hashCode()` of ASCII text given as bytes, unsigned (reference:
    /// `sidewinder.store.index_file.ascii_hash_py`; the index hashes its keys with it).
    #[pyfunction]
    fn ascii_hash(data: &Bound<'_, PyAny>) -> PyResult<u32> {
        let data = crate::buffer::ReadBuf::get(data)?;
        Ok(crate::hash::ascii_bytes_hash(data.as_slice()))
    }

    /// What the send lane reads of a SEND_MESSAGE_V2 JSON header: (opaque, flag, topic,
    /// queueId, sysFlag, bornTimestamp, flag, reconsumeTimes, properties), or None for anything
    /// unusual (reference: `sidewinder.broker.processors.send_header.send_v2_fields_py`; where
    /// this gives a tuple, it is the reference's).
    #[pyfunction]
    fn send_v2_fields<'py>(
        py: Python<'py>,
        header: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, pyo3::types::PyTuple>>> {
        let data = crate::buffer::ReadBuf::get(header)?;
        let Some(f) = crate::send_header::parse(data.as_slice()) else {
            return Ok(None);
        };
        Ok(Some(
            (
                f.opaque,
                f.flag,
                f.topic.as_ref(),
                f.queue_id,
                f.sys_flag,
                f.born_timestamp,
                f.msg_flag,
                f.reconsume_times,
                f.properties.as_ref(),
            )
                .into_pyobject(py)?,
        ))
    }

    /// One CommitLog record (RocketMQ 4.x layout) written into `buffer` at `position` from its
    /// primitive fields; returns its size. The reference is
    /// `sidewinder.protocol.record.encode_record_py`, which takes a MessageToStore: `sys_flag`
    /// here is its stored_sys_flag (the host bits must match the addresses). The buffer must be
    /// writable and hold the whole record (TypeError, IndexError); nothing is written when a
    /// check fails. Inputs are bytes or any contiguous buffer.
    #[pyfunction]
    #[allow(clippy::too_many_arguments)]
    fn encode_record(
        buffer: &Bound<'_, PyAny>,
        position: isize,
        topic: &Bound<'_, PyAny>,
        queue_id: i32,
        body: &Bound<'_, PyAny>,
        properties: &Bound<'_, PyAny>,
        flag: i32,
        sys_flag: i32,
        born_timestamp: i64,
        born_address: &Bound<'_, PyAny>,
        born_port: i32,
        store_timestamp: i64,
        store_address: &Bound<'_, PyAny>,
        store_port: i32,
        reconsume_times: i32,
        prepared_transaction_offset: i64,
        queue_offset: i64,
        phy_offset: i64,
    ) -> PyResult<usize> {
        crate::record::encode_record(
            buffer,
            position,
            topic,
            queue_id,
            body,
            properties,
            flag,
            sys_flag,
            born_timestamp,
            born_address,
            born_port,
            store_timestamp,
            store_address,
            store_port,
            reconsume_times,
            prepared_transaction_offset,
            queue_offset,
            phy_offset,
        )
    }
}
