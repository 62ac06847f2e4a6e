import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * RocketMQ's own mqadmin (MQAdminStartup, unchanged), then System.exit once the sub-command is
 * done. Its client shuts Netty down gracefully, and those threads keep the JVM up about 3 s
 * after the command has printed everything: the tests would wait that out for every call. A
 * sub-command that ends the JVM itself (a usage error) still ends it with its own status.
 */
public class MQAdminThenExit {
    public static void main(String[] args) {
        MQAdminStartup.main(args);
        System.out.flush();
        System.err.flush();
        System.exit(0);
    }
}
