//! The JSON header of a SEND_MESSAGE_V2 request, read for the send lane (reference:
//! `sidewinder.broker.processors.send_header.send_v2_fields_py`). Untrusted bytes: every read
//! is bounds-checked, and anything the lane would not take as it is gives None (the slow path
//! decodes the header in full and accepts or refuses it with its own remark).

use std::borrow::Cow;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple, PyType};

/// What the send lane reads of a plain SEND_MESSAGE_V2 header.
#[derive(Debug, PartialEq, Eq)]
pub struct SendV2<'a> {
    pub opaque: i32,
    pub flag: i32,
    pub topic: Cow<'a, str>,
    pub queue_id: i64,
    pub sys_flag: i64,
    pub born_timestamp: i64,
    pub msg_flag: i64,
    pub reconsume_times: i64,
    pub properties: Cow<'a, str>,
}

/// The nine fields as a plain tuple (send_v2_fields's).
pub fn fields_tuple<'py>(py: Python<'py>, f: &SendV2<'_>) -> PyResult<Bound<'py, PyAny>> {
    let fields = (
        f.opaque,
        f.flag,
        f.topic.as_ref(),
        f.queue_id,
        f.sys_flag,
        f.born_timestamp,
        f.msg_flag,
        f.reconsume_times,
        f.properties.as_ref(),
    );
    Ok(fields.into_pyobject(py)?.into_any())
}

/// `fields` as an instance of `into` (tuple, or a subclass such as a NamedTuple; None: tuple)
/// between `head`'s items and `tail`'s, as `tuple.__new__(into, head + fields + tail)` makes
/// it, without the call through `tuple.__new__` nor the tuples in between.
pub fn fields_into<'py>(
    f: &SendV2<'_>,
    into: Option<&Bound<'py, PyType>>,
    head: Option<&Bound<'py, PyTuple>>,
    tail: Option<&Bound<'py, PyTuple>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = head.map_or_else(|| tail.map(|t| t.py()), |t| Some(t.py()));
    let py = match (into, py) {
        (Some(into), _) => into.py(),
        (None, Some(py)) => py,
        (None, None) => unreachable!("a caller with no into, head nor tail takes the tuple path"),
    };
    let tp = match into {
        Some(into) if into.is_subclass_of::<PyTuple>()? => into.as_type_ptr(),
        Some(_) => {
            return Err(PyTypeError::new_err(
                "send_v2_fields: `into` must be a tuple type",
            ))
        }
        None => std::ptr::addr_of_mut!(ffi::PyTuple_Type),
    };
    let items = head.map_or(0, |t| t.len()) + 9 + tail.map_or(0, |t| t.len());
    // SAFETY: `tp` is a tuple type, so its tp_alloc makes a tuple of `items` empty slots; each
    // is filled once below by PyTuple_SetItem (which takes the reference and accepts a
    // subclass's instance) before the object is handed out.
    unsafe {
        let alloc: ffi::allocfunc = std::mem::transmute(ffi::PyType_GetSlot(tp, ffi::Py_tp_alloc));
        let tuple = Bound::from_owned_ptr_or_err(py, alloc(tp, items as ffi::Py_ssize_t))?;
        let mut at: ffi::Py_ssize_t = 0;
        let mut put = |item: Bound<'py, PyAny>| -> PyResult<()> {
            if ffi::PyTuple_SetItem(tuple.as_ptr(), at, item.into_ptr()) != 0 {
                return Err(PyErr::fetch(py));
            }
            at += 1;
            Ok(())
        };
        for item in head.into_iter().flat_map(|t| t.iter()) {
            put(item)?;
        }
        put(f.opaque.into_pyobject(py)?.into_any())?;
        put(f.flag.into_pyobject(py)?.into_any())?;
        put(PyString::new(py, f.topic.as_ref()).into_any())?;
        put(f.queue_id.into_pyobject(py)?.into_any())?;
        put(f.sys_flag.into_pyobject(py)?.into_any())?;
        put(f.born_timestamp.into_pyobject(py)?.into_any())?;
        put(f.msg_flag.into_pyobject(py)?.into_any())?;
        put(f.reconsume_times.into_pyobject(py)?.into_any())?;
        put(PyString::new(py, f.properties.as_ref()).into_any())?;
        for item in tail.into_iter().flat_map(|t| t.iter()) {
            put(item)?;
        }
        Ok(tuple)
    }
}

const SEND_MESSAGE_V2: i64 = 310;
const SEND_BATCH_MESSAGE: i64 = 320;
const INT32_DIGITS: usize = 9;
const INT64_DIGITS: usize = 18;
const LANGUAGES: [&str; 13] = [
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP",
    "OMS", "RUST",
];

pub(crate) struct Parser<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) at: usize,
}

impl<'a> Parser<'a> {
    pub(crate) fn peek(&self) -> Option<u8> {
        self.data.get(self.at).copied()
    }

    pub(crate) fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    pub(crate) fn eat(&mut self, byte: u8) -> Option<()> {
        self.skip_ws();
        if self.peek()? == byte {
            self.at += 1;
            Some(())
        } else {
            None
        }
    }

    /// A JSON integer that fits an int32 (no fraction, exponent or leading zero).
    pub(crate) fn int32(&mut self) -> Option<i32> {
        self.skip_ws();
        let negative = self.peek()? == b'-';
        if negative {
            self.at += 1;
        }
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        let digits = &self.data[start..self.at];
        if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') || digits.len() > 10 {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.peek() {
            return None;
        }
        let mut value: i64 = 0;
        for &d in digits {
            value = value * 10 + (d - b'0') as i64;
        }
        if negative {
            value = -value;
        }
        i32::try_from(value).ok()
    }

    fn hex4(&mut self) -> Option<u32> {
        let hex = self.data.get(self.at..self.at + 4)?;
        let mut value = 0u32;
        for &h in hex {
            value = value * 16 + (h as char).to_digit(16)?;
        }
        self.at += 4;
        Some(value)
    }

    /// A JSON string, unescaped (borrowed when it has no escapes); None for invalid UTF-8, a
    /// raw control character, a bad escape or a lone surrogate (which no Python str from the
    /// reference decoder holds either).
    pub(crate) fn string(&mut self) -> Option<Cow<'a, str>> {
        self.skip_ws();
        if self.peek()? != b'"' {
            return None;
        }
        self.at += 1;
        let first = self.at;
        self.plain_run();
        if self.peek()? == b'"' {
            let text = std::str::from_utf8(&self.data[first..self.at]).ok()?;
            self.at += 1;
            return Some(Cow::Borrowed(text));
        }
        let mut out: Vec<u8> = self.data[first..self.at].to_vec();
        loop {
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    return String::from_utf8(out).ok().map(Cow::Owned);
                }
                b'\\' => {
                    self.at += 1;
                    let escaped = self.peek()?;
                    self.at += 1;
                    let simple = match escaped {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'/' => Some(b'/'),
                        b'b' => Some(0x08),
                        b'f' => Some(0x0C),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        b'u' => None,
                        _ => return None,
                    };
                    if let Some(byte) = simple {
                        out.push(byte);
                    } else {
                        let unit = self.hex4()?;
                        let point = match unit {
                            0xD800..=0xDBFF => {
                                if self.data.get(self.at..self.at + 2)? != b"\\u" {
                                    return None;
                                }
                                self.at += 2;
                                let low = self.hex4()?;
                                if !(0xDC00..=0xDFFF).contains(&low) {
                                    return None;
                                }
                                0x1_0000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                            }
                            0xDC00..=0xDFFF => return None,
                            _ => unit,
                        };
                        let mut buf = [0u8; 4];
                        let encoded = char::from_u32(point)?.encode_utf8(&mut buf);
                        out.extend_from_slice(encoded.as_bytes());
                    }
                }
                _ => return None, // a raw control character
            }
            let start = self.at;
            self.plain_run();
            out.extend_from_slice(&self.data[start..self.at]);
        }
    }

    /// Past the bytes a string holds as they are (no quote, backslash or control character).
    fn plain_run(&mut self) {
        while let Some(b) = self.peek() {
            if b == b'"' || b == b'\\' || b < 0x20 {
                break;
            }
            self.at += 1;
        }
    }

    /// An extFields value as the string the reference makes of it (codec._ext_value): a
    /// string; an integer of up to 18 digits as its decimal; true or false as those words.
    /// Anything else (a float, null, an array, a longer integer) is None: unusual.
    pub(crate) fn ext_value(&mut self) -> Option<Cow<'a, str>> {
        self.skip_ws();
        match self.peek()? {
            b'"' => self.string(),
            b't' | b'f' => {
                for word in ["true", "false"] {
                    if self.data.get(self.at..self.at + word.len()) == Some(word.as_bytes()) {
                        self.at += word.len();
                        return Some(Cow::Borrowed(word));
                    }
                }
                None
            }
            _ => {
                let start = self.at;
                if self.peek()? == b'-' {
                    self.at += 1;
                }
                let digits_at = self.at;
                while let Some(b'0'..=b'9') = self.peek() {
                    self.at += 1;
                }
                let digits = &self.data[digits_at..self.at];
                if digits.is_empty()
                    || digits.len() > 18
                    || (digits.len() > 1 && digits[0] == b'0')
                    || matches!(self.peek(), Some(b'.' | b'e' | b'E'))
                {
                    return None;
                }
                if digits == b"0" {
                    return Some(Cow::Borrowed("0")); // -0 too, as Python's str(0)
                }
                std::str::from_utf8(&self.data[start..self.at])
                    .ok()
                    .map(Cow::Borrowed)
            }
        }
    }

    /// `null` (true) or not (false, nothing consumed).
    pub(crate) fn null(&mut self) -> bool {
        self.skip_ws();
        if self.data.get(self.at..self.at + 4) == Some(b"null") {
            self.at += 4;
            true
        } else {
            false
        }
    }
}

/// The one-letter ext fields the lane reads; all others must still be strings.
#[derive(Default)]
struct Ext<'a> {
    fields: [Option<Cow<'a, str>>; 14], // a..n
    seen_a_to_n: u16,
}

fn parse_ext<'a>(p: &mut Parser<'a>) -> Option<Ext<'a>> {
    let mut ext = Ext::default();
    let mut others: Vec<Cow<'a, str>> = Vec::new();
    p.eat(b'{')?;
    p.skip_ws();
    if p.peek()? == b'}' {
        p.at += 1;
        return Some(ext);
    }
    loop {
        let key = p.string()?;
        p.eat(b':')?;
        let value = p.ext_value()?;
        let kb = key.as_bytes();
        if kb.len() == 1 && (b'a'..=b'n').contains(&kb[0]) {
            let slot = (kb[0] - b'a') as usize;
            if ext.seen_a_to_n & (1 << slot) != 0 {
                return None; // a repeated key: unusual
            }
            ext.seen_a_to_n |= 1 << slot;
            ext.fields[slot] = Some(value);
        } else {
            if others.contains(&key) {
                return None;
            }
            others.push(key);
        }
        p.skip_ws();
        match p.peek()? {
            b',' => p.at += 1,
            b'}' => {
                p.at += 1;
                return Some(ext);
            }
            _ => return None,
        }
    }
}

/// `digits` of broker/send/header.py: a non-negative decimal of 1..=width ASCII digits.
fn digits(text: Option<&str>, width: usize) -> Option<i64> {
    let text = text?;
    if text.is_empty() || text.len() > width || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A SEND_MESSAGE_V2 header's fields.
pub fn parse(data: &[u8]) -> Option<SendV2<'_>> {
    parse_send(data).and_then(|(code, f)| (code == SEND_MESSAGE_V2).then_some(f))
}

/// A SEND_BATCH_MESSAGE header's fields (the same short names; the body holds the messages).
pub fn parse_batch(data: &[u8]) -> Option<SendV2<'_>> {
    parse_send(data).and_then(|(code, f)| (code == SEND_BATCH_MESSAGE).then_some(f))
}

/// A JSON request header's top level: (code, opaque, flag, extFields read by `read_ext`), or
/// None for anything unusual (an unknown or repeated key, a language RocketMQ does not name,
/// a value of the wrong kind, trailing bytes).
pub(crate) fn parse_command<'a, E>(
    data: &'a [u8],
    read_ext: impl Fn(&mut Parser<'a>) -> Option<E>,
) -> Option<(i64, i32, i32, Option<E>)> {
    let mut p = Parser { data, at: 0 };
    p.eat(b'{')?;
    let (mut code, mut opaque, mut flag, mut version) = (None, None, None, None);
    let (mut language, mut serialize, mut remark) = (false, false, false);
    let mut ext: Option<E> = None;
    p.skip_ws();
    if p.peek()? == b'}' {
        return None; // no code
    }
    loop {
        let key = p.string()?;
        p.eat(b':')?;
        match key.as_ref() {
            "code" if code.is_none() => code = Some(p.int32()?),
            "opaque" if opaque.is_none() => opaque = Some(p.int32()?),
            "flag" if flag.is_none() => flag = Some(p.int32()?),
            "version" if version.is_none() => version = Some(p.int32()?),
            "language" if !language => {
                let name = p.string()?;
                if !LANGUAGES.contains(&name.as_ref()) {
                    return None;
                }
                language = true;
            }
            "serializeTypeCurrentRPC" if !serialize => {
                p.string()?;
                serialize = true;
            }
            "remark" if !remark => {
                if !p.null() {
                    p.string()?;
                }
                remark = true;
            }
            "extFields" if ext.is_none() => ext = Some(read_ext(&mut p)?),
            _ => return None, // an unknown or repeated key
        }
        p.skip_ws();
        match p.peek()? {
            b',' => p.at += 1,
            b'}' => {
                p.at += 1;
                break;
            }
            _ => return None,
        }
    }
    p.skip_ws();
    if p.at != data.len() {
        return None;
    }
    Some((code? as i64, opaque.unwrap_or(0), flag.unwrap_or(0), ext))
}

/// The code (SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE) and fields of a send's header.
pub fn parse_send(data: &[u8]) -> Option<(i64, SendV2<'_>)> {
    let (code, opaque, flag, ext) = parse_command(data, parse_ext)?;
    if code != SEND_MESSAGE_V2 && code != SEND_BATCH_MESSAGE {
        return None;
    }
    let ext = ext?;
    let mut fields = ext.fields;
    let mut take = |letter: u8| fields[(letter - b'a') as usize].take();
    let (a, c, d) = (take(b'a'), take(b'c'), take(b'd'));
    if a.is_none() || c.is_none() {
        return None;
    }
    // Numbers the lane does not use but `process` parses (and refuses when they do not):
    // defaultTopicQueueNums, and maxReconsumeTimes when there.
    digits(d.as_deref(), INT32_DIGITS)?;
    if let Some(max_reconsume) = take(b'l') {
        digits(Some(&max_reconsume), INT32_DIGITS)?;
    }
    let (topic, properties) = (take(b'b')?, take(b'i').unwrap_or(Cow::Borrowed("")));
    let number = |text: Option<Cow<'_, str>>, width| digits(text.as_deref(), width);
    Some((
        code,
        SendV2 {
            opaque,
            flag,
            topic,
            queue_id: number(take(b'e'), INT32_DIGITS)?,
            sys_flag: number(take(b'f'), INT32_DIGITS)?,
            born_timestamp: number(take(b'g'), INT64_DIGITS)?,
            msg_flag: number(take(b'h'), INT32_DIGITS)?,
            reconsume_times: number(Some(take(b'j').unwrap_or(Cow::Borrowed("0"))), INT32_DIGITS)?,
            properties,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAVA: &[u8] = br#"{"code":310,"extFields":{"a":"G","b":"T","c":"TBW102","d":"4","e":"1","f":"0","g":"1700000000000","h":"0","i":"KEYS\u0001k\u0002WAIT\u0001true","j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":373}"#;

    #[test]
    fn a_java_header() {
        let got = parse(JAVA).unwrap();
        assert_eq!(got.opaque, 7);
        assert_eq!(got.topic, "T");
        assert_eq!((got.queue_id, got.born_timestamp), (1, 1_700_000_000_000));
        assert_eq!(got.properties, "KEYS\u{1}k\u{2}WAIT\u{1}true");
    }

    #[test]
    fn numbers_and_booleans_in_ext_fields_are_their_words() {
        let node = br#"{"code":310,"extFields":{"a":"G","b":"T","c":"C","d":4,"e":-0,"f":0,"g":1795488176020,"h":0,"j":0,"k":false}}"#;
        let got = parse(node).unwrap();
        assert_eq!((got.queue_id, got.born_timestamp), (0, 1795488176020));
        for bad in [
            &b"1.5"[..],
            b"1e3",
            b"01",
            b"null",
            b"[]",
            b"1234567890123456789",
            b"tru",
        ] {
            let mut header = br#"{"code":310,"extFields":{"a":"G","b":"T","c":"C","d":"#.to_vec();
            header.extend_from_slice(bad);
            header.extend_from_slice(br#","e":"0","f":"0","g":"0","h":"0"}}"#);
            assert_eq!(parse(&header), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn every_prefix_is_refused_without_a_panic() {
        for end in 0..JAVA.len() {
            assert_eq!(parse(&JAVA[..end]), None, "{end}");
        }
    }
}
