//! Stock-client driver for the RocketMQ 5 gRPC client for Rust, the crate registry `rocketmq` 5.0.0.
//!
//! Speaks the protocol of interop/drivers/PROTOCOL.md (JSON event lines on stdout, the same exit
//! statuses) over a RocketMQ 5 gRPC endpoint: the section "rust5" there lists its actions,
//! options and events (python5's, less what this client's API lacks). The client's public API is
//! used throughout and nothing of it is changed. It talks plaintext unless `--tls` is given.
//!
//! stdout carries only the events: fd 1 is pointed at a log file under `logs/` (in the working
//! directory, where the client also writes its JSON log) before the client starts, and the
//! events go to a duplicate of the original fd 1.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocketmq::conf::{ClientOption, LoggingFormat, ProducerOption, SimpleConsumerOption};
use rocketmq::error::ClientError;
use rocketmq::model::common::{FilterExpression, FilterType};
use rocketmq::model::message::{AckMessageEntry, MessageBuilder, MessageView};
use rocketmq::model::transaction::{Transaction, TransactionResolution};
use rocketmq::{Producer, SimpleConsumer};
use serde_json::{json, Map, Value};

const CLIENT: &str = "rust5";

// ------------------------------------------------------------------------------------------
// stdout discipline and events

static OUT: OnceLock<Mutex<File>> = OnceLock::new();
static FINISHED: AtomicBool = AtomicBool::new(false);

/// Keep a copy of fd 1 for the events; fd 1 itself goes to `logs/rust5-driver-stdout-PID.log`.
fn redirect_stdout() {
    let _ = std::fs::create_dir_all("logs");
    // SAFETY: plain descriptor calls on descriptors this process owns.
    let out = unsafe { libc::dup(1) };
    if out < 0 {
        return; // no fd 1 to protect
    }
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(format!(
            "logs/rust5-driver-stdout-{}.log",
            std::process::id()
        ))
        .or_else(|_| OpenOptions::new().write(true).open("/dev/null"));
    if let Ok(log) = log {
        unsafe { libc::dup2(log.as_raw_fd(), 1) };
    }
    let _ = OUT.set(Mutex::new(unsafe { File::from_raw_fd(out) }));
}

/// Write one event line; false once the final line (done / error) was written.
fn emit_line(event: &Value, last: bool) -> bool {
    let mut line = serde_json::to_string(event).unwrap_or_else(|_| "{}".into());
    line.push('\n');
    let Some(out) = OUT.get() else {
        print!("{line}");
        return true;
    };
    let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
    if FINISHED.load(Ordering::SeqCst) {
        return false;
    }
    if last {
        FINISHED.store(true, Ordering::SeqCst);
    }
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
    true
}

fn emit(event: Value) -> bool {
    emit_line(&compact(event), false)
}

/// The `error` event as the last line, then exit at once with `status`.
fn fail(kind: &str, message: impl Into<String>, status: i32, extra: Map<String, Value>) -> ! {
    let mut event = Map::new();
    event.insert("event".into(), json!("error"));
    event.insert("error".into(), json!(kind));
    event.insert("message".into(), json!(message.into()));
    event.extend(extra);
    emit_line(&compact(Value::Object(event)), true);
    std::process::exit(status)
}

fn fail_client(kind: &str, error: &ClientError, status: i32, extra: &[(&str, Value)]) -> ! {
    let mut described = describe(error);
    let message = described
        .remove("message")
        .and_then(|m| m.as_str().map(String::from));
    for (k, v) in extra {
        described.insert((*k).into(), v.clone());
    }
    fail(kind, message.unwrap_or_default(), status, described)
}

fn usage(message: impl Into<String>) -> ! {
    fail("usage", message, 2, Map::new())
}

fn unsupported(message: impl Into<String>) -> ! {
    fail("unsupported", message, 2, Map::new())
}

/// Drop the keys whose value is null.
fn compact(event: Value) -> Value {
    match event {
        Value::Object(map) => {
            Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).collect())
        }
        other => other,
    }
}

/// v2 status names and numbers (apache.rocketmq.v2.Code): the client's errors carry the name.
const CODES: &[(&str, i32)] = &[
    ("CODE_UNSPECIFIED", 0),
    ("OK", 20000),
    ("MULTIPLE_RESULTS", 30000),
    ("BAD_REQUEST", 40000),
    ("ILLEGAL_ACCESS_POINT", 40001),
    ("ILLEGAL_TOPIC", 40002),
    ("ILLEGAL_CONSUMER_GROUP", 40003),
    ("ILLEGAL_MESSAGE_TAG", 40004),
    ("ILLEGAL_MESSAGE_KEY", 40005),
    ("ILLEGAL_MESSAGE_GROUP", 40006),
    ("ILLEGAL_MESSAGE_PROPERTY_KEY", 40007),
    ("INVALID_TRANSACTION_ID", 40008),
    ("ILLEGAL_MESSAGE_ID", 40009),
    ("ILLEGAL_FILTER_EXPRESSION", 40010),
    ("ILLEGAL_INVISIBLE_TIME", 40011),
    ("ILLEGAL_DELIVERY_TIME", 40012),
    ("INVALID_RECEIPT_HANDLE", 40013),
    ("MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", 40014),
    ("UNRECOGNIZED_CLIENT_TYPE", 40015),
    ("MESSAGE_CORRUPTED", 40016),
    ("CLIENT_ID_REQUIRED", 40017),
    ("ILLEGAL_POLLING_TIME", 40018),
    ("UNAUTHORIZED", 40100),
    ("PAYMENT_REQUIRED", 40200),
    ("FORBIDDEN", 40300),
    ("NOT_FOUND", 40400),
    ("MESSAGE_NOT_FOUND", 40401),
    ("TOPIC_NOT_FOUND", 40402),
    ("CONSUMER_GROUP_NOT_FOUND", 40403),
    ("REQUEST_TIMEOUT", 40800),
    ("PAYLOAD_TOO_LARGE", 41300),
    ("MESSAGE_BODY_TOO_LARGE", 41301),
    ("PRECONDITION_FAILED", 42800),
    ("TOO_MANY_REQUESTS", 42900),
    ("REQUEST_HEADER_FIELDS_TOO_LARGE", 43100),
    ("MESSAGE_PROPERTIES_TOO_LARGE", 43101),
    ("INTERNAL_ERROR", 50000),
    ("INTERNAL_SERVER_ERROR", 50001),
    ("HA_NOT_AVAILABLE", 50002),
    ("NOT_IMPLEMENTED", 50100),
    ("PROXY_TIMEOUT", 50400),
    ("MASTER_PERSISTENCE_TIMEOUT", 50401),
    ("SLAVE_PERSISTENCE_TIMEOUT", 50402),
    ("UNSUPPORTED", 50500),
    ("VERSION_UNSUPPORTED", 50501),
    ("VERIFY_FIFO_MESSAGE_UNSUPPORTED", 50502),
];

fn grpc_status_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

/// `message`, and what the error carries: the v2 status (`code`, `codeName`) the client found
/// in an answer, or the gRPC status (`grpcStatus`) of a call that failed.
fn describe(error: &ClientError) -> Map<String, Value> {
    let mut out = Map::new();
    let mut text = format!(
        "{:?}: {} ({})",
        error.kind(),
        error.message(),
        error.operation()
    );
    for (key, value) in error.context() {
        text.push_str(&format!(", {key}={value}"));
        if *key == "code" {
            out.insert("codeName".into(), json!(value));
            if let Some((_, number)) = CODES.iter().find(|(name, _)| name == value) {
                out.insert("code".into(), json!(number));
            }
        }
    }
    if let Some(source) = error.source() {
        text.push_str(&format!(": {source:#}"));
        for cause in source.chain() {
            if let Some(status) = cause.downcast_ref::<tonic::Status>() {
                out.insert("grpcStatus".into(), json!(grpc_status_name(status.code())));
                break;
            }
        }
    }
    out.insert("message".into(), json!(text));
    out
}

fn with_described(mut event: Value, error: &ClientError) -> Value {
    if let Value::Object(map) = &mut event {
        map.extend(describe(error));
    }
    event
}

// ------------------------------------------------------------------------------------------
// command line

const ACTIONS: &[&str] = &[
    "produce",
    "transact",
    "simple-consume",
    "push-consume",
    "route",
];
const ANSWERS: &[&str] = &[
    "commit",
    "rollback",
    "unknown-commit",
    "unknown-rollback",
    "unknown",
];

#[derive(Debug, Clone)]
struct Args {
    command: String,
    endpoints: String,
    topic: String,
    group: Option<String>,
    timeout: f64,
    request_timeout: f64,
    namespace: String,
    access_key: Option<String>,
    secret_key: Option<String>,
    tls: bool,
    count: Option<i64>,
    mode: String,
    tag: Option<String>,
    keys_prefix: String,
    body_prefix: String,
    body_size: i64,
    props: BTreeMap<String, String>,
    start: i64,
    message_group: Option<String>,
    deliver_after_ms: i64,
    keep_going: bool,
    answer: Option<String>,
    expect: Option<i64>,
    tags: String,
    sql: Option<String>,
    linger: f64,
    batch_size: i32,
    invisible_duration: f64,
    await_duration: f64,
    no_ack: bool,
}

fn flag_value(text: &str) -> Result<bool, String> {
    match text.trim().to_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("expected true or false, got {text:?}")),
    }
}

fn number<T: std::str::FromStr>(flag: &str, text: &str) -> Result<T, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{flag}: not a number: {text:?}"))
}

fn parse_args(argv: &[String]) -> Result<Args, String> {
    let command = argv.first().ok_or(
        "an action is needed, one of produce, transact, simple-consume, push-consume, route",
    )?;
    if !ACTIONS.contains(&command.as_str()) {
        return Err(format!(
            "unknown action {command:?}; one of {}",
            ACTIONS.join(", ")
        ));
    }
    let mut a = Args {
        command: command.clone(),
        endpoints: String::new(),
        topic: String::new(),
        group: None,
        timeout: 60.0,
        request_timeout: 3.0,
        namespace: String::new(),
        access_key: None,
        secret_key: None,
        tls: false,
        count: None,
        mode: "sync".into(),
        tag: None,
        keys_prefix: "k-".into(),
        body_prefix: "body-".into(),
        body_size: -1,
        props: BTreeMap::new(),
        start: 0,
        message_group: None,
        deliver_after_ms: 0,
        keep_going: false,
        answer: None,
        expect: None,
        tags: "*".into(),
        sql: None,
        linger: 0.0,
        batch_size: 16,
        invisible_duration: 15.0,
        await_duration: 5.0,
        no_ack: false,
    };
    let mut endpoints = None;
    let mut topic = None;
    let mut i = 1;
    while i < argv.len() {
        let flag = argv[i].as_str();
        i += 1;
        // A boolean option: bare, or followed by true / false (drivers.py passes a value).
        if matches!(flag, "--no-ack" | "--keep-going" | "--tls") {
            let mut value = true;
            if i < argv.len() && !argv[i].starts_with("--") {
                value = flag_value(&argv[i])?;
                i += 1;
            }
            match flag {
                "--no-ack" => a.no_ack = value,
                "--keep-going" => a.keep_going = value,
                _ => a.tls = value,
            }
            continue;
        }
        if !flag.starts_with("--") {
            return Err(format!("unexpected argument {flag:?}"));
        }
        let known = [
            "--endpoints",
            "--topic",
            "--group",
            "--timeout",
            "--request-timeout",
            "--namespace",
            "--access-key",
            "--secret-key",
            "--count",
            "--mode",
            "--tag",
            "--keys-prefix",
            "--body-prefix",
            "--body-size",
            "--prop",
            "--start",
            "--message-group",
            "--deliver-after-ms",
            "--answer",
            "--expect",
            "--tags",
            "--sql",
            "--linger",
            "--batch-size",
            "--invisible-duration",
            "--await-duration",
            "--reconsume-later",
            "--threads",
        ];
        if !known.contains(&flag) {
            return Err(format!("unknown option {flag}"));
        }
        let value = argv.get(i).ok_or(format!("{flag} needs a value"))?.clone();
        i += 1;
        match flag {
            "--endpoints" => endpoints = Some(value),
            "--topic" => topic = Some(value),
            "--group" => a.group = Some(value),
            "--timeout" => a.timeout = number(flag, &value)?,
            "--request-timeout" => a.request_timeout = number(flag, &value)?,
            "--namespace" => a.namespace = value,
            "--access-key" => a.access_key = Some(value),
            "--secret-key" => a.secret_key = Some(value),
            "--count" => a.count = Some(number(flag, &value)?),
            "--mode" => a.mode = value,
            "--tag" => a.tag = Some(value),
            "--keys-prefix" => a.keys_prefix = value,
            "--body-prefix" => a.body_prefix = value,
            "--body-size" => a.body_size = number(flag, &value)?,
            "--prop" => {
                let (k, v) = value.split_once('=').unwrap_or(("", ""));
                if k.trim().is_empty() || v.trim().is_empty() {
                    return Err(format!(
                        "--prop needs K=V with neither blank, got {value:?}"
                    ));
                }
                a.props.insert(k.to_string(), v.to_string());
            }
            "--start" => a.start = number(flag, &value)?,
            "--message-group" => a.message_group = Some(value).filter(|g| !g.is_empty()),
            "--deliver-after-ms" => a.deliver_after_ms = number(flag, &value)?,
            "--answer" => a.answer = Some(value),
            "--expect" => a.expect = Some(number(flag, &value)?),
            "--tags" => a.tags = value,
            "--sql" => a.sql = Some(value).filter(|s| !s.is_empty()),
            "--linger" => a.linger = number(flag, &value)?,
            "--batch-size" => a.batch_size = number(flag, &value)?,
            "--invisible-duration" => a.invisible_duration = number(flag, &value)?,
            "--await-duration" => a.await_duration = number(flag, &value)?,
            // push-consume's options: parsed so that its answer is `unsupported`, not usage.
            "--reconsume-later" | "--threads" => {
                number::<i64>(flag, &value)?;
            }
            _ => unreachable!(),
        }
    }
    a.endpoints = endpoints.ok_or("--endpoints H:P is required")?;
    a.topic = topic.ok_or("--topic T is required")?;
    if a.access_key.is_some() != a.secret_key.is_some() {
        return Err("--access-key and --secret-key go together".into());
    }
    let cmd = a.command.as_str();
    if cmd == "produce" || cmd == "transact" {
        if a.count.map_or(true, |n| n < 0) {
            return Err(format!("{cmd} needs --count N (N >= 0)"));
        }
        if a.message_group.is_some() && a.deliver_after_ms != 0 {
            return Err("--message-group and --deliver-after-ms exclude each other".into());
        }
        if let Some(tag) = &a.tag {
            if tag.contains('|') || tag.trim().is_empty() {
                return Err("--tag must not be blank nor contain '|'".into());
            }
        }
    }
    if cmd == "transact" && !a.answer.as_deref().is_some_and(|x| ANSWERS.contains(&x)) {
        return Err(format!(
            "transact needs --answer, one of {}",
            ANSWERS.join(", ")
        ));
    }
    if cmd == "simple-consume" || cmd == "push-consume" {
        if a.group.as_deref().map_or(true, str::is_empty) {
            return Err(format!("{cmd} needs --group G"));
        }
        if a.expect.map_or(true, |n| n < 0) {
            return Err(format!("{cmd} needs --expect N (N >= 0)"));
        }
    }
    if cmd == "simple-consume" && a.batch_size <= 0 {
        return Err("--batch-size must be > 0".into());
    }
    Ok(a)
}

// ------------------------------------------------------------------------------------------
// the client

fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

fn client_option(a: &Args) -> ClientOption {
    let mut option = ClientOption::default();
    option.set_access_url(a.endpoints.clone());
    option.set_enable_tls(a.tls);
    option.set_timeout(seconds(a.request_timeout));
    // A receive's deadline is this time alone (the client sets no margin over it).
    option.set_long_polling_timeout(seconds(a.await_duration));
    if let (Some(ak), Some(sk)) = (&a.access_key, &a.secret_key) {
        option.set_access_key(ak.clone());
        option.set_secret_key(sk.clone());
    }
    option
}

fn check_namespace(a: &Args) {
    if !a.namespace.is_empty() {
        // ProducerOption / SimpleConsumerOption keep set_namespace crate-private in 5.0.0.
        unsupported("--namespace (the Rust client 5.0.0 offers no way to set one)");
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn make_body(a: &Args, i: i64) -> Vec<u8> {
    let mut body = format!("{}{}", a.body_prefix, i).into_bytes();
    if a.body_size >= 0 {
        body.resize(a.body_size as usize, b'|');
    }
    body
}

fn md5_hex(body: &[u8]) -> String {
    format!("{:x}", md5::compute(body))
}

fn keys_text(keys: &[String]) -> Value {
    if keys.is_empty() {
        return Value::Null;
    }
    let mut keys = keys.to_vec();
    keys.sort();
    json!(keys.join(" "))
}

/// One message as `produce` / `transact` sends it, and the fields its `sent` event reports.
struct Outgoing {
    index: i64,
    key: String,
    body_md5: String,
    body_len: usize,
    delivery_seconds: Option<i64>,
}

fn build_message(
    a: &Args,
    i: i64,
    transaction: bool,
) -> (impl rocketmq::model::message::Message, Outgoing) {
    let body = make_body(a, i);
    let key = format!("{}{}", a.keys_prefix, i);
    let outgoing = Outgoing {
        index: i,
        key: key.clone(),
        body_md5: md5_hex(&body),
        body_len: body.len(),
        // The client puts whole seconds in the Timestamp: rounded up, as python5 does.
        delivery_seconds: (a.deliver_after_ms != 0)
            .then(|| (now_ms() + a.deliver_after_ms + 999).div_euclid(1000)),
    };
    let mut builder = MessageBuilder::builder()
        .set_topic(a.topic.clone())
        .set_body(body)
        .set_keys(vec![key]);
    if let Some(tag) = &a.tag {
        builder = builder.set_tag(tag.clone());
    }
    if !a.props.is_empty() {
        let props: HashMap<String, String> = a.props.clone().into_iter().collect();
        builder = builder.set_properties(props);
    }
    if let Some(group) = &a.message_group {
        builder = builder.set_message_group(group.clone());
    }
    if let Some(due) = outgoing.delivery_seconds {
        builder = builder.set_delivery_timestamp(due);
    }
    if transaction {
        builder = builder.enable_transaction();
    }
    match builder.build() {
        Ok(message) => (message, outgoing),
        Err(error) => fail_client("usage", &error, 2, &[("index", json!(i))]),
    }
}

fn sent_event(a: &Args, out: &Outgoing, msg_id: &str, transaction_id: &str) -> Value {
    json!({
        "event": "sent",
        "client": CLIENT,
        "topic": a.topic,
        "msgId": msg_id,
        "transactionId": (!transaction_id.is_empty()).then_some(transaction_id),
        "status": "SEND_OK",
        "keys": out.key,
        "tags": a.tag,
        "properties": a.props,
        "messageGroup": a.message_group,
        "deliveryTimestamp": out.delivery_seconds.map(|s| s * 1000),
        "bodyMd5": out.body_md5,
        "bodyLen": out.body_len,
        "index": out.index,
    })
}

fn producer_option(a: &Args) -> ProducerOption {
    let mut option = ProducerOption::default();
    option.set_logging_format(LoggingFormat::Json); // logs/rocketmq_client.log, not stdout
    option.set_topics(vec![a.topic.clone()]);
    option
}

/// Shut a client down, bounded (a dead server must not hold the run); then `done`, exit 0.
async fn finish<F: std::future::Future>(summary: Value, shutdown: F) -> ! {
    let _ = tokio::time::timeout(Duration::from_secs(10), shutdown).await;
    let mut event = Map::new();
    event.insert("event".into(), json!("done"));
    if let Value::Object(map) = summary {
        event.extend(map);
    }
    emit_line(&Value::Object(event), true);
    std::process::exit(0)
}

// ------------------------------------------------------------------------------------------
// produce

async fn produce(a: Args) {
    if a.mode != "sync" && a.mode != "async" {
        // One message per call (batch_send takes one topic and group; no oneway).
        unsupported(format!(
            "produce --mode {} (the 5.x client: sync, async)",
            a.mode
        ));
    }
    check_namespace(&a);
    let mut producer = Producer::new(producer_option(&a), client_option(&a))
        .unwrap_or_else(|e| fail_client("client", &e, 1, &[]));
    // Starts the client (Telemetry with its settings) and queries the topic's route.
    if let Err(e) = producer.start().await {
        fail_client("client", &e, 1, &[]);
    }
    emit(json!({"event": "ready", "client": CLIENT}));
    let count = a.count.unwrap_or(0);
    let mut sent = 0;
    let mut failed = 0;
    let producer = Arc::new(producer);
    if a.mode == "sync" {
        for i in a.start..a.start + count {
            let (message, out) = build_message(&a, i, false);
            match producer.send(message).await {
                Ok(receipt) => {
                    emit(sent_event(
                        &a,
                        &out,
                        receipt.message_id(),
                        receipt.transaction_id(),
                    ));
                    sent += 1;
                }
                Err(e) => {
                    failed += 1;
                    if !a.keep_going {
                        fail_client("send", &e, 1, &[("index", json!(i))]);
                    }
                    emit(with_described(
                        json!({"event": "error", "error": "send", "index": i}),
                        &e,
                    ));
                }
            }
        }
    } else {
        let mut pending = Vec::new();
        for i in a.start..a.start + count {
            let (message, out) = build_message(&a, i, false);
            let producer = producer.clone();
            pending.push((
                out,
                tokio::spawn(async move { producer.send(message).await }),
            ));
        }
        for (out, task) in pending {
            match task.await {
                Ok(Ok(receipt)) => {
                    emit(sent_event(
                        &a,
                        &out,
                        receipt.message_id(),
                        receipt.transaction_id(),
                    ));
                    sent += 1;
                }
                Ok(Err(e)) => {
                    failed += 1;
                    let event = json!({"event": "error", "error": "send", "index": out.index});
                    emit(with_described(event, &e));
                }
                Err(join) => {
                    failed += 1;
                    emit(
                        json!({"event": "error", "error": "send", "index": out.index,
                                "message": join.to_string()}),
                    );
                }
            }
        }
    }
    if failed > 0 {
        fail(
            "send",
            format!("{failed} of {count} sends failed"),
            1,
            Map::new(),
        );
    }
    let producer = Arc::try_unwrap(producer).ok();
    finish(json!({"sent": sent}), async move {
        if let Some(p) = producer {
            let _ = p.shutdown().await;
        }
    })
    .await
}

// ------------------------------------------------------------------------------------------
// transact

#[derive(Default)]
struct Checks {
    transaction_ids: HashMap<String, String>, // msgId -> transactionId, from the sends
    waiting: std::collections::HashSet<String>,
    checked: std::collections::HashSet<String>,
    sent_all: bool,
}

async fn transact(a: Args) {
    if a.mode != "sync" {
        unsupported("transactions are sent one by one (--mode sync)");
    }
    if a.message_group.is_some() || a.deliver_after_ms != 0 {
        usage("a transaction message has no message group nor delivery time");
    }
    check_namespace(&a);
    let answer = a.answer.clone().unwrap_or_default();
    let checks = Arc::new(Mutex::new(Checks::default()));
    let (resolution, answer_name): (fn() -> TransactionResolution, &'static str) =
        match answer.as_str() {
            "unknown-commit" => (|| TransactionResolution::COMMIT, "commit"),
            "unknown-rollback" => (|| TransactionResolution::ROLLBACK, "rollback"),
            _ => (|| TransactionResolution::UNKNOWN, "unknown"),
        };
    let checker_state = checks.clone();
    // The server's check (RecoverOrphanedTransactionCommand over Telemetry): the client calls
    // this, then sends EndTransaction (SOURCE_SERVER_CHECK) with its answer.
    let checker = move |transaction_id: String, message: MessageView| {
        let msg_id = message.message_id().to_string();
        {
            let mut state = checker_state.lock().unwrap_or_else(|e| e.into_inner());
            state.checked.insert(msg_id.clone());
            state.waiting.remove(&msg_id);
        }
        emit(json!({
            "event": "checked",
            "client": CLIENT,
            "transactionId": transaction_id,
            "msgId": msg_id,
            "answer": answer_name,
        }));
        resolution()
    };
    let mut producer = Producer::new_transaction_producer(
        producer_option(&a),
        client_option(&a),
        Box::new(checker),
    )
    .unwrap_or_else(|e| fail_client("client", &e, 1, &[]));
    if let Err(e) = producer.start().await {
        fail_client("client", &e, 1, &[]);
    }
    emit(json!({"event": "ready", "client": CLIENT}));
    let wait_checks = answer == "unknown-commit" || answer == "unknown-rollback";
    let count = a.count.unwrap_or(0);
    for i in a.start..a.start + count {
        let (message, out) = build_message(&a, i, true);
        let transaction = match producer.send_transaction_message(message).await {
            Ok(t) => t,
            Err(e) => fail_client("send", &e, 1, &[("index", json!(i))]),
        };
        let msg_id = transaction.message_id().to_string();
        let transaction_id = transaction.transaction_id().to_string();
        {
            let mut state = checks.lock().unwrap_or_else(|e| e.into_inner());
            state
                .transaction_ids
                .insert(msg_id.clone(), transaction_id.clone());
            if wait_checks && !state.checked.contains(&msg_id) {
                state.waiting.insert(msg_id.clone());
            }
        }
        let state = match answer.as_str() {
            "commit" => transaction.commit().await.map(|_| "COMMIT_MESSAGE"),
            "rollback" => transaction.rollback().await.map(|_| "ROLLBACK_MESSAGE"),
            _ => Ok("UNKNOW"),
        };
        let state =
            state.unwrap_or_else(|e| fail_client("end-transaction", &e, 1, &[("index", json!(i))]));
        let mut event = sent_event(&a, &out, &msg_id, &transaction_id);
        event["localState"] = json!(state);
        emit(event);
    }
    checks.lock().unwrap_or_else(|e| e.into_inner()).sent_all = true;
    if wait_checks {
        // The watchdog ends a run whose checks never come.
        loop {
            let done = {
                let state = checks.lock().unwrap_or_else(|e| e.into_inner());
                state.sent_all && state.waiting.is_empty()
            };
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The client sends the checker's EndTransaction after the checker returned.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let checked = checks
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .checked
        .len();
    finish(
        json!({"sent": count, "checked": checked}),
        producer.shutdown(),
    )
    .await
}

// ------------------------------------------------------------------------------------------
// consume

struct Goal {
    expect: i64,
    linger: Duration,
    count: i64,
    reached_at: Option<Instant>,
}

impl Goal {
    fn new(expect: i64, linger: f64) -> Goal {
        Goal {
            expect,
            linger: seconds(linger),
            count: 0,
            reached_at: (expect == 0).then(Instant::now),
        }
    }

    fn add(&mut self) {
        self.count += 1;
        if self.reached_at.is_none() && self.count >= self.expect {
            self.reached_at = Some(Instant::now());
        }
    }

    fn over(&self) -> bool {
        self.reached_at
            .is_some_and(|at| at.elapsed() >= self.linger)
    }
}

fn received_event(message: &MessageView, action: &str) -> Value {
    let body = message.body();
    let attempt = message.delivery_attempt();
    let properties: BTreeMap<&String, &String> = message.properties().iter().collect();
    json!({
        "event": "received",
        "client": CLIENT,
        "topic": message.topic(),
        "msgId": message.message_id(),
        "keys": keys_text(message.keys()),
        "tags": message.tag(),
        "properties": properties,
        "messageGroup": message.message_group(),
        "bodyMd5": md5_hex(body),
        "bodyLen": body.len(),
        "deliveryAttempt": (attempt > 0).then_some(attempt),
        "reconsumeTimes": (attempt > 0).then_some(attempt - 1),
        // The client keeps whole seconds of both.
        "bornTimestamp": (message.born_timestamp() > 0).then_some(message.born_timestamp() * 1000),
        "deliveryTimestamp": message.delivery_timestamp().map(|s| s * 1000),
        "bornHost": Some(message.born_host()).filter(|h| !h.is_empty()),
        "receiptHandle": message.receipt_handle(),
        "action": action,
    })
}

async fn simple_consume(a: Args) {
    check_namespace(&a);
    let mut option = SimpleConsumerOption::default();
    option.set_logging_format(LoggingFormat::Json);
    option.set_consumer_group(a.group.clone().unwrap_or_default());
    option.set_topics(vec![a.topic.clone()]);
    let mut consumer = SimpleConsumer::new(option, client_option(&a))
        .unwrap_or_else(|e| fail_client("client", &e, 1, &[]));
    if let Err(e) = consumer.start().await {
        fail_client("client", &e, 1, &[]);
    }
    emit(json!({"event": "ready", "client": CLIENT}));
    let filter = match &a.sql {
        Some(sql) => FilterExpression::new(FilterType::Sql, sql.clone()),
        None => FilterExpression::new(FilterType::Tag, a.tags.clone()),
    };
    let mut goal = Goal::new(a.expect.unwrap_or(0), a.linger);
    while !goal.over() {
        let started = Instant::now();
        let messages = consumer
            .receive_with(
                &a.topic,
                &filter,
                a.batch_size,
                seconds(a.invisible_duration),
            )
            .await
            .unwrap_or_else(|e| fail_client("receive", &e, 1, &[]));
        emit(json!({
            "event": "polled",
            "client": CLIENT,
            "count": messages.len(),
            "seconds": (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
        }));
        for message in messages {
            if a.no_ack {
                emit(received_event(&message, "noack"));
                goal.add();
                continue;
            }
            match consumer.ack(&message).await {
                Ok(()) => {
                    emit(received_event(&message, "ok"));
                    goal.add();
                }
                Err(e) => {
                    emit(with_described(received_event(&message, "ack-failed"), &e));
                }
            }
        }
    }
    finish(json!({"received": goal.count}), consumer.shutdown()).await
}

// ------------------------------------------------------------------------------------------
// route

/// The client has no route API: a producer for the topic starts, which queries the route
/// (Producer::start, prefetch). An error is reported with its v2 code; an answer is read from
/// the client's own log, where it writes the route it got at DEBUG (Cargo.toml keeps that level).
async fn route(a: Args) {
    check_namespace(&a);
    let mut producer = Producer::new(producer_option(&a), client_option(&a))
        .unwrap_or_else(|e| fail_client("client", &e, 1, &[]));
    if let Err(e) = producer.start().await {
        fail_client("route", &e, 1, &[]);
    }
    emit(json!({"event": "ready", "client": CLIENT}));
    let wanted = format!("query route for topic={} success: route=", a.topic);
    let deadline = Instant::now() + Duration::from_secs(5);
    let logged = loop {
        // The log is written by an async drain: the line comes shortly after start() returned.
        if let Some(line) = logged_message(CLIENT_LOG, &wanted) {
            break line;
        }
        if Instant::now() > deadline {
            fail(
                "route",
                format!("no route logged in {CLIENT_LOG} within 5 s"),
                1,
                Map::new(),
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let queues = parse_route(&logged[wanted.len()..]);
    let count = queues.len();
    emit(json!({
        "event": "route",
        "client": CLIENT,
        "topic": a.topic,
        // The client keeps a route only when its status was OK.
        "code": 20000,
        "codeName": "OK",
        "queues": queues,
    }));
    finish(json!({"queues": count}), producer.shutdown()).await
}

/// Where LoggingFormat::Json writes (relative to the working directory).
const CLIENT_LOG: &str = "logs/rocketmq_client.log";

fn logged_message(path: &str, prefix: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|record| record.get("msg")?.as_str().map(String::from))
        .find(|msg| msg.starts_with(prefix))
}

/// `Permission::ReadWrite` or 3 -> "READ_WRITE"; the v2 enums' names as python5 reports them.
fn enum_name(text: &str, numbered: &[&str]) -> String {
    if let Ok(n) = text.parse::<usize>() {
        return numbered.get(n).map_or(text.to_string(), |s| s.to_string());
    }
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// The queues of a logged `Route { index, queue: [MessageQueue { .. }, ..] }` (prost's Debug).
fn parse_route(text: &str) -> Vec<Value> {
    let queue_id = regex::Regex::new(r"\bid: (\d+), permission: (\w+)").unwrap();
    let broker =
        regex::Regex::new(r#"broker: Some\(Broker \{ name: "((?:[^"\\]|\\.)*)", id: (-?\d+)"#)
            .unwrap();
    let address = regex::Regex::new(r#"Address \{ host: "([^"]*)", port: (\d+) \}"#).unwrap();
    let types = regex::Regex::new(r"accept_message_types: \[([^\]]*)\]").unwrap();
    const PERMISSIONS: &[&str] = &[
        "PERMISSION_UNSPECIFIED",
        "NONE",
        "READ",
        "WRITE",
        "READ_WRITE",
    ];
    const MESSAGE_TYPES: &[&str] = &[
        "MESSAGE_TYPE_UNSPECIFIED",
        "NORMAL",
        "FIFO",
        "DELAY",
        "TRANSACTION",
    ];
    text.split("MessageQueue {")
        .skip(1)
        .map(|queue| {
            let (id, permission) = queue_id
                .captures(queue)
                .map(|c| {
                    (
                        c[1].parse::<i64>().unwrap_or(-1),
                        enum_name(&c[2], PERMISSIONS),
                    )
                })
                .unwrap_or((-1, String::new()));
            let (name, broker_id) = broker
                .captures(queue)
                .map(|c| (c[1].to_string(), c[2].parse::<i64>().unwrap_or(-1)))
                .unwrap_or_default();
            let endpoints: Vec<String> = address
                .captures_iter(queue)
                .map(|c| format!("{}:{}", &c[1], &c[2]))
                .collect();
            let accepted: Vec<String> = types
                .captures(queue)
                .map(|c| {
                    c[1].split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(|t| enum_name(t, MESSAGE_TYPES))
                        .collect()
                })
                .unwrap_or_default();
            json!({
                "id": id,
                "permission": permission,
                "broker": name,
                "brokerId": broker_id,
                "endpoints": endpoints,
                "acceptMessageTypes": accepted,
            })
        })
        .collect()
}

// ------------------------------------------------------------------------------------------

fn main() {
    redirect_stdout();
    std::panic::set_hook(Box::new(|info| {
        // A panic in the client (it unwraps some answers) ends the run with an event saying so.
        fail("client", format!("panic: {info}"), 1, Map::new());
    }));
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = parse_args(&argv).unwrap_or_else(|message| usage(message));
    let timeout = args.timeout;
    std::thread::spawn(move || {
        std::thread::sleep(seconds(timeout));
        fail(
            "timeout",
            format!("no result within {timeout}s"),
            3,
            Map::new(),
        );
    });
    if args.command == "push-consume" {
        unsupported("push-consume: the Rust client 5.0.0 has no PushConsumer (Producer and SimpleConsumer only)");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail("client", format!("no tokio runtime: {e}"), 1, Map::new()));
    runtime.block_on(async move {
        match args.command.as_str() {
            "produce" => produce(args).await,
            "transact" => transact(args).await,
            "simple-consume" => simple_consume(args).await,
            _ => route(args).await,
        }
    });
    fail(
        "client",
        "the action returned without a result",
        1,
        Map::new(),
    );
}
