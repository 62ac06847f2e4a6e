//! The gRPC front's transport: HTTP/2 and gRPC's message framing on a thread of its own, so
//! that a call costs the interpreter one tuple in and one call out, not grpcio's per-call
//! machinery. Python decides what every call does (reference: the grpc.aio server of
//! `sidewinder/proxy/grpc_server.py`, the same handlers behind both).
//!
//! The thread runs a current-thread tokio runtime: it accepts connections, speaks HTTP/2 with
//! `h2`, cuts request bodies into gRPC messages and queues events for Python (a call opened,
//! a message, the client's half-close, a cancellation), writing 1 to an eventfd the event loop
//! watches when the queue was empty. Python answers by call id (`send`, `finish`), which queues
//! the frames on the call's channel: no Python runs on that thread and no GIL is taken there.
//!
//! With a TLS port given, a connection whose first byte opens a TLS handshake is relayed to it
//! byte for byte (grpcio's TLS port), as RocketMQ's tls.server.mode permissive serves both on
//! one port; `tls_only` (enforcing) closes plaintext ones.

use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::{HeaderMap, HeaderValue, Request, Response};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

const TLS_HANDSHAKE: u8 = 0x16;
// gRPC status codes the transport itself answers with.
const INTERNAL: u32 = 13;
const RESOURCE_EXHAUSTED: u32 = 8;
const UNIMPLEMENTED: u32 = 12;

enum Event {
    Call {
        id: u64,
        path: String,
        metadata: Vec<(String, String)>,
        peer: String,
        timeout_ms: i64,
    },
    Message {
        id: u64,
        data: Bytes,
    },
    HalfClose {
        id: u64,
    },
    Cancel {
        id: u64,
    },
}

enum Out {
    Message(Bytes),
    Finish { code: u32, message: String },
}

struct Shared {
    events: Mutex<VecDeque<Event>>,
    calls: Mutex<HashMap<u64, mpsc::UnboundedSender<Out>>>,
    next_id: AtomicU64,
    notify_fd: RawFd,
    max_message: usize,
}

impl Shared {
    fn push(&self, event: Event) {
        let was_empty = {
            let mut events = self.events.lock().unwrap();
            let was_empty = events.is_empty();
            events.push_back(event);
            was_empty
        };
        if was_empty {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to the eventfd, which the Python side
            // keeps open until this thread has exited (`close` joins it). A full counter
            // (EAGAIN) still leaves it readable, which is all the loop needs.
            let _ = unsafe { libc::write(self.notify_fd, (&one as *const u64).cast(), 8) };
        }
    }

    fn channel_of(&self, id: u64) -> Option<mpsc::UnboundedSender<Out>> {
        self.calls.lock().unwrap().get(&id).cloned()
    }
}

/// A gRPC server's transport on `host:port`; its calls are served by the Python side.
#[pyclass(module = "sidewinder._native")]
pub struct GrpcServer {
    shared: Arc<Shared>,
    port: u16,
    stop: Option<watch::Sender<bool>>,
    thread: Option<JoinHandle<()>>,
}

#[pymethods]
impl GrpcServer {
    /// Listen on `host:port` (0: any free port) and serve from a thread of its own, writing to
    /// eventfd `notify_fd` when events wait. `tls_port`: where TLS connections are relayed;
    /// `tls_only`: plaintext connections are closed. Messages over `max_message` bytes end
    /// their call with RESOURCE_EXHAUSTED.
    #[new]
    #[pyo3(signature = (host, port, notify_fd, max_message, tls_port=None, tls_only=false))]
    fn new(
        host: &str,
        port: u16,
        notify_fd: RawFd,
        max_message: usize,
        tls_port: Option<u16>,
        tls_only: bool,
    ) -> PyResult<Self> {
        let listener = std::net::TcpListener::bind((host, port)).map_err(|e| {
            PyOSError::new_err(format!("cannot listen for gRPC on {host}:{port}: {e}"))
        })?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            events: Mutex::new(VecDeque::new()),
            calls: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            notify_fd,
            max_message,
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let listener = {
            let _inside = runtime.enter();
            TcpListener::from_std(listener)?
        };
        let (stop, stopped) = watch::channel(false);
        let serving = shared.clone();
        let thread = std::thread::Builder::new()
            .name("grpc-front".into())
            .spawn(move || {
                runtime.block_on(accept(listener, serving, tls_port, tls_only, stopped));
                // Dropping the runtime here cancels every connection's task and closes it.
            })?;
        Ok(GrpcServer {
            shared,
            port,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    #[getter]
    fn port(&self) -> u16 {
        self.port
    }

    /// The events waiting, oldest first: (0, id, path, metadata, peer, timeout_ms) for a call
    /// opened (timeout_ms -1 without grpc-timeout), (1, id, message) for each request message,
    /// (2, id) when the client has sent its last, (3, id) when the call is gone (reset by the
    /// client, its connection closed, or ended by the transport).
    fn drain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let events = std::mem::take(&mut *self.shared.events.lock().unwrap());
        let list = PyList::empty(py);
        for event in events {
            let item = match event {
                Event::Call {
                    id,
                    path,
                    metadata,
                    peer,
                    timeout_ms,
                } => {
                    let pairs = PyList::empty(py);
                    for (key, value) in metadata {
                        pairs.append((key, value))?;
                    }
                    PyTuple::new(
                        py,
                        [
                            0u8.into_pyobject(py)?.into_any(),
                            id.into_pyobject(py)?.into_any(),
                            path.into_pyobject(py)?.into_any(),
                            pairs.into_any(),
                            peer.into_pyobject(py)?.into_any(),
                            timeout_ms.into_pyobject(py)?.into_any(),
                        ],
                    )?
                }
                Event::Message { id, data } => PyTuple::new(
                    py,
                    [
                        1u8.into_pyobject(py)?.into_any(),
                        id.into_pyobject(py)?.into_any(),
                        PyBytes::new(py, &data).into_any(),
                    ],
                )?,
                Event::HalfClose { id } => (2u8, id).into_pyobject(py)?,
                Event::Cancel { id } => (3u8, id).into_pyobject(py)?,
            };
            list.append(item)?;
        }
        Ok(list)
    }

    /// Send `message` on call `id` (its response headers first, the first time). False when
    /// the call is gone.
    fn send(&self, id: u64, message: &[u8]) -> bool {
        match self.shared.channel_of(id) {
            Some(channel) => channel
                .send(Out::Message(Bytes::copy_from_slice(message)))
                .is_ok(),
            None => false,
        }
    }

    /// End call `id` with gRPC status `code` and `message` (trailers), after what was sent.
    fn finish(&self, id: u64, code: u32, message: &str) -> bool {
        let channel = self.shared.calls.lock().unwrap().remove(&id);
        match channel {
            Some(channel) => channel
                .send(Out::Finish {
                    code,
                    message: message.to_owned(),
                })
                .is_ok(),
            None => false,
        }
    }

    /// A unary call's answer: `message`, then status OK.
    fn reply(&self, id: u64, message: &[u8]) -> bool {
        let channel = self.shared.calls.lock().unwrap().remove(&id);
        match channel {
            Some(channel) => {
                let sent = channel.send(Out::Message(Bytes::copy_from_slice(message)));
                sent.is_ok()
                    && channel
                        .send(Out::Finish {
                            code: 0,
                            message: String::new(),
                        })
                        .is_ok()
            }
            None => false,
        }
    }

    /// Stop listening, close every connection and join the thread (the GIL released).
    fn close(&mut self, py: Python<'_>) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(thread) = self.thread.take() {
            py.detach(|| {
                let _ = thread.join();
            });
        }
        self.shared.calls.lock().unwrap().clear();
    }
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept(
    listener: TcpListener,
    shared: Arc<Shared>,
    tls_port: Option<u16>,
    tls_only: bool,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.changed() => return,
        };
        let Ok((socket, peer)) = accepted else {
            continue; // a connection that failed while being accepted (e.g. EMFILE): go on
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _ = socket.set_nodelay(true);
            let mut first = [0u8; 1];
            match socket.peek(&mut first).await {
                Ok(1) => {}
                _ => return,
            }
            if first[0] == TLS_HANDSHAKE {
                if let Some(port) = tls_port {
                    relay(socket, port).await;
                }
                return; // no TLS port: a TLS client on a plaintext port is closed
            }
            if tls_only {
                return;
            }
            serve_connection(socket, peer, shared).await;
        });
    }
}

async fn relay(mut socket: TcpStream, port: u16) {
    if let Ok(mut inner) = TcpStream::connect(("127.0.0.1", port)).await {
        let _ = inner.set_nodelay(true);
        let _ = tokio::io::copy_bidirectional(&mut socket, &mut inner).await;
    }
}

fn peer_name(peer: &SocketAddr) -> String {
    match peer {
        SocketAddr::V4(v4) => format!("ipv4:{}:{}", v4.ip(), v4.port()),
        SocketAddr::V6(v6) => format!("ipv6:[{}]:{}", v6.ip(), v6.port()),
    }
}

async fn serve_connection(socket: TcpStream, peer: SocketAddr, shared: Arc<Shared>) {
    let peer = peer_name(&peer);
    let handshake = h2::server::Builder::new()
        .initial_window_size(1 << 20)
        .initial_connection_window_size(1 << 22)
        .max_frame_size(1 << 16)
        .max_concurrent_streams(4096)
        .handshake::<_, Bytes>(socket);
    let Ok(mut connection) = handshake.await else {
        return;
    };
    while let Some(accepted) = connection.accept().await {
        let Ok((request, respond)) = accepted else {
            return;
        };
        tokio::spawn(serve_call(shared.clone(), request, respond, peer.clone()));
    }
    // The client said GOAWAY: no new calls, but the connection must still be driven for the
    // answers of the calls in flight to go out.
    let _ = std::future::poll_fn(|cx| connection.poll_closed(cx)).await;
}

/// grpc-timeout ("30S", "100m", ...) in milliseconds; -1 when absent or unreadable.
fn timeout_ms(value: &str) -> i64 {
    let (digits, unit) = value.split_at(value.len().saturating_sub(1));
    let Ok(amount) = digits.parse::<i64>() else {
        return -1;
    };
    match unit {
        "H" => amount.saturating_mul(3_600_000),
        "M" => amount.saturating_mul(60_000),
        "S" => amount.saturating_mul(1000),
        "m" => amount,
        "u" => amount / 1000,
        "n" => amount / 1_000_000,
        _ => -1,
    }
}

async fn serve_call(
    shared: Arc<Shared>,
    request: Request<RecvStream>,
    respond: SendResponse<Bytes>,
    peer: String,
) {
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let (parts, body) = request.into_parts();
    let mut metadata = Vec::with_capacity(parts.headers.len());
    let mut timeout = -1;
    let mut encoding = Encoding::Identity;
    for (name, value) in parts.headers.iter() {
        let Ok(text) = value.to_str() else {
            continue; // binary metadata: none of the front's keys
        };
        if name == "grpc-timeout" {
            timeout = timeout_ms(text);
        } else if name == "grpc-encoding" {
            encoding = Encoding::of(text);
        }
        metadata.push((name.as_str().to_owned(), text.to_owned()));
    }
    let (channel, replies) = mpsc::unbounded_channel();
    shared.calls.lock().unwrap().insert(id, channel.clone());
    shared.push(Event::Call {
        id,
        path: parts.uri.path().to_owned(),
        metadata,
        peer,
        timeout_ms: timeout,
    });
    let reader = tokio::spawn(read_messages(shared.clone(), id, body, channel, encoding));
    let finished = write_replies(respond, replies).await;
    reader.abort();
    let still_open = shared.calls.lock().unwrap().remove(&id).is_some();
    if !finished || still_open {
        shared.push(Event::Cancel { id });
    }
}

/// Cut the request body into gRPC messages, each queued for Python as it completes.
async fn read_messages(
    shared: Arc<Shared>,
    id: u64,
    mut body: RecvStream,
    channel: mpsc::UnboundedSender<Out>,
    encoding: Encoding,
) {
    let mut pending = BytesMut::new();
    loop {
        match body.data().await {
            Some(Ok(chunk)) => {
                let _ = body.flow_control().release_capacity(chunk.len());
                pending.extend_from_slice(&chunk);
                loop {
                    match next_message(&mut pending, shared.max_message, &encoding) {
                        Ok(Some(message)) => shared.push(Event::Message { id, data: message }),
                        Ok(None) => break,
                        Err((code, text)) => {
                            shared.calls.lock().unwrap().remove(&id);
                            let _ = channel.send(Out::Finish {
                                code,
                                message: text,
                            });
                            return;
                        }
                    }
                }
            }
            Some(Err(_)) => return, // reset: the writer sees it and reports the cancellation
            None => {
                shared.push(Event::HalfClose { id });
                return;
            }
        }
    }
}

/// How the client compressed its messages (grpc-encoding), for those flagged compressed.
enum Encoding {
    Identity,
    Gzip,
    Deflate,
    Other(String),
}

impl Encoding {
    fn of(name: &str) -> Self {
        match name {
            "identity" => Encoding::Identity,
            "gzip" => Encoding::Gzip,
            "deflate" => Encoding::Deflate,
            other => Encoding::Other(other.to_owned()),
        }
    }

    /// The message a compressed one stands for, read up to `max_message` bytes.
    fn expand(&self, data: &[u8], max_message: usize) -> Result<Bytes, (u32, String)> {
        let mut out = Vec::new();
        let limit = max_message as u64 + 1;
        let read = match self {
            Encoding::Gzip => flate2::read::GzDecoder::new(data)
                .take(limit)
                .read_to_end(&mut out),
            Encoding::Deflate => flate2::read::ZlibDecoder::new(data)
                .take(limit)
                .read_to_end(&mut out),
            Encoding::Identity => {
                return Err((
                    INTERNAL,
                    "a message flagged compressed, with grpc-encoding identity".to_owned(),
                ))
            }
            Encoding::Other(name) => {
                return Err((
                    UNIMPLEMENTED,
                    format!("grpc-encoding {name} is not supported: use gzip, deflate or identity"),
                ))
            }
        };
        if let Err(e) = read {
            return Err((
                INTERNAL,
                format!("cannot decompress the request message: {e}"),
            ));
        }
        if out.len() > max_message {
            return Err((
                RESOURCE_EXHAUSTED,
                format!("a request message of over {max_message} bytes decompressed"),
            ));
        }
        Ok(Bytes::from(out))
    }
}

/// The next whole message of `pending` (its 5-byte prefix taken off, decompressed), None until
/// one is whole, or the status that ends the call for a message the transport cannot take.
fn next_message(
    pending: &mut BytesMut,
    max_message: usize,
    encoding: &Encoding,
) -> Result<Option<Bytes>, (u32, String)> {
    if pending.len() < 5 {
        return Ok(None);
    }
    let compressed = match pending[0] {
        0 => false,
        1 => true,
        flag => return Err((INTERNAL, format!("a message prefix flagged {flag}"))),
    };
    let length = u32::from_be_bytes([pending[1], pending[2], pending[3], pending[4]]) as usize;
    if length > max_message {
        return Err((
            RESOURCE_EXHAUSTED,
            format!("a request message of {length} bytes is over the limit of {max_message}"),
        ));
    }
    if pending.len() < 5 + length {
        return Ok(None);
    }
    pending.advance(5);
    let message = pending.split_to(length).freeze();
    if compressed {
        return encoding.expand(&message, max_message).map(Some);
    }
    Ok(Some(message))
}

fn framed(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + message.len());
    out.put_u8(0);
    out.put_u32(message.len() as u32);
    out.put_slice(message);
    out.freeze()
}

/// grpc-message's percent-encoding: printable ASCII but '%' as it is.
fn percent_encoded(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if (0x20..=0x7e).contains(&byte) && byte != b'%' {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn status_headers(code: u32, message: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("grpc-status", HeaderValue::from(code));
    if !message.is_empty() {
        if let Ok(value) = HeaderValue::from_str(&percent_encoded(message)) {
            headers.insert("grpc-message", value);
        }
    }
    headers
}

fn response_head(trailers: Option<HeaderMap>) -> Response<()> {
    let mut response = Response::new(());
    let headers = response.headers_mut();
    headers.insert("content-type", HeaderValue::from_static("application/grpc"));
    if let Some(trailers) = trailers {
        headers.extend(trailers);
    }
    response
}

async fn send_all(stream: &mut SendStream<Bytes>, mut data: Bytes) -> Result<(), h2::Error> {
    while !data.is_empty() {
        stream.reserve_capacity(data.len());
        let granted = std::future::poll_fn(|cx| stream.poll_capacity(cx)).await;
        match granted {
            Some(Ok(0)) => continue,
            Some(Ok(n)) => {
                let chunk = data.split_to(n.min(data.len()));
                stream.send_data(chunk, false)?;
            }
            Some(Err(e)) => return Err(e),
            None => return Err(h2::Error::from(h2::Reason::CANCEL)),
        }
    }
    Ok(())
}

/// Write what Python answers on the call until it finishes it (true) or the client resets
/// the stream or goes away (false).
async fn write_replies(
    mut respond: SendResponse<Bytes>,
    mut replies: mpsc::UnboundedReceiver<Out>,
) -> bool {
    let mut stream: Option<SendStream<Bytes>> = None;
    loop {
        let next = tokio::select! {
            next = replies.recv() => next,
            _ = std::future::poll_fn(|cx| match stream.as_mut() {
                Some(stream) => stream.poll_reset(cx),
                None => respond.poll_reset(cx),
            }) => return false,
        };
        match next {
            None => return false,
            Some(Out::Message(message)) => {
                if stream.is_none() {
                    match respond.send_response(response_head(None), false) {
                        Ok(opened) => stream = Some(opened),
                        Err(_) => return false,
                    }
                }
                let Some(open) = stream.as_mut() else {
                    return false;
                };
                if send_all(open, framed(&message)).await.is_err() {
                    return false;
                }
            }
            Some(Out::Finish { code, message }) => {
                let status = status_headers(code, &message);
                let sent = match stream.as_mut() {
                    Some(open) => open.send_trailers(status).is_ok(),
                    // Trailers-only: the status in the one HEADERS frame that ends the stream.
                    None => respond
                        .send_response(response_head(Some(status)), true)
                        .is_ok(),
                };
                return sent;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_in_every_unit() {
        assert_eq!(timeout_ms("30S"), 30_000);
        assert_eq!(timeout_ms("100m"), 100);
        assert_eq!(timeout_ms("2M"), 120_000);
        assert_eq!(timeout_ms("1H"), 3_600_000);
        assert_eq!(timeout_ms("5000u"), 5);
        assert_eq!(timeout_ms("7000000n"), 7);
        assert_eq!(timeout_ms(""), -1);
        assert_eq!(timeout_ms("S"), -1);
        assert_eq!(timeout_ms("12x"), -1);
    }

    #[test]
    fn messages_are_cut_at_their_prefix() {
        let plain = Encoding::Identity;
        let mut pending = BytesMut::new();
        pending.extend_from_slice(&framed(b"abc"));
        pending.extend_from_slice(&framed(b"")[..3]);
        assert_eq!(
            next_message(&mut pending, 10, &plain).unwrap().unwrap(),
            &b"abc"[..]
        );
        assert!(next_message(&mut pending, 10, &plain).unwrap().is_none());
        pending.extend_from_slice(&[0, 0]);
        assert_eq!(
            next_message(&mut pending, 10, &plain).unwrap().unwrap(),
            &b""[..]
        );
        pending.extend_from_slice(&[1, 0, 0, 0, 1, 9]);
        assert_eq!(
            next_message(&mut pending, 10, &plain).unwrap_err().0,
            INTERNAL
        );
        let mut big = BytesMut::new();
        big.extend_from_slice(&[0, 0, 0, 0, 11]);
        assert_eq!(
            next_message(&mut big, 10, &plain).unwrap_err().0,
            RESOURCE_EXHAUSTED
        );
        let mut odd = BytesMut::new();
        odd.extend_from_slice(&[2, 0, 0, 0, 0]);
        assert_eq!(next_message(&mut odd, 10, &plain).unwrap_err().0, INTERNAL);
    }

    #[test]
    fn compressed_messages_are_expanded_within_the_limit() {
        use std::io::Write;
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gzip.write_all(&[7u8; 100]).unwrap();
        let packed = gzip.finish().unwrap();
        let mut pending = BytesMut::new();
        pending.put_u8(1);
        pending.put_u32(packed.len() as u32);
        pending.extend_from_slice(&packed);
        let again = pending.clone();
        let message = next_message(&mut pending, 100, &Encoding::Gzip)
            .unwrap()
            .unwrap();
        assert_eq!(message, Bytes::from(vec![7u8; 100]));
        let mut over = again.clone();
        assert_eq!(
            next_message(&mut over, 99, &Encoding::Gzip).unwrap_err().0,
            RESOURCE_EXHAUSTED
        );
        let mut other = again.clone();
        assert_eq!(
            next_message(&mut other, 100, &Encoding::of("snappy"))
                .unwrap_err()
                .0,
            UNIMPLEMENTED
        );
        let mut garbage = BytesMut::new();
        garbage.extend_from_slice(&[1, 0, 0, 0, 3, 1, 2, 3]);
        assert_eq!(
            next_message(&mut garbage, 100, &Encoding::Deflate)
                .unwrap_err()
                .0,
            INTERNAL
        );
    }

    #[test]
    fn status_messages_are_percent_encoded() {
        assert_eq!(percent_encoded("a b%c\né"), "a b%25c%0A%C3%A9");
    }
}
