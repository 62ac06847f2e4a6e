import java.lang.reflect.Method;
import java.util.Map;
import java.util.TreeMap;

/**
 * Prints the defaults of a RocketMQ config class (MessageStoreConfig, BrokerConfig, ...) as one
 * JSON object: every public no-argument getter of a scalar, enum or string, by its property name.
 * The bench uses it to hold Sidewinder's config defaults against the real ones.
 */
public class DumpConfig {
    public static void main(String[] args) throws Exception {
        Object config = Class.forName(args[0]).getDeclaredConstructor().newInstance();
        Map<String, Object> values = new TreeMap<>();
        for (Method m : config.getClass().getMethods()) {
            if (m.getParameterCount() != 0 || m.getDeclaringClass() == Object.class) {
                continue;
            }
            String name = m.getName();
            String key;
            if (name.startsWith("get")) {
                key = name.substring(3);
            } else if (name.startsWith("is")) {
                key = name.substring(2);
            } else {
                continue;
            }
            if (key.isEmpty()) {
                continue;
            }
            key = Character.toLowerCase(key.charAt(0)) + key.substring(1);
            Object v = m.invoke(config);
            if (v == null || v instanceof Number || v instanceof Boolean || v instanceof String
                || v instanceof Enum) {
                values.put(key, v);
            }
        }
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, Object> e : values.entrySet()) {
            if (out.length() > 1) {
                out.append(',');
            }
            out.append('"').append(e.getKey()).append("\":");
            Object v = e.getValue();
            if (v == null || v instanceof Number || v instanceof Boolean) {
                out.append(v);
            } else {
                out.append('"').append(v.toString().replace("\\", "\\\\").replace("\"", "\\\""))
                    .append('"');
            }
        }
        System.out.println(out.append('}'));
    }
}
