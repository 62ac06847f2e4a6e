// Sidewinder interop driver for the stock RocketMQ 5 Java gRPC client, Maven Central
// org.apache.rocketmq:rocketmq-client-java:5.0.8 (one shaded jar).
//
// Speaks the protocol of interop/drivers/PROTOCOL.md (JSON event lines on stdout, the same exit
// statuses) over a RocketMQ 5 gRPC endpoint instead of a name server; its section "java5grpc"
// there lists the actions, options and events, which are those of the python5 driver:
//   GrpcDriver produce        --endpoints H:P --topic T --count N [options]
//   GrpcDriver transact       --endpoints H:P --topic T --count N --answer A [options]
//   GrpcDriver simple-consume --endpoints H:P --topic T --group G --expect N [options]
//   GrpcDriver push-consume   --endpoints H:P --topic T --group G --expect N [options]
//   GrpcDriver route          --endpoints H:P --topic T
//
// Build (one javac, no build tool; `python -m interop.install java5grpc` does it):
//   javac -d OUT -cp rocketmq-client-java-5.0.8.jar interop/drivers/java5grpc/src/*.java
//   java -cp OUT:rocketmq-client-java-5.0.8.jar GrpcDriver produce ...
//
// The client talks plaintext (its default is TLS: enableSsl(false)). stdout carries only the
// JSON events: System.out is pointed at stderr before any client class loads, and the client's
// own logs go to $HOME/logs/rocketmq (-Drocketmq.log.root).
//
// The client's public API is used throughout. What its MessageView drops from the wire (the
// queue id and offset, store time and host, the message type) and when an ack or an
// EndTransaction was answered are read beside it, never changed: every call goes through the
// client's gRPC LoggingInterceptor, which hands the request and response objects to a TRACE
// log call. The jar's shaded slf4j has no binding (it logs nothing), so the driver brings one,
// StaticLoggerBinder.java: the client's log to a file, and those TRACE arguments to tap().

import apache.rocketmq.v2.AckMessageResponse;
import apache.rocketmq.v2.AckMessageResultEntry;
import apache.rocketmq.v2.Code;
import apache.rocketmq.v2.EndTransactionRequest;
import apache.rocketmq.v2.EndTransactionResponse;
import apache.rocketmq.v2.QueryRouteRequest;
import apache.rocketmq.v2.QueryRouteResponse;
import apache.rocketmq.v2.ReceiveMessageResponse;
import apache.rocketmq.v2.Resource;
import apache.rocketmq.v2.SystemProperties;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.ProducerBuilder;
import org.apache.rocketmq.client.apis.producer.RecallReceipt;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionChecker;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;
import org.apache.rocketmq.client.java.impl.ClientImpl;
import org.apache.rocketmq.client.java.impl.producer.SendReceiptImpl;
import org.apache.rocketmq.client.java.message.MessageViewImpl;
import org.apache.rocketmq.client.java.route.MessageQueueImpl;
import org.apache.rocketmq.shaded.io.grpc.StatusRuntimeException;
import org.apache.rocketmq.shaded.org.slf4j.impl.StaticLoggerBinder;

public final class GrpcDriver {
    static final String CLIENT = "java5grpc";

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

    /** Prints the last line (unless another thread already did) and ends the JVM at once. */
    static void finish(Json last, int status) {
        synchronized (OUT_LOCK) {
            if (closed) {
                return;
            }
            out.print(last.toString());
            out.print('\n');
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

    /** An error event for `t`: its message, the v2 status code it carries, or its gRPC status. */
    static void fail(String kind, Throwable t, int status, Object... extra) {
        finish(describe(ev("error").put("error", kind), t, extra), status);
    }

    static final Pattern RESPONSE_CODE = Pattern.compile("response-code=(\\d+)");

    static Json describe(Json j, Throwable t, Object... extra) {
        StringBuilder sb = new StringBuilder();
        String grpcStatus = null;
        Integer code = null;
        Throwable c = t;
        for (int depth = 0; c != null && depth < 6; depth++, c = c.getCause()) {
            if (c instanceof ExecutionException || c instanceof java.util.concurrent.CompletionException) {
                continue;
            }
            if (sb.length() > 0) {
                sb.append(" <- ");
            }
            sb.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
            if (grpcStatus == null && c instanceof StatusRuntimeException) {
                grpcStatus = ((StatusRuntimeException) c).getStatus().getCode().name();
            }
            if (code == null && c.getMessage() != null) {
                Matcher m = RESPONSE_CODE.matcher(c.getMessage());
                if (m.find()) {
                    code = Integer.parseInt(m.group(1));
                }
            }
            if (c.getCause() == c) {
                break;
            }
        }
        String message = sb.length() > 2000 ? sb.substring(0, 2000) : sb.toString();
        j.put("message", message).put("grpcStatus", grpcStatus);
        if (code != null) {
            j.put("code", code).put("codeName", codeName(code));
        }
        for (int i = 0; i + 1 < extra.length; i += 2) {
            j.put((String) extra[i], extra[i + 1]);
        }
        return j;
    }

    static String codeName(int code) {
        Code c = Code.forNumber(code);
        return c == null ? Integer.toString(code) : c.name();
    }

    /** Minimal ordered JSON object writer (null values are omitted). */
    static final class Json {
        private final StringBuilder sb = new StringBuilder("{");
        private boolean empty = true;

        Json put(String k, Object v) {
            if (v == null) {
                return this;
            }
            if (!empty) {
                sb.append(',');
            }
            empty = false;
            quote(sb, k);
            sb.append(':');
            value(sb, v);
            return this;
        }

        @SuppressWarnings("unchecked")
        static void value(StringBuilder sb, Object v) {
            if (v == null) {
                sb.append("null");
            } else if (v instanceof Number || v instanceof Boolean) {
                sb.append(v);
            } else if (v instanceof Json) {
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
                    default:
                        if (c < 0x20 || c == 0x7f || c == 0x2028 || c == 0x2029 || Character.isSurrogate(c)) {
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
            return sb + "}";
        }
    }

    // ------------------------------------------------------------------ options

    static final List<String> ACTIONS =
        Arrays.asList("produce", "transact", "simple-consume", "push-consume", "route");
    static final Set<String> KNOWN = new HashSet<>(Arrays.asList(
        "endpoints", "topic", "group", "timeout", "request-timeout", "namespace", "access-key",
        "secret-key", "count", "mode", "tag", "keys-prefix", "body-prefix", "body-size", "prop",
        "start", "message-group", "deliver-after-ms", "keep-going", "answer", "expect", "tags",
        "sql", "linger", "batch-size", "invisible-duration", "await-duration", "no-ack",
        "reconsume-later", "threads", "recall"));
    // Given bare (`--no-ack`) or with a value (`--no-ack true`, as interop/drivers.py writes them).
    static final Set<String> FLAGS = new HashSet<>(Arrays.asList("keep-going", "no-ack", "recall"));
    static final List<String> ANSWERS =
        Arrays.asList("commit", "rollback", "unknown-commit", "unknown-rollback", "unknown");

    static final Map<String, List<String>> OPTS = new LinkedHashMap<>();

    static final class UsageError extends RuntimeException {
        UsageError(String m) {
            super(m);
        }
    }

    static void parse(String[] args) {
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--")) {
                throw new UsageError("unexpected argument " + a);
            }
            String k = a.substring(2);
            if (!KNOWN.contains(k)) {
                throw new UsageError("unknown option --" + k);
            }
            String v;
            if (FLAGS.contains(k) && (i + 1 >= args.length || args[i + 1].startsWith("--"))) {
                v = "true";
            } else {
                if (i + 1 >= args.length) {
                    throw new UsageError("--" + k + " needs a value");
                }
                v = args[++i];
            }
            OPTS.computeIfAbsent(k, x -> new ArrayList<>()).add(v);
        }
    }

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

    static long longOpt(String k, long def) {
        String v = opt(k, null);
        try {
            return v == null ? def : Long.parseLong(v.trim());
        } catch (NumberFormatException e) {
            throw new UsageError("--" + k + " wants an integer, got " + v);
        }
    }

    static int intOpt(String k, int def) {
        return (int) longOpt(k, def);
    }

    static double doubleOpt(String k, double def) {
        String v = opt(k, null);
        try {
            return v == null ? def : Double.parseDouble(v.trim());
        } catch (NumberFormatException e) {
            throw new UsageError("--" + k + " wants a number, got " + v);
        }
    }

    static boolean flag(String k) {
        String v = opt(k, "false").trim().toLowerCase();
        if (v.equals("true") || v.equals("1") || v.equals("yes")) {
            return true;
        }
        if (v.equals("false") || v.equals("0") || v.equals("no")) {
            return false;
        }
        throw new UsageError("--" + k + " wants true or false, got " + v);
    }

    static Duration seconds(double s) {
        return Duration.ofMillis(Math.round(s * 1000));
    }

    static final class Args {
        String command;
        String endpoints;
        String topic;
        String group;
        double timeout;
        double requestTimeout;
        String namespace;
        String accessKey;
        String secretKey;
        long count;
        String mode;
        String tag;
        String keysPrefix;
        String bodyPrefix;
        int bodySize;
        Map<String, String> props = new LinkedHashMap<>();
        long start;
        String messageGroup;
        long deliverAfterMs;
        boolean keepGoing;
        boolean recall;
        String answer;
        long expect;
        String tags;
        String sql;
        double linger;
        int batchSize;
        double invisibleDuration;
        double awaitDuration;
        boolean noAck;
        int reconsumeLater;
        int threads;
    }

    static Args parseArgs(String[] argv) {
        if (argv.length == 0 || !ACTIONS.contains(argv[0])) {
            throw new UsageError("the first argument is the action, one of " + String.join(", ", ACTIONS));
        }
        parse(argv);
        Args a = new Args();
        a.command = argv[0];
        a.endpoints = req("endpoints");
        a.topic = req("topic");
        a.group = opt("group", null);
        a.timeout = doubleOpt("timeout", 60);
        // 10 s, not the client's 3: its first calls run while the JVM still loads classes, and a
        // loaded test machine made them start past a 3 s deadline.
        a.requestTimeout = doubleOpt("request-timeout", 10);
        a.namespace = opt("namespace", "");
        a.accessKey = opt("access-key", null);
        a.secretKey = opt("secret-key", null);
        a.count = longOpt("count", -1);
        a.mode = opt("mode", "sync");
        a.tag = opt("tag", null);
        a.keysPrefix = opt("keys-prefix", "k-");
        a.bodyPrefix = opt("body-prefix", "body-");
        a.bodySize = intOpt("body-size", -1);
        a.start = longOpt("start", 0);
        a.messageGroup = opt("message-group", null);
        a.deliverAfterMs = longOpt("deliver-after-ms", 0);
        a.keepGoing = flag("keep-going");
        a.recall = flag("recall");
        a.answer = opt("answer", null);
        a.expect = longOpt("expect", -1);
        a.tags = opt("tags", "*");
        a.sql = opt("sql", null);
        a.linger = doubleOpt("linger", 0);
        a.batchSize = intOpt("batch-size", 16);
        a.invisibleDuration = doubleOpt("invisible-duration", 15);
        a.awaitDuration = doubleOpt("await-duration", 5);
        a.noAck = flag("no-ack");
        a.reconsumeLater = intOpt("reconsume-later", 0);
        a.threads = intOpt("threads", 20);
        for (String kv : OPTS.getOrDefault("prop", Collections.emptyList())) {
            int eq = kv.indexOf('=');
            if (eq < 0 || kv.substring(0, eq).trim().isEmpty() || kv.substring(eq + 1).trim().isEmpty()) {
                throw new UsageError("--prop needs K=V with neither blank, got " + kv);
            }
            a.props.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        if ((a.accessKey == null) != (a.secretKey == null)) {
            throw new UsageError("--access-key and --secret-key go together");
        }
        if (a.requestTimeout <= 0) {
            throw new UsageError("--request-timeout must be > 0");
        }
        if (a.command.equals("produce") || a.command.equals("transact")) {
            if (a.count < 0) {
                throw new UsageError(a.command + " needs --count N (N >= 0)");
            }
            if (a.messageGroup != null && a.deliverAfterMs != 0) {
                throw new UsageError("--message-group and --deliver-after-ms exclude each other");
            }
            if (a.tag != null && (a.tag.contains("|") || a.tag.trim().isEmpty())) {
                throw new UsageError("--tag must not be blank nor contain '|'");
            }
        }
        if (a.command.equals("transact") && !ANSWERS.contains(a.answer)) {
            throw new UsageError("transact needs --answer, one of " + String.join(", ", ANSWERS));
        }
        if (a.command.equals("simple-consume") || a.command.equals("push-consume")) {
            if (a.group == null || a.group.isEmpty()) {
                throw new UsageError(a.command + " needs --group G");
            }
            if (a.expect < 0) {
                throw new UsageError(a.command + " needs --expect N (N >= 0)");
            }
        }
        if (a.command.equals("simple-consume") && a.batchSize <= 0) {
            throw new UsageError("--batch-size must be > 0");
        }
        return a;
    }

    static void startWatchdog(double seconds) {
        long already = 0;
        try {
            // The JVM's own start counts against the caller's limit too.
            already = java.lang.management.ManagementFactory.getRuntimeMXBean().getUptime() * 1_000_000L;
            already = Math.max(0, Math.min(already, 10_000_000_000L));
        } catch (RuntimeException | LinkageError ignored) {
            // no management bean: count from now
        }
        final long deadline = System.nanoTime() + (long) (seconds * 1e9) - already;
        Thread t = new Thread(() -> {
            long left;
            while ((left = deadline - System.nanoTime()) > 0) {
                try {
                    TimeUnit.NANOSECONDS.sleep(Math.min(left, 200_000_000L));
                } catch (InterruptedException ignored) {
                    // keep waiting
                }
            }
            fail("timeout", "no result within " + seconds + " s", 3);
        }, "driver-watchdog");
        t.setDaemon(true);
        t.start();
    }

    // ------------------------------------------------------------------ the wire tap

    /** What a received message carried on the wire that its MessageView does not keep. */
    static final class Wire {
        final int queueId;
        final Long queueOffset;
        final Long storeTimestamp;
        final String storeHost;
        final String messageType;

        Wire(SystemProperties p) {
            queueId = p.getQueueId();
            queueOffset = p.hasQueueOffset() ? p.getQueueOffset() : null;
            storeTimestamp = p.hasStoreTimestamp()
                ? p.getStoreTimestamp().getSeconds() * 1000 + p.getStoreTimestamp().getNanos() / 1_000_000
                : null;
            storeHost = p.getStoreHost().isEmpty() ? null : p.getStoreHost();
            messageType = p.getMessageType().name();
        }
    }

    // receipt handle -> what the wire said; message id -> the status of its ack; EndTransaction
    // calls in flight (rpc id -> message id) and answered (message id -> code name)
    static final Map<String, Wire> WIRE = new ConcurrentHashMap<>();
    static final Map<String, String> ACKED = new ConcurrentHashMap<>();
    static final Map<String, String> END_TX_CALLS = new ConcurrentHashMap<>();
    static final Map<String, String> ENDED = new ConcurrentHashMap<>();

    /**
     * The client's LoggingInterceptor logs, at TRACE, (rpcId, service, method, request) for every
     * request and (rpcId, service, method, response) for every response, the protobuf objects
     * themselves; the logging binding (StaticLoggerBinder) hands us those arguments.
     */
    static void tap(Object[] args) {
        if (args.length < 4 || !(args[0] instanceof String)) {
            return;
        }
        String rpcId = (String) args[0];
        Object body = args[3];
        if (body instanceof ReceiveMessageResponse) {
            ReceiveMessageResponse r = (ReceiveMessageResponse) body;
            if (r.hasMessage()) {
                SystemProperties p = r.getMessage().getSystemProperties();
                WIRE.put(p.getReceiptHandle(), new Wire(p));
            }
        } else if (body instanceof AckMessageResponse) {
            for (AckMessageResultEntry e : ((AckMessageResponse) body).getEntriesList()) {
                ACKED.put(e.getMessageId(), e.getStatus().getCode().name());
            }
        } else if (body instanceof EndTransactionRequest) {
            END_TX_CALLS.put(rpcId, ((EndTransactionRequest) body).getMessageId());
        } else if (body instanceof EndTransactionResponse) {
            String messageId = END_TX_CALLS.remove(rpcId);
            if (messageId != null) {
                ENDED.put(messageId, ((EndTransactionResponse) body).getStatus().getCode().name());
            }
        }
    }

    // ------------------------------------------------------------------ helpers

    static ClientServiceProvider provider;

    static ClientConfiguration configuration(Args a) {
        ClientConfigurationBuilder b = ClientConfiguration.newBuilder()
            .setEndpoints(a.endpoints)
            .enableSsl(false) // the client's default is TLS; the front serves plaintext
            .setRequestTimeout(seconds(a.requestTimeout))
            .setNamespace(a.namespace);
        if (a.accessKey != null) {
            b.setCredentialProvider(new StaticSessionCredentialsProvider(a.accessKey, a.secretKey));
        }
        return b.build();
    }

    static String md5(byte[] b) {
        try {
            byte[] h = MessageDigest.getInstance("MD5").digest(b);
            StringBuilder sb = new StringBuilder();
            for (byte x : h) {
                sb.append(String.format("%02x", x & 0xff));
            }
            return sb.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static byte[] body(Args a, long i) {
        byte[] text = (a.bodyPrefix + i).getBytes(StandardCharsets.UTF_8);
        if (a.bodySize < 0) {
            return text;
        }
        byte[] b = new byte[a.bodySize];
        for (int k = 0; k < a.bodySize; k++) {
            b[k] = k < text.length ? text[k] : (byte) '|';
        }
        return b;
    }

    static String keys(Collection<String> keys) {
        return keys == null || keys.isEmpty() ? null : String.join(" ", new TreeSet<>(keys));
    }

    /** Close clients (bounded: a dead server must not hold the run), then `done`, exit 0. */
    static void done(Json summary, AutoCloseable... clients) {
        Thread closer = new Thread(() -> {
            for (AutoCloseable c : clients) {
                try {
                    c.close();
                } catch (Throwable t) {
                    System.err.println("java5grpc driver: close: " + t);
                }
            }
        }, "driver-closer");
        closer.setDaemon(true);
        closer.start();
        try {
            closer.join(5000);
        } catch (InterruptedException ignored) {
            // done anyway
        }
        finish(summary, 0);
    }

    // ------------------------------------------------------------------ produce

    static Message messageFor(Args a, long i, long[] due) {
        MessageBuilder b = provider.newMessageBuilder()
            .setTopic(a.topic)
            .setBody(body(a, i))
            .setKeys(a.keysPrefix + i);
        if (a.tag != null) {
            b.setTag(a.tag);
        }
        for (Map.Entry<String, String> e : a.props.entrySet()) {
            b.addProperty(e.getKey(), e.getValue());
        }
        if (a.messageGroup != null) {
            b.setMessageGroup(a.messageGroup);
        }
        if (a.deliverAfterMs != 0) {
            due[0] = System.currentTimeMillis() + a.deliverAfterMs; // milliseconds on the wire
            b.setDeliveryTimestamp(due[0]);
        }
        return b.build();
    }

    static Json sentEvent(Args a, long i, Message m, SendReceipt receipt) {
        Json j = ev("sent").put("topic", a.topic);
        if (receipt instanceof SendReceiptImpl) {
            SendReceiptImpl r = (SendReceiptImpl) receipt;
            MessageQueueImpl mq = r.getMessageQueue();
            // The queue the client addressed; the server picks where the message goes.
            j.put("broker", mq.getBroker().getName()).put("clientQueueId", mq.getQueueId())
                .put("queueOffset", r.getOffset())
                .put("msgId", r.getMessageId().toString())
                .put("transactionId", emptyToNull(r.getTransactionId()))
                .put("recallHandle", emptyToNull(r.getRecallHandle()));
        } else {
            j.put("msgId", receipt.getMessageId().toString());
        }
        byte[] b = new byte[m.getBody().remaining()];
        m.getBody().duplicate().get(b);
        j.put("status", "SEND_OK")
            .put("keys", keys(m.getKeys()))
            .put("tags", m.getTag().orElse(null))
            .put("properties", new LinkedHashMap<String, Object>(a.props))
            .put("messageGroup", m.getMessageGroup().orElse(null))
            .put("deliveryTimestamp", m.getDeliveryTimestamp().orElse(null))
            .put("bodyMd5", md5(b))
            .put("bodyLen", b.length)
            .put("index", i);
        return j;
    }

    static String emptyToNull(String s) {
        return s == null || s.isEmpty() ? null : s;
    }

    static Producer startProducer(Args a, TransactionChecker checker, boolean withTopic) {
        ProducerBuilder b = provider.newProducerBuilder().setClientConfiguration(configuration(a));
        if (withTopic) {
            b.setTopics(a.topic);
        }
        if (checker != null) {
            b.setTransactionChecker(checker);
        }
        Producer p;
        try {
            // build() starts the client: QueryRoute for the topic and the settings over Telemetry.
            p = b.build();
        } catch (Throwable t) {
            fail("client", t, 1);
            return null;
        }
        emit(ev("ready"));
        return p;
    }

    static Throwable unwrap(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof java.util.concurrent.CompletionException)
            && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    static void produce(Args a) {
        if (!a.mode.equals("sync") && !a.mode.equals("async")) {
            // The 5.x client sends one message per call and has no oneway or batch send.
            fail("unsupported", "produce --mode " + a.mode + " (the 5.x client: sync, async)", 2);
        }
        if (a.recall && !a.mode.equals("sync")) {
            throw new UsageError("--recall recalls each message after its send: --mode sync only");
        }
        Producer producer = startProducer(a, null, true);
        long sent = 0;
        long failed = 0;
        if (a.mode.equals("sync")) {
            for (long i = a.start; i < a.start + a.count; i++) {
                long[] due = new long[1];
                Message m = messageFor(a, i, due);
                SendReceipt r;
                try {
                    r = producer.send(m);
                } catch (Throwable t) {
                    failed++;
                    if (!a.keepGoing) {
                        fail("send", t, 1, "index", i);
                    }
                    emit(describe(ev("error").put("error", "send").put("index", i), t));
                    continue;
                }
                emit(sentEvent(a, i, m, r));
                sent++;
                if (a.recall) {
                    recall(producer, a, i, r);
                }
            }
        } else {
            List<Object[]> pending = new ArrayList<>();
            for (long i = a.start; i < a.start + a.count; i++) {
                Message m = messageFor(a, i, new long[1]);
                try {
                    pending.add(new Object[] {i, m, producer.sendAsync(m)});
                } catch (Throwable t) { // refused before it left
                    failed++;
                    emit(describe(ev("error").put("error", "send").put("index", i), t));
                }
            }
            for (Object[] p : pending) {
                long i = (Long) p[0];
                SendReceipt r;
                try {
                    r = ((CompletableFuture<?>) p[2]).thenApply(x -> (SendReceipt) x).get();
                } catch (Throwable t) {
                    failed++;
                    emit(describe(ev("error").put("error", "send").put("index", i), unwrap(t)));
                    continue;
                }
                emit(sentEvent(a, i, (Message) p[1], r));
                sent++;
            }
        }
        if (failed > 0) {
            fail("send", failed + " of " + a.count + " sends failed", 1);
        }
        done(ev("done").put("sent", sent), producer);
    }

    /** Producer.recallMessage with the send receipt's handle (a DELAY message's): `recalled`. */
    static void recall(Producer producer, Args a, long i, SendReceipt r) {
        String handle = r instanceof SendReceiptImpl ? ((SendReceiptImpl) r).getRecallHandle() : null;
        try {
            RecallReceipt recalled = producer.recallMessage(a.topic, handle);
            emit(ev("recalled").put("index", i).put("msgId", recalled.getMessageId().toString()));
        } catch (Throwable t) {
            fail("recall", t, 1, "index", i);
        }
    }

    // ------------------------------------------------------------------ transact

    /**
     * Each message is a half message of its own transaction, committed or rolled back at once
     * (`commit`, `rollback`), or left open for the server's check (RecoverOrphanedTransaction
     * over Telemetry), which the checker answers (`unknown-commit`, `unknown-rollback`; the
     * client then sends EndTransaction, SOURCE_SERVER_CHECK, and the run waits for its answer).
     * `unknown` leaves them all open and ends at once; a check before then is answered UNKNOWN
     * (the client sends nothing).
     */
    static void transact(Args a) {
        if (!a.mode.equals("sync")) {
            fail("unsupported", "transactions are sent one by one (--mode sync)", 2);
        }
        if (a.messageGroup != null || a.deliverAfterMs != 0) {
            fail("usage", "a transaction message has no message group nor delivery time", 2);
        }
        final TransactionResolution checkAnswer = a.answer.equals("unknown-commit")
            ? TransactionResolution.COMMIT
            : a.answer.equals("unknown-rollback") ? TransactionResolution.ROLLBACK : TransactionResolution.UNKNOWN;
        final Map<String, String> transactionIds = new ConcurrentHashMap<>(); // msgId -> transactionId
        final Set<String> checked = ConcurrentHashMap.newKeySet();
        TransactionChecker checker = view -> {
            String msgId = view.getMessageId().toString();
            checked.add(msgId);
            emit(ev("checked")
                .put("transactionId", transactionIds.get(msgId))
                .put("msgId", msgId)
                .put("answer", checkAnswer.name().toLowerCase()));
            return checkAnswer;
        };
        Producer producer = startProducer(a, checker, true);
        boolean waitChecks = a.answer.equals("unknown-commit") || a.answer.equals("unknown-rollback");
        List<String> ids = new ArrayList<>();
        for (long i = a.start; i < a.start + a.count; i++) {
            Message m = messageFor(a, i, new long[1]);
            Transaction tx;
            SendReceipt r;
            try {
                tx = producer.beginTransaction();
                r = producer.send(m, tx);
            } catch (Throwable t) {
                fail("send", t, 1, "index", i);
                return;
            }
            String msgId = r.getMessageId().toString();
            ids.add(msgId);
            if (r instanceof SendReceiptImpl) {
                transactionIds.put(msgId, ((SendReceiptImpl) r).getTransactionId());
            }
            String state = "UNKNOW";
            try {
                if (a.answer.equals("commit")) {
                    tx.commit();
                    state = "COMMIT_MESSAGE";
                } else if (a.answer.equals("rollback")) {
                    tx.rollback();
                    state = "ROLLBACK_MESSAGE";
                }
            } catch (Throwable t) {
                fail("end-transaction", t, 1, "index", i);
            }
            emit(sentEvent(a, i, m, r).put("localState", state));
        }
        if (waitChecks) {
            // Every message checked and the checker's EndTransaction answered; the watchdog ends
            // a run whose checks never come.
            while (!ENDED.keySet().containsAll(ids)) {
                sleepMs(50);
            }
        }
        done(ev("done").put("sent", a.count).put("checked", checked.size()), producer);
    }

    static void sleepMs(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ------------------------------------------------------------------ consume

    static FilterExpression filter(Args a) {
        if (a.sql != null) {
            return new FilterExpression(a.sql, FilterExpressionType.SQL92);
        }
        return new FilterExpression(a.tags == null ? "*" : a.tags, FilterExpressionType.TAG);
    }

    static Json receivedEvent(MessageView m, String action) {
        ByteBuffer buf = m.getBody().duplicate();
        byte[] b = new byte[buf.remaining()];
        buf.get(b);
        int attempt = m.getDeliveryAttempt();
        String receiptHandle = null;
        boolean corrupted = false;
        if (m instanceof MessageViewImpl) {
            receiptHandle = ((MessageViewImpl) m).getReceiptHandle();
            corrupted = ((MessageViewImpl) m).isCorrupted();
        }
        Wire w = receiptHandle == null ? null : WIRE.remove(receiptHandle); // a handle comes once
        Json j = ev("received").put("topic", m.getTopic());
        if (w != null) {
            j.put("queueId", w.queueId).put("queueOffset", w.queueOffset);
        }
        j.put("msgId", m.getMessageId().toString())
            .put("keys", keys(m.getKeys()))
            .put("tags", m.getTag().orElse(null))
            .put("properties", new LinkedHashMap<String, Object>(m.getProperties()))
            .put("messageGroup", m.getMessageGroup().orElse(null))
            .put("messageType", w == null ? null : w.messageType)
            .put("bodyMd5", md5(b))
            .put("bodyLen", b.length)
            .put("corrupted", corrupted ? Boolean.TRUE : null)
            .put("deliveryAttempt", attempt)
            .put("reconsumeTimes", attempt > 0 ? attempt - 1 : null)
            .put("bornTimestamp", m.getBornTimestamp())
            .put("storeTimestamp", w == null ? null : w.storeTimestamp)
            .put("storeHost", w == null ? null : w.storeHost)
            .put("deliveryTimestamp", m.getDeliveryTimestamp().orElse(null))
            .put("bornHost", emptyToNull(m.getBornHost()))
            .put("receiptHandle", receiptHandle)
            .put("action", action);
        return j;
    }

    /** Counts `received` events that count for --expect; then --linger seconds more. */
    static final class Goal {
        final long expect;
        final double linger;
        final AtomicInteger count = new AtomicInteger();
        volatile long reachedAt;

        Goal(long expect, double linger) {
            this.expect = expect;
            this.linger = linger;
            this.reachedAt = expect == 0 ? System.nanoTime() : 0;
        }

        synchronized void add() {
            if (count.incrementAndGet() >= expect && reachedAt == 0) {
                reachedAt = System.nanoTime();
            }
        }

        boolean over() {
            long r = reachedAt;
            return r != 0 && System.nanoTime() - r >= (long) (linger * 1e9);
        }
    }

    static void simpleConsume(Args a) {
        SimpleConsumer consumer;
        try {
            consumer = provider.newSimpleConsumerBuilder()
                .setClientConfiguration(configuration(a))
                .setConsumerGroup(a.group)
                .setSubscriptionExpressions(Collections.singletonMap(a.topic, filter(a)))
                .setAwaitDuration(seconds(a.awaitDuration))
                .build();
        } catch (Throwable t) {
            fail("client", t, 1);
            return;
        }
        emit(ev("ready"));
        Goal goal = new Goal(a.expect, a.linger);
        while (!goal.over()) {
            long started = System.nanoTime();
            List<MessageView> messages;
            try {
                messages = consumer.receive(a.batchSize, seconds(a.invisibleDuration));
            } catch (Throwable t) {
                fail("receive", t, 1);
                return;
            }
            emit(ev("polled").put("count", messages.size())
                .put("seconds", Math.round((System.nanoTime() - started) / 1e6) / 1000.0));
            for (MessageView m : messages) {
                if (a.noAck) {
                    emit(receivedEvent(m, "noack"));
                    goal.add();
                    continue;
                }
                try {
                    consumer.ack(m);
                } catch (Throwable t) {
                    emit(describe(receivedEvent(m, "ack-failed"), t));
                    continue;
                }
                emit(receivedEvent(m, "ok"));
                goal.add();
            }
        }
        done(ev("done").put("received", goal.count.get()), consumer);
    }

    static void pushConsume(Args a) {
        Goal goal = new Goal(a.expect, a.linger);
        AtomicInteger later = new AtomicInteger(a.reconsumeLater);
        Set<String> okIds = ConcurrentHashMap.newKeySet();
        PushConsumer consumer;
        try {
            consumer = provider.newPushConsumerBuilder()
                .setClientConfiguration(configuration(a))
                .setConsumerGroup(a.group)
                .setSubscriptionExpressions(Collections.singletonMap(a.topic, filter(a)))
                .setConsumptionThreadCount(a.threads)
                .setMessageListener(m -> {
                    if (later.getAndUpdate(n -> n > 0 ? n - 1 : 0) > 0) {
                        emit(receivedEvent(m, "later"));
                        return ConsumeResult.FAILURE;
                    }
                    emit(receivedEvent(m, "ok"));
                    okIds.add(m.getMessageId().toString());
                    goal.add();
                    return ConsumeResult.SUCCESS;
                })
                // build() starts it: QueryRoute, and the server's settings over Telemetry (the
                // client gives up after 3 s without them).
                .build();
        } catch (Throwable t) {
            fail("client", t, 1);
            return;
        }
        emit(ev("ready"));
        while (!goal.over()) {
            sleepMs(50);
        }
        // The client acks after the listener returned. Its close() would wait for its long
        // polls in flight (up to the server's long-polling time plus the request timeout) and a
        // second more, so the run ends once every counted message's AckMessage was answered.
        long ackDeadline = System.nanoTime() + 10_000_000_000L;
        while (!ACKED.keySet().containsAll(okIds) && System.nanoTime() < ackDeadline) {
            sleepMs(20);
        }
        Set<String> unacked = new HashSet<>(okIds);
        unacked.removeAll(ACKED.keySet());
        Map<String, Object> failedAcks = new HashMap<>();
        for (String id : okIds) {
            String status = ACKED.get(id);
            if (status != null && !status.equals("OK")) {
                failedAcks.put(id, status);
            }
        }
        finish(ev("done").put("received", goal.count.get())
            .put("unacked", unacked.isEmpty() ? null : unacked.size())
            .put("ackFailures", failedAcks.isEmpty() ? null : failedAcks), 0);
    }

    // ------------------------------------------------------------------ route

    /**
     * The 5.0.8 producer's start fails when its topics' route does (it waits for QueryRoute), so
     * the producer starts with no topic, then QueryRoute goes once through the client's own
     * ClientManager (its channel, its metadata) and the answer is reported.
     */
    static void route(Args a) {
        Producer producer = startProducer(a, null, false);
        ClientImpl client = (ClientImpl) producer;
        QueryRouteRequest request = QueryRouteRequest.newBuilder()
            .setTopic(Resource.newBuilder().setResourceNamespace(a.namespace).setName(a.topic))
            .setEndpoints(client.getEndpoints().toProtobuf())
            .build();
        QueryRouteResponse response;
        try {
            response = client.getClientManager()
                .queryRoute(client.getEndpoints(), request, seconds(a.requestTimeout)).get();
        } catch (Throwable t) {
            fail("route", unwrap(t), 1);
            return;
        }
        Code code = response.getStatus().getCode();
        if (code != Code.OK && code != Code.MULTIPLE_RESULTS) {
            String message = response.getStatus().getMessage();
            finish(ev("error").put("error", "route")
                .put("message", message.isEmpty() ? code.name() : message)
                .put("code", code.getNumber()).put("codeName", code.name()), 1);
        }
        List<Object> queues = new ArrayList<>();
        for (apache.rocketmq.v2.MessageQueue q : response.getMessageQueuesList()) {
            List<Object> endpoints = new ArrayList<>();
            for (apache.rocketmq.v2.Address addr : q.getBroker().getEndpoints().getAddressesList()) {
                endpoints.add(addr.getHost() + ":" + addr.getPort());
            }
            List<Object> types = new ArrayList<>();
            for (apache.rocketmq.v2.MessageType t : q.getAcceptMessageTypesList()) {
                types.add(t.name());
            }
            queues.add(new Json().put("id", q.getId())
                .put("permission", q.getPermission().name())
                .put("broker", q.getBroker().getName())
                .put("brokerId", q.getBroker().getId())
                .put("endpoints", endpoints)
                .put("acceptMessageTypes", types));
        }
        emit(ev("route").put("topic", a.topic).put("code", code.getNumber()).put("codeName", code.name())
            .put("queues", queues));
        done(ev("done").put("queues", queues.size()), producer);
    }

    // ------------------------------------------------------------------ main

    public static void main(String[] argv) {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err); // nothing but our events on stdout
        Args a;
        try {
            a = parseArgs(argv);
        } catch (UsageError e) {
            fail("usage", e.getMessage(), 2);
            return;
        }
        startWatchdog(a.timeout);
        try {
            StaticLoggerBinder.TRACE_SINK = GrpcDriver::tap;
            provider = ClientServiceProvider.loadService();
        } catch (Throwable t) {
            fail("client", t, 1);
        }
        try {
            switch (a.command) {
                case "produce": produce(a); break;
                case "transact": transact(a); break;
                case "simple-consume": simpleConsume(a); break;
                case "push-consume": pushConsume(a); break;
                default: route(a);
            }
        } catch (UsageError e) {
            fail("usage", e.getMessage(), 2);
        } catch (Throwable t) {
            fail("client", t, 1);
        }
        fail("client", "the action returned without a result", 1);
    }
}
