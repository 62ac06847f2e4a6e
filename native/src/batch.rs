//! The messages of a SEND_BATCH_MESSAGE body written as CommitLog records in one call
//! (reference: `sidewinder.protocol.batch_record`, `batch_sizes_py` and `encode_batch_py`).

use crate::record::{encode_into, record_size, Fields, MAX_PROPERTIES_LENGTH};

/// One entry of a batch body, bounds-checked: its flag, body and properties (the separators at
/// their end still there).
pub struct Entry<'a> {
    flag: i32,
    body: &'a [u8],
    properties: &'a [u8],
}

fn be_i32(data: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
}

/// The entries of `data`, or None where the reference refuses the body (a torn or overlong
/// entry, a TOTALSIZE that disagrees with the fields) or finds it empty.
fn entries(data: &[u8]) -> Option<Vec<Entry<'_>>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        if data.len() - at < 20 {
            return None;
        }
        let total = be_i32(data, at);
        let flag = be_i32(data, at + 12);
        let body_len = be_i32(data, at + 16);
        if body_len < 0 {
            return None;
        }
        let body_at = at + 20;
        let props_at = body_at.checked_add(body_len as usize)?;
        if props_at.checked_add(2).is_none_or(|end| end > data.len()) {
            return None;
        }
        let props_len = (u16::from(data[props_at]) << 8 | u16::from(data[props_at + 1])) as usize;
        let end = props_at + 2 + props_len;
        if props_len > 0x7FFF || end > data.len() {
            return None;
        }
        if total != 0 && (at as i64 + i64::from(total)) != end as i64 {
            return None;
        }
        out.push(Entry {
            flag,
            body: &data[body_at..props_at],
            properties: &data[props_at + 2..end],
        });
        at = end;
    }
    if out.is_empty() {
        None
    } else {
        Some(out)
    }
}

fn kept_properties(properties: &[u8]) -> &[u8] {
    let mut n = properties.len();
    while n > 0 && properties[n - 1] == 0x02 {
        n -= 1;
    }
    &properties[..n]
}

/// Bytes of the properties a message is stored with: its own less the trailing separators,
/// then the CLUSTER one (alone when it has none).
fn stored_properties_length(properties: &[u8], cluster_length: usize) -> usize {
    let kept = kept_properties(properties).len();
    if kept == 0 {
        cluster_length
    } else {
        kept + 1 + cluster_length
    }
}

/// (messages, bytes of their bodies and stored properties), or None as `entries` says or when
/// a message's stored properties are too long.
pub fn sizes(data: &[u8], cluster_length: usize) -> Option<(usize, usize)> {
    let mut variable = 0usize;
    let found = entries(data)?;
    for entry in &found {
        let stored = stored_properties_length(entry.properties, cluster_length);
        if stored > MAX_PROPERTIES_LENGTH {
            return None;
        }
        variable += entry.body.len() + stored;
    }
    Some((found.len(), variable))
}

/// What every record of a batch shares: the send header's fields and the store's.
pub struct Shared<'a> {
    pub topic: &'a [u8],
    pub queue_id: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_address: &'a [u8],
    pub born_port: i32,
    pub store_timestamp: i64,
    pub store_address: &'a [u8],
    pub store_port: i32,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
}

/// The records of the batch, checked: each one's stored properties and size, and the bytes of
/// all (which must be `expected`, what intake worked out), or why not.
pub fn plan<'a>(
    data: &'a [u8],
    cluster: &[u8],
    shared: &Shared<'_>,
    expected: usize,
) -> Result<Vec<(Entry<'a>, Vec<u8>, usize)>, String> {
    let found = entries(data).ok_or("not a batch body the generic path takes")?;
    let mut planned = Vec::with_capacity(found.len());
    let mut total = 0usize;
    for entry in found {
        let kept = kept_properties(entry.properties);
        let mut properties = Vec::with_capacity(kept.len() + 1 + cluster.len());
        if !kept.is_empty() {
            properties.extend_from_slice(kept);
            properties.push(0x02);
        }
        properties.extend_from_slice(cluster);
        let size = record_size(&fields(shared, &entry, &properties, 0, 0))?;
        total += size;
        planned.push((entry, properties, size));
    }
    if total != expected {
        return Err(format!(
            "the batch's records take {total} bytes, not the {expected} its intake worked out"
        ));
    }
    Ok(planned)
}

fn fields<'a>(
    shared: &Shared<'a>,
    entry: &Entry<'a>,
    properties: &'a [u8],
    queue_offset: i64,
    phy_offset: i64,
) -> Fields<'a> {
    Fields {
        queue_offset,
        phy_offset,
        ..shared.record(entry.flag, entry.body, properties)
    }
}

impl<'a> Shared<'a> {
    /// A record of these shared fields with its own flag, body and properties (queue and
    /// physical offsets 0, to be set).
    pub fn record(&self, flag: i32, body: &'a [u8], properties: &'a [u8]) -> Fields<'a> {
        Fields {
            topic: self.topic,
            queue_id: self.queue_id,
            body,
            properties,
            flag,
            sys_flag: self.sys_flag,
            born_timestamp: self.born_timestamp,
            born_address: self.born_address,
            born_port: self.born_port,
            store_timestamp: self.store_timestamp,
            store_address: self.store_address,
            store_port: self.store_port,
            reconsume_times: self.reconsume_times,
            prepared_transaction_offset: self.prepared_transaction_offset,
            queue_offset: 0,
            phy_offset: 0,
        }
    }
}

/// Writes the planned records into `out` (exactly their bytes); each one's physical offset.
pub fn encode(
    planned: &[(Entry<'_>, Vec<u8>, usize)],
    shared: &Shared<'_>,
    out: &mut [u8],
    queue_offset: i64,
    phy_offset: i64,
) -> Vec<i64> {
    let mut phys = Vec::with_capacity(planned.len());
    let mut at = 0usize;
    for (n, (entry, properties, size)) in planned.iter().enumerate() {
        let phy = phy_offset + at as i64;
        let record = fields(shared, entry, properties, queue_offset + n as i64, phy);
        encode_into(&record, *size, &mut out[at..at + size]);
        phys.push(phy);
        at += size;
    }
    phys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(flag: i32, body: &[u8], props: &[u8]) -> Vec<u8> {
        let total = 20 + body.len() + 2 + props.len();
        let mut out = Vec::new();
        out.extend_from_slice(&(total as i32).to_be_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&flag.to_be_bytes());
        out.extend_from_slice(&(body.len() as i32).to_be_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(&(props.len() as u16).to_be_bytes());
        out.extend_from_slice(props);
        out
    }

    #[test]
    fn sizes_strip_separators_and_add_the_cluster() {
        let mut data = entry(0, b"abc", b"K\x01v\x02\x02");
        data.extend(entry(1, b"", b""));
        // "K\x01v" + "\x02" + 5 cluster bytes; then the cluster alone.
        assert_eq!(sizes(&data, 5), Some((2, 3 + 3 + 1 + 5 + 5)));
    }

    #[test]
    fn torn_and_empty_bodies_are_refused() {
        let data = entry(0, b"abc", b"");
        assert_eq!(sizes(&data[..data.len() - 1], 5), None);
        assert_eq!(sizes(b"", 5), None);
        let mut wrong_total = data.clone();
        wrong_total[3] += 1;
        assert_eq!(sizes(&wrong_total, 5), None);
    }
}
