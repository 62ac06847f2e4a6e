//! `sidewinder._native`: the per-message hot path in Rust.
//!
//! Every function here has a pure-Python reference in `sidewinder/` that gives the same answer
//! for every input and stays in use when this module is absent (or `SIDEWINDER_NATIVE=0`);
//! `sidewinder/common/native.py` chooses. Bytes from the network are bounds-checked before use.

use pyo3::prelude::*;

mod batch;
mod buffer;
mod dispatch_scan;
mod gather;
mod grpc_front;
mod hash;
mod index;
mod pull_header;
mod record;
mod send_header;
mod send_lane;
mod syncer;

#[pymodule]
mod _native {
    use pyo3::exceptions::{PyIndexError, PyValueError};
    use pyo3::prelude::*;
    use pyo3::types::{PyBytes, PyList, PyString, PyTuple, PyType};

    /// Bumped when a function's signature changes, so a stale build in the source tree is
    /// refused rather than called with the wrong arguments.
    #[pymodule_export]
    const API_VERSION: u32 = 15;

    #[pymodule_export]
    use crate::syncer::Syncer;

    #[pymodule_export]
    use crate::send_lane::SendLane;

    #[pymodule_export]
    use crate::grpc_front::GrpcServer;

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

    /// What the send pipeline reads of a SEND_MESSAGE_V2 JSON header: (opaque, flag, topic,
    /// queueId, sysFlag, bornTimestamp, flag, reconsumeTimes, properties), or None for anything
    /// unusual (reference: `sidewinder.broker.send.header.send_v2_fields_py`; where this gives
    /// a tuple, it is the reference's). Given `into` (a tuple type), `head` and `tail`, the
    /// tuple is `into`'s, those nine fields between `head`'s and `tail`'s: the pipeline's
    /// request, made once instead of rebuilt from this tuple in Python.
    #[pyfunction]
    #[pyo3(signature = (header, into=None, head=None, tail=None))]
    fn send_v2_fields<'py>(
        py: Python<'py>,
        header: &Bound<'py, PyAny>,
        into: Option<&Bound<'py, PyType>>,
        head: Option<&Bound<'py, PyTuple>>,
        tail: Option<&Bound<'py, PyTuple>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let data = crate::buffer::ReadBuf::get(header)?;
        let Some(f) = crate::send_header::parse(data.as_slice()) else {
            return Ok(None);
        };
        if into.is_none() && head.is_none() && tail.is_none() {
            return crate::send_header::fields_tuple(py, &f).map(Some);
        }
        crate::send_header::fields_into(&f, into, head, tail).map(Some)
    }

    /// `send_v2_fields`'s tuple for a SEND_BATCH_MESSAGE JSON header (the same short field
    /// names), or None (reference: `sidewinder.broker.send.header.send_batch_fields_py`).
    #[pyfunction]
    fn send_batch_fields<'py>(
        py: Python<'py>,
        header: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let data = crate::buffer::ReadBuf::get(header)?;
        let Some(f) = crate::send_header::parse_batch(data.as_slice()) else {
            return Ok(None);
        };
        crate::send_header::fields_tuple(py, &f).map(Some)
    }

    /// What the pull lane reads of a PULL_MESSAGE JSON header: (opaque, then
    /// PullMessageRequestHeader's eleven fields in its order), or None for anything unusual
    /// (reference: `sidewinder.broker.processors.pull_lane.pull_fields_py`; where this gives
    /// a tuple, it is the reference's).
    #[pyfunction]
    fn pull_fields<'py>(
        py: Python<'py>,
        header: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let data = crate::buffer::ReadBuf::get(header)?;
        let Some(f) = crate::pull_header::parse_pull(data.as_slice()) else {
            return Ok(None);
        };
        let fields = (
            f.opaque,
            f.consumer_group.as_ref(),
            f.topic.as_ref(),
            f.queue_id,
            f.queue_offset,
            f.max_msg_nums,
            f.sys_flag,
            f.commit_offset,
            f.suspend_timeout_millis,
            f.sub_version,
            f.subscription.as_deref(),
            f.expression_type.as_deref(),
        );
        Ok(Some(fields.into_pyobject(py)?))
    }

    /// A pull's records in one CommitLog segment, joined: (entries scanned, count, total
    /// bytes, whether it stopped at an entry outside the segment, body). `count` and `total`
    /// come in as what earlier segments of the batch took. Reference and contract:
    /// `sidewinder.store.get_message.gather_run_py`.
    #[pyfunction]
    #[allow(clippy::too_many_arguments)]
    fn gather_run<'py>(
        py: Python<'py>,
        entries: &Bound<'py, PyAny>,
        segment: &Bound<'py, PyAny>,
        segment_start: i64,
        segment_end: i64,
        max_count: usize,
        max_bytes: i64,
        tags_codes: Option<&Bound<'py, PyAny>>,
        count: usize,
        total: i64,
    ) -> PyResult<(usize, usize, i64, bool, Bound<'py, PyBytes>)> {
        let codes: Option<Vec<i64>> = match tags_codes {
            None => None,
            Some(set) => {
                let mut codes = set
                    .try_iter()?
                    .map(|code| code?.extract::<i64>())
                    .collect::<PyResult<Vec<i64>>>()?;
                codes.sort_unstable();
                Some(codes)
            }
        };
        let entries = crate::buffer::ReadBuf::get(entries)?;
        let segment = crate::buffer::ReadBuf::get(segment)?;
        let limits = crate::gather::Limits {
            segment_start,
            segment_end,
            max_count,
            max_bytes,
            tags_codes: codes.as_deref(),
        };
        let run = crate::gather::gather(
            entries.as_slice(),
            segment.as_slice(),
            &limits,
            count,
            total,
        );
        let data = segment.as_slice();
        let length = run.spans.iter().map(|(start, end)| end - start).sum();
        let body = PyBytes::new_with(py, length, |out| {
            let mut at = 0;
            for &(start, end) in &run.spans {
                out[at..at + end - start].copy_from_slice(&data[start..end]);
                at += end - start;
            }
            Ok(())
        })?;
        Ok((run.scanned, run.count, run.total, run.outside, body))
    }

    /// What dispatch writes for the records of one CommitLog segment from `position`, by a
    /// `dispatch_scan.ScanRules`:
    /// (why it stopped, position after, records, last store timestamp, queue runs, packed
    /// keys). The GIL is released while it reads the bytes before `readable` (the segment's
    /// written position), and only those: the event loop appends after them meanwhile.
    /// Reference and contract: `sidewinder.store.dispatch_scan.scan_segment_py`.
    #[pyfunction]
    #[allow(clippy::too_many_arguments)]
    fn scan_segment<'py>(
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        position: i64,
        stop: i64,
        readable: i64,
        max_records: i64,
        rules: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let delay_levels_ms: Vec<i64> = rules.getattr("delay_levels_ms")?.extract()?;
        let keys: bool = rules.getattr("keys")?.extract()?;
        let buffer = crate::buffer::ReadBuf::get(data)?;
        if position < 0
            || !(position <= readable && readable <= buffer.len() as i64)
            || max_records < 0
        {
            return Err(PyValueError::new_err(format!(
                "cannot scan {} bytes from {} to {}, {} records",
                buffer.len(),
                position,
                readable,
                max_records
            )));
        }
        // The written records only: the bytes past `readable` are the segment's free room,
        // which the loop appends into while this thread reads without the GIL, so no Rust
        // reference may cover them. The bytes before it are not written again (appends go
        // past the written position; only recovery cuts a segment back, before dispatch).
        let bytes = buffer.head(readable as usize);
        let scanned = py.detach(|| {
            crate::dispatch_scan::scan(
                bytes,
                position as usize,
                stop,
                readable as usize,
                max_records as usize,
                &delay_levels_ms,
                keys,
            )
        });
        let queues = PyList::empty(py);
        for run in &scanned.queues {
            queues.append((
                PyBytes::new(py, run.topic),
                run.queue_id,
                run.grown,
                run.first,
                run.count,
                run.one_run,
                PyBytes::new(py, &run.entries),
                run.max_phy,
            ))?;
        }
        (
            scanned.status,
            scanned.position,
            scanned.count,
            scanned.last_store_timestamp,
            queues,
            PyBytes::new(py, &scanned.keys),
        )
            .into_pyobject(py)
    }

    /// Index keys (packed by the scan: hash, phy offset, store timestamp) written into an
    /// IndexFile's buffer after entry `counts[0]`; returns the header's new running fields
    /// (indexCount, hashSlotCount, beginTimestamp, beginPhyOffset, endPhyOffset, endTimestamp).
    /// The GIL is released while it writes, through raw pointers: lookups on the loop read the
    /// file meanwhile (index.rs). Reference: `sidewinder.store.index_file.put_keys_py`.
    #[pyfunction]
    fn put_keys(
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        hash_slot_num: i64,
        counts: crate::index::Counts,
        keys: &Bound<'_, PyAny>,
    ) -> PyResult<crate::index::Counts> {
        let mut target = crate::buffer::WriteBuf::get(buffer)?;
        let keys = crate::buffer::ReadBuf::get(keys)?;
        let keys = keys.as_slice();
        if hash_slot_num <= 0
            || counts.0 < 0
            || !keys.len().is_multiple_of(crate::index::KEY_ENTRY)
            || target.overlaps(keys)
        {
            return Err(PyValueError::new_err(format!(
                "{} key bytes, {hash_slot_num} slots and count {} (or keys inside the index \
                 buffer) make no index write",
                keys.len(),
                counts.0
            )));
        }
        crate::index::check(target.len(), hash_slot_num as usize, counts.0, keys)
            .map_err(PyIndexError::new_err)?;
        // SAFETY: the whole buffer, held exported (so mapped) by `target` until this call
        // returns; the index has one writer at a time (the store's dispatch lock), and lookups
        // on other threads only read it.
        let index = unsafe { crate::index::SharedIndex::new(target.as_mut_ptr(), target.len()) };
        Ok(py.detach(|| crate::index::put(&index, hash_slot_num as usize, counts, keys)))
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

    /// (messages, bytes of their bodies and stored properties) of a SEND_BATCH_MESSAGE body,
    /// or None for a body the generic path refuses or finds empty, or a message whose
    /// properties, with the CLUSTER one of `cluster_length` bytes, are too long (reference:
    /// `sidewinder.protocol.batch_record.batch_sizes_py`).
    #[pyfunction]
    fn batch_sizes(
        data: &Bound<'_, PyAny>,
        cluster_length: usize,
    ) -> PyResult<Option<(usize, usize)>> {
        let data = crate::buffer::ReadBuf::get(data)?;
        Ok(crate::batch::sizes(data.as_slice(), cluster_length))
    }

    /// The records of a batch body written into `buffer` from `position`, with consecutive
    /// queue offsets; each record's physical offset (reference:
    /// `sidewinder.protocol.batch_record.encode_batch_py`). `size` is the bytes intake worked
    /// out for them. Nothing is written when a check fails: a body that is no batch, records
    /// that do not take `size` bytes (ValueError), a buffer without room (IndexError).
    #[pyfunction]
    #[allow(clippy::too_many_arguments)]
    fn encode_batch(
        buffer: &Bound<'_, PyAny>,
        position: isize,
        data: &Bound<'_, PyAny>,
        cluster: &Bound<'_, PyAny>,
        size: usize,
        topic: &Bound<'_, PyAny>,
        queue_id: i32,
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
    ) -> PyResult<Vec<i64>> {
        let data = crate::buffer::ReadBuf::get(data)?;
        let cluster = crate::buffer::ReadBuf::get(cluster)?;
        let topic = crate::buffer::ReadBuf::get(topic)?;
        let born_address = crate::buffer::ReadBuf::get(born_address)?;
        let store_address = crate::buffer::ReadBuf::get(store_address)?;
        let mut target = crate::buffer::WriteBuf::get(buffer)?;
        let inputs = [
            data.as_slice(),
            cluster.as_slice(),
            topic.as_slice(),
            born_address.as_slice(),
            store_address.as_slice(),
        ];
        // An input that shares memory with the target is copied first: the records are
        // written over bytes it may read.
        let owned: Vec<std::borrow::Cow<'_, [u8]>> = inputs
            .iter()
            .map(|input| {
                if target.overlaps(input) {
                    std::borrow::Cow::Owned(input.to_vec())
                } else {
                    std::borrow::Cow::Borrowed(*input)
                }
            })
            .collect();
        let (data, cluster, topic, born_address, store_address) =
            (&owned[0], &owned[1], &owned[2], &owned[3], &owned[4]);
        let shared = crate::batch::Shared {
            topic,
            queue_id,
            sys_flag,
            born_timestamp,
            born_address,
            born_port,
            store_timestamp,
            store_address,
            store_port,
            reconsume_times,
            prepared_transaction_offset,
        };
        let planned =
            crate::batch::plan(data, cluster, &shared, size).map_err(PyValueError::new_err)?;
        let limit = target.len();
        if position < 0
            || (position as usize)
                .checked_add(size)
                .is_none_or(|end| end > limit)
        {
            return Err(PyIndexError::new_err(format!(
                "a batch of {size} bytes at {position} runs past the {limit}-byte buffer"
            )));
        }
        // SAFETY: [position, position + size) is in bounds and no input borrows the target.
        let out = unsafe { target.slice_mut(position as usize, size) };
        Ok(crate::batch::encode(
            &planned,
            &shared,
            out,
            queue_offset,
            phy_offset,
        ))
    }
}
