// The logging binding the stock rocketmq-client-java 5.0.8 jar lacks: it shades slf4j-api 1.7.30,
// which looks for a StaticLoggerBinder, beside logback 1.3.15, which only offers an slf4j 2
// service provider. So the client's every log call goes to slf4j's NOP logger. This class, in
// the package the shaded slf4j looks in, binds it to a small logger of ours: INFO and above go
// to $HOME/logs/rocketmq/rocketmq-client.log (-Drocketmq.log.root), and the TRACE calls of the
// client's gRPC LoggingInterceptor (the request and response objects of every call) go to the
// driver's wire tap, TRACE_SINK. The client's own classes are not touched.

package org.apache.rocketmq.shaded.org.slf4j.impl;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.LocalDateTime;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import org.apache.rocketmq.shaded.org.slf4j.ILoggerFactory;
import org.apache.rocketmq.shaded.org.slf4j.Logger;
import org.apache.rocketmq.shaded.org.slf4j.helpers.FormattingTuple;
import org.apache.rocketmq.shaded.org.slf4j.helpers.MarkerIgnoringBase;
import org.apache.rocketmq.shaded.org.slf4j.helpers.MessageFormatter;

public final class StaticLoggerBinder {
    /** slf4j 1.7 reads this to check the binding's API level. */
    public static String REQUESTED_API_VERSION = "1.6.99";

    /** The logger whose TRACE calls carry the gRPC requests and responses. */
    public static final String WIRE_LOGGER = "org.apache.rocketmq.client.java.rpc.LoggingInterceptor";

    /** Receives the arguments of every TRACE call of WIRE_LOGGER, when set. */
    public static volatile Consumer<Object[]> TRACE_SINK;

    private static final StaticLoggerBinder SINGLETON = new StaticLoggerBinder();
    private final ILoggerFactory factory = new Factory();

    public static StaticLoggerBinder getSingleton() {
        return SINGLETON;
    }

    public ILoggerFactory getLoggerFactory() {
        return factory;
    }

    public String getLoggerFactoryClassStr() {
        return Factory.class.getName();
    }

    static final class Factory implements ILoggerFactory {
        private final Map<String, Logger> loggers = new ConcurrentHashMap<>();
        private volatile PrintStream file;

        @Override
        public Logger getLogger(String name) {
            return loggers.computeIfAbsent(name, n -> new FileLogger(n, this));
        }

        PrintStream file() {
            PrintStream f = file;
            if (f == null) {
                synchronized (this) {
                    if (file == null) {
                        file = open();
                    }
                    f = file;
                }
            }
            return f;
        }

        private static PrintStream open() {
            String root = System.getProperty("rocketmq.log.root");
            if (root == null) {
                root = System.getProperty("user.home") + File.separator + "logs" + File.separator + "rocketmq";
            }
            try {
                File dir = new File(root);
                dir.mkdirs();
                OutputStream os = new FileOutputStream(new File(dir, "rocketmq-client.log"), true);
                return new PrintStream(os, true, StandardCharsets.UTF_8);
            } catch (IOException e) {
                return new PrintStream(OutputStream.nullOutputStream());
            }
        }
    }

    static final class FileLogger extends MarkerIgnoringBase {
        private final transient Factory factory;
        private final boolean wire;

        FileLogger(String name, Factory factory) {
            this.name = name;
            this.factory = factory;
            this.wire = WIRE_LOGGER.equals(name);
        }

        private void log(String level, String format, Object[] args) {
            FormattingTuple t = MessageFormatter.arrayFormat(format, args);
            PrintStream f = factory.file();
            synchronized (f) {
                f.println(LocalDateTime.now() + " " + level + " [" + Thread.currentThread().getName() + "] "
                    + name + " - " + t.getMessage());
                if (t.getThrowable() != null) {
                    t.getThrowable().printStackTrace(f);
                }
            }
        }

        private void log(String level, String msg, Throwable t) {
            log(level, msg, new Object[] {t});
        }

        private void trace0(Object[] args) {
            Consumer<Object[]> sink = TRACE_SINK;
            if (wire && sink != null && args != null) {
                sink.accept(args);
            }
        }

        @Override public boolean isTraceEnabled() { return wire; }
        @Override public void trace(String msg) { }
        @Override public void trace(String format, Object arg) { trace0(new Object[] {arg}); }
        @Override public void trace(String format, Object a1, Object a2) { trace0(new Object[] {a1, a2}); }
        @Override public void trace(String format, Object... args) { trace0(args); }
        @Override public void trace(String msg, Throwable t) { }

        @Override public boolean isDebugEnabled() { return false; }
        @Override public void debug(String msg) { }
        @Override public void debug(String format, Object arg) { }
        @Override public void debug(String format, Object a1, Object a2) { }
        @Override public void debug(String format, Object... args) { }
        @Override public void debug(String msg, Throwable t) { }

        @Override public boolean isInfoEnabled() { return true; }
        @Override public void info(String msg) { log("INFO", msg, new Object[0]); }
        @Override public void info(String format, Object arg) { log("INFO", format, new Object[] {arg}); }
        @Override public void info(String format, Object a1, Object a2) { log("INFO", format, new Object[] {a1, a2}); }
        @Override public void info(String format, Object... args) { log("INFO", format, args); }
        @Override public void info(String msg, Throwable t) { log("INFO", msg, t); }

        @Override public boolean isWarnEnabled() { return true; }
        @Override public void warn(String msg) { log("WARN", msg, new Object[0]); }
        @Override public void warn(String format, Object arg) { log("WARN", format, new Object[] {arg}); }
        @Override public void warn(String format, Object a1, Object a2) { log("WARN", format, new Object[] {a1, a2}); }
        @Override public void warn(String format, Object... args) { log("WARN", format, args); }
        @Override public void warn(String msg, Throwable t) { log("WARN", msg, t); }

        @Override public boolean isErrorEnabled() { return true; }
        @Override public void error(String msg) { log("ERROR", msg, new Object[0]); }
        @Override public void error(String format, Object arg) { log("ERROR", format, new Object[] {arg}); }
        @Override public void error(String format, Object a1, Object a2) { log("ERROR", format, new Object[] {a1, a2}); }
        @Override public void error(String format, Object... args) { log("ERROR", format, args); }
        @Override public void error(String msg, Throwable t) { log("ERROR", msg, t); }
    }
}
