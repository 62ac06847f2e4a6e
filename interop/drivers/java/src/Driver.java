// Sidewinder interop driver for the stock RocketMQ Java client (rocketmq-client 4.9.8).
//
// Speaks the protocol in interop/drivers/PROTOCOL.md:
//   Driver produce  --namesrv HOST:PORT --topic T --group G --count N [options]
//   Driver consume  --namesrv HOST:PORT --topic T --group G --expect N [options]
//   Driver transact --namesrv HOST:PORT --topic T --group G --count N --answer A [options]
// Java-only extras: --serialize json|rocketmq (wire header encoding), --vip true|false (default false).
//
// Build (one javac, no build tool):
//   javac -d OUT -cp '/path/to/rocketmq-client-4.9.8-jars/*' interop/drivers/java/src/*.java
//   java -cp 'OUT:/path/to/rocketmq-client-4.9.8-jars/*' Driver produce ...
//
// stdout carries only the JSON event lines; System.out is redirected to stderr so nothing the
// client (or a logging fallback) prints can reach it, and the client's own logs go to $HOME/logs.
// No client class is touched before the system properties are set (the remoting layer reads
// rocketmq.serialize.type in a static initializer).

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.store.OffsetStore;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.impl.MQClientManager;
import org.apache.rocketmq.client.impl.consumer.DefaultMQPushConsumerImpl;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.RPCHook;

public final class Driver {
    // Routes are polled every 3 s, not 30: a scenario that waits for a client to find a topic the
    // broker made meanwhile (a %RETRY% topic, the other broker group after a master dies) waits
    // that long. Only the timing changes; RocketMQ's clients let users set it the same way.
    static final int POLL_NAMESRV_MS = 3000;
    static final int SEND_TIMEOUT_MS = 10000;
    // Route and heartbeat requests to the name server: the client's 3 s default is shorter than
    // a JVM name server's stalls on a loaded 2-core host.
    static final int API_TIMEOUT_MS = 10000;


    // "java" (rocketmq-client 4.9.8) or "java5" (5.3.2): the one source compiles against both.
    static final String CLIENT = System.getProperty("driver.client", "java");

    // ------------------------------------------------------------------ output

    static PrintStream out;
    static final Object OUT_LOCK = new Object();
    static boolean closed; // guarded by OUT_LOCK: once the final line is out nothing else is printed

    static void emit(Json j) {
        String line = j.toString();
        synchronized (OUT_LOCK) {
            if (closed) {
                return;
            }
            out.print(line);
            out.print('\n');
            out.flush();
        }
    }

    /** Prints the last line (if nobody else did yet) and terminates the JVM with the given status. */
    static void finish(Json last, int status) {
        synchronized (OUT_LOCK) {
            if (closed) {
                return; // another thread is already terminating the process
            }
            if (last != null) {
                out.print(last.toString());
                out.print('\n');
            }
            out.flush();
            closed = true;
        }
        System.err.flush();
        Runtime.getRuntime().halt(status);
    }

    static Json ev(String event) {
        return new Json().put("event", event).put("client", CLIENT);
    }

    static void fail(String kind, String message, int status) {
        finish(ev("error").put("error", kind).put("message", message), status);
    }

    static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        Throwable c = t;
        for (int depth = 0; c != null && depth < 4; depth++, c = c.getCause()) {
            if (sb.length() > 0) {
                sb.append(" <- ");
            }
            sb.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
            if (c.getCause() == c) {
                break;
            }
        }
        String s = sb.toString();
        return s.length() > 2000 ? s.substring(0, 2000) : s;
    }

    /** Minimal ordered JSON object writer (null values are omitted). */
    static final class Json {
        private final StringBuilder sb = new StringBuilder("{");
        private boolean empty = true;

        private void key(String k) {
            if (!empty) {
                sb.append(',');
            }
            empty = false;
            quote(sb, k);
            sb.append(':');
        }

        Json put(String k, Object v) {
            if (v == null) {
                return this;
            }
            key(k);
            value(sb, v);
            return this;
        }

        @SuppressWarnings("unchecked")
        static void value(StringBuilder sb, Object v) {
            if (v == null) {
                sb.append("null");
            } else if (v instanceof Number || v instanceof Boolean) {
                sb.append(v);
            } else if (v instanceof Map) {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<String, Object> e : ((Map<String, Object>) v).entrySet()) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    quote(sb, e.getKey());
                    sb.append(':');
                    value(sb, e.getValue());
                }
                sb.append('}');
            } else if (v instanceof Collection) {
                sb.append('[');
                boolean first = true;
                for (Object o : (Collection<Object>) v) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    value(sb, o);
                }
                sb.append(']');
            } else {
                quote(sb, v.toString());
            }
        }

        static void quote(StringBuilder sb, String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"': sb.append("\\\""); break;
                    case '\\': sb.append("\\\\"); break;
                    case '\n': sb.append("\\n"); break;
                    case '\r': sb.append("\\r"); break;
                    case '\t': sb.append("\\t"); break;
                    case '\b': sb.append("\\b"); break;
                    case '\f': sb.append("\\f"); break;
                    default:
                        if (c < 0x20 || c == 0x7f || c == 0x2028 || c == 0x2029 || Character.isSurrogate(c)) {
                            // surrogates are escaped too, so a lone one cannot turn into '?' on the way out
                            sb.append(String.format("\\u%04x", (int) c));
                        } else {
                            sb.append(c);
                        }
                }
            }
            sb.append('"');
        }

        @Override
        public String toString() {
            return sb.toString() + "}";
        }
    }

    // ------------------------------------------------------------------ options

    static final Set<String> KNOWN = new HashSet<>(Arrays.asList(
        "namesrv", "topic", "group", "count", "expect", "answer", "timeout", "instance",
        "mode", "batch-size", "tag", "keys-prefix", "body-prefix", "body-size", "prop",
        "delay-level", "queue", "start", "model", "tags", "sql", "from", "seek",
        "reconsume-later", "linger", "serialize", "vip", "compress-over", "request-timeout",
        "reply", "access-key", "secret-key", "keep-going", "deliver-after-ms", "callback"));

    static final Map<String, List<String>> OPTS = new LinkedHashMap<>();

    static String opt(String k, String def) {
        List<String> v = OPTS.get(k);
        return v == null ? def : v.get(v.size() - 1);
    }

    static String req(String k) {
        String v = opt(k, null);
        if (v == null || v.isEmpty()) {
            throw new UsageError("--" + k + " is required");
        }
        return v;
    }

    static <T> T parsedOpt(String k, T def, java.util.function.Function<String, T> parse, String what) {
        String v = opt(k, null);
        if (v == null) {
            return def;
        }
        try {
            return parse.apply(v.trim());
        } catch (NumberFormatException e) {
            throw new UsageError("--" + k + " wants " + what + ", got " + v);
        }
    }

    static int intOpt(String k, int def) {
        return parsedOpt(k, def, Integer::parseInt, "an integer");
    }

    static long longOpt(String k, long def) {
        return parsedOpt(k, def, Long::parseLong, "an integer");
    }

    static double doubleOpt(String k, double def) {
        return parsedOpt(k, def, Double::parseDouble, "a number");
    }

    static String oneOf(String k, String def, String... allowed) {
        String v = opt(k, def);
        for (String a : allowed) {
            if (a.equals(v)) {
                return v;
            }
        }
        throw new UsageError("--" + k + " must be one of " + String.join(", ", allowed) + ", got " + v);
    }

    static final class UsageError extends RuntimeException {
        UsageError(String m) {
            super(m);
        }
    }

    static final class Unsupported extends RuntimeException {
        Unsupported(String m) {
            super(m);
        }
    }

    static void parse(String[] args, int from) {
        for (int i = from; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--") || a.length() < 3) {
                throw new UsageError("unexpected argument " + a);
            }
            String k = a.substring(2);
            String v;
            int eq = k.indexOf('=');
            if (eq >= 0) {
                v = k.substring(eq + 1);
                k = k.substring(0, eq);
            } else {
                if (i + 1 >= args.length) {
                    throw new UsageError("--" + k + " needs a value");
                }
                v = args[++i];
            }
            if (!KNOWN.contains(k)) {
                throw new UsageError("unknown option --" + k);
            }
            OPTS.computeIfAbsent(k, x -> new ArrayList<>()).add(v);
        }
    }

    // ------------------------------------------------------------------ shared state

    static final AtomicInteger SENT = new AtomicInteger();
    static final AtomicInteger RECEIVED_OK = new AtomicInteger();
    static volatile String phase = "starting";

    static String namesrv, topic, group, instance;
    static boolean vip;
    static RPCHook hook; // AclClientRPCHook when --access-key and --secret-key are given

    static RPCHook aclHook() {
        String ak = opt("access-key", null);
        String sk = opt("secret-key", null);
        if (ak == null && sk == null) {
            return null;
        }
        if (ak == null || sk == null) {
            throw new UsageError("--access-key and --secret-key go together");
        }
        return new AclClientRPCHook(new SessionCredentials(ak, sk));
    }

    // ------------------------------------------------------------------ main

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        System.setOut(System.err); // anything else that writes to System.out lands on stderr

        String cmd = args.length > 0 ? args[0] : "";
        double timeout;
        try {
            if (!cmd.equals("produce") && !cmd.equals("consume") && !cmd.equals("transact")
                && !cmd.equals("request")) {
                throw new UsageError("usage: Driver produce|consume|transact|request --namesrv HOST:PORT --topic T --group G ...");
            }
            parse(args, 1);
            timeout = doubleOpt("timeout", 60);
            if (!(timeout > 0)) {
                throw new UsageError("--timeout must be > 0");
            }
        } catch (UsageError e) {
            fail("usage", e.getMessage(), 2);
            return;
        }
        startWatchdog(timeout, cmd);

        try {
            String serialize = opt("serialize", null);
            if (serialize != null) {
                String s = serialize.trim().toLowerCase();
                if (!s.equals("json") && !s.equals("rocketmq")) {
                    throw new UsageError("--serialize must be json or rocketmq");
                }
                System.setProperty("rocketmq.serialize.type", s.toUpperCase());
            }
            String vipS = opt("vip", "false").trim().toLowerCase();
            if (!vipS.equals("true") && !vipS.equals("false")) {
                throw new UsageError("--vip must be true or false");
            }
            vip = vipS.equals("true");
            namesrv = req("namesrv");
            topic = req("topic");
            group = req("group");
            instance = opt("instance", String.valueOf(ProcessHandle.current().pid()));
            hook = aclHook();
        } catch (UsageError e) {
            fail("usage", e.getMessage(), 2);
            return;
        }
        setupClientLogging();

        try {
            switch (cmd) {
                case "produce":
                    produce(false);
                    break;
                case "transact":
                    produce(true);
                    break;
                case "request":
                    request();
                    break;
                default:
                    consume();
            }
        } catch (UsageError e) {
            fail("usage", e.getMessage(), 2);
        } catch (Unsupported e) {
            fail("unsupported", e.getMessage(), 2);
        } catch (Throwable t) {
            fail("client", describe(t), 1);
        }
        fail("client", "driver ended without a result", 1);
    }

    static void startWatchdog(double seconds, String cmd) {
        // The limit counts from the JVM start, with a margin so the exit itself lands inside it.
        long already = 0;
        try {
            already = java.lang.management.ManagementFactory.getRuntimeMXBean().getUptime() * 1_000_000L;
            already = Math.max(0, Math.min(already, 10_000_000_000L));
        } catch (RuntimeException | LinkageError ignored) {
            // no management bean: count from now
        }
        // The JVM's exit waits up to 300 ms for threads sitting in native code (netty's epoll loops).
        long margin = Math.min(400_000_000L, (long) (seconds * 1e9 / 2));
        final long deadline = System.nanoTime() + (long) (seconds * 1e9) - already - margin;
        Thread t = new Thread(() -> {
            while (true) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                try {
                    TimeUnit.NANOSECONDS.sleep(Math.min(left, 200_000_000L));
                } catch (InterruptedException ignored) {
                    // keep waiting
                }
            }
            Json j = ev("error").put("error", "timeout")
                .put("message", "no result within " + seconds + " s (" + phase + ")");
            if (cmd.equals("consume")) {
                j.put("received", RECEIVED_OK.get());
            } else {
                j.put("sent", SENT.get());
            }
            finish(j, 3);
        }, "driver-watchdog");
        t.setDaemon(true);
        t.start();
    }

    static void setupClientLogging() {
        String home = System.getenv("HOME");
        if (home == null || home.isEmpty()) {
            home = System.getProperty("user.home");
        }
        if (System.getProperty("rocketmq.client.logRoot") == null) {
            System.setProperty("rocketmq.client.logRoot", home + "/logs");
        }
        if (System.getProperty("rocketmq.client.logUseSlf4j") == null) {
            System.setProperty("rocketmq.client.logUseSlf4j", "false");
        }
        if (System.getProperty("rocketmq.client.localOffsetStoreDir") == null) {
            System.setProperty("rocketmq.client.localOffsetStoreDir", home + "/.rocketmq_offsets");
        }
        // Initialise the client's own logger now, so the common and remoting loggers are routed
        // to its file appender before any other client class asks for a logger (4.x; the 5.x
        // client has no ClientLogger and configures its logging by itself).
        try {
            Class.forName("org.apache.rocketmq.client.log.ClientLogger").getMethod("getLog").invoke(null);
        } catch (ClassNotFoundException e) {
            // the 5.x client
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("ClientLogger.getLog", e);
        }
    }

    // ------------------------------------------------------------------ message helpers

    static final Set<String> SYSTEM_KEYS = new HashSet<>(Arrays.asList(
        "KEYS", "TAGS", "UNIQ_KEY", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID",
        "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "ORIGIN_MESSAGE_ID", "RECONSUME_TIME",
        "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "MSG_REGION", "TRACE_ON",
        "TRAN_PREPARED_QUEUE_OFFSET", "TRANSACTION_CHECK_TIMES", "CHECK_IMMUNITY_TIME_IN_SECONDS",
        "CLUSTER", "DELAY_TIME"));

    static String md5(byte[] b) {
        try {
            MessageDigest d = MessageDigest.getInstance("MD5");
            byte[] h = d.digest(b == null ? new byte[0] : b);
            StringBuilder sb = new StringBuilder();
            for (byte x : h) {
                sb.append(String.format("%02x", x & 0xff));
            }
            return sb.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static byte[] body(String prefix, long i, int size) {
        byte[] text = (prefix + i).getBytes(StandardCharsets.UTF_8);
        if (size < 0) {
            return text;
        }
        byte[] b = new byte[size];
        for (int k = 0; k < size; k++) {
            b[k] = k < text.length ? text[k] : (byte) '|';
        }
        return b;
    }

    static final class ProduceSpec {
        String tag;
        String keysPrefix;
        String bodyPrefix;
        int bodySize;
        int delayLevel;
        long deliverAfterMs;
        Map<String, String> props = new LinkedHashMap<>();
        // Sync and oneway sends: a failed send is reported as an error event and the next sent.
        boolean keepGoing;

        Message build(long i) {
            Message m = new Message(topic, body(bodyPrefix, i, bodySize));
            if (tag != null) {
                m.setTags(tag);
            }
            m.setKeys(keysPrefix + i);
            for (Map.Entry<String, String> e : props.entrySet()) {
                m.putUserProperty(e.getKey(), e.getValue());
            }
            if (delayLevel > 0) {
                m.setDelayTimeLevel(delayLevel);
            }
            if (deliverAfterMs > 0) {
                // 5.x: Message.setDeliverTimeMs, the TIMER_DELIVER_MS property; 4.9.8 has neither.
                try {
                    m.getClass().getMethod("setDeliverTimeMs", long.class)
                        .invoke(m, System.currentTimeMillis() + deliverAfterMs);
                } catch (NoSuchMethodException e) {
                    throw new Unsupported("--deliver-after-ms needs the 5.x client");
                } catch (ReflectiveOperationException e) {
                    throw new IllegalStateException("setDeliverTimeMs", e);
                }
            }
            return m;
        }
    }

    static Json sentEvent(Message m, long index, SendResult r, String status) {
        Json j = ev("sent");
        String t = m.getTopic();
        if (r != null && r.getMessageQueue() != null) {
            t = r.getMessageQueue().getTopic();
        }
        j.put("topic", t);
        if (r != null) {
            if (r.getMessageQueue() != null) {
                j.put("queueId", r.getMessageQueue().getQueueId());
            }
            j.put("queueOffset", r.getQueueOffset());
            j.put("msgId", r.getMsgId());
            j.put("offsetMsgId", r.getOffsetMsgId());
            j.put("status", r.getSendStatus() == null ? null : r.getSendStatus().name());
        } else {
            j.put("msgId", MessageClientIDSetter.getUniqID(m));
            j.put("status", status);
        }
        return finishSent(j, m, index);
    }

    static Json finishSent(Json j, Message m, long index) {
        j.put("keys", m.getKeys());
        j.put("tags", m.getTags());
        j.put("properties", userProperties(m.getProperties()));
        byte[] b = m.getBody();
        j.put("bodyMd5", md5(b));
        j.put("bodyLen", b == null ? 0 : b.length);
        j.put("index", index);
        return j;
    }

    static Map<String, Object> userProperties(Map<String, String> props) {
        Map<String, Object> r = new LinkedHashMap<>();
        if (props == null) {
            return r;
        }
        for (String k : new TreeSet<>(props.keySet())) {
            if (SYSTEM_KEYS.contains(k) || k.startsWith("__")) {
                continue;
            }
            r.put(k, props.get(k));
        }
        return r;
    }

    static String originalTopic(MessageExt m) {
        String t = m.getTopic();
        if (t != null && t.startsWith("%RETRY%")) {
            String orig = m.getProperty("RETRY_TOPIC");
            if (orig != null && !orig.isEmpty()) {
                return orig;
            }
        }
        return t;
    }

    static Json receivedEvent(MessageExt m, boolean later) {
        Json j = ev("received");
        j.put("topic", originalTopic(m));
        j.put("queueId", m.getQueueId());
        j.put("queueOffset", m.getQueueOffset());
        String msgId;
        String offsetMsgId;
        if (m instanceof MessageClientExt) {
            msgId = m.getMsgId(); // the unique key when there is one, as the client shows it
            offsetMsgId = ((MessageClientExt) m).getOffsetMsgId();
        } else {
            String uniq = MessageClientIDSetter.getUniqID(m);
            msgId = uniq != null ? uniq : m.getMsgId();
            offsetMsgId = m.getMsgId();
        }
        j.put("msgId", msgId);
        j.put("offsetMsgId", offsetMsgId);
        j.put("keys", m.getKeys());
        j.put("tags", m.getTags());
        j.put("properties", userProperties(m.getProperties()));
        byte[] b = m.getBody();
        j.put("bodyMd5", md5(b));
        j.put("bodyLen", b == null ? 0 : b.length);
        j.put("reconsumeTimes", m.getReconsumeTimes());
        j.put("storeTimestamp", m.getStoreTimestamp());
        j.put("bornTimestamp", m.getBornTimestamp());
        j.put("action", later ? "later" : "ok");
        return j;
    }

    // ------------------------------------------------------------------ produce / transact

    static void produce(boolean transact) throws Exception {
        final int count = intOpt("count", -1);
        if (count < 0) {
            throw new UsageError("--count N is required");
        }
        final String mode = oneOf("mode", "sync", "sync", "async", "oneway", "batch");
        final int batchSize = intOpt("batch-size", 10);
        if (batchSize <= 0) {
            throw new UsageError("--batch-size must be > 0");
        }
        final ProduceSpec spec = new ProduceSpec();
        spec.tag = opt("tag", null);
        spec.keysPrefix = opt("keys-prefix", "k-");
        spec.bodyPrefix = opt("body-prefix", "body-");
        spec.bodySize = intOpt("body-size", -1);
        spec.delayLevel = intOpt("delay-level", 0);
        spec.deliverAfterMs = longOpt("deliver-after-ms", 0);
        List<String> props = OPTS.getOrDefault("prop", new ArrayList<>());
        for (String p : props) {
            int eq = p.indexOf('=');
            if (eq <= 0) {
                throw new UsageError("--prop wants K=V, got " + p);
            }
            spec.props.put(p.substring(0, eq), p.substring(eq + 1));
        }
        final Integer queue = opt("queue", null) == null ? null : intOpt("queue", 0);
        final long start = longOpt("start", 0);
        String keepGoingS = opt("keep-going", "false").trim().toLowerCase();
        if (!keepGoingS.equals("true") && !keepGoingS.equals("false")) {
            throw new UsageError("--keep-going must be true or false");
        }
        spec.keepGoing = keepGoingS.equals("true");
        if (spec.keepGoing && !mode.equals("sync") && !mode.equals("oneway")) {
            throw new UsageError("--keep-going is for --mode sync or oneway");
        }
        String answer = null;
        if (transact) {
            answer = oneOf("answer", null, "commit", "rollback", "unknown-commit", "unknown-rollback",
                "unknown");
            if (!mode.equals("sync")) {
                throw new Unsupported("transactional send has no --mode " + mode + " in the Java client");
            }
            if (queue != null) {
                throw new Unsupported("TransactionMQProducer has no queue selector");
            }
        }
        // Validate properties before starting anything (putUserProperty rejects system names).
        try {
            spec.build(start);
        } catch (RuntimeException e) {
            throw new UsageError(describe(e));
        }

        if (transact) {
            transact(spec, count, start, answer);
            return;
        }

        phase = "starting producer";
        DefaultMQProducer p = new DefaultMQProducer(group, hook);
        p.setNamesrvAddr(namesrv);
        p.setMqClientApiTimeout(API_TIMEOUT_MS);
        p.setInstanceName(instance);
        p.setPollNameServerInterval(POLL_NAMESRV_MS);
        p.setVipChannelEnabled(vip);
        // Bodies above this many bytes are sent zlib-compressed (the client's default is 4096).
        p.setCompressMsgBodyOverHowmuch(intOpt("compress-over", 4096));
        // The client's 3 s default is shorter than a JVM broker's stalls on a loaded 2-core host.
        p.setSendMsgTimeout(SEND_TIMEOUT_MS);
        p.start();
        emit(ev("ready"));
        phase = "sending";

        MessageQueueSelector selector = new MessageQueueSelector() {
            @Override
            public MessageQueue select(List<MessageQueue> mqs, Message msg, Object arg) {
                int q = (Integer) arg;
                for (MessageQueue mq : mqs) {
                    if (mq.getQueueId() == q) {
                        return mq;
                    }
                }
                return mqs.get(q % mqs.size());
            }
        };

        boolean ok = true;
        switch (mode) {
            case "sync":
                ok = sendEach(spec, start, count, (m, i) -> {
                    SendResult r = queue == null ? p.send(m) : p.send(m, selector, queue);
                    return sentEvent(m, i, r, null);
                });
                break;
            case "oneway":
                ok = sendEach(spec, start, count, (m, i) -> {
                    if (queue == null) {
                        p.sendOneway(m);
                    } else {
                        p.sendOneway(m, selector, queue);
                    }
                    return sentEvent(m, i, null, "ONEWAY");
                });
                break;
            case "async": {
                final Semaphore window = new Semaphore(512);
                final CountDownLatch all = new CountDownLatch(count);
                final AtomicInteger failed = new AtomicInteger();
                for (long i = start; i < start + count; i++) {
                    final long idx = i;
                    final Message m = spec.build(i);
                    window.acquire();
                    SendCallback cb = new SendCallback() {
                        @Override
                        public void onSuccess(SendResult r) {
                            emit(sentEvent(m, idx, r, null));
                            SENT.incrementAndGet();
                            window.release();
                            all.countDown();
                        }

                        @Override
                        public void onException(Throwable e) {
                            emit(ev("error").put("error", "send").put("message", describe(e)).put("index", idx));
                            failed.incrementAndGet();
                            window.release();
                            all.countDown();
                        }
                    };
                    try {
                        if (queue == null) {
                            p.send(m, cb);
                        } else {
                            p.send(m, selector, queue, cb);
                        }
                    } catch (Exception e) {
                        cb.onException(e);
                    }
                }
                phase = "waiting for async send callbacks";
                all.await();
                ok = failed.get() == 0;
                break;
            }
            case "batch": {
                MessageQueue target = null;
                if (queue != null) {
                    // 4.9.8 has no selector overload for batches: pick the queue the same way the
                    // selector above does, out of the client's own publish queue list.
                    List<MessageQueue> mqs = p.fetchPublishMessageQueues(topic);
                    if (mqs.isEmpty()) {
                        throw new IllegalStateException("no publish queues for " + topic);
                    }
                    target = selector.select(mqs, null, queue);
                }
                for (long i = start; i < start + count && ok; i += batchSize) {
                    List<Message> chunk = new ArrayList<>();
                    for (long k = i; k < Math.min(start + count, i + batchSize); k++) {
                        chunk.add(spec.build(k));
                    }
                    try {
                        SendResult r = target == null ? p.send(chunk) : p.send(chunk, target);
                        String[] offIds = r.getOffsetMsgId() == null ? new String[0] : r.getOffsetMsgId().split(",");
                        String[] ids = r.getMsgId() == null ? new String[0] : r.getMsgId().split(",");
                        for (int k = 0; k < chunk.size(); k++) {
                            Message m = chunk.get(k);
                            Json j = ev("sent");
                            j.put("topic", r.getMessageQueue() != null ? r.getMessageQueue().getTopic() : topic);
                            if (r.getMessageQueue() != null) {
                                j.put("queueId", r.getMessageQueue().getQueueId());
                            }
                            j.put("queueOffset", r.getQueueOffset() + k);
                            String id = MessageClientIDSetter.getUniqID(m);
                            j.put("msgId", id != null ? id : (k < ids.length ? ids[k] : null));
                            j.put("offsetMsgId", offIds.length == chunk.size() ? offIds[k] : null);
                            j.put("status", r.getSendStatus() == null ? null : r.getSendStatus().name());
                            emit(finishSent(j, m, i + k));
                            SENT.incrementAndGet();
                        }
                    } catch (Exception e) {
                        emit(ev("error").put("error", "send").put("message", describe(e)).put("index", i));
                        ok = false;
                    }
                }
                break;
            }
            default:
                throw new UsageError("bad mode " + mode);
        }

        phase = "shutting down producer";
        p.shutdown();
        if (ok) {
            finish(ev("done").put("sent", SENT.get()), 0);
        } else {
            finish(null, 1);
        }
    }

    /** DefaultMQProducer.request: each message waits for its reply (a replier's createReplyMessage). */
    static void request() throws Exception {
        final int count = intOpt("count", -1);
        if (count < 0) {
            throw new UsageError("--count N is required");
        }
        final long requestTimeoutMs = (long) (doubleOpt("request-timeout", 10) * 1000);
        final boolean callback = oneOf("callback", "false", "true", "false").equals("true");
        final ProduceSpec spec = new ProduceSpec();
        spec.tag = opt("tag", null);
        spec.keysPrefix = opt("keys-prefix", "k-");
        spec.bodyPrefix = opt("body-prefix", "body-");
        spec.bodySize = intOpt("body-size", -1);
        final long start = longOpt("start", 0);
        phase = "starting requester";
        DefaultMQProducer p = new DefaultMQProducer(group, hook);
        p.setNamesrvAddr(namesrv);
        p.setMqClientApiTimeout(API_TIMEOUT_MS);
        p.setInstanceName(instance);
        p.setPollNameServerInterval(POLL_NAMESRV_MS);
        p.setVipChannelEnabled(vip);
        p.start();
        emit(ev("ready"));
        boolean ok = true;
        for (long i = start; i < start + count; i++) {
            phase = "requesting " + i;
            Message m = spec.build(i);
            try {
                Message reply = callback ? requestWithCallback(p, m, requestTimeoutMs) : p.request(m, requestTimeoutMs);
                Json j = ev("replied");
                j.put("index", i);
                j.put("requestCorrelationId", m.getProperty("CORRELATION_ID"));
                j.put("correlationId", reply.getProperty("CORRELATION_ID"));
                j.put("topic", reply.getTopic());
                j.put("msgType", reply.getProperty("MSG_TYPE"));
                j.put("replyToClient", reply.getProperty("REPLY_TO_CLIENT"));
                j.put("requestBodyMd5", md5(m.getBody()));
                byte[] b = reply.getBody();
                j.put("bodyMd5", md5(b));
                j.put("bodyLen", b == null ? 0 : b.length);
                emit(j);
                SENT.incrementAndGet();
            } catch (Exception e) {
                emit(ev("error").put("error", "request").put("message", describe(e)).put("index", i));
                ok = false;
                break;
            }
        }
        phase = "shutting down requester";
        p.shutdown();
        if (ok) {
            finish(ev("done").put("replied", SENT.get()), 0);
        } else {
            finish(null, 1);
        }
    }

    /** request(msg, RequestCallback, timeout), waited for: the reply, or the callback's exception. */
    static Message requestWithCallback(DefaultMQProducer p, Message m, long timeoutMs) throws Exception {
        final java.util.concurrent.CompletableFuture<Message> done = new java.util.concurrent.CompletableFuture<>();
        p.request(m, new org.apache.rocketmq.client.producer.RequestCallback() {
            @Override
            public void onSuccess(Message reply) {
                // 5.3.2 calls this once with null when the request is sent, then with the reply.
                if (reply != null) {
                    done.complete(reply);
                }
            }

            @Override
            public void onException(Throwable e) {
                done.completeExceptionally(e);
            }
        }, timeoutMs);
        try {
            return done.get(timeoutMs + 5000, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
        }
    }

    /** With --reply true: answers each delivered request (createReplyMessage, body "reply-" + the request's). */
    static DefaultMQProducer replier;

    static void answer(MessageExt m) {
        if (replier == null) {
            return;
        }
        Json j = ev("answered");
        j.put("correlationId", m.getProperty("CORRELATION_ID"));
        try {
            byte[] prefix = "reply-".getBytes(StandardCharsets.UTF_8);
            byte[] body = new byte[prefix.length + m.getBody().length];
            System.arraycopy(prefix, 0, body, 0, prefix.length);
            System.arraycopy(m.getBody(), 0, body, prefix.length, m.getBody().length);
            Message reply = org.apache.rocketmq.client.utils.MessageUtil.createReplyMessage(m, body);
            SendResult r = replier.send(reply, 10000);
            j.put("topic", reply.getTopic());
            j.put("status", r.getSendStatus().name());
            j.put("bodyMd5", md5(body));
        } catch (Exception e) {
            j.put("error", describe(e));
        }
        emit(j);
    }

    interface OneSend {
        Json send(Message m, long index) throws Exception;
    }

    /** Sends messages one at a time, printing each result; false after the first failure. */
    static boolean sendEach(ProduceSpec spec, long start, int count, OneSend one) {
        for (long i = start; i < start + count; i++) {
            Message m = spec.build(i);
            try {
                emit(one.send(m, i));
                SENT.incrementAndGet();
            } catch (Exception e) {
                emit(ev("error").put("error", "send").put("message", describe(e)).put("index", i));
                if (!spec.keepGoing) {
                    return false;
                }
            }
        }
        return true;
    }

    static void transact(ProduceSpec spec, int count, long start, String answer) throws Exception {
        final LocalTransactionState local;
        final LocalTransactionState onCheck;
        switch (answer) {
            case "commit":
                local = LocalTransactionState.COMMIT_MESSAGE;
                onCheck = LocalTransactionState.COMMIT_MESSAGE;
                break;
            case "rollback":
                local = LocalTransactionState.ROLLBACK_MESSAGE;
                onCheck = LocalTransactionState.ROLLBACK_MESSAGE;
                break;
            case "unknown-commit":
                local = LocalTransactionState.UNKNOW;
                onCheck = LocalTransactionState.COMMIT_MESSAGE;
                break;
            case "unknown":
                // Leaves half messages pending: the run ends without waiting for any check.
                local = LocalTransactionState.UNKNOW;
                onCheck = LocalTransactionState.UNKNOW;
                break;
            default:
                local = LocalTransactionState.UNKNOW;
                onCheck = LocalTransactionState.ROLLBACK_MESSAGE;
        }
        final String checkAnswer = onCheck == LocalTransactionState.COMMIT_MESSAGE ? "commit"
            : onCheck == LocalTransactionState.ROLLBACK_MESSAGE ? "rollback" : "unknown";
        final Set<String> finalized = ConcurrentHashMap.newKeySet();
        final AtomicLong lastCheck = new AtomicLong();

        phase = "starting transaction producer";
        TransactionMQProducer p = new TransactionMQProducer(group, hook);
        p.setNamesrvAddr(namesrv);
        p.setMqClientApiTimeout(API_TIMEOUT_MS);
        p.setInstanceName(instance);
        p.setSendMsgTimeout(SEND_TIMEOUT_MS);
        p.setPollNameServerInterval(POLL_NAMESRV_MS);
        p.setVipChannelEnabled(vip);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return local;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                String txId = msg.getTransactionId();
                String uniq = MessageClientIDSetter.getUniqID(msg);
                if (txId == null) {
                    txId = uniq;
                }
                emit(ev("checked")
                    .put("transactionId", txId)
                    .put("msgId", uniq != null ? uniq : msg.getMsgId())
                    .put("topic", originalTopic(msg))
                    .put("keys", msg.getKeys())
                    .put("answer", checkAnswer));
                if (txId != null) {
                    finalized.add(txId);
                }
                lastCheck.set(System.nanoTime());
                return onCheck;
            }
        });
        p.start();
        emit(ev("ready"));
        phase = "sending transactional messages";

        List<String> txIds = new ArrayList<>();
        boolean ok = true;
        for (long i = start; i < start + count; i++) {
            Message m = spec.build(i);
            try {
                TransactionSendResult r = p.sendMessageInTransaction(m, null);
                // 4.9.8 copies neither the transaction id nor the offset id into the
                // TransactionSendResult; the id it hands the listener is on the message itself.
                String txId = r.getTransactionId() != null ? r.getTransactionId() : m.getTransactionId();
                Json j = sentEvent(m, i, r, null);
                j.put("transactionId", txId);
                j.put("localState", r.getLocalTransactionState() == null ? null : r.getLocalTransactionState().name());
                emit(j);
                SENT.incrementAndGet();
                if (r.getSendStatus() != SendStatus.SEND_OK) {
                    continue; // the client answered ROLLBACK itself; no check will come
                }
                if (txId == null) {
                    throw new IllegalStateException("no transaction id for message " + i);
                }
                txIds.add(txId);
                if (r.getLocalTransactionState() != LocalTransactionState.UNKNOW) {
                    finalized.add(txId); // committed or rolled back by the local answer
                }
            } catch (Exception e) {
                emit(ev("error").put("error", "send").put("message", describe(e)).put("index", i));
                ok = false;
                break;
            }
        }
        if (ok && local == LocalTransactionState.UNKNOW && onCheck != LocalTransactionState.UNKNOW) {
            phase = "waiting for transaction checks (" + txIds.size() + " sent)";
            while (!finalized.containsAll(txIds)) {
                Thread.sleep(50);
            }
            // the client sends END_TRANSACTION (oneway) after the listener returns: give it a moment
            while (System.nanoTime() - lastCheck.get() < 500_000_000L) {
                Thread.sleep(50);
            }
        }
        phase = "shutting down producer";
        p.shutdown();
        if (ok) {
            finish(ev("done").put("sent", SENT.get()), 0);
        } else {
            finish(null, 1);
        }
    }

    // ------------------------------------------------------------------ consume

    static int expect;
    static int reconsumeLater;
    static final AtomicInteger DELIVERIES = new AtomicInteger();
    static final CountDownLatch REACHED = new CountDownLatch(1);

    /** Decides the answer for one delivery, prints it, and counts it. Returns true for "later". */
    static boolean deliver(MessageExt m) {
        boolean later = DELIVERIES.getAndIncrement() < reconsumeLater;
        emit(receivedEvent(m, later));
        if (!later) {
            answer(m);
        }
        if (!later && RECEIVED_OK.incrementAndGet() >= expect) {
            REACHED.countDown();
        }
        return later;
    }

    static void consume() throws Exception {
        expect = intOpt("expect", -1);
        if (expect < 0) {
            throw new UsageError("--expect N is required");
        }
        if (expect == 0) {
            REACHED.countDown();
        }
        final String mode = oneOf("mode", "push", "push", "orderly", "pop", "pull", "lite-pull");
        final String model = oneOf("model", "clustering", "clustering", "broadcasting");
        final String tags = opt("tags", "*");
        final String sql = opt("sql", null);
        final String from = oneOf("from", "first", "first", "last");
        final Long seek = opt("seek", null) == null ? null : longOpt("seek", 0);
        reconsumeLater = intOpt("reconsume-later", 0);
        final double linger = doubleOpt("linger", 0);
        if (seek != null && !mode.equals("lite-pull")) {
            throw new UsageError("--seek is for --mode lite-pull only");
        }
        final String reply = oneOf("reply", "false", "true", "false");
        if (reply.equals("true")) {
            if (!mode.equals("push") && !mode.equals("orderly")) {
                throw new UsageError("--reply is for push consumers");
            }
            phase = "starting replier";
            replier = new DefaultMQProducer(group + "-replier", hook);
            replier.setNamesrvAddr(namesrv);
            replier.setMqClientApiTimeout(API_TIMEOUT_MS);
            replier.setInstanceName(instance + "-replier");
            replier.setPollNameServerInterval(POLL_NAMESRV_MS);
            replier.setVipChannelEnabled(vip);
            replier.start();
        }
        final MessageModel mm = model.equals("broadcasting") ? MessageModel.BROADCASTING : MessageModel.CLUSTERING;
        final ConsumeFromWhere cfw = from.equals("first")
            ? ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET : ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET;

        switch (mode) {
            case "push":
            case "orderly":
            case "pop":
                push(mode, mm, cfw, tags, sql, linger);
                break;
            case "pull":
                pull(mm, from, tags, sql, linger);
                break;
            default:
                litePull(mm, cfw, tags, sql, seek, linger);
        }
    }

    static void lingerAfterReached(double linger) throws InterruptedException {
        phase = "consuming (" + RECEIVED_OK.get() + " of " + expect + ")";
        while (!REACHED.await(200, TimeUnit.MILLISECONDS)) {
            phase = "consuming (" + RECEIVED_OK.get() + " of " + expect + ")";
        }
        phase = "lingering";
        if (linger > 0) {
            Thread.sleep((long) (linger * 1000));
        }
    }

    static void push(String mode, MessageModel mm, ConsumeFromWhere cfw, String tags, String sql, double linger)
        throws Exception {
        phase = "starting push consumer";
        final boolean orderly = mode.equals("orderly");
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group, hook, new AllocateMessageQueueAveragely());
        if (mode.equals("pop")) {
            // 5.x: the broker assigns the queues (QUERY_ASSIGNMENT) and, for a group in POP mode,
            // the client pops from them. 4.9.8 has no such switch.
            try {
                c.getClass().getMethod("setClientRebalance", boolean.class).invoke(c, false);
            } catch (NoSuchMethodException e) {
                throw new Unsupported("--mode pop needs the 5.x client");
            }
        }
        c.setNamesrvAddr(namesrv);
        c.setMqClientApiTimeout(API_TIMEOUT_MS);
        c.setInstanceName(instance);
        c.setPollNameServerInterval(POLL_NAMESRV_MS);
        c.setVipChannelEnabled(vip);
        c.setMessageModel(mm);
        c.setConsumeFromWhere(cfw);
        c.setConsumeMessageBatchMaxSize(1);
        if (sql != null) {
            c.subscribe(topic, MessageSelector.bySql(sql));
        } else {
            c.subscribe(topic, tags);
        }
        if (orderly) {
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                boolean later = false;
                for (MessageExt m : msgs) {
                    later |= deliver(m);
                }
                return later ? ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT : ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                boolean later = false;
                for (MessageExt m : msgs) {
                    later |= deliver(m);
                }
                return later ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        c.start();
        ScheduledExecutorService commits = commitEverySecond(c);
        emit(ev("ready"));
        lingerAfterReached(linger);
        phase = "committing offsets";
        commits.shutdownNow();
        commitConsumed(c);
        phase = "shutting down consumer";
        c.shutdown();
        finish(ev("done").put("received", RECEIVED_OK.get()), 0);
    }

    /**
     * The client's periodic offset commit (its own persistConsumerOffset, oneway), every second
     * from the start: the client's timer first runs 10 s after it starts (MQClientInstance's
     * fixed initial delay), then every persistConsumerOffsetInterval, so a scenario asking the
     * broker for an online consumer's offsets waited ten seconds for the first.
     */
    static ScheduledExecutorService commitEverySecond(DefaultMQPushConsumer c) {
        ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "driver-commit");
            t.setDaemon(true);
            return t;
        });
        if (c.getMessageModel() == MessageModel.CLUSTERING) {
            DefaultMQPushConsumerImpl impl = c.getDefaultMQPushConsumerImpl();
            timer.scheduleAtFixedRate(impl::persistConsumerOffset, 1, 1, TimeUnit.SECONDS);
        }
        return timer;
    }

    /**
     * A clustering push consumer's offsets, committed synchronously before its shutdown commits
     * them again oneway. The client's first periodic commit comes 10 s after it starts and the
     * shutdown's is oneway (a loaded machine can lose it), so without this a consumer that read
     * everything and left could leave the broker without its offsets, and scenarios lingered
     * for seconds hoping for a periodic commit. The same UPDATE_CONSUMER_OFFSET request, sent
     * as the client's own updateConsumeOffsetToBroker(mq, offset, isOneway=false) sends it.
     */
    static void commitConsumed(DefaultMQPushConsumer c) throws Exception {
        if (c.getMessageModel() != MessageModel.CLUSTERING) {
            return;  // broadcasting keeps its offsets in a local file
        }
        DefaultMQPushConsumerImpl impl = c.getDefaultMQPushConsumerImpl();
        Map<MessageQueue, ProcessQueue> queues = impl.getRebalanceImpl().getProcessQueueTable();
        // A listener's return is followed by the removal of its messages from the queue's
        // in-flight count, then the offset's update: until every count is 0 (bounded), then
        // the moment the update after the last removal takes.
        long deadline = System.nanoTime() + 3_000_000_000L;
        while (System.nanoTime() < deadline
            && queues.values().stream().anyMatch(pq -> pq.getMsgCount().get() > 0)) {
            Thread.sleep(20);
        }
        Thread.sleep(50);
        OffsetStore store = impl.getOffsetStore();
        for (MessageQueue mq : queues.keySet()) {
            long offset = store.readOffset(mq, ReadOffsetType.READ_FROM_MEMORY);
            if (offset >= 0) {
                try {
                    store.updateConsumeOffsetToBroker(mq, offset, false);
                } catch (Exception e) {
                    // The shutdown's oneway commit follows; the scenario judges what arrived.
                    System.err.println("[driver] synchronous commit of " + mq + " failed: " + e);
                }
            }
        }
    }

    /** DefaultMQPullConsumer over every queue of the topic, starting at its min (first) or max (last) offset. */
    static void pull(MessageModel mm, String from, String tags, String sql, double linger) throws Exception {
        phase = "starting pull consumer";
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(group, hook);
        c.setNamesrvAddr(namesrv);
        c.setMqClientApiTimeout(API_TIMEOUT_MS);
        c.setInstanceName(instance);
        c.setPollNameServerInterval(POLL_NAMESRV_MS);
        c.setVipChannelEnabled(vip);
        c.setMessageModel(mm);
        c.start();
        Set<MessageQueue> queues = c.fetchSubscribeMessageQueues(topic);
        if (sql != null) {
            // The client refuses SQL pulls to a broker whose version it has not learnt from a
            // heartbeat response, and a bare DefaultMQPullConsumer neither routes nor heartbeats
            // its topic before the first pull: do both now on the consumer's own client instance.
            MQClientInstance factory = MQClientManager.getInstance().getOrCreateMQClientInstance(c);
            factory.updateTopicRouteInfoFromNameServer(topic);
            factory.sendHeartbeatToAllBrokerWithLock();
        }
        final Map<MessageQueue, Long> next = new LinkedHashMap<>();
        for (MessageQueue mq : sortQueues(queues)) {
            next.put(mq, from.equals("first") ? c.minOffset(mq) : c.maxOffset(mq));
        }
        // Retried messages (--reconsume-later) come back on the group's retry topic: read it too.
        final String retryTopic = "%RETRY%" + group;
        final Map<MessageQueue, Long> retryNext = new LinkedHashMap<>();
        boolean retryKnown = false;
        long nextRetryLookup = 0;
        if (reconsumeLater > 0) {
            try {
                for (MessageQueue mq : sortQueues(c.fetchSubscribeMessageQueues(retryTopic))) {
                    retryNext.put(mq, from.equals("first") ? c.minOffset(mq) : c.maxOffset(mq));
                }
                retryKnown = true;
            } catch (Exception e) {
                // the broker creates the retry topic on the first send-back
            }
        }
        final MessageSelector selector = sql != null ? MessageSelector.bySql(sql) : null;
        emit(ev("ready"));

        long lingerUntil = Long.MAX_VALUE;
        boolean laterSent = false;
        while (true) {
            if (REACHED.getCount() == 0 && lingerUntil == Long.MAX_VALUE) {
                lingerUntil = System.nanoTime() + (long) (linger * 1e9);
                phase = "lingering";
            }
            if (System.nanoTime() >= lingerUntil) {
                break;
            }
            if (lingerUntil == Long.MAX_VALUE) {
                phase = "pulling (" + RECEIVED_OK.get() + " of " + expect + ")";
            }
            boolean any = false;
            for (Map.Entry<MessageQueue, Long> e : next.entrySet()) {
                MessageQueue mq = e.getKey();
                PullResult r = selector != null
                    ? c.pull(mq, selector, e.getValue(), 32)
                    : c.pull(mq, tags, e.getValue(), 32);
                if (r.getMsgFoundList() != null) {
                    for (MessageExt m : r.getMsgFoundList()) {
                        any = true;
                        if (deliver(m)) {
                            c.sendMessageBack(m, 0);
                            laterSent = true;
                        }
                    }
                }
                if (r.getNextBeginOffset() != e.getValue()) {
                    e.setValue(r.getNextBeginOffset());
                    c.updateConsumeOffset(mq, r.getNextBeginOffset());
                }
            }
            if (laterSent && !retryKnown && System.nanoTime() >= nextRetryLookup) {
                try {
                    for (MessageQueue mq : sortQueues(c.fetchSubscribeMessageQueues(retryTopic))) {
                        retryNext.put(mq, c.minOffset(mq));
                    }
                    retryKnown = true;
                } catch (Exception ex) {
                    nextRetryLookup = System.nanoTime() + 500_000_000L;
                }
            }
            for (Map.Entry<MessageQueue, Long> e : retryNext.entrySet()) {
                PullResult r = c.pull(e.getKey(), "*", e.getValue(), 32);
                if (r.getMsgFoundList() != null) {
                    for (MessageExt m : r.getMsgFoundList()) {
                        any = true;
                        if (deliver(m)) {
                            c.sendMessageBack(m, 0);
                        }
                    }
                }
                e.setValue(r.getNextBeginOffset());
            }
            if (!any) {
                Thread.sleep(100);
            }
        }
        phase = "shutting down consumer";
        try {
            // DefaultMQPullConsumer only persists offsets of rebalanced queues; push ours explicitly.
            c.getOffsetStore().persistAll(new HashSet<>(next.keySet()));
        } catch (Exception ignored) {
            // best effort
        }
        c.shutdown();
        finish(ev("done").put("received", RECEIVED_OK.get()), 0);
    }

    /** DefaultLitePullConsumer: assign every queue, optional seek, auto-commit off, commitSync after each poll. */
    static void litePull(MessageModel mm, ConsumeFromWhere cfw, String tags, String sql, Long seek, double linger)
        throws Exception {
        if (sql != null) {
            throw new Unsupported("DefaultLitePullConsumer 4.9.8 assign mode takes only tag expressions");
        }
        if (reconsumeLater > 0) {
            throw new Unsupported("DefaultLitePullConsumer has no reconsume-later");
        }
        phase = "starting lite pull consumer";
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group, hook);
        c.setNamesrvAddr(namesrv);
        c.setMqClientApiTimeout(API_TIMEOUT_MS);
        c.setInstanceName(instance);
        c.setPollNameServerInterval(POLL_NAMESRV_MS);
        c.setVipChannelEnabled(vip);
        c.setMessageModel(mm);
        c.setConsumeFromWhere(cfw);
        c.setAutoCommit(false);
        if (!"*".equals(tags.trim())) {
            c.setSubExpressionForAssign(topic, tags);
        }
        c.start();
        Collection<MessageQueue> mqs = sortQueues(c.fetchMessageQueues(topic));
        c.assign(mqs);
        if (seek != null) {
            // assign() has already started a pull task per queue. A task whose pull from the old offset
            // returns while seek() holds the queue lock can still cache those messages once seek()'s
            // replacement task has consumed the seek offset (DefaultLitePullConsumerImpl 4.9.x, seen in CI).
            // Paused, the replacement task waits a full pause period before it reads the seek offset,
            // so the stale pull finds it still set and drops its messages.
            c.pause(mqs);
            for (MessageQueue mq : mqs) {
                c.seek(mq, seek);
            }
            Thread.sleep(200);
            c.resume(mqs);
        }
        emit(ev("ready"));
        long lingerUntil = Long.MAX_VALUE;
        while (true) {
            if (REACHED.getCount() == 0 && lingerUntil == Long.MAX_VALUE) {
                lingerUntil = System.nanoTime() + (long) (linger * 1e9);
                phase = "lingering";
            }
            long now = System.nanoTime();
            if (now >= lingerUntil) {
                break;
            }
            if (lingerUntil == Long.MAX_VALUE) {
                phase = "polling (" + RECEIVED_OK.get() + " of " + expect + ")";
            }
            long wait = lingerUntil == Long.MAX_VALUE ? 500 : Math.max(1, Math.min(500, (lingerUntil - now) / 1_000_000));
            List<MessageExt> msgs = c.poll(wait);
            if (msgs != null && !msgs.isEmpty()) {
                for (MessageExt m : msgs) {
                    deliver(m);
                }
                c.commitSync();
            }
        }
        phase = "shutting down consumer";
        c.shutdown();
        finish(ev("done").put("received", RECEIVED_OK.get()), 0);
    }

    static List<MessageQueue> sortQueues(Collection<MessageQueue> qs) {
        List<MessageQueue> l = new ArrayList<>(qs);
        l.sort((a, b) -> {
            int x = a.getBrokerName().compareTo(b.getBrokerName());
            return x != 0 ? x : Integer.compare(a.getQueueId(), b.getQueueId());
        });
        return l;
    }

    private Driver() {
    }
}
