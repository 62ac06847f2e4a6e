//! What dispatch writes for a run of CommitLog records (reference:
//! `sidewinder.store.dispatch_scan.scan_segment_py`, whose doc says what a scan gives and where
//! it stops). Reads only within `readable`, which the caller checked against the buffer.

use std::collections::HashMap;

use crate::record::{MESSAGE_MAGIC, MESSAGE_MAGIC_V2};

pub const STOPPED: u8 = 0;
pub const EXHAUSTED: u8 = 1;
pub const DEFERRED: u8 = 2;

const HEAD: usize = 48; // totalSize .. bornTimestamp
const BORNHOST_V6: i32 = 0x10;
const STOREHOST_V6: i32 = 0x20;
const TRANSACTION_TYPE_MASK: i32 = 0xC;
const COMMIT: i32 = 0x8;
const ROLLBACK: i32 = 0xC;
const SCHEDULE_TOPIC: &[u8] = b"SCHEDULE_TOPIC_XXXX";
/// Offsets and timestamps at or past this (or negative) are corrupt: such a record is deferred,
/// so no sum below overflows.
pub const SANE_LIMIT: i64 = 1 << 62;

pub struct QueueRun<'a> {
    pub topic: &'a [u8],
    pub queue_id: i32,
    pub grown: i64,
    pub first: i64,
    pub count: i64,
    pub one_run: bool,
    pub entries: Vec<u8>,
    pub max_phy: i64,
}

pub struct Scan<'a> {
    pub status: u8,
    pub position: usize,
    pub count: usize,
    pub last_store_timestamp: i64,
    pub queues: Vec<QueueRun<'a>>,
    pub keys: Vec<u8>,
}

struct Record<'a> {
    end: usize,
    queue_id: i32,
    queue_offset: i64,
    phy: i64,
    sys_flag: i32,
    store_timestamp: i64,
    topic: &'a [u8],
    properties: &'a [u8],
}

fn i32_at(data: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(data[at..at + 4].try_into().unwrap())
}

fn i64_at(data: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(data[at..at + 8].try_into().unwrap())
}

fn host_length(sys_flag: i32, bit: i32) -> usize {
    if sys_flag & bit != 0 {
        20
    } else {
        8
    }
}

/// The V1 or V2 record at `position` (any hosts), None for anything else. `data` holds
/// `readable` bytes or more.
fn parse(data: &[u8], position: usize, readable: usize) -> Option<Record<'_>> {
    if position + HEAD > readable {
        return None;
    }
    let total = i32_at(data, position);
    let magic = i32_at(data, position + 4);
    if (magic != MESSAGE_MAGIC && magic != MESSAGE_MAGIC_V2) || total <= 0 {
        return None;
    }
    let end = position + total as usize;
    if end > readable {
        return None;
    }
    let queue_offset = i64_at(data, position + 20);
    let phy = i64_at(data, position + 28);
    let sys_flag = i32_at(data, position + 36);
    let mut at = position + HEAD + host_length(sys_flag, BORNHOST_V6);
    if at + 8 > end {
        return None;
    }
    let store_timestamp = i64_at(data, at);
    if [queue_offset, phy, store_timestamp]
        .iter()
        .any(|&n| !(0..SANE_LIMIT).contains(&n))
    {
        return None;
    }
    at += 8 + host_length(sys_flag, STOREHOST_V6) + 12;
    if at + 4 > end {
        return None;
    }
    let body_len = i32_at(data, at);
    if body_len < 0 {
        return None;
    }
    let length_size = if magic == MESSAGE_MAGIC_V2 { 2 } else { 1 };
    let mut topic_at = at + 4 + body_len as usize;
    if topic_at + length_size > end {
        return None;
    }
    let topic_len = if length_size == 2 {
        (data[topic_at] as usize) << 8 | data[topic_at + 1] as usize
    } else {
        data[topic_at] as usize
    };
    topic_at += length_size;
    let properties_at = topic_at + topic_len + 2;
    if properties_at > end {
        return None;
    }
    let properties_len = (data[properties_at - 2] as usize) << 8 | data[properties_at - 1] as usize;
    if properties_at + properties_len != end {
        return None;
    }
    Some(Record {
        end,
        queue_id: i32_at(data, position + 12),
        queue_offset,
        phy,
        sys_flag,
        store_timestamp,
        topic: &data[topic_at..topic_at + topic_len],
        properties: &data[properties_at..end],
    })
}

/// The value of the last property named by `needle` (its name and \x01), None when absent; a
/// match inside another name or a value is passed over.
fn value<'a>(properties: &'a [u8], needle: &[u8]) -> Option<&'a [u8]> {
    let mut end = properties.len();
    let at = loop {
        let at = rfind(&properties[..end], needle)?;
        if at == 0 || properties[at - 1] == 2 {
            break at;
        }
        end = at;
    };
    let start = at + needle.len();
    let end = properties[start..]
        .iter()
        .position(|&b| b == 2)
        .map_or(properties.len(), |n| start + n);
    Some(&properties[start..end])
}

fn rfind(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() > haystack.len() {
        return None;
    }
    (0..=haystack.len() - needle.len())
        .rev()
        .find(|&at| &haystack[at..at + needle.len()] == needle)
}

/// Java's hashCode continued from `h` over the UTF-16 units of `text`.
fn extend_hash(mut h: i32, text: &str) -> i32 {
    if text.is_ascii() {
        for &b in text.as_bytes() {
            h = h.wrapping_mul(31).wrapping_add(b as i32);
        }
    } else {
        for unit in text.encode_utf16() {
            h = h.wrapping_mul(31).wrapping_add(unit as i32);
        }
    }
    h
}

fn tags_code(record: &Record<'_>, delay_levels_ms: &[i64]) -> Option<i64> {
    let mut code: i64 = 0;
    if let Some(tags) = value(record.properties, b"TAGS\x01") {
        if !tags.is_empty() {
            code = extend_hash(0, std::str::from_utf8(tags).ok()?) as i64;
        }
    }
    if record.topic == SCHEDULE_TOPIC {
        if let Some(delay) = value(record.properties, b"DELAY\x01") {
            if delay.is_empty() || !delay.iter().all(u8::is_ascii_digit) {
                return None;
            }
            // Saturating: past 18 digits it is past every level.
            let level = delay.iter().fold(0u64, |n, &d| {
                n.saturating_mul(10).saturating_add((d - b'0') as u64)
            });
            let level = level.min(delay_levels_ms.len() as u64) as usize;
            if level > 0 {
                code = record
                    .store_timestamp
                    .saturating_add(delay_levels_ms[level - 1]);
            }
        }
    }
    Some(code)
}

/// Each key's IndexFile hash (abs(hashCode of "topic#key"), 0 for Integer.MIN_VALUE's), added
/// to `keys` as (hash, phy, store timestamp) little-endian; false for a message the reference
/// reader takes (nothing added then).
fn add_keys(record: &Record<'_>, keys: &mut Vec<u8>) -> bool {
    let uniq = value(record.properties, b"UNIQ_KEY\x01").filter(|key| !key.is_empty());
    let words = value(record.properties, b"KEYS\x01");
    let words = words.into_iter().flat_map(|w| w.split(|&b| b == b' '));
    let mut all = uniq
        .into_iter()
        .chain(words.filter(|w| !w.is_empty()))
        .peekable();
    if all.peek().is_none() {
        return true;
    }
    let Ok(topic) = std::str::from_utf8(record.topic) else {
        return false;
    };
    let prefix = extend_hash(extend_hash(0, topic), "#");
    let start = keys.len();
    for key in all {
        let Ok(text) = std::str::from_utf8(key) else {
            keys.truncate(start);
            return false;
        };
        let h = extend_hash(prefix, text);
        let h = if h == i32::MIN { 0 } else { h.abs() } as i64;
        keys.extend_from_slice(&h.to_le_bytes());
        keys.extend_from_slice(&record.phy.to_le_bytes());
        keys.extend_from_slice(&record.store_timestamp.to_le_bytes());
    }
    true
}

pub fn scan<'a>(
    data: &'a [u8],
    mut position: usize,
    stop: i64,
    readable: usize,
    max_records: usize,
    delay_levels_ms: &[i64],
    with_keys: bool,
) -> Scan<'a> {
    let mut queues: Vec<QueueRun<'a>> = Vec::new();
    let mut found: HashMap<(&'a [u8], i32), usize> = HashMap::new();
    let mut keys = Vec::new();
    let mut count = 0;
    let mut last_store_timestamp = 0;
    let mut status = EXHAUSTED;
    while position < readable {
        if count >= max_records {
            status = STOPPED;
            break;
        }
        let Some(record) = parse(data, position, readable) else {
            status = DEFERRED;
            break;
        };
        if record.end as i64 > stop {
            status = STOPPED;
            break;
        }
        let transaction = record.sys_flag & TRANSACTION_TYPE_MASK;
        let mut code = None;
        if transaction == 0 || transaction == COMMIT {
            match tags_code(&record, delay_levels_ms) {
                Some(c) => code = Some(c),
                None => {
                    status = DEFERRED;
                    break;
                }
            }
        }
        if with_keys && transaction != ROLLBACK && !add_keys(&record, &mut keys) {
            status = DEFERRED;
            break;
        }
        let index = *found
            .entry((record.topic, record.queue_id))
            .or_insert_with(|| {
                queues.push(QueueRun {
                    topic: record.topic,
                    queue_id: record.queue_id,
                    grown: 0,
                    first: 0,
                    count: 0,
                    one_run: true,
                    entries: Vec::new(),
                    max_phy: 0,
                });
                queues.len() - 1
            });
        let run = &mut queues[index];
        run.grown = record.queue_offset.saturating_add(1);
        let size = (record.end - position) as i64;
        if let Some(code) = code {
            if run.count == 0 {
                run.first = record.queue_offset;
            } else if record.queue_offset != run.first.saturating_add(run.count) {
                run.one_run = false;
            }
            run.count += 1;
            run.entries.extend_from_slice(&record.phy.to_be_bytes());
            run.entries.extend_from_slice(&(size as i32).to_be_bytes());
            run.entries.extend_from_slice(&code.to_be_bytes());
            run.max_phy = record.phy.saturating_add(size);
        }
        count += 1;
        last_store_timestamp = record.store_timestamp;
        position = record.end;
    }
    Scan {
        status,
        position,
        count,
        last_store_timestamp,
        queues,
        keys,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_no_record_are_deferred_not_read_past() {
        let data = vec![0u8; 100];
        let scanned = scan(&data, 0, 100, 100, 10, &[], true);
        assert_eq!(scanned.status, DEFERRED);
        assert_eq!(scanned.count, 0);
        let scanned = scan(&data, 90, 100, 100, 10, &[], true);
        assert_eq!(scanned.status, DEFERRED);
    }

    #[test]
    fn a_name_inside_another_is_passed_over() {
        assert_eq!(value(b"XTAGS\x01a", b"TAGS\x01"), None);
        assert_eq!(
            value(b"TAGS\x01t\x02XTAGS\x01a", b"TAGS\x01"),
            Some(&b"t"[..])
        );
        assert_eq!(
            value(b"A\x01b\x02TAGS\x01t\x02B\x01c", b"TAGS\x01"),
            Some(&b"t"[..])
        );
        assert_eq!(value(b"A\x01b", b"TAGS\x01"), None);
    }
}
