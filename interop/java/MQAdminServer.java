import com.alibaba.fastjson.JSON;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.Permission;
import java.util.Arrays;
import java.util.List;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * RocketMQ's own mqadmin (MQAdminStartup, unchanged), one sub-command after another in one JVM:
 * a JVM start costs a test about 0.6 CPU-seconds a call, and the suite makes hundreds of calls.
 *
 * A request is one line on stdin, the sub-command's arguments as a JSON array. The answer on
 * stdout is a header line "\0<status> <stdout bytes> <stderr bytes>" and then both outputs: what
 * the sub-command printed while it ran, cut where it called System.exit (it would have ended the
 * process there), and that status, 0 if it did not call it.
 */
public class MQAdminServer extends MQAdminStartup {
    private static volatile boolean serving = true;
    private static volatile Integer exitStatus;
    private static ByteArrayOutputStream out;
    private static ByteArrayOutputStream err;
    private static int outAtExit;
    private static int errAtExit;

    /** Thrown where a sub-command calls System.exit; main0 catches and prints it, then returns. */
    private static final class ExitTrapped extends SecurityException {
        ExitTrapped(int status) {
            super("exit " + status);
        }
    }

    public static void main(String[] args) {
        try {
            serve();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void serve() throws IOException {
        OutputStream reply = System.out;
        System.setSecurityManager(new SecurityManager() {
            @Override
            public void checkPermission(Permission perm) {
            }

            @Override
            public void checkPermission(Permission perm, Object context) {
            }

            @Override
            public void checkExit(int status) {
                if (!serving) {
                    return;
                }
                synchronized (MQAdminServer.class) {
                    if (exitStatus == null) {
                        exitStatus = status;
                        outAtExit = out.size();
                        errAtExit = err.size();
                    }
                }
                throw new ExitTrapped(status);
            }
        });
        BufferedReader requests = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = requests.readLine()) != null) {
            List<String> argv = JSON.parseArray(line, String.class);
            synchronized (MQAdminServer.class) {
                out = new ByteArrayOutputStream();
                err = new ByteArrayOutputStream();
                exitStatus = null;
            }
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            // Fresh sub-command objects: some keep a client they shut down after one run, and
            // MQAdminStartup only ever appends to its list and takes the first match.
            subCommandList.clear();
            try {
                MQAdminStartup.main(argv.toArray(new String[0]));
            } catch (ExitTrapped trapped) {
                // main0 let it through: the status is already recorded.
            } catch (Throwable t) {
                t.printStackTrace();
            }
            System.out.flush();
            System.err.flush();
            byte[] stdout;
            byte[] stderr;
            int status;
            synchronized (MQAdminServer.class) {
                stdout = out.toByteArray();
                stderr = err.toByteArray();
                status = exitStatus == null ? 0 : exitStatus;
                if (exitStatus != null) {
                    stdout = Arrays.copyOf(stdout, outAtExit);
                    stderr = Arrays.copyOf(stderr, errAtExit);
                }
            }
            String header = "\0" + status + " " + stdout.length + " " + stderr.length + "\n";
            reply.write(header.getBytes(StandardCharsets.US_ASCII));
            reply.write(stdout);
            reply.write(stderr);
            reply.flush();
        }
        serving = false;
        System.exit(0);
    }
}
