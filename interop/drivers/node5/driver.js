#!/usr/bin/env node
'use strict';

// Stock-client driver for the RocketMQ 5 gRPC client for Node, npm `rocketmq-client-nodejs`
// 1.0.8 (see ../PROTOCOL.md, section "node5").
//
// Run with NODE_PATH pointing at the node_modules that `python -m interop.install node5` makes
// (this folder's package-lock.json) and HOME set to a scratch directory (the client logs to
// $HOME/logs/rocketmq/rocketmq_client_nodejs.log):
//
//   NODE_PATH=<cache>/node5/node_modules node interop/drivers/node5/driver.js produce \
//     --endpoints 127.0.0.1:8081 --topic T --count 10
//
// It takes python5's command line and prints python5's events with "client":"node5". The
// client's public API is used throughout; what it does not keep (a received message's queue id,
// store time and host and message type, the per-entry status of an ack, the answer of a check's
// EndTransaction) is read beside it, by wrapping the methods of the client's own RpcClientManager
// instance, which hand back the gRPC responses unchanged. Nothing of the client is replaced.

const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const tls = require('node:tls');
const util = require('node:util');

const CLIENT = 'node5';
const PACKAGE = 'rocketmq-client-nodejs';

// ---------------------------------------------------------------------------------------------
// stdout discipline: the events go to fd 1 through the original write; anything else that would
// reach process.stdout (console.log, a library's print) goes to a log file under $HOME.

const HOME = process.env.HOME || os.tmpdir();
const LOG_DIR = path.join(HOME, 'logs');
let logFd = null;
try {
  fs.mkdirSync(LOG_DIR, { recursive: true });
  logFd = fs.openSync(path.join(LOG_DIR, `node5-driver-stdout-${process.pid}.log`), 'a');
} catch (err) {
  logFd = null;
}
const writeEvent = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, encoding, callback) => {
  if (logFd !== null) {
    try {
      fs.writeSync(logFd, typeof chunk === 'string' ? chunk : Buffer.from(chunk));
    } catch (err) {
      // a log that cannot be written is dropped
    }
  }
  const done = typeof encoding === 'function' ? encoding : callback;
  if (typeof done === 'function') process.nextTick(done);
  return true;
};

let finished = false; // set once the final line (done / error) was written

function emit(obj, final = false) {
  if (finished) return false;
  if (final) finished = true;
  // stdout to a file or a pipe is synchronous on Linux: the line is out when this returns.
  writeEvent(JSON.stringify(obj) + '\n');
  return true;
}

function fail(kind, message, status, extra = {}) {
  emit({ event: 'error', error: kind, message: String(message), ...extra }, true);
  process.exit(status);
}

/** An error event from an exception: its message and what it carries (see describeError). */
function failWith(kind, err, status, extra = {}) {
  const described = describeError(err);
  fail(kind, described.message, status, { ...described, ...extra });
}

function stderr(...args) {
  process.stderr.write(`node5 driver: ${util.format(...args)}\n`);
}

class UsageError extends Error {}

class Unsupported extends Error {}

function sleep(ms) {
  return new Promise(resolve => setTimeout(resolve, ms));
}

/** Wait for `promise` at most `ms`; true when it settled in time (its failure only logged). */
async function bounded(promise, ms, what) {
  let timer;
  const late = new Promise(resolve => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const settled = promise.then(
    () => true,
    err => {
      stderr('%s: %s', what, err && err.message);
      return true;
    },
  );
  const inTime = await Promise.race([settled, late]);
  clearTimeout(timer);
  return inTime;
}

// ---------------------------------------------------------------------------------------------
// command line: python5's

const ACTIONS = ['produce', 'transact', 'simple-consume', 'push-consume', 'route'];
const ANSWERS = ['commit', 'rollback', 'unknown-commit', 'unknown-rollback', 'unknown'];

// name -> [kind, default]; kinds: str, int, float, flag (bare or true/false), list (repeatable)
const OPTIONS = {
  endpoints: ['str', null],
  topic: ['str', null],
  group: ['str', null],
  timeout: ['float', 60],
  'request-timeout': ['float', 3],
  namespace: ['str', ''],
  'access-key': ['str', null],
  'secret-key': ['str', null],
  tls: ['flag', false],
  'ca-file': ['str', null],
  // produce
  count: ['int', null],
  mode: ['str', 'sync'],
  tag: ['str', null],
  'keys-prefix': ['str', 'k-'],
  'body-prefix': ['str', 'body-'],
  'body-size': ['int', -1],
  prop: ['list', []],
  start: ['int', 0],
  'message-group': ['str', null],
  'deliver-after-ms': ['int', 0],
  'keep-going': ['flag', false],
  // transact
  answer: ['str', null],
  // consume (both kinds)
  expect: ['int', null],
  tags: ['str', '*'],
  sql: ['str', null],
  linger: ['float', 0],
  // simple-consume
  'batch-size': ['int', 16],
  'invisible-duration': ['float', 15],
  'await-duration': ['float', 5],
  'no-ack': ['flag', false],
  // push-consume
  'reconsume-later': ['int', 0],
  threads: ['int', 20],
};

function camel(name) {
  return name.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
}

function parseFlag(text) {
  const value = String(text).trim().toLowerCase();
  if (['true', '1', 'yes'].includes(value)) return true;
  if (['false', '0', 'no'].includes(value)) return false;
  throw new UsageError(`expected true or false, got ${JSON.stringify(text)}`);
}

function parseNumber(name, text, integer) {
  const value = Number(text);
  if (text === undefined || text === '' || !Number.isFinite(value) || (integer && !Number.isInteger(value))) {
    throw new UsageError(`--${name} needs ${integer ? 'an integer' : 'a number'}, got ${JSON.stringify(text)}`);
  }
  return value;
}

function parseArgs(argv) {
  if (argv.length === 0 || !ACTIONS.includes(argv[0])) {
    throw new UsageError(`the first argument is the action, one of ${ACTIONS.join(', ')}`);
  }
  const args = { command: argv[0] };
  for (const [name, [, fallback]] of Object.entries(OPTIONS)) {
    args[camel(name)] = Array.isArray(fallback) ? [] : fallback;
  }
  for (let i = 1; i < argv.length; i++) {
    const token = argv[i];
    if (!token.startsWith('--')) throw new UsageError(`unexpected argument ${JSON.stringify(token)}`);
    let name = token.slice(2);
    let inline;
    const eq = name.indexOf('=');
    if (eq >= 0) {
      inline = name.slice(eq + 1);
      name = name.slice(0, eq);
    }
    const spec = OPTIONS[name];
    if (!spec) throw new UsageError(`unknown option --${name}`);
    const [kind] = spec;
    const key = camel(name);
    if (kind === 'flag') {
      if (inline !== undefined) {
        args[key] = parseFlag(inline);
      } else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) {
        args[key] = parseFlag(argv[++i]);
      } else {
        args[key] = true;
      }
      continue;
    }
    let value = inline;
    if (value === undefined) {
      if (i + 1 >= argv.length) throw new UsageError(`--${name} needs a value`);
      value = argv[++i];
    }
    if (kind === 'int') args[key] = parseNumber(name, value, true);
    else if (kind === 'float') args[key] = parseNumber(name, value, false);
    else if (kind === 'list') args[key].push(value);
    else args[key] = value;
  }
  if (!args.endpoints) throw new UsageError('--endpoints H:P is required');
  if (!args.topic) throw new UsageError('--topic T is required');
  args.props = new Map();
  for (const kv of args.prop) {
    const at = kv.indexOf('=');
    const k = at < 0 ? '' : kv.slice(0, at);
    const v = at < 0 ? '' : kv.slice(at + 1);
    if (at < 0 || !k.trim() || !v.trim()) {
      throw new UsageError(`--prop needs K=V with neither blank, got ${JSON.stringify(kv)}`);
    }
    args.props.set(k, v);
  }
  if (Boolean(args.accessKey) !== Boolean(args.secretKey)) {
    throw new UsageError('--access-key and --secret-key go together');
  }
  if (args.requestTimeout < 1) {
    throw new UsageError('--request-timeout must be >= 1 (the client takes no less than 1000 ms)');
  }
  if (args.command === 'produce' || args.command === 'transact') {
    if (args.count === null || args.count < 0) {
      throw new UsageError(`${args.command} needs --count N (N >= 0)`);
    }
    if (args.messageGroup && args.deliverAfterMs) {
      throw new UsageError('--message-group and --deliver-after-ms exclude each other');
    }
    if (args.tag !== null && (args.tag.includes('|') || !args.tag.trim())) {
      throw new UsageError("--tag must not be blank nor contain '|'");
    }
  }
  if (args.command === 'produce' && args.mode !== 'sync' && args.mode !== 'async') {
    // One message per call; the client's API has no oneway send nor batch.
    throw new Unsupported(`produce --mode ${args.mode} (the 5.x client: sync, async)`);
  }
  if (args.command === 'transact' && args.mode !== 'sync') {
    throw new Unsupported('transactions are sent one by one (--mode sync)');
  }
  if (args.command === 'transact' && !ANSWERS.includes(args.answer)) {
    throw new UsageError(`transact needs --answer, one of ${ANSWERS.join(', ')}`);
  }
  if (args.command === 'simple-consume' || args.command === 'push-consume') {
    if (!args.group) throw new UsageError(`${args.command} needs --group G`);
    if (args.expect === null || args.expect < 0) {
      throw new UsageError(`${args.command} needs --expect N (N >= 0)`);
    }
  }
  if (args.command === 'simple-consume') {
    if (args.batchSize <= 0) throw new UsageError('--batch-size must be > 0');
    if (args.invisibleDuration <= 0) throw new UsageError('--invisible-duration must be > 0');
  }
  return args;
}

function startWatchdog(seconds) {
  setTimeout(() => fail('timeout', `no result within ${seconds}s`, 3), Math.max(0, seconds * 1000));
}

// ---------------------------------------------------------------------------------------------
// TLS: the client dials TLS with grpc-js' default roots (`sslEnabled`), which it reads from
// GRPC_DEFAULT_SSL_ROOTS_FILE_PATH when the module loads. With no --ca-file, the driver trusts
// the certificate the front presents (the front's test mode makes a fresh self-signed one), as
// the Go client's InsecureSkipVerify does.

function presentedCertificate(endpoints, timeoutMs) {
  const [host, port] = endpoints.split(';')[0].split(',')[0].split(':');
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host,
      port: Number(port),
      servername: net.isIP(host) ? undefined : host,
      rejectUnauthorized: false,
      ALPNProtocols: ['h2'],
    });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no TLS handshake with ${host}:${port} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      const cert = socket.getPeerCertificate(false);
      socket.end();
      if (!cert || !cert.raw) return reject(new Error(`${host}:${port} presented no certificate`));
      const b64 = cert.raw.toString('base64').replace(/(.{64})/g, '$1\n');
      resolve(`-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`);
    });
    socket.once('error', err => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

async function prepareTls(args) {
  if (!args.tls) return;
  let file = args.caFile;
  if (!file) {
    let pem;
    try {
      pem = await presentedCertificate(args.endpoints, args.requestTimeout * 1000);
    } catch (err) {
      fail('client', `TLS: ${err.message}`, 1);
    }
    file = path.join(HOME, `node5-front-${process.pid}.pem`);
    fs.writeFileSync(file, pem);
  }
  process.env.GRPC_DEFAULT_SSL_ROOTS_FILE_PATH = file;
}

// ---------------------------------------------------------------------------------------------
// the client

let rmq = null; // the package
let pb = null; // its generated definition_pb
let grpcStatus = null; // @grpc/grpc-js' status enum

function loadClient() {
  rmq = require(PACKAGE);
  pb = require(`${PACKAGE}/proto/apache/rocketmq/v2/definition_pb`);
  grpcStatus = require('@grpc/grpc-js').status;
}

function enumName(enumObject, value) {
  for (const [name, number] of Object.entries(enumObject)) {
    if (number === value) return name;
  }
  return String(value);
}

function codeName(code) {
  return pb ? enumName(pb.Code, code) : String(code);
}

function clientOptions(args, extra = {}) {
  const options = {
    endpoints: args.endpoints,
    namespace: args.namespace,
    requestTimeout: Math.round(args.requestTimeout * 1000),
    sslEnabled: Boolean(args.tls),
    ...extra,
  };
  if (args.accessKey) {
    options.sessionCredentials = { accessKey: args.accessKey, accessSecret: args.secretKey };
  }
  return options;
}

/** `message` plus what the error carries: the v2 status code, or the gRPC status. */
function describeError(err) {
  const out = { message: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
  // A failed startup wraps the cause (twice: "Startup ... failed" around "Failed to fetch ...").
  let inner = err;
  for (let depth = 0; inner && depth < 5; depth++) {
    const code = inner.code;
    if (typeof code === 'number' && code >= 10000) {
      out.code = code;
      out.codeName = codeName(code);
      break;
    }
    if (typeof code === 'number' && inner.metadata !== undefined && grpcStatus) {
      out.grpcStatus = enumName(grpcStatus, code);
      break;
    }
    inner = inner.cause;
  }
  if (inner && inner !== err && inner instanceof Error) out.cause = `${inner.name}: ${inner.message}`;
  return out;
}

function makeBody(args, i) {
  const text = Buffer.from(`${args.bodyPrefix}${i}`, 'utf8');
  if (args.bodySize < 0) return text;
  const body = Buffer.alloc(args.bodySize, '|');
  text.copy(body, 0, 0, Math.min(text.length, args.bodySize));
  return body;
}

function md5(bytes) {
  return crypto.createHash('md5').update(bytes).digest('hex');
}

function joinKeys(keys) {
  return keys && keys.length ? [...keys].sort().join(' ') : null;
}

function compact(event) {
  const out = {};
  for (const [k, v] of Object.entries(event)) {
    if (v !== null && v !== undefined) out[k] = v;
  }
  return out;
}

function millis(date) {
  return date instanceof Date ? date.getTime() : null;
}

function timestampMillis(ts) {
  return ts ? ts.getSeconds() * 1000 + Math.floor(ts.getNanos() / 1e6) : null;
}

/**
 * Wrap one method of a client's RpcClientManager (its own instance) to see the gRPC request and
 * response it passes on unchanged: `seen(request, response)` after an answer.
 */
function watch(client, method, seen) {
  const manager = client.getRpcClientManager();
  const original = manager[method].bind(manager);
  manager[method] = async (endpoints, request, ...rest) => {
    const response = await original(endpoints, request, ...rest);
    try {
      seen(request, response);
    } catch (err) {
      stderr('watch %s: %s', method, err && err.stack);
    }
    return response;
  };
}

async function shutdownAll(clients, graceMs = 10000) {
  for (const client of clients) {
    await bounded(client.shutdown(), graceMs, 'shutdown');
  }
}

async function finish(summary, clients = []) {
  await shutdownAll(clients);
  emit({ event: 'done', ...summary }, true);
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------
// produce

function messageFor(args, i) {
  const options = {
    topic: args.topic,
    body: makeBody(args, i),
    keys: [`${args.keysPrefix}${i}`],
  };
  if (args.tag) options.tag = args.tag;
  if (args.props.size) options.properties = new Map(args.props);
  if (args.messageGroup) options.messageGroup = args.messageGroup;
  if (args.deliverAfterMs) options.deliveryTimestamp = new Date(Date.now() + args.deliverAfterMs);
  return new rmq.Message(options);
}

function sentEvent(args, i, msg, receipt, extra = {}) {
  const queue = receipt.messageQueue;
  return compact({
    event: 'sent',
    client: CLIENT,
    topic: args.topic,
    // The queue the client addressed; the server picks where the message goes (a 5.x proxy
    // does) and its answer names no queue, only the offset.
    broker: queue && queue.broker ? queue.broker.name : null,
    clientQueueId: queue ? queue.queueId : null,
    queueOffset: receipt.offset,
    msgId: receipt.messageId,
    transactionId: receipt.transactionId || null,
    recallHandle: receipt.recallHandle || null,
    status: 'SEND_OK',
    keys: joinKeys(msg.keys),
    tags: msg.tag || null,
    properties: Object.fromEntries(args.props),
    messageGroup: msg.messageGroup || null,
    deliveryTimestamp: millis(msg.deliveryTimestamp),
    bodyMd5: md5(msg.body),
    bodyLen: msg.body.length,
    index: i,
    ...extra,
  });
}

async function startProducer(args, checker) {
  const producer = new rmq.Producer(clientOptions(args, { topics: [args.topic], checker }));
  try {
    // Queries the topic's route (three tries, 1 s and 2 s apart), then waits for the server's
    // settings over Telemetry, with no limit of its own (the watchdog ends a run without them).
    await producer.startup();
  } catch (err) {
    failWith('client', err, 1);
  }
  emit({ event: 'ready', client: CLIENT });
  return producer;
}

function sendError(i, err) {
  return { event: 'error', error: 'send', index: i, ...describeError(err) };
}

async function produce(args) {
  const producer = await startProducer(args);
  let sent = 0;
  let failed = 0;
  const end = args.start + args.count;
  if (args.mode === 'sync') {
    for (let i = args.start; i < end; i++) {
      let msg;
      let receipt;
      try {
        msg = messageFor(args, i);
        receipt = await producer.send(msg);
      } catch (err) {
        failed++;
        if (!args.keepGoing) failWith('send', err, 1, { index: i });
        emit(sendError(i, err));
        continue;
      }
      emit(sentEvent(args, i, msg, receipt));
      sent++;
    }
  } else {
    const pending = [];
    for (let i = args.start; i < end; i++) {
      try {
        const msg = messageFor(args, i);
        pending.push([i, msg, producer.send(msg)]);
      } catch (err) {
        failed++;
        emit(sendError(i, err));
      }
    }
    for (const [i, msg, promise] of pending) {
      try {
        emit(sentEvent(args, i, msg, await promise));
        sent++;
      } catch (err) {
        failed++;
        emit(sendError(i, err));
      }
    }
  }
  if (failed) fail('send', `${failed} of ${args.count} sends failed`, 1);
  await finish({ sent }, [producer]);
}

// ---------------------------------------------------------------------------------------------
// transact

/**
 * Each message is a half message of its own transaction, then committed or rolled back at once
 * (`commit`, `rollback`), or left open for the server's check (RecoverOrphanedTransactionCommand
 * over Telemetry), which the checker answers (`unknown-commit`, `unknown-rollback`; the run waits
 * until the server answered the checker's EndTransaction of every message). `unknown` leaves them
 * open and ends at once; a check that comes first is answered with no resolution (the client then
 * sends no EndTransaction).
 */
async function transact(args) {
  if (args.messageGroup || args.deliverAfterMs) {
    fail('usage', 'a transaction message has no message group nor delivery time', 2);
  }
  const R = pb.TransactionResolution;
  const answer = { 'unknown-commit': 'commit', 'unknown-rollback': 'rollback' }[args.answer] || 'unknown';
  const resolution = { commit: R.COMMIT, rollback: R.ROLLBACK, unknown: null }[answer];
  const transactionIds = new Map(); // msgId -> transactionId, from the send receipts
  const checked = new Set();
  const resolved = new Set(); // msgIds whose SOURCE_SERVER_CHECK EndTransaction was answered
  const checker = {
    async check(messageView) {
      const msgId = messageView.messageId;
      checked.add(msgId);
      emit(compact({
        event: 'checked',
        client: CLIENT,
        transactionId: transactionIds.get(msgId),
        msgId,
        answer,
      }));
      return resolution;
    },
  };
  const producer = await startProducer(args, checker);
  watch(producer, 'endTransaction', (request, response) => {
    const ok = response.getStatus() && response.getStatus().getCode() === pb.Code.OK;
    if (request.getSource() === pb.TransactionSource.SOURCE_SERVER_CHECK && ok) {
      resolved.add(request.getMessageId());
    }
  });
  const sentIds = [];
  for (let i = args.start; i < args.start + args.count; i++) {
    let msg;
    let transaction;
    let receipt;
    try {
      msg = messageFor(args, i);
      transaction = producer.beginTransaction();
      receipt = await producer.send(msg, transaction);
    } catch (err) {
      failWith('send', err, 1, { index: i });
    }
    transactionIds.set(receipt.messageId, receipt.transactionId);
    sentIds.push(receipt.messageId);
    let state = 'UNKNOW';
    try {
      if (args.answer === 'commit') {
        await transaction.commit();
        state = 'COMMIT_MESSAGE';
      } else if (args.answer === 'rollback') {
        await transaction.rollback();
        state = 'ROLLBACK_MESSAGE';
      }
    } catch (err) {
      failWith('end-transaction', err, 1, { index: i });
    }
    emit(sentEvent(args, i, msg, receipt, { localState: state }));
  }
  if (answer !== 'unknown') {
    // The watchdog ends a run whose checks never come.
    while (!sentIds.every(id => resolved.has(id))) await sleep(50);
  }
  await finish({ sent: args.count, checked: checked.size }, [producer]);
}

// ---------------------------------------------------------------------------------------------
// consume

function filterExpression(args) {
  if (args.sql) return new rmq.FilterExpression(args.sql, pb.FilterType.SQL);
  return new rmq.FilterExpression(args.tags || '*');
}

/** What a received message's wire form has and its MessageView drops, by receipt handle. */
function watchReceived(client) {
  const wire = new Map();
  const manager = client.getRpcClientManager();
  const original = manager.receiveMessage.bind(manager);
  manager.receiveMessage = async (endpoints, request, ...rest) => {
    const responses = await original(endpoints, request, ...rest);
    for (const response of responses) {
      const message = response.getMessage && response.getMessage();
      if (!message) continue;
      const props = message.getSystemProperties();
      wire.set(props.getReceiptHandle(), {
        queueId: props.getQueueId(),
        queueOffset: props.getQueueOffset(),
        storeTimestamp: timestampMillis(props.getStoreTimestamp()),
        storeHost: props.getStoreHost() || null,
        messageType: props.getMessageType() ? enumName(pb.MessageType, props.getMessageType()) : null,
      });
    }
    return responses;
  };
  return wire;
}

/** The status of each ack entry, by message id: {code} (the response's, entry's first). */
function watchAcks(client) {
  const acks = new Map();
  watch(client, 'ackMessage', (request, response) => {
    const overall = response.getStatus() ? response.getStatus().getCode() : pb.Code.OK;
    const byId = new Map();
    for (const entry of response.getEntriesList()) {
      byId.set(entry.getMessageId(), entry.getStatus() ? entry.getStatus().getCode() : overall);
    }
    for (const entry of request.getEntriesList()) {
      const id = entry.getMessageId();
      acks.set(id, byId.has(id) ? byId.get(id) : overall);
    }
  });
  return acks;
}

function receivedEvent(mv, action, wire) {
  const body = mv.body || Buffer.alloc(0);
  const attempt = mv.deliveryAttempt;
  const seen = wire.get(mv.receiptHandle) || {};
  return compact({
    event: 'received',
    client: CLIENT,
    topic: mv.topic,
    queueId: seen.queueId,
    queueOffset: seen.queueOffset,
    msgId: mv.messageId,
    keys: joinKeys(mv.keys),
    tags: mv.tag || null,
    properties: Object.fromEntries(mv.properties || []),
    messageGroup: mv.messageGroup || null,
    messageType: seen.messageType,
    bodyMd5: md5(body),
    bodyLen: body.length,
    corrupted: mv.corrupted ? true : null,
    deliveryAttempt: attempt,
    reconsumeTimes: attempt ? attempt - 1 : null,
    bornTimestamp: millis(mv.bornTimestamp),
    storeTimestamp: seen.storeTimestamp,
    storeHost: seen.storeHost,
    deliveryTimestamp: millis(mv.deliveryTimestamp),
    bornHost: mv.bornHost || null,
    receiptHandle: mv.receiptHandle,
    action,
  });
}

/** Counts `received` events that count for --expect; then --linger seconds more. */
class Goal {
  constructor(expect, linger) {
    this.expect = expect;
    this.lingerMs = linger * 1000;
    this.count = 0;
    this.reachedAt = expect === 0 ? Date.now() : null;
  }

  add() {
    this.count++;
    if (this.reachedAt === null && this.count >= this.expect) this.reachedAt = Date.now();
  }

  over() {
    return this.reachedAt !== null && Date.now() - this.reachedAt >= this.lingerMs;
  }
}

async function simpleConsume(args) {
  const consumer = new rmq.SimpleConsumer(clientOptions(args, {
    consumerGroup: args.group,
    subscriptions: new Map([[args.topic, filterExpression(args)]]),
    awaitDuration: Math.round(args.awaitDuration * 1000),
  }));
  const wire = watchReceived(consumer);
  const acks = watchAcks(consumer);
  try {
    await consumer.startup();
  } catch (err) {
    failWith('client', err, 1);
  }
  emit({ event: 'ready', client: CLIENT });
  const goal = new Goal(args.expect, args.linger);
  while (!goal.over()) {
    const started = Date.now();
    let messages;
    try {
      messages = await consumer.receive(args.batchSize, Math.round(args.invisibleDuration * 1000));
    } catch (err) {
      failWith('receive', err, 1);
    }
    messages = messages || [];
    emit({
      event: 'polled',
      client: CLIENT,
      count: messages.length,
      seconds: Math.round(Date.now() - started) / 1000,
    });
    for (const mv of messages) {
      if (args.noAck) {
        emit(receivedEvent(mv, 'noack', wire));
        goal.add();
        continue;
      }
      try {
        await consumer.ack(mv);
      } catch (err) {
        emit({ ...receivedEvent(mv, 'ack-failed', wire), ...describeError(err) });
        continue;
      }
      // The client checks the response's status only, not its entry's.
      const code = acks.get(mv.messageId);
      if (code !== undefined && code !== pb.Code.OK) {
        emit({
          ...receivedEvent(mv, 'ack-failed', wire),
          message: `ack entry answered ${codeName(code)}`,
          code,
          codeName: codeName(code),
        });
        continue;
      }
      emit(receivedEvent(mv, 'ok', wire));
      goal.add();
    }
  }
  await finish({ received: goal.count }, [consumer]);
}

async function pushConsume(args) {
  const goal = new Goal(args.expect, args.linger);
  let later = args.reconsumeLater;
  const counted = []; // msgIds reported `ok`, whose acks the run waits for
  let wire = new Map();
  const listener = {
    async consume(mv) {
      if (later > 0) {
        later--;
        emit(receivedEvent(mv, 'later', wire));
        return rmq.ConsumeResult.FAILURE;
      }
      emit(receivedEvent(mv, 'ok', wire));
      counted.push(mv.messageId);
      goal.add();
      return rmq.ConsumeResult.SUCCESS;
    },
  };
  const consumer = new rmq.PushConsumer(clientOptions(args, {
    consumerGroup: args.group,
    subscriptions: new Map([[args.topic, filterExpression(args)]]),
    messageListener: listener,
  }));
  wire = watchReceived(consumer);
  const acks = watchAcks(consumer);
  // The client calls ChangeInvisibleDuration for a delivery its listener failed (its retry
  // policy's delay) and retries it every second while the answer is not OK: each answer is a
  // `nacked` event.
  watch(consumer, 'changeInvisibleDuration', (request, response) => {
    const d = request.getInvisibleDuration();
    const status = response.getStatus();
    const code = status ? status.getCode() : pb.Code.OK;
    emit(compact({
      event: 'nacked',
      client: CLIENT,
      msgId: request.getMessageId(),
      invisibleMs: d ? d.getSeconds() * 1000 + Math.floor(d.getNanos() / 1e6) : 0,
      code,
      codeName: codeName(code),
      message: status ? status.getMessage() || null : null,
    }));
  });
  try {
    // Queries the route, then waits for the server's settings over Telemetry (no limit).
    await consumer.startup();
  } catch (err) {
    failWith('client', err, 1);
  }
  emit({ event: 'ready', client: CLIENT });
  while (!goal.over()) await sleep(50);
  // The client acks after the listener returned. Its shutdown waits for the long polls in flight
  // (the server's long-polling time plus the request timeout), so the run does not shut it down:
  // it ends once the server answered the ack of every counted message (10 s at most).
  const deadline = Date.now() + 10000;
  while (Date.now() < deadline && !counted.every(id => acks.get(id) === pb.Code.OK)) await sleep(50);
  const unacked = counted.filter(id => !acks.has(id));
  const ackFailures = {};
  for (const id of counted) {
    const code = acks.get(id);
    if (code !== undefined && code !== pb.Code.OK) ackFailures[id] = codeName(code);
  }
  const summary = { received: goal.count };
  if (unacked.length) summary.unacked = unacked;
  if (Object.keys(ackFailures).length) summary.ackFailures = ackFailures;
  emit({ event: 'done', ...summary }, true);
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------
// route

/**
 * Start a producer with no topic (its startup then queries nothing and waits for nothing), then
 * send QueryRoute once through the client's own RpcClientManager, with its metadata, and report
 * the answer: the queues, or the error.
 */
async function route(args) {
  const service = require(`${PACKAGE}/proto/apache/rocketmq/v2/service_pb`);
  const producer = new rmq.Producer(clientOptions(args));
  try {
    await producer.startup();
  } catch (err) {
    failWith('client', err, 1);
  }
  emit({ event: 'ready', client: CLIENT });
  const request = new service.QueryRouteRequest();
  request.setTopic(new pb.Resource().setName(args.topic).setResourceNamespace(args.namespace));
  request.setEndpoints(producer.getEndpoints().toProtobuf());
  let response;
  try {
    response = await producer.getRpcClientManager().queryRoute(
      producer.getEndpoints(), request, Math.round(args.requestTimeout * 1000));
  } catch (err) {
    failWith('route', err, 1);
  }
  const status = response.getStatus();
  const code = status ? status.getCode() : pb.Code.OK;
  if (code !== pb.Code.OK && code !== pb.Code.MULTIPLE_RESULTS) {
    fail('route', (status && status.getMessage()) || codeName(code), 1, { code, codeName: codeName(code) });
  }
  const queues = response.getMessageQueuesList().map(queue => ({
    id: queue.getId(),
    permission: enumName(pb.Permission, queue.getPermission()),
    broker: queue.getBroker().getName(),
    brokerId: queue.getBroker().getId(),
    endpoints: queue.getBroker().getEndpoints().getAddressesList().map(a => `${a.getHost()}:${a.getPort()}`),
    acceptMessageTypes: queue.getAcceptMessageTypesList().map(t => enumName(pb.MessageType, t)),
  }));
  emit({
    event: 'route',
    client: CLIENT,
    topic: args.topic,
    code,
    codeName: codeName(code),
    queues,
  });
  await finish({ queues: queues.length }, [producer]);
}

// ---------------------------------------------------------------------------------------------

async function main(argv) {
  let args;
  try {
    args = parseArgs(argv);
  } catch (err) {
    if (err instanceof UsageError) fail('usage', err.message, 2);
    if (err instanceof Unsupported) fail('unsupported', err.message, 2);
    throw err;
  }
  startWatchdog(args.timeout);
  // The client's background work (heartbeats, route refreshes, telemetry) logs its own failures;
  // a rejection nobody awaited is noted, not fatal.
  process.on('unhandledRejection', reason => stderr('unhandled rejection: %s', reason && reason.stack));
  await prepareTls(args);
  try {
    loadClient();
  } catch (err) {
    fail('client', `cannot load ${PACKAGE}: ${err.message}`, 1);
  }
  const action = {
    produce,
    transact,
    'simple-consume': simpleConsume,
    'push-consume': pushConsume,
    route,
  }[args.command];
  await action(args);
  fail('client', 'the action returned without a result', 1);
}

main(process.argv.slice(2)).catch(err => {
  failWith('client', err, 1);
});
