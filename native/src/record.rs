//! One CommitLog record, RocketMQ 4.x layout (reference: `sidewinder.protocol.record`).

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;

use crate::buffer::{ReadBuf, WriteBuf};

pub const MESSAGE_MAGIC: i32 = -626843481; // 0xDAA320A7
pub const MESSAGE_MAGIC_V2: i32 = -626843477; // 0xDAA320AB
pub const MAX_TOPIC_LENGTH_V1: usize = 127;
pub const MAX_PROPERTIES_LENGTH: usize = 32767;
const BORNHOST_V6: i32 = 0x10;
const STOREHOST_V6: i32 = 0x20;

/// The primitive fields of a record, as `encode_record` writes them.
pub struct Fields<'a> {
    pub topic: &'a [u8],
    pub queue_id: i32,
    pub body: &'a [u8],
    pub properties: &'a [u8],
    pub flag: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_address: &'a [u8],
    pub born_port: i32,
    pub store_timestamp: i64,
    pub store_address: &'a [u8],
    pub store_port: i32,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub queue_offset: i64,
    pub phy_offset: i64,
}

fn host_length(address: &[u8]) -> usize {
    if address.len() == 16 {
        20
    } else {
        8
    }
}

/// TOTALSIZE of the record, or why it cannot be written (the reference's refusals).
pub fn record_size(f: &Fields<'_>) -> Result<usize, String> {
    if f.properties.len() > MAX_PROPERTIES_LENGTH {
        return Err(format!(
            "properties of {} bytes exceed {}",
            f.properties.len(),
            MAX_PROPERTIES_LENGTH
        ));
    }
    if f.topic.len() > u16::MAX as usize {
        return Err(format!(
            "a topic of {} bytes does not fit its length field",
            f.topic.len()
        ));
    }
    if f.body.len() > i32::MAX as usize {
        return Err(format!(
            "a body of {} bytes does not fit its length field",
            f.body.len()
        ));
    }
    // The SYSFLAG's host bits say how wide the hosts are; they must be the hosts' own.
    if (f.sys_flag & BORNHOST_V6 != 0) != (f.born_address.len() == 16)
        || (f.sys_flag & STOREHOST_V6 != 0) != (f.store_address.len() == 16)
    {
        return Err(format!(
            "sysflag {:#x} does not match host addresses of {} and {} bytes",
            f.sys_flag,
            f.born_address.len(),
            f.store_address.len()
        ));
    }
    let topic_length_field = if f.topic.len() > MAX_TOPIC_LENGTH_V1 {
        2
    } else {
        1
    };
    Ok(4 + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + host_length(f.born_address)
        + 8
        + host_length(f.store_address)
        + 4
        + 8
        + 4
        + f.body.len()
        + topic_length_field
        + f.topic.len()
        + 2
        + f.properties.len())
}

struct Cursor<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Cursor<'_> {
    #[inline(always)]
    fn bytes(&mut self, data: &[u8]) {
        self.out[self.at..self.at + data.len()].copy_from_slice(data);
        self.at += data.len();
    }
    #[inline(always)]
    fn i32(&mut self, v: i32) {
        self.bytes(&v.to_be_bytes());
    }
    #[inline(always)]
    fn i64(&mut self, v: i64) {
        self.bytes(&v.to_be_bytes());
    }
    /// A host as the reference packs it: 16 address bytes for IPv6; otherwise struct's "4s",
    /// which pads a shorter address with zeros and cuts a longer one to 4 bytes.
    #[inline(always)]
    fn host(&mut self, address: &[u8], port: i32) {
        if address.len() == 16 {
            self.bytes(address);
        } else {
            let mut four = [0u8; 4];
            let n = address.len().min(4);
            four[..n].copy_from_slice(&address[..n]);
            self.bytes(&four);
        }
        self.i32(port);
    }
}

/// Writes the record into `out`, which is exactly `record_size(f)` bytes.
pub fn encode_into(f: &Fields<'_>, size: usize, out: &mut [u8]) {
    debug_assert_eq!(out.len(), size);
    let v2 = f.topic.len() > MAX_TOPIC_LENGTH_V1;
    let mut c = Cursor { out, at: 0 };
    c.i32(size as i32);
    c.i32(if v2 { MESSAGE_MAGIC_V2 } else { MESSAGE_MAGIC });
    c.i32((crc32fast::hash(f.body) & 0x7FFF_FFFF) as i32);
    c.i32(f.queue_id);
    c.i32(f.flag);
    c.i64(f.queue_offset);
    c.i64(f.phy_offset);
    c.i32(f.sys_flag);
    c.i64(f.born_timestamp);
    c.host(f.born_address, f.born_port);
    c.i64(f.store_timestamp);
    c.host(f.store_address, f.store_port);
    c.i32(f.reconsume_times);
    c.i64(f.prepared_transaction_offset);
    c.i32(f.body.len() as i32);
    c.bytes(f.body);
    if v2 {
        c.bytes(&(f.topic.len() as u16).to_be_bytes());
    } else {
        c.bytes(&[f.topic.len() as u8]);
    }
    c.bytes(f.topic);
    c.bytes(&(f.properties.len() as u16).to_be_bytes());
    c.bytes(f.properties);
    assert_eq!(c.at, size, "record fields do not add up to its size");
}

#[allow(clippy::too_many_arguments)]
pub fn encode_record(
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
    let topic = ReadBuf::get(topic)?;
    let body = ReadBuf::get(body)?;
    let properties = ReadBuf::get(properties)?;
    let born_address = ReadBuf::get(born_address)?;
    let store_address = ReadBuf::get(store_address)?;
    let fields = Fields {
        topic: topic.as_slice(),
        queue_id,
        body: body.as_slice(),
        properties: properties.as_slice(),
        flag,
        sys_flag,
        born_timestamp,
        born_address: born_address.as_slice(),
        born_port,
        store_timestamp,
        store_address: store_address.as_slice(),
        store_port,
        reconsume_times,
        prepared_transaction_offset,
        queue_offset,
        phy_offset,
    };
    let size = record_size(&fields).map_err(PyValueError::new_err)?;
    let mut target = WriteBuf::get(buffer)?;
    let limit = target.len();
    if position < 0
        || (position as usize)
            .checked_add(size)
            .is_none_or(|end| end > limit)
    {
        return Err(PyIndexError::new_err(format!(
            "a record of {size} bytes at {position} runs past the {limit}-byte buffer"
        )));
    }
    let start = position as usize;
    // An input that shares memory with the target (a view of the same buffer) is copied first:
    // the record is written over bytes it may read.
    let inputs = [
        fields.topic,
        fields.body,
        fields.properties,
        fields.born_address,
        fields.store_address,
    ];
    if inputs.iter().any(|input| target.overlaps(input)) {
        let owned: Vec<Vec<u8>> = inputs.iter().map(|input| input.to_vec()).collect();
        let copied = Fields {
            topic: &owned[0],
            body: &owned[1],
            properties: &owned[2],
            born_address: &owned[3],
            store_address: &owned[4],
            ..fields
        };
        // SAFETY: nothing else borrows the target's memory now (the inputs were copied).
        encode_into(&copied, size, unsafe { target.slice_mut(start, size) });
    } else {
        // SAFETY: the target's bytes [start, start + size) are in bounds and no input shares them.
        encode_into(&fields, size, unsafe { target.slice_mut(start, size) });
    }
    Ok(size)
}
