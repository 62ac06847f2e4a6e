#!/usr/bin/env node
'use strict';

// Sidewinder interop driver for npm `ali-ons` 3.12.x (see ../PROTOCOL.md).
//
// Run with NODE_PATH pointing at a node_modules folder that holds ali-ons (installed from this
// folder's package-lock.json) and HOME set to a scratch directory:
//
//   NODE_PATH=<cache>/node/node_modules node interop/drivers/node/driver.js produce --namesrv ...
//
// stdout carries only protocol events (one JSON object per line). ali-ons' own logging goes to
// $HOME/logs/ali-ons/driver-<command>-<pid>.log.
//
// What ali-ons offers, and so what this driver supports:
//   produce: sync only (no async / oneway / batch API), tags, keys, user properties, delay level
//            (msg.delayTimeLevel), --queue through the only queue-selection hook ali-ons has, the
//            message sharding key (md5(shardingKey) mod #queues). That hook cannot address queue 0:
//            ali-ons evaluates `queueIds[i] || ''`, so queue id 0 means "no selection" there.
//   consume: push (concurrent) only, clustering or broadcasting, tag or SQL92 subscription,
//            --reconsume-later through Consumer.ACTION_RETRY. No orderly listener, no pull or
//            lite-pull consumer, no transactions.

const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');
const util = require('util');

const CLIENT = 'node';

// ---------------------------------------------------------------------------------------------
// output

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

let exiting = false;

function finish(code) {
  if (exiting) return;
  exiting = true;
  // stdout to a pipe or a file is synchronous on Linux, so nothing written above is lost.
  process.exit(code);
}

function fail(kind, message, code) {
  if (exiting) return;
  emit({ event: 'error', error: kind, message: String(message) });
  finish(code);
}

// ---------------------------------------------------------------------------------------------
// logging: never to stdout

let logStream = null;

function openLog(command) {
  try {
    const dir = path.join(os.homedir(), 'logs', 'ali-ons');
    fs.mkdirSync(dir, { recursive: true });
    logStream = fs.createWriteStream(path.join(dir, `driver-${command}-${process.pid}.log`), { flags: 'a' });
    logStream.on('error', () => { logStream = null; });
  } catch (err) {
    logStream = null;
  }
}

function log(level, args) {
  if (!logStream) return;
  let text;
  try {
    text = util.format(...args);
  } catch (err) {
    text = String(args[0]);
  }
  logStream.write(`${new Date().toISOString()} ${level} ${text}\n`);
}

const logger = {
  debug() {},
  info(...args) { log('INFO', args); },
  warn(...args) { log('WARN', args); },
  error(...args) { log('ERROR', args); },
};

// ali-ons asserts an `httpclient` option even though it only uses it to look up name servers
// over HTTP (onsAddr), which never happens once `nameSrv` is given.
const httpclientStub = {
  async request() {
    throw new Error('httpclient stub: ali-ons should not use HTTP when nameSrv is set');
  },
};

// ---------------------------------------------------------------------------------------------
// arguments

const SPEC = {
  common: { namesrv: 's', topic: 's', group: 's', timeout: 'f', instance: 's' },
  produce: {
    count: 'i', mode: 's', 'batch-size': 'i', tag: 's', 'keys-prefix': 's', 'body-prefix': 's',
    'body-size': 'i', prop: 'list', 'delay-level': 'i', queue: 'i', start: 'i',
  },
  consume: {
    expect: 'i', mode: 's', model: 's', tags: 's', sql: 's', from: 's', seek: 'i',
    'reconsume-later': 'i', linger: 'f',
  },
  transact: { count: 'i', answer: 's' },
};

class UsageError extends Error {}

function parseArgs(argv) {
  const command = argv[0];
  if (!command || !SPEC[command] || command === 'common') {
    throw new UsageError(`first argument must be produce, consume or transact, got ${JSON.stringify(command)}`);
  }
  const spec = Object.assign({}, SPEC.common, SPEC[command]);
  if (command === 'transact') Object.assign(spec, SPEC.produce);
  const opts = { prop: [] };
  for (let i = 1; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`);
    let name = arg.slice(2);
    let value;
    const eq = name.indexOf('=');
    if (eq >= 0) {
      value = name.slice(eq + 1);
      name = name.slice(0, eq);
    }
    const type = spec[name];
    if (!type) throw new UsageError(`unknown option --${name} for ${command}`);
    if (value === undefined) {
      if (i + 1 >= argv.length) throw new UsageError(`option --${name} needs a value`);
      value = argv[++i];
    }
    if (type === 'i') {
      if (!/^-?\d+$/.test(value)) throw new UsageError(`option --${name} needs an integer, got ${JSON.stringify(value)}`);
      opts[name] = parseInt(value, 10);
    } else if (type === 'f') {
      const f = Number(value);
      if (value === '' || !Number.isFinite(f)) throw new UsageError(`option --${name} needs a number, got ${JSON.stringify(value)}`);
      opts[name] = f;
    } else if (type === 'list') {
      opts[name].push(value);
    } else {
      opts[name] = value;
    }
  }
  for (const required of ['namesrv', 'topic', 'group']) {
    if (!opts[required]) throw new UsageError(`--${required} is required`);
  }
  if (command === 'produce' && opts.count === undefined) throw new UsageError('--count is required');
  if (command === 'consume' && opts.expect === undefined) throw new UsageError('--expect is required');
  const props = {};
  for (const kv of opts.prop) {
    const eqAt = kv.indexOf('=');
    if (eqAt <= 0) throw new UsageError(`--prop needs K=V, got ${JSON.stringify(kv)}`);
    props[kv.slice(0, eqAt)] = kv.slice(eqAt + 1);
  }
  opts.props = props;
  opts.timeout = opts.timeout === undefined ? 60 : opts.timeout;
  opts.instance = opts.instance || String(process.pid);
  return { command, opts };
}

// ---------------------------------------------------------------------------------------------
// helpers

function md5hex(buf) {
  return crypto.createHash('md5').update(buf).digest('hex');
}

function buildBody(prefix, i, size) {
  const text = Buffer.from(`${prefix}${i}`, 'utf8');
  if (size < 0) return text;
  const out = Buffer.alloc(size, '|');
  text.copy(out, 0, 0, Math.min(text.length, size));
  return out;
}

function withTimeout(promise, ms) {
  let timer;
  return Promise.race([
    Promise.resolve(promise).catch(err => logger.warn('[driver] close failed: %s', err && err.stack || err)),
    new Promise(resolve => { timer = setTimeout(resolve, ms); }),
  ]).finally(() => clearTimeout(timer));
}

const SYSTEM_KEYS = new Set([
  'KEYS', 'TAGS', 'UNIQ_KEY', 'WAIT', 'DELAY', 'RETRY_TOPIC', 'REAL_TOPIC', 'REAL_QID', 'TRAN_MSG',
  'PGROUP', 'MIN_OFFSET', 'MAX_OFFSET', 'ORIGIN_MESSAGE_ID', 'RECONSUME_TIME', 'MAX_RECONSUME_TIMES',
  'CONSUME_START_TIME', 'MSG_REGION', 'TRACE_ON', 'TRAN_PREPARED_QUEUE_OFFSET',
  'TRANSACTION_CHECK_TIMES', 'CHECK_IMMUNITY_TIME_IN_SECONDS', 'CLUSTER', 'DELAY_TIME',
]);

function userProperties(props) {
  const out = {};
  for (const key of Object.keys(props || {})) {
    if (SYSTEM_KEYS.has(key) || key.startsWith('__')) continue;
    const value = props[key];
    if (value === null || value === undefined) continue;
    out[key] = String(value);
  }
  return out;
}

// ali-ons runs its timers (set on the client instance the first producer or consumer of an
// instanceName makes) with no shorter first run: a consumer takes its queues at start and then
// only at the next rebalance (it ignores NOTIFY_CONSUMER_IDS_CHANGED), and commits its offsets
// every persist interval. Every 2 s and 1 s rather than 10 s and 5 s, so a scenario waiting
// on either waits that much less; routes every 3 s as the Java driver's. Only timing changes:
// ali-ons lets users set them the same way.
const TIMERS = {
  pollNameServerInteval: 3000,
  rebalanceInterval: 2000,
  persistConsumerOffsetInterval: 1000,
};

function clientOptions(opts) {
  return Object.assign({
    httpclient: httpclientStub,
    nameSrv: opts.namesrv,
    logger,
    instanceName: opts.instance,
  }, TIMERS);
}

function loadOns() {
  try {
    return require('ali-ons');
  } catch (err) {
    fail('client', `cannot load ali-ons (set NODE_PATH to the node_modules that holds it): ${err.message}`, 1);
    return null;
  }
}

// ali-ons' only queue-selection hook: TopicPublishInfo.selectOneMessageQueue picks
// queueIds[md5(shardingKey).readUInt32BE() % queueIds.length] among the writable queue ids.
function shardingKeyForQueue(publishInfo, queueId) {
  const queueIds = [];
  for (const mq of publishInfo.messageQueueList) {
    if (!queueIds.includes(mq.queueId)) queueIds.push(mq.queueId);
  }
  const pos = queueIds.indexOf(queueId);
  if (pos < 0) return { error: `queue ${queueId} is not a writable queue of the topic (writable: ${queueIds.join(',')})` };
  for (let n = 0; n < 100000; n++) {
    const key = `sidewinder-q${queueId}-${n}`;
    if (crypto.createHash('md5').update(key).digest().readUInt32BE() % queueIds.length === pos) return { key };
  }
  return { error: `no sharding key found for queue ${queueId}` };
}

// ---------------------------------------------------------------------------------------------
// produce

async function produce(opts) {
  const mode = opts.mode || 'sync';
  if (!['sync', 'async', 'oneway', 'batch'].includes(mode)) return fail('usage', `unknown produce mode ${mode}`, 2);
  if (mode !== 'sync') return fail('unsupported', `ali-ons has no ${mode} send (only Producer#send, which is sync)`, 2);
  if (opts.queue !== undefined && opts.queue === 0) {
    return fail('unsupported', 'ali-ons cannot select queue 0: its only selector, the sharding key, treats queue id 0 as "none" (queueIds[i] || \'\')', 2);
  }
  if (opts.queue !== undefined && opts.queue < 0) return fail('usage', '--queue must be >= 0', 2);

  const ons = loadOns();
  if (!ons) return;
  const { Producer, Message } = ons;

  installInnerProducer(Producer, clientOptions(opts));
  const producer = new Producer(Object.assign(clientOptions(opts), { producerGroup: opts.group }));
  producer.on('error', err => logger.error('[driver] producer error: %s', err && err.stack || err));
  await producer.ready();

  let shardingKey = null;
  if (opts.queue !== undefined) {
    const info = await producer.tryToFindTopicPublishInfo(opts.topic);
    if (!info || !info.ok) return fail('send', `no route for topic ${opts.topic}`, 1);
    const found = shardingKeyForQueue(info, opts.queue);
    if (found.error) return fail('usage', found.error, 2);
    shardingKey = found.key;
  }
  emit({ event: 'ready', client: CLIENT });

  const start = opts.start || 0;
  const keysPrefix = opts['keys-prefix'] === undefined ? 'k-' : opts['keys-prefix'];
  const bodyPrefix = opts['body-prefix'] === undefined ? 'body-' : opts['body-prefix'];
  const bodySize = opts['body-size'] === undefined ? -1 : opts['body-size'];
  const delayLevel = opts['delay-level'] || 0;
  let sent = 0;
  for (let i = start; i < start + opts.count; i++) {
    const body = buildBody(bodyPrefix, i, bodySize);
    const bodyMd5 = md5hex(body);
    const bodyLen = body.length;
    const msg = new Message(opts.topic, opts.tag || null, Buffer.from(body));
    // Message's constructor stores TAGS even when it is null, which would go out as "TAGS\1null".
    if (!opts.tag) delete msg.properties.TAGS;
    const key = `${keysPrefix}${i}`;
    msg.keys = [ key ];
    for (const k of Object.keys(opts.props)) msg.properties[k] = opts.props[k];
    if (delayLevel > 0) msg.delayTimeLevel = delayLevel;
    if (shardingKey) msg.shardingKey = shardingKey;

    let result;
    try {
      result = await producer.send(msg);
    } catch (err) {
      return fail('send', `message ${i}: ${err && err.message || err}`, 1);
    }
    const ev = {
      event: 'sent',
      client: CLIENT,
      topic: result.messageQueue ? result.messageQueue.topic : opts.topic,
      // the response header values are strings
      queueId: result.messageQueue ? Number(result.messageQueue.queueId) : undefined,
      queueOffset: Number(result.queueOffset),
      msgId: result.msgId,
      // ali-ons shows its user the broker's offsetMsgId (it sets no UNIQ_KEY)
      offsetMsgId: result.msgId,
      status: result.sendStatus,
      keys: key,
      tags: opts.tag || undefined,
      properties: Object.assign({}, opts.props),
      bodyMd5,
      bodyLen,
      index: i,
    };
    emit(ev);
    sent++;
    if (opts.queue !== undefined && ev.queueId !== opts.queue) {
      return fail('send', `message ${i} went to queue ${ev.queueId}, not ${opts.queue}`, 1);
    }
  }

  await withTimeout(producer.close(), 5000);
  await closeInnerProducer(Producer);
  emit({ event: 'done', sent });
  finish(0);
}

// ali-ons starts one hidden producer per process (group CLIENT_INNER_PRODUCER, used by the push
// consumer's send-back fallback) on the first Producer#init / Consumer#init. Create it the same way
// ourselves, first, so it gets an 'error' listener: an sdk-base object without one prints every
// error to stderr.
function installInnerProducer(Producer, options) {
  if (Producer.defaultProducer) return;
  const inner = new Producer(Object.assign({}, options, { producerGroup: 'CLIENT_INNER_PRODUCER' }));
  inner.on('error', err => logger.error('[driver] inner producer error: %s', err && err.stack || err));
  Producer.defaultProducer = inner;
}

// ali-ons starts one hidden CLIENT_INNER_PRODUCER per process; close it so the client
// unregisters and drops its connections.
async function closeInnerProducer(Producer) {
  const inner = Producer.defaultProducer;
  if (inner) {
    Producer.defaultProducer = null;
    await withTimeout(inner.close(), 3000);
  }
}

// ---------------------------------------------------------------------------------------------
// consume

async function consume(opts) {
  const mode = opts.mode || 'push';
  const model = opts.model || 'clustering';
  const from = opts.from || 'first';
  if (!['push', 'orderly', 'pull', 'lite-pull'].includes(mode)) return fail('usage', `unknown consume mode ${mode}`, 2);
  if (!['clustering', 'broadcasting'].includes(model)) return fail('usage', `unknown model ${model}`, 2);
  if (!['first', 'last'].includes(from)) return fail('usage', `unknown --from ${from}`, 2);
  if (mode === 'orderly') return fail('unsupported', 'ali-ons has no orderly push consumer', 2);
  if (mode === 'pull' || mode === 'lite-pull') return fail('unsupported', `ali-ons has no ${mode} consumer`, 2);
  if (opts.seek !== undefined) return fail('usage', '--seek is for lite-pull only', 2);
  if (opts.sql !== undefined && opts.tags !== undefined) return fail('usage', '--sql and --tags exclude each other', 2);

  const ons = loadOns();
  if (!ons) return;
  const { Consumer, Producer } = ons;

  const broadcasting = model === 'broadcasting';
  installInnerProducer(Producer, clientOptions(opts));
  const consumer = new Consumer(Object.assign(clientOptions(opts), {
    consumerGroup: opts.group,
    isBroadcast: broadcasting,
    // broadcasting: keep offsets in a local file like the Java client
    // ($HOME/.rocketmq_offsets_node/<clientId>/<group>/offsets.json)
    persistent: broadcasting,
    consumeFromWhere: from === 'first' ? 'CONSUME_FROM_FIRST_OFFSET' : 'CONSUME_FROM_LAST_OFFSET',
  }));
  // ali-ons reports recoverable trouble (offset not found, pull retries, send-back fallback) as
  // 'error' events and carries on; those go to the log, not to stdout.
  consumer.on('error', err => logger.error('[driver] consumer error: %s', err && err.stack || err));

  const expect = opts.expect;
  const linger = opts.linger || 0;
  let laterLeft = opts['reconsume-later'] || 0;
  let okCount = 0;
  let readyDone = false;
  let goalReached = false;

  const markReady = () => {
    if (!readyDone) {
      readyDone = true;
      emit({ event: 'ready', client: CLIENT });
    }
  };

  const closeAndExit = async () => {
    if (exiting) return;
    await withTimeout(consumer.close(), 5000);
    await closeInnerProducer(Producer);
    emit({ event: 'done', received: okCount });
    finish(0);
  };

  const reachGoal = () => {
    if (goalReached) return;
    goalReached = true;
    if (linger > 0) setTimeout(closeAndExit, linger * 1000);
    else setImmediate(closeAndExit);
  };

  const handler = async msg => {
    if (exiting) return undefined;
    markReady();
    const later = laterLeft > 0;
    if (later) laterLeft--;
    const body = msg.body || Buffer.alloc(0);
    const props = msg.properties || {};
    const ev = {
      event: 'received',
      client: CLIENT,
      // ali-ons has already put the original topic (RETRY_TOPIC) back for retried messages
      topic: props.RETRY_TOPIC || msg.topic,
      queueId: msg.queueId,
      queueOffset: msg.queueOffset,
      msgId: msg.msgId,
      offsetMsgId: msg.msgId,
      keys: props.KEYS || undefined,
      tags: props.TAGS || undefined,
      properties: userProperties(props),
      bodyMd5: md5hex(body),
      bodyLen: body.length,
      reconsumeTimes: msg.reconsumeTimes,
      storeTimestamp: msg.storeTimestamp,
      bornTimestamp: msg.bornTimestamp,
      action: later ? 'later' : 'ok',
    };
    emit(ev);
    if (later) {
      // ali-ons' handler for %RETRY%<group> awaits ours but drops its return value, so
      // ACTION_RETRY only works for first deliveries; a redelivery must throw to go back again.
      if (props.RETRY_TOPIC) throw new Error('sidewinder driver: reconsume later');
      return Consumer.ACTION_RETRY;
    }
    okCount++;
    if (okCount >= expect) reachGoal();
    return undefined;
  };

  let expression;
  if (opts.sql !== undefined) expression = { expressionType: 'SQL92', subString: opts.sql };
  else expression = opts.tags === undefined ? '*' : opts.tags;
  consumer.subscribe(opts.topic, expression, handler);
  await consumer.ready();

  if (expect <= 0) {
    markReady();
    reachGoal();
    return;
  }

  // "ready" once a queue of the topic is assigned (its start offset is then fixed), or once the
  // route is known and no queue came our way for a while (more consumers than queues).
  const t0 = Date.now();
  const poll = setInterval(() => {
    if (readyDone || exiting) {
      clearInterval(poll);
      return;
    }
    let assigned = false;
    for (const item of consumer.processQueueTable.values()) {
      if (item && item.messageQueue && item.messageQueue.topic === opts.topic) assigned = true;
    }
    const routed = consumer._topicSubscribeInfoTable && consumer._topicSubscribeInfoTable.has(opts.topic);
    if (assigned || (routed && Date.now() - t0 > 3000)) {
      markReady();
      clearInterval(poll);
    }
  }, 50);
}

// ---------------------------------------------------------------------------------------------
// main

function main() {
  let parsed;
  try {
    parsed = parseArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) return fail('usage', err.message, 2);
    throw err;
  }
  const { command, opts } = parsed;

  const timer = setTimeout(() => {
    fail('timeout', `no result within ${opts.timeout}s`, 3);
  }, Math.max(0, opts.timeout * 1000));
  void timer;

  openLog(command);
  process.on('uncaughtException', err => {
    logger.error('[driver] uncaught: %s', err && err.stack || err);
    fail('client', err && err.message || String(err), 1);
  });
  process.on('unhandledRejection', err => {
    // ali-ons runs background loops that can reject while closing; keep them in the log.
    logger.error('[driver] unhandled rejection: %s', err && err.stack || err);
  });

  let run;
  if (command === 'produce') run = produce(opts);
  else if (command === 'consume') run = consume(opts);
  else return fail('unsupported', 'ali-ons has no transactional producer', 2);
  run.catch(err => {
    logger.error('[driver] %s failed: %s', command, err && err.stack || err);
    fail('client', err && err.message || String(err), 1);
  });
  return undefined;
}

main();
