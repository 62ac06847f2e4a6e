#!/usr/bin/env python3
"""Stock-client driver for the Apache rocketmq-client-cpp core, through PyPI ``rocketmq==0.4.4``.

Speaks the protocol in ``interop/drivers/PROTOCOL.md``. Run it with the interpreter of a virtualenv
that has ``rocketmq==0.4.4`` installed (its import name is ``rocketmq``, so it must not share an
environment with our own code) and with ``HOME`` set to a temp dir (the C++ core writes its logs
under ``$HOME/logs/rocketmq-cpp``, broadcasting offsets under ``$HOME/.rocketmq_offsets``).

Standard library and ``rocketmq`` only. Where the C API of the bundled ``librocketmq.so`` hides
something the protocol asks for (the consume-from-where setting, a received message's property map
and its offsetMsgId, a binary-exact body), this driver reads it through the library's exported C++
symbols, but only when the library is byte-for-byte the one shipped in the 0.4.4 wheel (checked by
SHA-256); otherwise those keys are omitted, never guessed.
"""

import argparse
import contextlib
import hashlib
import json
import os
import sys
import tempfile
import threading
import time

CLIENT = "cpp"

# ---------------------------------------------------------------------------------------------
# stdout discipline: keep our own copy of fd 1 for the JSON events, and point fd 1 (and Python's
# sys.stdout) at a log file under $HOME before the C library is loaded, so nothing it prints can
# reach the caller's stdout.

_OUT_FD = os.dup(1)
_HOME = os.environ.get("HOME") or tempfile.gettempdir()
_LOG_DIR = os.path.join(_HOME, "logs")
try:
    os.makedirs(_LOG_DIR, exist_ok=True)
    _stdout_log = os.path.join(_LOG_DIR, f"cpp-driver-stdout-{os.getpid()}.log")
    _log_fd = os.open(_stdout_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
except OSError:
    _log_fd = os.open(os.devnull, os.O_WRONLY)
os.dup2(_log_fd, 1)
os.close(_log_fd)
# fd 1 now points at the log; our JSON goes to the saved original through this object.
sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115

_out_lock = threading.Lock()
_finished = False  # set once the final line (done / error) was written


def emit(obj, final=False):
    """Write one JSON event line to the original stdout. Returns False once the run is over."""
    global _finished
    line = (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
    with _out_lock:
        if _finished:
            return False
        if final:
            _finished = True
        view = memoryview(line)
        while view:
            n = os.write(_OUT_FD, view)
            view = view[n:]
    return True


def fail(kind, message, status):
    """Print an error event as the last line and exit at once (no clean-up)."""
    emit({"event": "error", "error": kind, "message": str(message)}, final=True)
    os._exit(status)


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def start_watchdog(timeout):
    def run():
        time.sleep(max(0.0, timeout))
        fail("timeout", f"no result within {timeout:g}s", 3)

    t = threading.Thread(target=run, name="watchdog", daemon=True)
    t.start()


# ---------------------------------------------------------------------------------------------
# command line


def parse_args(argv):
    p = _Parser(prog="driver.py", add_help=False)
    p.add_argument("command", choices=["produce", "consume", "transact"])
    p.add_argument("--namesrv", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--instance", default=None)
    # produce
    p.add_argument("--count", type=int, default=None)
    p.add_argument("--mode", default=None)
    p.add_argument("--batch-size", type=int, default=10)
    p.add_argument("--tag", default=None)
    p.add_argument("--keys-prefix", default="k-")
    p.add_argument("--body-prefix", default="body-")
    p.add_argument("--body-size", type=int, default=-1)
    p.add_argument("--prop", action="append", default=[])
    p.add_argument("--delay-level", type=int, default=0)
    p.add_argument("--queue", type=int, default=None)
    p.add_argument("--start", type=int, default=0)
    # consume
    p.add_argument("--expect", type=int, default=None)
    p.add_argument("--model", choices=["clustering", "broadcasting"], default="clustering")
    p.add_argument("--tags", default="*")
    p.add_argument("--sql", default=None)
    p.add_argument("--from", dest="from_", choices=["first", "last"], default="first")
    p.add_argument("--seek", type=int, default=None)
    p.add_argument("--reconsume-later", type=int, default=0)
    p.add_argument("--linger", type=float, default=0.0)
    # transact
    p.add_argument("--answer", default=None)
    args = p.parse_args(argv)

    props = {}
    for kv in args.prop:
        if "=" not in kv:
            raise UsageError(f"--prop needs K=V, got {kv!r}")
        k, v = kv.split("=", 1)
        if not k:
            raise UsageError("--prop needs a non-empty key")
        props[k] = v
    args.props = props
    if args.instance is None:
        args.instance = str(os.getpid())
    if args.command == "produce":
        args.mode = args.mode or "sync"
        if args.mode not in ("sync", "async", "oneway", "batch"):
            raise UsageError(f"unknown produce --mode {args.mode!r}")
        if args.count is None or args.count < 0:
            raise UsageError("produce needs --count N (N >= 0)")
        if args.queue is not None and args.queue < 0:
            raise UsageError("--queue must be >= 0")
    elif args.command == "consume":
        args.mode = args.mode or "push"
        if args.mode not in ("push", "orderly", "pull", "lite-pull"):
            raise UsageError(f"unknown consume --mode {args.mode!r}")
        if args.expect is None or args.expect < 0:
            raise UsageError("consume needs --expect N (N >= 0)")
    return args


# ---------------------------------------------------------------------------------------------
# message helpers


def make_body(args, i):
    text = f"{args.body_prefix}{i}".encode()
    if args.body_size is None or args.body_size < 0:
        return text
    size = args.body_size
    if len(text) < size:
        text = text + b"|" * (size - len(text))
    return text[:size]


SYSTEM_KEYS = frozenset(
    [
        "KEYS",
        "TAGS",
        "UNIQ_KEY",
        "WAIT",
        "DELAY",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "ORIGIN_MESSAGE_ID",
        "RECONSUME_TIME",
        "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME",
        "MSG_REGION",
        "TRACE_ON",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "TRANSACTION_CHECK_TIMES",
        "CHECK_IMMUNITY_TIME_IN_SECONDS",
        "CLUSTER",
        "DELAY_TIME",
    ]
)


def is_system_key(k):
    return k in SYSTEM_KEYS or k.startswith("__")


def _dec(b):
    if b is None:
        return ""
    if isinstance(b, bytes):
        return b.decode("utf-8", "replace")
    return b


# ---------------------------------------------------------------------------------------------
# the library


def load_library():
    """Import the wrapper (after stdout was redirected) and set up the extra ABI-level accessors."""
    import ctypes

    from rocketmq import client as rmq_client
    from rocketmq import ffi as rmq_ffi

    lib = rmq_client
    lib.ffi = rmq_ffi
    lib.ctypes = ctypes
    path = rmq_ffi._DYLIB_PATH
    # A second handle on the same (already loaded) library: our own prototypes, so the wrapper's
    # function objects keep theirs.
    raw = ctypes.CDLL(path)
    lib.raw = raw

    # exported C++ setter; CreatePushConsumer returns a DefaultMQPushConsumer*
    # cast to CPushConsumer*
    lib.set_consume_from_where = None
    try:
        f = raw._ZN8rocketmq21DefaultMQPushConsumer19setConsumeFromWhereENS_16ConsumeFromWhereE
        f.argtypes = [ctypes.c_void_p, ctypes.c_int]
        f.restype = None
        lib.set_consume_from_where = f
    except AttributeError:
        pass

    # ABI-level reads (COW std::string, std::map layout of this exact build): only on the known .so
    lib.abi_ok = False
    try:
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        lib.abi_ok = digest == KNOWN_LIB_SHA256
    except OSError:
        pass
    if lib.abi_ok:
        g = raw._ZNK8rocketmq12MQMessageExt14getOffsetMsgIdEv
        g.argtypes = [ctypes.c_void_p]
        g.restype = ctypes.c_void_p
        lib.get_offset_msg_id = g
        b = raw.GetMessageBody
        b.argtypes = [ctypes.c_void_p]
        b.restype = ctypes.c_void_p
        lib.get_body_ptr = b
        p = raw.GetMessageProperty
        p.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        p.restype = ctypes.c_char_p
        lib.get_property = p
    return lib


# librocketmq.so of the rocketmq 0.4.4 manylinux1_x86_64 wheel
# (client-cpp 1.2.x, gcc 4.8, COW strings)
KNOWN_LIB_SHA256 = "eecafaf7c86bb0c15c3d7c707fe1c3d221a45097a1ee18604f41ef68bc9ab645"
# rocketmq::MQMessage in that build: std::map<string,string> m_properties at this+0x30, so its
# _Rb_tree header node is at +0x38 (color, parent/root +0x40, left +0x48, right +0x50) and the
# node count at +0x58 (read from the disassembly of MQMessage::getProperties() const).
_PROPS_ROOT = 0x40
_PROPS_COUNT = 0x58
_COW_LEN = 24  # a COW std::string's length sits 24 bytes before its character data


def _cow_string(ctypes, data_ptr):
    if not data_ptr:
        return b""
    n = ctypes.c_size_t.from_address(data_ptr - _COW_LEN).value
    if n > (64 << 20):
        raise ValueError(f"implausible std::string length {n}")
    return ctypes.string_at(data_ptr, n)


def _string_at_member(ctypes, addr):
    return _cow_string(ctypes, ctypes.c_void_p.from_address(addr).value)


def read_properties(lib, handle):
    """All properties of a received message (an MQMessageExt*), or None when unknowable."""
    ctypes = lib.ctypes
    count = ctypes.c_size_t.from_address(handle + _PROPS_COUNT).value
    if count > 10000:
        raise ValueError(f"implausible property count {count}")
    props = {}
    stack = []
    node = ctypes.c_void_p.from_address(handle + _PROPS_ROOT).value
    seen = 0
    while stack or node:
        while node:
            stack.append(node)
            node = ctypes.c_void_p.from_address(node + 16).value  # left
        node = stack.pop()
        seen += 1
        if seen > count:
            raise ValueError("property tree larger than its count")
        k = _string_at_member(ctypes, node + 32)
        v = _string_at_member(ctypes, node + 40)
        props[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
        node = ctypes.c_void_p.from_address(node + 24).value  # right
    if seen != count:
        raise ValueError(f"property tree has {seen} nodes, count says {count}")
    return props


class MessageReader:
    """Turns a received CMessageExt* into a `received` event."""

    def __init__(self, lib):
        self.lib = lib
        self.dll = lib.ffi.dll
        self.abi = lib.abi_ok
        self._warned = False

    def _abi_off(self, exc):
        self.abi = False
        if not self._warned:
            self._warned = True
            sys.stderr.write(f"cpp driver: ABI-level message reads disabled: {exc}\n")

    def event(self, handle, action):
        dll = self.dll
        ev = {"event": "received", "client": CLIENT}
        ev["topic"] = _dec(dll.GetMessageTopic(handle))
        ev["queueId"] = int(dll.GetMessageQueueId(handle))
        ev["queueOffset"] = int(dll.GetMessageQueueOffset(handle))
        msg_id = _dec(dll.GetMessageId(handle))
        if msg_id:
            ev["msgId"] = msg_id
        body = None
        props = None
        if self.abi:
            try:
                off = self.lib.get_offset_msg_id(handle)
                offset_msg_id = _string_at_member(self.lib.ctypes, off).decode("ascii", "replace")
                if offset_msg_id:
                    ev["offsetMsgId"] = offset_msg_id
                body = _cow_string(self.lib.ctypes, self.lib.get_body_ptr(handle))
                props = read_properties(self.lib, handle)
                # cross-check the layout against the C API
                uk = _dec(self.lib.get_property(handle, b"UNIQ_KEY"))
                if props.get("UNIQ_KEY", "") != uk:
                    raise ValueError("UNIQ_KEY mismatch between map walk and C API")
            except Exception as exc:
                ev.pop("offsetMsgId", None)
                body = None
                props = None
                self._abi_off(exc)
        if body is None:
            body = dll.GetMessageBody(handle) or b""  # C string: stops at the first NUL
        keys = _dec(dll.GetMessageKeys(handle))
        tags = _dec(dll.GetMessageTags(handle))
        if keys:
            ev["keys"] = keys
        if tags:
            ev["tags"] = tags
        if props is not None:
            ev["properties"] = {k: v for k, v in sorted(props.items()) if not is_system_key(k)}
        ev["bodyMd5"] = hashlib.md5(body).hexdigest()
        ev["bodyLen"] = len(body)
        ev["reconsumeTimes"] = int(dll.GetMessageReconsumeTimes(handle))
        ev["storeTimestamp"] = int(dll.GetMessageStoreTimestamp(handle))
        ev["bornTimestamp"] = int(dll.GetMessageBornTimestamp(handle))
        ev["action"] = action
        return ev


# ---------------------------------------------------------------------------------------------
# produce

SEND_STATUS = {
    0: "SEND_OK",
    1: "FLUSH_DISK_TIMEOUT",
    2: "FLUSH_SLAVE_TIMEOUT",
    3: "SLAVE_NOT_AVAILABLE",
}


def produce(args):
    if args.mode == "batch":
        fail(
            "unsupported",
            'the C++ core\'s batch send is code 10 with batch:"1", which a 4.x broker '
            "stores as one message; not offered",
            2,
        )
    if args.mode == "async" and args.queue is not None:
        fail("unsupported", "rocketmq 0.4.4 has no async send with a queue selector", 2)

    lib = load_library()
    ctypes = lib.ctypes
    dll = lib.ffi.dll

    producer = lib.Producer(args.group)
    producer.set_namesrv_addr(args.namesrv)
    dll.SetProducerInstanceName(producer._handle, args.instance.encode("utf-8"))
    try:
        producer.start()
    except Exception as exc:
        fail("client", f"producer start failed: {exc}", 1)
    emit({"event": "ready", "client": CLIENT})

    selector_cb = None
    chosen = {}
    if args.queue is not None:

        def select(mq_size, _msg, _arg):
            # the C API hands the selector only the number of queues; with one broker the list
            # index is the queueId
            idx = args.queue % mq_size if mq_size > 0 else 0
            chosen["qid"] = idx
            return idx

        selector_cb = lib.ffi.QUEUE_SELECTOR_CALLBACK(select)
        dummy_arg = ctypes.c_int(0)  # the C API refuses a NULL arg

    def build(i):
        msg = lib.Message(args.topic)
        keys = f"{args.keys_prefix}{i}"
        msg.set_keys(keys)
        if args.tag is not None:
            msg.set_tags(args.tag)
        for k, v in args.props.items():
            msg.set_property(k, v)
        if args.delay_level:
            msg.set_delay_time_level(args.delay_level)
        body = make_body(args, i)
        rc = dll.SetByteMessageBody(msg._handle, body, len(body))
        if rc != 0:
            raise RuntimeError(f"SetByteMessageBody failed: {rc}")
        return msg, keys, body

    def base_event(i, keys, body):
        ev = {"event": "sent", "client": CLIENT, "topic": args.topic}
        ev["keys"] = keys
        if args.tag is not None:
            ev["tags"] = args.tag
        ev["properties"] = dict(args.props)
        ev["bodyMd5"] = hashlib.md5(body).hexdigest()
        ev["bodyLen"] = len(body)
        ev["index"] = i
        return ev

    def uniq_key(msg):
        # the client writes UNIQ_KEY into the message it sends (CMessage* and CMessageExt* share
        # the MQMessage base, so the C getter works on an outgoing message too)
        return _dec(dll.GetMessageProperty(msg._handle, b"UNIQ_KEY"))

    sent = 0
    error = None
    indices = range(args.start, args.start + args.count)

    if args.mode == "async":
        inflight = threading.Semaphore(64)
        all_done = threading.Event()
        state = {"pending": args.count, "error": None}
        state_lock = threading.Lock()
        keep = []

        def finish_one():
            inflight.release()
            with state_lock:
                state["pending"] -= 1
                if state["pending"] == 0:
                    all_done.set()

        def make_callbacks(i, keys, body):
            def on_ok(res):
                ev = base_event(i, keys, body)
                ev["queueOffset"] = int(res.offset)
                if res.msg_id:
                    ev["msgId"] = res.msg_id
                ev["status"] = SEND_STATUS.get(int(res.status), str(res.status))
                emit(ev)
                finish_one()

            def on_err(exc):
                with state_lock:
                    if state["error"] is None:
                        state["error"] = f"index {i}: {exc}"
                finish_one()

            return on_ok, on_err

        if args.count == 0:
            all_done.set()
        for i in indices:
            if state["error"] is not None:
                break
            msg, keys, body = build(i)
            keep.append(msg)  # the C++ core copies the message, but be safe until the callback
            on_ok, on_err = make_callbacks(i, keys, body)
            inflight.acquire()
            try:
                producer.send_async(msg, on_ok, on_err)
            except Exception as exc:
                state["error"] = f"index {i}: {exc}"
                finish_one()
                break
        if state["error"] is None:
            all_done.wait()
        error = state["error"]
        sent = args.count
    else:
        for i in indices:
            msg, keys, body = build(i)
            ev = base_event(i, keys, body)
            try:
                if args.mode == "oneway":
                    if selector_cb is not None:
                        rc = dll.SendMessageOnewayOrderly(
                            producer._handle,
                            msg,
                            selector_cb,
                            ctypes.cast(ctypes.pointer(dummy_arg), ctypes.c_void_p),
                        )
                        if rc != 0:
                            raise RuntimeError(f"SendMessageOnewayOrderly failed: {rc}")
                    else:
                        producer.send_oneway(msg)
                    mid = uniq_key(msg)
                    if mid:
                        ev["msgId"] = mid
                    ev["status"] = "ONEWAY"
                else:
                    if selector_cb is not None:
                        cres = lib.ffi._CSendResult()
                        # autoRetryTimes 0: a retry would move the message to another queue
                        rc = dll.SendMessageOrderly(
                            producer._handle,
                            msg,
                            selector_cb,
                            ctypes.cast(ctypes.pointer(dummy_arg), ctypes.c_void_p),
                            0,
                            ctypes.pointer(cres),
                        )
                        if rc != 0:
                            msg_txt = _dec(dll.GetLatestErrorMessage())
                            raise RuntimeError(f"SendMessageOrderly failed ({rc}): {msg_txt}")
                        ev["queueId"] = chosen.get("qid")
                        status, mid, offset = (
                            cres.sendStatus,
                            cres.msgId.decode("utf-8"),
                            cres.offset,
                        )
                    else:
                        res = producer.send_sync(msg)
                        status, mid, offset = int(res.status), res.msg_id, res.offset
                    ev["queueOffset"] = int(offset)
                    if mid:
                        ev["msgId"] = mid
                    ev["status"] = SEND_STATUS.get(int(status), str(status))
            except Exception as exc:
                error = f"index {i}: {type(exc).__name__}: {exc}"
                break
            emit(ev)
            sent += 1

    with contextlib.suppress(Exception):
        producer.shutdown()
    if error is not None:
        fail("send", error, 1)
    emit({"event": "done", "sent": sent}, final=True)
    os._exit(0)


# ---------------------------------------------------------------------------------------------
# consume

CONSUME_FROM_LAST_OFFSET = 0
CONSUME_FROM_FIRST_OFFSET = 4


class Tally:
    def __init__(self, expect, later):
        self.lock = threading.Lock()
        self.expect = expect
        self.later_left = later
        self.ok = 0
        self.reached = threading.Event()
        if expect == 0:
            self.reached.set()

    def decide(self):
        with self.lock:
            if self.later_left > 0:
                self.later_left -= 1
                return "later"
            return "ok"

    def count_ok(self):
        with self.lock:
            self.ok += 1
            if self.ok >= self.expect:
                self.reached.set()


def consume(args):
    if args.mode == "lite-pull":
        fail("unsupported", "no lite pull consumer in the C++ core", 2)
    if args.sql is not None:
        fail("unsupported", "the C++ core 1.2.x subscribes by tag expression only (no SQL92)", 2)
    if args.mode == "pull" and args.reconsume_later:
        fail("unsupported", "the C API of the pull consumer has no send-back (RECONSUME_LATER)", 2)
    if args.seek is not None:
        fail("unsupported", "--seek is for lite-pull only", 2)

    lib = load_library()
    reader = MessageReader(lib)
    tally = Tally(args.expect, args.reconsume_later)
    if args.mode == "pull":
        return consume_pull(args, lib, reader, tally)
    return consume_push(args, lib, reader, tally)


def finish_consume(args, tally, shutdown):
    tally.reached.wait()
    if args.linger > 0:
        time.sleep(args.linger)
    with contextlib.suppress(Exception):
        shutdown()
    with tally.lock:
        n = tally.ok
    emit({"event": "done", "received": n}, final=True)
    os._exit(0)


def consume_push(args, lib, reader, tally):
    ffi = lib.ffi
    orderly = args.mode == "orderly"
    model = (
        ffi.MessageModel.BROADCASTING
        if args.model == "broadcasting"
        else ffi.MessageModel.CLUSTERING
    )
    if lib.set_consume_from_where is None and args.from_ == "first":
        fail(
            "unsupported",
            "this librocketmq.so does not export setConsumeFromWhere "
            "(the C API is fixed to CONSUME_FROM_LAST_OFFSET)",
            2,
        )

    consumer = lib.PushConsumer(args.group, orderly=orderly, message_model=model)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.set_instance_name(args.instance)
    consumer.set_message_batch_max_size(1)
    if lib.set_consume_from_where is not None:
        lib.set_consume_from_where(
            consumer._handle,
            CONSUME_FROM_FIRST_OFFSET if args.from_ == "first" else CONSUME_FROM_LAST_OFFSET,
        )

    later_code = ffi._CConsumeStatus.RECONSUME_LATER.value
    ok_code = ffi._CConsumeStatus.CONSUME_SUCCESS.value

    def on_message(_consumer, handle):
        try:
            action = tally.decide()
            ev = reader.event(handle, action)
            if not emit(ev):
                return later_code  # run is over: leave it for the next consumer
            if action == "later":
                return later_code
            tally.count_ok()
            return ok_code
        except Exception as exc:
            sys.stderr.write(f"cpp driver: callback error: {exc!r}\n")
            return later_code

    rc = ffi.dll.Subscribe(consumer._handle, args.topic.encode("utf-8"), args.tags.encode("utf-8"))
    if rc != 0:
        fail("client", f"Subscribe failed: {rc}", 1)
    # registered directly: the wrapper's subscribe() turns a callback exception into a ctypes
    # error (reported as CONSUME_SUCCESS) and offers no way to answer RECONSUME_LATER
    consumer._register_callback(on_message)
    try:
        consumer.start()
    except Exception as exc:
        fail("client", f"push consumer start failed: {exc}", 1)
    emit({"event": "ready", "client": CLIENT})
    finish_consume(args, tally, consumer.shutdown)


def consume_pull(args, lib, reader, tally):
    ctypes = lib.ctypes
    ffi = lib.ffi
    dll = ffi.dll
    consumer = lib.PullConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    try:
        consumer.start()
    except Exception as exc:
        fail("client", f"pull consumer start failed: {exc}", 1)

    mqs_ptr = ctypes.POINTER(ffi._CMessageQueue)()
    size = ctypes.c_int()
    deadline = time.monotonic() + args.timeout
    while True:
        rc = dll.FetchSubscriptionMessageQueues(
            consumer._handle,
            args.topic.encode("utf-8"),
            ctypes.pointer(mqs_ptr),
            ctypes.pointer(size),
        )
        if rc == 0 and size.value > 0:
            break
        if rc == 0:
            dll.ReleaseSubscriptionMessageQueue(mqs_ptr)
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)  # topic not routable yet: the watchdog bounds this
    queues = []
    for i in range(size.value):
        src = mqs_ptr[i]
        mq = ffi._CMessageQueue()
        ctypes.memmove(ctypes.byref(mq), ctypes.byref(src), ctypes.sizeof(mq))
        queues.append(mq)
    dll.ReleaseSubscriptionMessageQueue(mqs_ptr)
    queues.sort(key=lambda q: (q.brokerName, q.queueId))
    emit({"event": "ready", "client": CLIENT})

    expr = args.tags.encode("utf-8")
    offsets = {}
    for q in queues:
        key = (q.brokerName, q.queueId)
        offsets[key] = 0
        if args.from_ == "last":
            # learn the queue's max offset from one pull at 0 (the C API has no maxOffset call)
            res = dll.Pull(consumer._handle, ctypes.pointer(q), expr, 0, 1)
            offsets[key] = (
                int(res.maxOffset) if res.pullStatus != ffi._CPullStatus.BROKER_TIMEOUT else 0
            )
            dll.ReleasePullResult(res)

    stop = threading.Event()

    def pull_loop():
        while not stop.is_set():
            got_any = False
            for q in queues:
                if stop.is_set():
                    break
                key = (q.brokerName, q.queueId)
                res = dll.Pull(consumer._handle, ctypes.pointer(q), expr, offsets[key], 32)
                try:
                    st = res.pullStatus
                    if st != ffi._CPullStatus.BROKER_TIMEOUT:
                        offsets[key] = int(res.nextBeginOffset)
                    if st == ffi._CPullStatus.FOUND:
                        got_any = True
                        for j in range(int(res.size)):
                            ev = reader.event(res.msgFoundList[j], "ok")
                            if not emit(ev):
                                return
                            tally.count_ok()
                    elif st == ffi._CPullStatus.NO_MATCHED_MSG:
                        got_any = True
                finally:
                    dll.ReleasePullResult(res)
            if not got_any:
                stop.wait(0.2)

    t = threading.Thread(target=pull_loop, name="pull", daemon=True)
    t.start()

    def shutdown():
        stop.set()
        t.join(timeout=30)
        consumer.shutdown()

    finish_consume(args, tally, shutdown)


# ---------------------------------------------------------------------------------------------


def main(argv):
    try:
        args = parse_args(argv)
    except UsageError as exc:
        fail("usage", exc, 2)
    start_watchdog(args.timeout)
    if args.command == "transact":
        fail("unsupported", "the C++ core in rocketmq 0.4.4 has no transactional producer", 2)
    try:
        if args.command == "produce":
            produce(args)
        else:
            consume(args)
    except SystemExit:
        raise
    except BaseException as exc:
        fail("client", f"{type(exc).__name__}: {exc}", 1)


if __name__ == "__main__":
    main(sys.argv[1:])
