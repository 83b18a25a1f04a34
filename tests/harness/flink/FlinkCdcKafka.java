import java.util.Map;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The Flink CDC side of bench/backlog.py: a pipeline as a Flink SQL user writes it, Flink CDC's
 * MySQL SQL connector into Flink's Kafka sink, {@code INSERT INTO sink SELECT * FROM src}, in a
 * local MiniCluster of this JVM (one JVM per run, as {@code flink run} starts one).
 *
 * <p>Usage: {@code FlinkCdcKafka <request>}, the request one JSON object:
 * {@code {"columns": "<DDL column list with its PRIMARY KEY>", "parallelism": 2,
 * "source": {<the mysql-cdc table's WITH options>}, "sink": {<the kafka table's WITH options>}}}.
 * The job never ends by itself (the binlog is unbounded): the bench watches the topic and
 * kills this JVM once it holds the expected records. A failed job is printed to stderr with its
 * causes and ends the JVM with exit 2.
 */
public final class FlinkCdcKafka {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: FlinkCdcKafka <request as one JSON object>");
            System.exit(64);
        }
        JsonNode request = new ObjectMapper().readTree(args[0]);
        String parallelism = request.get("parallelism").asText();
        Configuration conf = new Configuration();
        conf.setString("parallelism.default", parallelism);
        conf.setString("taskmanager.numberOfTaskSlots", parallelism);
        conf.setString("table.exec.resource.default-parallelism", parallelism);
        conf.setString("restart-strategy.type", "none");
        TableEnvironment tables = TableEnvironment.create(
                EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());
        String columns = request.get("columns").asText();
        tables.executeSql(table("src", columns, "mysql-cdc", request.get("source")));
        tables.executeSql(table("sink", columns, "kafka", request.get("sink")));
        try {
            tables.executeSql("INSERT INTO sink SELECT * FROM src").await();
        } catch (Exception e) {
            System.err.println("the Flink job failed: " + causes(e));
            System.exit(2);
        }
    }

    private static String table(String name, String columns, String connector, JsonNode options) {
        StringBuilder ddl = new StringBuilder("CREATE TABLE ").append(name).append(" (")
                .append(columns).append(") WITH ('connector' = ").append(quote(connector));
        for (Map.Entry<String, JsonNode> option : (Iterable<Map.Entry<String, JsonNode>>) options::fields) {
            ddl.append(", ").append(quote(option.getKey())).append(" = ")
                    .append(quote(option.getValue().asText()));
        }
        return ddl.append(")").toString();
    }

    private static String quote(String text) {
        return "'" + text.replace("'", "''") + "'";
    }

    private static String causes(Throwable e) {
        StringBuilder text = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            text.append(text.length() == 0 ? "" : " <- ").append(t.getClass().getSimpleName())
                    .append(": ").append(t.getMessage());
        }
        return text.toString();
    }
}
