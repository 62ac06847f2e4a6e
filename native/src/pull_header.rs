//! The JSON header of a PULL_MESSAGE request, read for the pull lane (reference:
//! `sidewinder.broker.processors.pull_lane.pull_fields_py`). Untrusted bytes: every read is
//! bounds-checked (the send header's parser), and anything the lane would not take as it is
//! gives None (the generic path decodes the header in full and accepts or refuses it).

use std::borrow::Cow;

use crate::send_header::{parse_command, Parser};

const PULL_MESSAGE: i64 = 11;
const ONEWAY_FLAG: i32 = 0x2;
const NAMES: [&str; 11] = [
    "consumerGroup",
    "topic",
    "queueId",
    "queueOffset",
    "maxMsgNums",
    "sysFlag",
    "commitOffset",
    "suspendTimeoutMillis",
    "subVersion",
    "subscription",
    "expressionType",
];

/// PullMessageRequestHeader's fields, in its order, after the request's opaque.
#[derive(Debug, PartialEq, Eq)]
pub struct PullFields<'a> {
    pub opaque: i32,
    pub consumer_group: Cow<'a, str>,
    pub topic: Cow<'a, str>,
    pub queue_id: i64,
    pub queue_offset: i64,
    pub max_msg_nums: i64,
    pub sys_flag: i64,
    pub commit_offset: i64,
    pub suspend_timeout_millis: i64,
    pub sub_version: i64,
    pub subscription: Option<Cow<'a, str>>,
    pub expression_type: Option<Cow<'a, str>>,
}

type Named<'a> = [Option<Cow<'a, str>>; 11];

/// extFields with the pull's names picked out; other keys must be unique and hold values.
fn named_ext<'a>(p: &mut Parser<'a>) -> Option<Named<'a>> {
    let mut named: Named<'a> = Default::default();
    let mut others: Vec<Cow<'a, str>> = Vec::new();
    p.eat(b'{')?;
    p.skip_ws();
    if p.peek()? == b'}' {
        p.at += 1;
        return Some(named);
    }
    loop {
        let key = p.string()?;
        p.eat(b':')?;
        let value = p.ext_value()?;
        match NAMES.iter().position(|name| *name == key.as_ref()) {
            Some(slot) if named[slot].is_some() => return None, // repeated: unusual
            Some(slot) => named[slot] = Some(value),
            None if others.contains(&key) => return None,
            None => others.push(key),
        }
        p.skip_ws();
        match p.peek()? {
            b',' => p.at += 1,
            b'}' => {
                p.at += 1;
                return Some(named);
            }
            _ => return None,
        }
    }
}

/// protocol.headers' `_plain_int`: ASCII digits, perhaps after a minus, within `bits`; here
/// at most 18 digits (a longer one is left to the reference's judgement: None).
fn plain_int(text: Option<&str>, bits: u32) -> Option<i64> {
    let text = text?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: i64 = text.parse().ok()?;
    let high = (1i128 << (bits - 1)) - 1;
    (-high - 1..=high)
        .contains(&(value as i128))
        .then_some(value)
}

/// The fields of a plain PULL_MESSAGE header (not oneway), or None.
pub fn parse_pull(data: &[u8]) -> Option<PullFields<'_>> {
    let (code, opaque, flag, ext) = parse_command(data, named_ext)?;
    if code != PULL_MESSAGE || flag & ONEWAY_FLAG != 0 {
        return None;
    }
    let [group, topic, queue_id, queue_offset, max_msg_nums, sys_flag, commit_offset, suspend, sub_version, subscription, expression_type] =
        ext?;
    Some(PullFields {
        opaque,
        consumer_group: group?,
        topic: topic?,
        queue_id: plain_int(queue_id.as_deref(), 32)?,
        queue_offset: plain_int(queue_offset.as_deref(), 64)?,
        max_msg_nums: plain_int(max_msg_nums.as_deref(), 32)?,
        sys_flag: plain_int(sys_flag.as_deref(), 32)?,
        commit_offset: plain_int(commit_offset.as_deref(), 64)?,
        suspend_timeout_millis: plain_int(suspend.as_deref(), 64)?,
        sub_version: plain_int(sub_version.as_deref(), 64)?,
        subscription,
        expression_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAVA: &[u8] = br#"{"code":11,"extFields":{"consumerGroup":"G","topic":"T","queueId":"3","queueOffset":"42","maxMsgNums":"32","sysFlag":"3","commitOffset":"-1","suspendTimeoutMillis":"15000","subVersion":"1700000000000","subscription":"*","expressionType":"TAG","bname":"b"},"flag":0,"language":"JAVA","opaque":9,"serializeTypeCurrentRPC":"JSON","version":409}"#;

    #[test]
    fn a_java_header() {
        let got = parse_pull(JAVA).unwrap();
        assert_eq!((got.opaque, got.queue_id, got.queue_offset), (9, 3, 42));
        assert_eq!(
            (got.commit_offset, got.sub_version),
            (-1, 1_700_000_000_000)
        );
        assert_eq!(got.subscription.as_deref(), Some("*"));
    }

    #[test]
    fn every_prefix_is_refused_without_a_panic() {
        for end in 0..JAVA.len() {
            assert_eq!(parse_pull(&JAVA[..end]), None, "{end}");
        }
    }

    #[test]
    fn out_of_range_numbers_and_oneway_pulls_are_left() {
        let big = String::from_utf8(JAVA.to_vec())
            .unwrap()
            .replace(r#""queueId":"3""#, r#""queueId":"2147483648""#);
        assert_eq!(parse_pull(big.as_bytes()), None);
        let oneway = String::from_utf8(JAVA.to_vec())
            .unwrap()
            .replace(r#""flag":0"#, r#""flag":2"#);
        assert_eq!(parse_pull(oneway.as_bytes()), None);
    }
}
