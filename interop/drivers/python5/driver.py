#!/usr/bin/env python3
"""Stock-client driver for the RocketMQ 5 gRPC client, PyPI ``rocketmq-python-client==5.1.2``.

Speaks the protocol of ``interop/drivers/PROTOCOL.md`` (JSON event lines on stdout, the same exit
statuses) over a RocketMQ 5 gRPC endpoint instead of a name server; the section "python5" there
lists its actions, options and events. Run it with the interpreter of the virtualenv that
``python -m interop.install py5`` makes (never the project's: the client's generated protos and
ours register the same descriptor names), with ``HOME`` set to a temp dir (the client logs to
``$HOME/logs/rocketmq_python``).

Standard library and ``rocketmq`` only. The client's public API is used throughout; two things it
does not expose are read beside it, never changed: the queue a send addressed (its MessageQueue
keeps the id private, ``message_queue0()`` gives it back) and a received message's queue id and
offset, store time and store host (the wire message has them, ``Message.fromProtobuf`` drops
them: a wrapper copies them first).
"""

import argparse
import hashlib
import json
import os
import sys
import tempfile
import threading
import time

CLIENT = "python5"

# ---------------------------------------------------------------------------------------------
# stdout discipline: keep our own copy of fd 1 for the JSON events and point fd 1 (and Python's
# sys.stdout) at a log file under $HOME before the client and grpc are imported, so nothing they
# print can reach the caller's stdout.

_OUT_FD = os.dup(1)
_HOME = os.environ.get("HOME") or tempfile.gettempdir()
_LOG_DIR = os.path.join(_HOME, "logs")
try:
    os.makedirs(_LOG_DIR, exist_ok=True)
    _log_fd = os.open(
        os.path.join(_LOG_DIR, f"python5-driver-stdout-{os.getpid()}.log"),
        os.O_WRONLY | os.O_CREAT | os.O_APPEND,
        0o644,
    )
except OSError:
    _log_fd = os.open(os.devnull, os.O_WRONLY)
os.dup2(_log_fd, 1)
os.close(_log_fd)
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


def fail(kind, message, status, **extra):
    """Print an error event as the last line and exit at once (no clean-up)."""
    emit({"event": "error", "error": kind, "message": str(message), **extra}, final=True)
    os._exit(status)


def finish(summary, clients=(), grace=10.0):
    """Shut the clients down (bounded: a dead server must not hold the run), print `done`, exit 0.

    A push consumer's shutdown waits for its listener tasks, so every ack of a message that was
    reported received has been sent by then."""
    closer = threading.Thread(target=_shutdown_all, args=(clients,), daemon=True)
    closer.start()
    closer.join(grace)
    emit({"event": "done", **summary}, final=True)
    os._exit(0)


def _shutdown_all(clients):
    for client in clients:
        try:
            client.shutdown()
        except Exception as exc:  # a failed shutdown does not undo what was done
            sys.stderr.write(f"python5 driver: shutdown: {exc!r}\n")


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def start_watchdog(timeout):
    def run():
        time.sleep(max(0.0, timeout))
        fail("timeout", f"no result within {timeout:g}s", 3)

    threading.Thread(target=run, name="watchdog", daemon=True).start()


# ---------------------------------------------------------------------------------------------
# command line

ACTIONS = ("produce", "transact", "simple-consume", "push-consume", "route")


def _flag(text):
    """A boolean option given bare (`--no-ack`) or with a value (`--no-ack true`, drivers.py)."""
    value = str(text).strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_args(argv):
    p = _Parser(prog="driver.py", add_help=False)
    p.add_argument("command", choices=ACTIONS)
    p.add_argument("--endpoints", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", default=None)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--request-timeout", type=int, default=3)
    p.add_argument("--namespace", default="")
    p.add_argument("--access-key", default=None)
    p.add_argument("--secret-key", default=None)
    # produce
    p.add_argument("--count", type=int, default=None)
    p.add_argument("--mode", default="sync")
    p.add_argument("--tag", default=None)
    p.add_argument("--keys-prefix", default="k-")
    p.add_argument("--body-prefix", default="body-")
    p.add_argument("--body-size", type=int, default=-1)
    p.add_argument("--prop", action="append", default=[])
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--message-group", default=None)
    p.add_argument("--deliver-after-ms", type=int, default=0)
    p.add_argument("--keep-going", type=_flag, nargs="?", const=True, default=False)
    # transact
    p.add_argument("--answer", default=None)
    # consume (both kinds)
    p.add_argument("--expect", type=int, default=None)
    p.add_argument("--tags", default="*")
    p.add_argument("--sql", default=None)
    p.add_argument("--linger", type=float, default=0.0)
    # simple-consume
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--invisible-duration", type=int, default=15)
    p.add_argument("--await-duration", type=int, default=5)
    p.add_argument("--no-ack", type=_flag, nargs="?", const=True, default=False)
    # push-consume
    p.add_argument("--reconsume-later", type=int, default=0)
    p.add_argument("--threads", type=int, default=20)
    args = p.parse_args(argv)

    props = {}
    for kv in args.prop:
        k, sep, v = kv.partition("=")
        if not sep or not k.strip() or not v.strip():
            raise UsageError(f"--prop needs K=V with neither blank, got {kv!r}")
        props[k] = v
    args.props = props
    if bool(args.access_key) != bool(args.secret_key):
        raise UsageError("--access-key and --secret-key go together")
    if args.command in ("produce", "transact"):
        if args.count is None or args.count < 0:
            raise UsageError(f"{args.command} needs --count N (N >= 0)")
        if args.message_group and args.deliver_after_ms:
            raise UsageError("--message-group and --deliver-after-ms exclude each other")
        if args.tag is not None and ("|" in args.tag or not args.tag.strip()):
            raise UsageError("--tag must not be blank nor contain '|'")
    if args.command == "transact" and args.answer not in ANSWERS:
        raise UsageError(f"transact needs --answer, one of {', '.join(ANSWERS)}")
    if args.command in ("simple-consume", "push-consume"):
        if not args.group:
            raise UsageError(f"{args.command} needs --group G")
        if args.expect is None or args.expect < 0:
            raise UsageError(f"{args.command} needs --expect N (N >= 0)")
    if args.command == "simple-consume" and args.batch_size <= 0:
        raise UsageError("--batch-size must be > 0")
    return args


# ---------------------------------------------------------------------------------------------
# the client


def load_client():
    """Import the client (after stdout was redirected) and note what it drops from the wire."""
    import rocketmq
    from rocketmq.v5.model import message as message_module

    original = message_module.Message.fromProtobuf

    def from_protobuf(self, message):
        props = message.system_properties
        stored = props.HasField("store_timestamp")
        self._driver_wire = {
            "queueId": props.queue_id,
            "queueOffset": props.queue_offset,
            "storeTimestamp": props.store_timestamp.ToMilliseconds() if stored else None,
            "storeHost": props.store_host or None,
        }
        return original(self, message)

    message_module.Message.fromProtobuf = from_protobuf
    return rocketmq


def client_configuration(rmq, args):
    credentials = rmq.Credentials(args.access_key or "", args.secret_key or "")
    return rmq.ClientConfiguration(
        args.endpoints, credentials, args.namespace, request_timeout=args.request_timeout
    )


def describe_exception(exc):
    """`message` plus what the error carries: the v2 status code, or the gRPC status."""
    out = {"message": f"{type(exc).__name__}: {exc}"}
    code = getattr(exc, "code", None)
    if callable(code):  # grpc.RpcError / grpc.aio.AioRpcError
        try:
            out["grpcStatus"] = code().name
            out["message"] = f"{type(exc).__name__}: {code().name}: {exc.details()}"
        except Exception:
            pass
    elif isinstance(code, int):
        out["code"] = code
        out["codeName"] = _code_name(code)
    return out


def _code_name(code):
    from rocketmq.grpc_protocol import Code

    try:
        return Code.Name(code)
    except ValueError:
        return str(code)


def make_body(args, i):
    text = f"{args.body_prefix}{i}".encode()
    if args.body_size < 0:
        return text
    return (text + b"|" * max(args.body_size - len(text), 0))[: args.body_size]


def _keys(keys):
    return " ".join(sorted(keys)) if keys else None


def _compact(event):
    return {k: v for k, v in event.items() if v is not None}


# ---------------------------------------------------------------------------------------------
# produce


def message_for(rmq, args, i):
    msg = rmq.Message()
    msg.topic = args.topic
    msg.body = make_body(args, i)
    if args.tag:
        msg.tag = args.tag
    msg.keys = f"{args.keys_prefix}{i}"
    for k, v in args.props.items():
        msg.add_property(k, v)
    if args.message_group:
        msg.message_group = args.message_group
    if args.deliver_after_ms:
        # The client puts this value in a Timestamp's seconds: whole seconds, rounded up.
        due_ms = time.time_ns() // 1_000_000 + args.deliver_after_ms
        msg.delivery_timestamp = -(-due_ms // 1000)
    return msg


def sent_event(args, i, msg, receipt, **extra):
    queue = receipt.message_queue.message_queue0()
    body = msg.body
    return _compact(
        {
            "event": "sent",
            "client": CLIENT,
            "topic": args.topic,
            # The queue the client addressed; the server picks where the message goes (a 5.x
            # proxy does) and its answer names no queue, only the offset.
            "broker": queue.broker.name,
            "clientQueueId": queue.id,
            "queueOffset": receipt.offset,
            "msgId": receipt.message_id,
            "transactionId": receipt.transaction_id or None,
            "recallHandle": receipt.recall_handle,
            "status": "SEND_OK",
            "keys": _keys(msg.keys),
            "tags": msg.tag,
            "properties": dict(args.props),
            "messageGroup": msg.message_group,
            "deliveryTimestamp": msg.delivery_timestamp * 1000 if msg.delivery_timestamp else None,
            "bodyMd5": hashlib.md5(body).hexdigest(),
            "bodyLen": len(body),
            "index": i,
            **extra,
        }
    )


def start_producer(rmq, args, checker=None):
    producer = rmq.Producer(client_configuration(rmq, args), topics=[args.topic], checker=checker)
    try:
        producer.startup()
    except Exception as exc:
        fail("client", **describe_exception(exc), status=1)
    emit({"event": "ready", "client": CLIENT})
    return producer


def send_error(i, exc):
    return {"event": "error", "error": "send", "index": i, **describe_exception(exc)}


def produce(rmq, args):
    if args.mode not in ("sync", "async"):
        # The 5.x client sends one message per call and has no oneway or batch send.
        fail("unsupported", f"produce --mode {args.mode} (the 5.x client: sync, async)", 2)
    producer = start_producer(rmq, args)
    sent = 0
    failed = 0
    indices = range(args.start, args.start + args.count)
    if args.mode == "sync":
        for i in indices:
            msg = message_for(rmq, args, i)
            try:
                receipt = producer.send(msg)
            except Exception as exc:
                failed += 1
                if not args.keep_going:
                    fail("send", **describe_exception(exc), index=i, status=1)
                emit(send_error(i, exc))
                continue
            emit(sent_event(args, i, msg, receipt))
            sent += 1
    else:
        pending = []
        for i in indices:
            msg = message_for(rmq, args, i)
            try:
                pending.append((i, msg, producer.send_async(msg)))
            except Exception as exc:  # refused before it left (route, message type)
                failed += 1
                emit(send_error(i, exc))
        for i, msg, future in pending:
            try:
                receipt = future.result()
            except Exception as exc:
                failed += 1
                emit(send_error(i, exc))
                continue
            emit(sent_event(args, i, msg, receipt))
            sent += 1
    if failed:
        fail("send", f"{failed} of {args.count} sends failed", 1)
    finish({"sent": sent}, [producer])


# ---------------------------------------------------------------------------------------------
# transact

ANSWERS = ("commit", "rollback", "unknown-commit", "unknown-rollback", "unknown")


def transact(rmq, args):
    """Each message is a half message of its own transaction, then committed or rolled back at
    once (`commit`, `rollback`), or left open for the server's check (RecoverOrphanedTransaction
    over Telemetry), which the checker answers (`unknown-commit`, `unknown-rollback`). `unknown`
    leaves them all open and ends without waiting. The 5.x client has no UNKNOW answer."""
    if args.mode != "sync":
        fail("unsupported", "transactions are sent one by one (--mode sync)", 2)
    if args.message_group or args.deliver_after_ms:
        fail("usage", "a transaction message has no message group nor delivery time", 2)
    resolution = rmq.TransactionResolution
    check_answer = resolution.COMMIT if args.answer == "unknown-commit" else resolution.ROLLBACK
    lock = threading.Lock()
    transaction_ids = {}  # msgId -> transactionId, from the send receipts
    waiting = set()  # msgIds still waiting for their check
    checked = set()
    all_checked = threading.Event()

    class Checker(rmq.TransactionChecker):
        def check(self, message):
            with lock:
                msg_id = message.message_id
                checked.add(msg_id)
                waiting.discard(msg_id)
                if not waiting and len(transaction_ids) == args.count:
                    all_checked.set()
                transaction_id = transaction_ids.get(msg_id)
            emit(
                _compact(
                    {
                        "event": "checked",
                        "client": CLIENT,
                        "transactionId": transaction_id,
                        "msgId": msg_id,
                        "answer": "commit" if check_answer == resolution.COMMIT else "rollback",
                    }
                )
            )
            return check_answer

    producer = start_producer(rmq, args, Checker())
    wait_checks = args.answer in ("unknown-commit", "unknown-rollback")
    for i in range(args.start, args.start + args.count):
        msg = message_for(rmq, args, i)
        try:
            transaction = producer.begin_transaction()
            receipt = producer.send(msg, transaction=transaction)
        except Exception as exc:
            fail("send", **describe_exception(exc), index=i, status=1)
        with lock:
            transaction_ids[receipt.message_id] = receipt.transaction_id
            if wait_checks and receipt.message_id not in checked:
                waiting.add(receipt.message_id)
        state = "UNKNOW"
        try:
            if args.answer == "commit":
                transaction.commit()
                state = "COMMIT_MESSAGE"
            elif args.answer == "rollback":
                transaction.rollback()
                state = "ROLLBACK_MESSAGE"
        except Exception as exc:
            fail("end-transaction", **describe_exception(exc), index=i, status=1)
        emit(sent_event(args, i, msg, receipt, localState=state))
    with lock:
        if not waiting:
            all_checked.set()
    if wait_checks:
        all_checked.wait()  # the watchdog ends a run whose checks never come
        time.sleep(0.5)  # the checker's EndTransaction goes out after check() returned
    finish({"sent": args.count, "checked": len(checked)}, [producer])


# ---------------------------------------------------------------------------------------------
# consume


def filter_expression(rmq, args):
    from rocketmq.grpc_protocol import FilterType

    if args.sql:
        # The protobuf's enum (apache.rocketmq.v2.FilterType): SQL, though the client's
        # docstring calls it SQL92.
        return rmq.FilterExpression(args.sql, FilterType.SQL)
    return rmq.FilterExpression(args.tags or "*")


def received_event(msg, action):
    body = msg.body or b""
    attempt = msg.delivery_attempt
    wire = getattr(msg, "_driver_wire", {})
    return _compact(
        {
            "event": "received",
            "client": CLIENT,
            "topic": msg.topic,
            "queueId": wire.get("queueId"),
            "queueOffset": wire.get("queueOffset"),
            "msgId": msg.message_id,
            "keys": _keys(msg.keys),
            "tags": msg.tag,
            "properties": dict(msg.properties or {}),
            "messageGroup": msg.message_group,
            "messageType": msg.message_type_desc(msg.message_type) if msg.message_type else None,
            "bodyMd5": hashlib.md5(body).hexdigest(),
            "bodyLen": len(body),
            "corrupted": True if msg.corrupted else None,
            "deliveryAttempt": attempt,
            "reconsumeTimes": attempt - 1 if attempt else None,
            "bornTimestamp": msg.born_timestamp,
            "storeTimestamp": wire.get("storeTimestamp"),
            "storeHost": wire.get("storeHost"),
            "deliveryTimestamp": msg.delivery_timestamp or None,
            "bornHost": msg.born_host or None,
            "receiptHandle": msg.receipt_handle,
            "action": action,
        }
    )


class Goal:
    """Counts `received` events that count for `--expect`; then `--linger` seconds more."""

    def __init__(self, expect, linger):
        self.expect = expect
        self.linger = linger
        self.count = 0
        self.reached_at = time.monotonic() if expect == 0 else None
        self.lock = threading.Lock()

    def add(self):
        with self.lock:
            self.count += 1
            if self.reached_at is None and self.count >= self.expect:
                self.reached_at = time.monotonic()

    def over(self):
        with self.lock:
            return self.reached_at is not None and (
                time.monotonic() - self.reached_at >= self.linger
            )

    def reached(self):
        with self.lock:
            return self.reached_at is not None


def simple_consume(rmq, args):
    consumer = rmq.SimpleConsumer(
        client_configuration(rmq, args),
        args.group,
        {args.topic: filter_expression(rmq, args)},
        await_duration=args.await_duration,
    )
    try:
        consumer.startup()
    except Exception as exc:
        fail("client", **describe_exception(exc), status=1)
    emit({"event": "ready", "client": CLIENT})
    goal = Goal(args.expect, args.linger)
    while not goal.over():
        started = time.monotonic()
        try:
            messages = consumer.receive(args.batch_size, args.invisible_duration)
        except Exception as exc:
            fail("receive", **describe_exception(exc), status=1)
        messages = messages or []
        emit(
            {
                "event": "polled",
                "client": CLIENT,
                "count": len(messages),
                "seconds": round(time.monotonic() - started, 3),
            }
        )
        for msg in messages:
            if args.no_ack:
                emit(received_event(msg, "noack"))
                goal.add()
                continue
            try:
                consumer.ack(msg)
            except Exception as exc:
                emit({**received_event(msg, "ack-failed"), **describe_exception(exc)})
                continue
            emit(received_event(msg, "ok"))
            goal.add()
    finish({"received": goal.count}, [consumer])


def push_consume(rmq, args):
    goal = Goal(args.expect, args.linger)
    later = [args.reconsume_later]
    later_lock = threading.Lock()

    class Listener(rmq.MessageListener):
        def consume(self, message):
            with later_lock:
                answer_later = later[0] > 0
                if answer_later:
                    later[0] -= 1
            if answer_later:
                emit(received_event(message, "later"))
                return rmq.ConsumeResult.FAILURE
            emit(received_event(message, "ok"))
            goal.add()
            return rmq.ConsumeResult.SUCCESS

    consumer = rmq.PushConsumer(
        client_configuration(rmq, args),
        args.group,
        Listener(),
        {args.topic: filter_expression(rmq, args)},
        consumption_thread_count=args.threads,
    )
    try:
        # Blocks until the server's settings arrive over Telemetry (the client gives up at 10 s).
        consumer.startup()
    except Exception as exc:
        settings = getattr(consumer, "_init_settings_event", None)
        if isinstance(settings, threading.Event) and not settings.is_set():
            # 5.1.2 then fails in its own clean-up (no consumption made yet), hiding the cause.
            fail(
                "client",
                "no settings from the server over Telemetry within 10 s",
                1,
                clientError=describe_exception(exc)["message"],
            )
        fail("client", **describe_exception(exc), status=1)
    emit({"event": "ready", "client": CLIENT})
    while not goal.over():
        time.sleep(0.05)
    finish({"received": goal.count}, [consumer])


# ---------------------------------------------------------------------------------------------
# route


def route(rmq, args):
    """Start a producer for the topic (the client's own QueryRoute at startup), then ask once more
    through its RpcClient, with its metadata, to report the answer: the queues, or the error."""
    from rocketmq.grpc_protocol import Code, MessageType, Permission, QueryRouteRequest

    config = client_configuration(rmq, args)
    producer = rmq.Producer(config, topics=[args.topic])
    try:
        producer.startup()
    except Exception as exc:
        fail("client", **describe_exception(exc), status=1)
    emit({"event": "ready", "client": CLIENT})
    request = QueryRouteRequest()
    request.topic.name = args.topic
    request.topic.resource_namespace = args.namespace
    request.endpoints.CopyFrom(config.rpc_endpoints.endpoints)
    try:
        response = producer.rpc_client.query_topic_route_async(
            config.rpc_endpoints, request, producer.sign(), timeout=args.request_timeout
        ).result()
    except Exception as exc:
        fail("route", **describe_exception(exc), status=1)
    status = response.status
    if status.code not in (Code.OK, Code.MULTIPLE_RESULTS):
        fail(
            "route",
            status.message or _code_name(status.code),
            1,
            code=status.code,
            codeName=_code_name(status.code),
        )
    queues = [
        {
            "id": queue.id,
            "permission": Permission.Name(queue.permission),
            "broker": queue.broker.name,
            "brokerId": queue.broker.id,
            "endpoints": [f"{a.host}:{a.port}" for a in queue.broker.endpoints.addresses],
            "acceptMessageTypes": [MessageType.Name(t) for t in queue.accept_message_types],
        }
        for queue in response.message_queues
    ]
    emit(
        {
            "event": "route",
            "client": CLIENT,
            "topic": args.topic,
            "code": status.code,
            "codeName": _code_name(status.code),
            "queues": queues,
        }
    )
    finish({"queues": len(queues)}, [producer])


# ---------------------------------------------------------------------------------------------


def main(argv):
    try:
        args = parse_args(argv)
    except UsageError as exc:
        fail("usage", exc, 2)
    start_watchdog(args.timeout)
    try:
        rmq = load_client()
    except Exception as exc:
        fail("client", f"cannot import the rocketmq 5.x client: {exc!r}", 1)
    action = {
        "produce": produce,
        "transact": transact,
        "simple-consume": simple_consume,
        "push-consume": push_consume,
        "route": route,
    }[args.command]
    try:
        action(rmq, args)
    except SystemExit:
        raise
    except BaseException as exc:
        fail("client", **describe_exception(exc), status=1)
    fail("client", "the action returned without a result", 1)


if __name__ == "__main__":
    main(sys.argv[1:])
