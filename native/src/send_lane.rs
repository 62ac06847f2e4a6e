//! The send lane: plain SEND_MESSAGE_V2 frames stored straight from a connection's buffer
//! (reference and contract: `sidewinder.broker.send.lane.SendLanePy`). Frames are untrusted:
//! every length is checked against the bytes there are before use; a frame this does not take
//! as it is stops the walk or is left to the generic path, never guessed at.

use std::borrow::Cow;
use std::io::Write;

use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::batch;
use crate::buffer::{ReadBuf, WriteBuf};
use crate::record::{encode_into, record_size, MAX_PROPERTIES_LENGTH};
use crate::send_header;

const RESPONSE_FLAG: i32 = 0x1;
const ONEWAY_FLAG: i32 = 0x2;
const TRANSACTION_TYPE_MASK: i64 = 0xC;
const HOSTS_V6_MASK: i32 = 0x30;
/// store.commit_log.RECORD_ALLOWANCE: what a record may hold besides its body.
const RECORD_ALLOWANCE: i64 = 64 << 10;
const SEND_BATCH_MESSAGE: i64 = 320;

/// protocol.message's `property_value`: the value of property `name`, a whole name only.
fn property<'a>(properties: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let mut start = 0;
    while start <= properties.len() {
        let rest = &properties[start..];
        let found = rest
            .windows(name.len() + 1)
            .position(|w| &w[..name.len()] == name && w[name.len()] == 0x01)?;
        let at = start + found;
        if at == 0 || properties[at - 1] == 0x02 {
            let value = &properties[at + name.len() + 1..];
            let end = value.iter().position(|&b| b == 0x02).unwrap_or(value.len());
            return Some(&value[..end]);
        }
        start = at + 1;
    }
    None
}

/// Whether a header may be a send's: it opens with `{"code":` and a send's code (10, 310,
/// 320), or does not open with a code at all (lane.py's `_is_send`).
fn is_send(header: &[u8]) -> bool {
    let Some(rest) = header.strip_prefix(br#"{"code":"#) else {
        return true;
    };
    let sign = usize::from(rest.first() == Some(&b'-'));
    let digits = rest[sign..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || digits > 10 {
        return true;
    }
    match rest.get(sign + digits) {
        Some(b',') | Some(b'}') => {}
        _ => return true,
    }
    sign == 0 && matches!(&rest[..digits], b"10" | b"310" | b"320")
}

/// body.py's `strip_wait`: the properties less WAIT, and whether the producer waits.
fn strip_wait(properties: &str) -> (Cow<'_, str>, bool) {
    let bytes = properties.as_bytes();
    let mut at = properties.find("WAIT\u{1}");
    while let Some(found) = at {
        if found == 0 || bytes[found - 1] == 0x02 {
            break;
        }
        at = properties[found + 1..]
            .find("WAIT\u{1}")
            .map(|next| next + found + 1);
    }
    let Some(at) = at else {
        return (Cow::Borrowed(properties), true);
    };
    let (value, rest) = match properties[at..].find('\u{2}') {
        None => (
            &properties[at + 5..],
            Cow::Borrowed(&properties[..at.saturating_sub(1)]),
        ),
        Some(offset) => {
            let end = at + offset;
            let mut rest = String::with_capacity(properties.len());
            rest.push_str(&properties[..at]);
            rest.push_str(&properties[end + 1..]);
            (&properties[at + 5..end], Cow::Owned(rest))
        }
    };
    let wait = !value.eq_ignore_ascii_case("false");
    if rest.contains("WAIT\u{1}") {
        let (stripped, _) = strip_wait(&rest);
        return (Cow::Owned(stripped.into_owned()), wait);
    }
    (rest, wait)
}

/// A topic `topic_of` gave: its name (the queue key's), encoded name and queue count.
struct Topic {
    name: String,
    found: Option<(Py<PyString>, Vec<u8>, i64)>,
}

/// A queue stored to in this call: its topic, id, queue offset before and next.
struct Queue {
    topic: usize,
    queue_id: i32,
    before: i64,
    next: i64,
}

/// A SUCCESS header in pieces: before the msgId, the store host's hex (before each physical
/// offset's), then between the numbers (lane.py's `reply_pieces`).
type ReplyPieces = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>);

#[pyclass(frozen, module = "sidewinder._native")]
pub struct SendLane {
    store_address: Vec<u8>,
    store_port: i32,
    cluster_property: Vec<u8>,
    pieces: [Vec<u8>; 6],
    max_frame: usize,
}

#[pymethods]
impl SendLane {
    #[new]
    fn new(
        store_address: Vec<u8>,
        store_port: i32,
        cluster_property: Vec<u8>,
        reply_pieces: ReplyPieces,
        max_frame: usize,
    ) -> Self {
        let (a, b, c, d, e, f) = reply_pieces;
        SendLane {
            store_address,
            store_port,
            cluster_property,
            pieces: [a, b, c, d, e, f],
            max_frame,
        }
    }

    /// A SUCCESS reply frame (lane.py's `reply`).
    fn reply<'py>(
        &self,
        py: Python<'py>,
        opaque: i32,
        phys: Vec<i64>,
        queue_id: i32,
        queue_offset: i64,
    ) -> Bound<'py, PyBytes> {
        let mut out = Vec::with_capacity(256);
        self.write_reply(&mut out, opaque, &phys, queue_id, queue_offset);
        PyBytes::new(py, &out)
    }

    #[allow(clippy::too_many_arguments)]
    fn serve<'py>(
        &self,
        py: Python<'py>,
        frames: &Bound<'py, PyAny>,
        start: usize,
        out: &Bound<'py, PyAny>,
        at: usize,
        room: usize,
        phy: i64,
        stamp: i64,
        queue_offsets: &Bound<'py, PyDict>,
        topic_of: &Bound<'py, PyAny>,
        born_address: Vec<u8>,
        born_port: i32,
        largest: i64,
        late: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let frames = ReadBuf::get(frames)?;
        let data = frames.as_slice();
        let mut target = WriteBuf::get(out)?;
        if at.checked_add(room).is_none_or(|end| end > target.len()) || start > data.len() {
            return Err(PyIndexError::new_err(format!(
                "a window of {room} bytes at {at} runs past the {}-byte buffer",
                target.len()
            )));
        }
        if target.overlaps(data) {
            return Err(PyIndexError::new_err(
                "the frames and the window share memory",
            ));
        }
        // SAFETY: [at, at + room) is in bounds (checked above) and nothing else touches the
        // window during this call (the GIL is held; the frames do not share its memory).
        let window = unsafe { target.slice_mut(at, room) };
        let born_v6 = born_address.len() == 16;
        let store_v6 = self.store_address.len() == 16;
        let v6_bits = if born_v6 { 0x10 } else { 0 } | if store_v6 { 0x20 } else { 0 };

        let (mut position, mut used, mut need) = (start, 0usize, 0usize);
        let mut skipped: Vec<(usize, usize)> = Vec::new();
        let (mut replies, mut later, mut served) = (Vec::new(), Vec::new(), Vec::new());
        let (mut settle_end, mut stored) = (0i64, 0usize);
        let mut counts = [0usize; 6]; // lane.py's COUNTS
        let mut topics: Vec<Topic> = Vec::new();
        // topic, messages, bytes, sends
        let mut per_topic: Vec<(usize, usize, usize, usize)> = Vec::new();
        let mut queues: Vec<Queue> = Vec::new();
        let mut properties: Vec<u8> = Vec::new();

        while data.len() - position >= 8 {
            let length = i32::from_be_bytes(data[position..position + 4].try_into().unwrap());
            let marker = u32::from_be_bytes(data[position + 4..position + 8].try_into().unwrap());
            let (kind, header_length) = (marker >> 24, (marker & 0xFF_FFFF) as usize);
            if length < 4 || length as usize > self.max_frame || kind != 0 {
                break; // the frame decoder's to raise, or to decode
            }
            if header_length > length as usize - 4 {
                break;
            }
            let frame_end = position + 4 + length as usize;
            if frame_end > data.len() {
                break;
            }
            let body_start = position + 8 + header_length;
            let header = &data[position + 8..body_start];
            let body = &data[body_start..frame_end];
            let Some((code, f)) = send_header::parse_send(header) else {
                if is_send(header) {
                    break;
                }
                skipped.push((position, frame_end));
                position = frame_end;
                continue;
            };
            // route.py's shortcut, in lane.py's order (topic_of is asked as the reference asks).
            if f.flag & RESPONSE_FLAG != 0 || f.sys_flag & TRANSACTION_TYPE_MASK != 0 {
                break;
            }
            let topic = match topics.iter().position(|t| t.name == f.topic) {
                Some(index) => index,
                None => {
                    let found = topic_of.call1((PyString::new(py, &f.topic),))?;
                    let found = if found.is_none() {
                        None
                    } else {
                        let (name, encoded, limit): (Bound<'py, PyString>, Vec<u8>, i64) =
                            found.extract()?;
                        Some((name.unbind(), encoded, limit))
                    };
                    topics.push(Topic {
                        name: f.topic.to_string(),
                        found,
                    });
                    topics.len() - 1
                }
            };
            let Some((_, encoded_topic, limit)) = &topics[topic].found else {
                break;
            };
            if f.queue_id >= *limit {
                break;
            }
            let text: &str = &f.properties;
            if text.contains("DELAY\u{1}")
                || text.contains("TIMER_DEL")
                || text.contains("TRAN_MSG\u{1}")
            {
                break;
            }
            if body.len() as i64 > largest - RECORD_ALLOWANCE {
                break;
            }
            let batch = code == SEND_BATCH_MESSAGE;
            let queue_id = f.queue_id as i32;
            let stored_sys_flag = (f.sys_flag as i32 & !HOSTS_V6_MASK) | v6_bits;
            let shared = batch::Shared {
                topic: encoded_topic,
                queue_id,
                sys_flag: stored_sys_flag,
                born_timestamp: f.born_timestamp,
                born_address: &born_address,
                born_port,
                store_timestamp: stamp,
                store_address: &self.store_address,
                store_port: self.store_port,
                reconsume_times: f.reconsume_times as i32,
                prepared_transaction_offset: 0,
            };
            let mut fields = shared.record(f.msg_flag as i32, &[], &[]);
            let (size, wait, planned) = if batch {
                // A timer message's properties are its own, in the body.
                if body.windows(9).any(|w| w == b"TIMER_DEL") {
                    break;
                }
                let Some((count, variable)) = batch::sizes(body, self.cluster_property.len())
                else {
                    break;
                };
                let Ok(fixed) = record_size(&fields) else {
                    break;
                };
                let total = count * fixed + variable;
                if total as i64 > largest {
                    break;
                }
                let Ok(planned) = batch::plan(body, &self.cluster_property, &shared, total) else {
                    break;
                };
                let wait = property(&planned[0].1, b"WAIT")
                    .is_none_or(|value| !value.eq_ignore_ascii_case(b"false"));
                (total, wait, planned)
            } else {
                let (kept, wait) = strip_wait(text);
                let kept = kept.as_bytes();
                let kept =
                    &kept[..kept.len() - kept.iter().rev().take_while(|&&b| b == 0x02).count()];
                properties.clear();
                if !kept.is_empty() {
                    properties.extend_from_slice(kept);
                    properties.push(0x02);
                }
                properties.extend_from_slice(&self.cluster_property);
                if properties.len() > MAX_PROPERTIES_LENGTH {
                    break;
                }
                fields.body = body;
                fields.properties = &properties;
                let Ok(size) = record_size(&fields) else {
                    break;
                };
                if size as i64 > largest {
                    break;
                }
                (size, wait, Vec::new())
            };
            if used + size > room {
                need = size;
                break;
            }
            let queue = match queues
                .iter()
                .position(|q| q.topic == topic && q.queue_id == queue_id)
            {
                Some(index) => index,
                None => {
                    let before = self.queue_offset(py, queue_offsets, &topics[topic], queue_id)?;
                    queues.push(Queue {
                        topic,
                        queue_id,
                        before,
                        next: before,
                    });
                    queues.len() - 1
                }
            };
            let queue_offset = queues[queue].next;
            let first_phy = phy + used as i64;
            let target = &mut window[used..used + size];
            let phys = if batch {
                batch::encode(&planned, &shared, target, queue_offset, first_phy)
            } else {
                fields.queue_offset = queue_offset;
                fields.phy_offset = first_phy;
                encode_into(&fields, size, target);
                vec![first_phy]
            };
            let messages = phys.len();
            queues[queue].next += messages as i64;
            match per_topic.iter_mut().find(|(t, _, _, _)| *t == topic) {
                Some(totals) => {
                    totals.1 += messages;
                    totals.2 += size;
                    totals.3 += 1;
                }
                None => per_topic.push((topic, messages, size, 1)),
            }
            stored += messages;
            let kind = if batch { 3 } else { 0 };
            if f.flag & ONEWAY_FLAG != 0 {
                counts[kind + 1] += 1;
            } else {
                let waits_late = wait && late;
                let opaque = f.opaque;
                if waits_late {
                    self.write_reply(&mut later, opaque, &phys, queue_id, queue_offset);
                    settle_end = first_phy + size as i64;
                    counts[kind + 2] += 1;
                } else {
                    self.write_reply(&mut replies, opaque, &phys, queue_id, queue_offset);
                    counts[kind] += 1;
                }
                served.extend_from_slice(&opaque.to_be_bytes());
                served.extend_from_slice(&queue_id.to_be_bytes());
                served.extend_from_slice(&first_phy.to_be_bytes());
                served.extend_from_slice(&queue_offset.to_be_bytes());
                served.push(u8::from(waits_late));
                served.extend_from_slice(&((messages - 1) as u16).to_be_bytes());
                for other in &phys[1..] {
                    served.extend_from_slice(&other.to_be_bytes());
                }
            }
            used += size;
            position = frame_end;
        }

        let touched = PyList::empty(py);
        for queue in &queues {
            let key = queue_key(py, &topics[queue.topic], queue.queue_id)?;
            queue_offsets.set_item(&key, queue.next)?;
            touched.append((key, queue.before))?;
        }
        let topic_counts = PyList::empty(py);
        for (topic, messages, bytes, sends) in &per_topic {
            let (name, _, _) = topics[*topic].found.as_ref().expect("a topic stored to");
            topic_counts.append((name.bind(py), *messages, *bytes, *sends))?;
        }
        let skipped = PyList::new(py, skipped)?;
        (
            position,
            used,
            need,
            skipped,
            PyBytes::new(py, &replies),
            PyBytes::new(py, &later),
            PyBytes::new(py, &served),
            settle_end,
            topic_counts,
            touched,
            stored,
            (
                counts[0], counts[1], counts[2], counts[3], counts[4], counts[5],
            ),
        )
            .into_pyobject(py)
    }
}

impl SendLane {
    /// `queue_offsets[(name, queue_id)]`, 0 when absent.
    fn queue_offset(
        &self,
        py: Python<'_>,
        queue_offsets: &Bound<'_, PyDict>,
        topic: &Topic,
        queue_id: i32,
    ) -> PyResult<i64> {
        let key = queue_key(py, topic, queue_id)?;
        match queue_offsets.get_item(&key)? {
            Some(offset) => offset.extract(),
            None => Ok(0),
        }
    }

    /// The SUCCESS frame: [length][JSON, header length] then the header from the template.
    fn write_reply(
        &self,
        out: &mut Vec<u8>,
        opaque: i32,
        phys: &[i64],
        queue_id: i32,
        offset: i64,
    ) {
        let start = out.len();
        out.extend_from_slice(&[0; 8]);
        let p = &self.pieces;
        out.extend_from_slice(&p[0]);
        for (n, phy) in phys.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&p[1]);
            let _ = write!(out, "{phy:016X}");
        }
        out.extend_from_slice(&p[2]);
        let _ = write!(out, "{queue_id}");
        out.extend_from_slice(&p[3]);
        let _ = write!(out, "{offset}");
        out.extend_from_slice(&p[4]);
        let _ = write!(out, "{opaque}");
        out.extend_from_slice(&p[5]);
        let header = (out.len() - start - 8) as i32;
        out[start..start + 4].copy_from_slice(&(header + 4).to_be_bytes());
        out[start + 4..start + 8].copy_from_slice(&header.to_be_bytes());
    }
}

fn queue_key<'py>(py: Python<'py>, topic: &Topic, queue_id: i32) -> PyResult<Bound<'py, PyTuple>> {
    let (name, _, _) = topic.found.as_ref().expect("a topic stored to");
    (name.bind(py), queue_id).into_pyobject(py)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_are_told_by_their_opening_code() {
        assert!(is_send(br#"{"code":310,"x":1}"#));
        assert!(is_send(br#"{"code":10}"#));
        assert!(is_send(br#"{"code":320,"#));
        assert!(!is_send(br#"{"code":11,"x":1}"#));
        assert!(!is_send(br#"{"code":-310,"x":1}"#));
        assert!(!is_send(br#"{"code":0310,"x":1}"#));
        assert!(is_send(br#"{"opaque":1,"code":11}"#));
        assert!(is_send(br#"{"code": 11}"#));
        assert!(is_send(br#"{"code":11"#));
        assert!(is_send(b""));
    }

    #[test]
    fn wait_is_stripped_as_the_reference_strips_it() {
        assert_eq!(strip_wait("A\u{1}1"), (Cow::Borrowed("A\u{1}1"), true));
        assert_eq!(strip_wait("WAIT\u{1}false").1, false);
        assert_eq!(strip_wait("A\u{1}1\u{2}WAIT\u{1}FALSE").0, "A\u{1}1");
        assert_eq!(
            strip_wait("WAIT\u{1}true\u{2}A\u{1}1\u{2}WAIT\u{1}false"),
            (Cow::Owned("A\u{1}1".to_string()), true)
        );
        assert_eq!(strip_wait("XWAIT\u{1}false").1, true);
    }
}
