import java.math.BigDecimal;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;
import org.apache.flink.util.CloseableIterator;

import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Reads one Kafka topic from its start to its current end with Flink SQL's own changelog formats
 * (debezium-json, canal-json), in a local MiniCluster, and prints the table a Flink user's sink
 * would end up with: one JSON line per row, every value as exact text.
 *
 * <p>Usage: {@code MaterializeTopic <bootstrap> <topic> <format> <columns> [<option>=<value>...]},
 * e.g. {@code "id INT, name STRING, PRIMARY KEY (id) NOT ENFORCED"} and
 * {@code debezium-json.timestamp-format.standard=ISO-8601}; or
 * {@code MaterializeTopic --ddl <CREATE TABLE ...>}: a Kafka table's DDL as a user writes it
 * (the documentation's, tests/integration/test_recipes.py), read to the topic's current end.
 *
 * <p>The changelog is applied by primary key as an upsert sink does, and every retraction
 * (-U, -D) is checked against the row it removes, so a before-image that differs from what was
 * inserted is caught too. Exit 0 with the rows; exit 2 with Flink's message when the job fails
 * (a record Flink cannot parse fails it: ignore-parse-errors is never set); exit 3 when the
 * changelog retracts a row it never had.
 */
public final class MaterializeTopic {
    // exact and fixed-width, so the Python side compares text with text
    private static final DateTimeFormatter LOCAL =
            DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSSSSSSSS");

    public static void main(String[] args) throws Exception {
        if (args.length < 4 && !(args.length == 2 && args[0].equals("--ddl"))) {
            System.err.println(
                    "usage: MaterializeTopic <bootstrap> <topic> <format> <columns> [<k>=<v>...]");
            System.exit(64);
        }
        TableEnvironment tables = TableEnvironment.create(
                EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(settings()).build());
        String table = "t";
        String select = "SELECT * FROM t";
        if (args[0].equals("--ddl")) {
            // a user's CREATE TABLE as given, read to the topic's current end by a hint
            tables.executeSql(args[1]);
            table = tables.listTables()[0];
            select = "SELECT * FROM `" + table.replace("`", "``")
                    + "` /*+ OPTIONS('scan.bounded.mode'='latest-offset') */";
        } else {
            tables.executeSql(ddl(args));
        }
        List<String> key = tables.from(table).getResolvedSchema().getPrimaryKey()
                .orElseThrow(() -> new IllegalArgumentException("the columns need a PRIMARY KEY"))
                .getColumns();
        Map<List<Object>, Row> rows;
        try {
            rows = materialize(tables.executeSql(select), key);
        } catch (Exception e) {
            System.err.println("Flink failed: " + causes(e));
            System.exit(2);
            return;
        }
        ObjectMapper json = new ObjectMapper();
        for (Row row : rows.values()) {
            Map<String, String> line = new LinkedHashMap<>();
            for (String name : Objects.requireNonNull(row.getFieldNames(true))) {
                line.put(name, text(row.getField(name)));
            }
            System.out.println(json.writeValueAsString(line));
        }
    }

    /** One slot, no restarts: a parse error must end the job at once, not be retried. */
    private static Configuration settings() {
        Configuration conf = new Configuration();
        conf.setString("parallelism.default", "1");
        conf.setString("restart-strategy.type", "none");
        conf.setString("table.exec.resource.default-parallelism", "1");
        return conf;
    }

    /** The table over the whole topic as it stands now: bounded, so the query ends. */
    private static String ddl(String[] args) {
        StringBuilder with = new StringBuilder()
                .append("'connector'='kafka', 'topic'='").append(quote(args[1]))
                .append("', 'properties.bootstrap.servers'='").append(quote(args[0]))
                .append("', 'properties.group.id'='sparkcdc-flink-consumer'")
                .append(", 'scan.startup.mode'='earliest-offset'")
                .append(", 'scan.bounded.mode'='latest-offset'")
                .append(", 'format'='").append(quote(args[2])).append("'");
        for (int i = 4; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq < 1) {
                throw new IllegalArgumentException("option '" + args[i] + "' is not <key>=<value>");
            }
            with.append(", '").append(quote(args[i].substring(0, eq))).append("'='")
                    .append(quote(args[i].substring(eq + 1))).append("'");
        }
        return "CREATE TABLE t (" + args[3] + ") WITH (" + with + ")";
    }

    private static String quote(String text) {
        return text.replace("'", "''");
    }

    /** +I/+U put the row under its key, -U/-D remove it; a retraction must match the row held. */
    private static Map<List<Object>, Row> materialize(TableResult result, List<String> key)
            throws Exception {
        Map<List<Object>, Row> table = new LinkedHashMap<>();
        try (CloseableIterator<Row> changes = result.collect()) {
            while (changes.hasNext()) {
                Row change = changes.next();
                List<Object> id = new ArrayList<>();
                for (String name : key) {
                    id.add(change.getField(name));
                }
                RowKind kind = change.getKind();
                change.setKind(RowKind.INSERT);
                if (kind == RowKind.INSERT || kind == RowKind.UPDATE_AFTER) {
                    table.put(id, change);
                    continue;
                }
                Row held = table.remove(id);
                if (!change.equals(held)) {
                    System.err.println(kind.shortString() + " of " + change + " but the table held " + held);
                    System.exit(3);
                }
            }
        }
        return table;
    }

    /** The value as exact text: plain decimals, full-width timestamps, bytes as hex. */
    private static String text(Object value) {
        if (value == null) {
            return null;
        }
        if (value instanceof BigDecimal) {
            return ((BigDecimal) value).toPlainString();
        }
        if (value instanceof LocalDateTime) {
            return LOCAL.format((LocalDateTime) value);
        }
        if (value instanceof Instant) {
            return LOCAL.format(LocalDateTime.ofInstant((Instant) value, ZoneOffset.UTC)) + "Z";
        }
        if (value instanceof byte[]) {
            return HexFormat.of().formatHex((byte[]) value);
        }
        return value.toString(); // numbers, booleans, strings, LocalDate
    }

    /** Flink's exception and every cause below it: the parse error is at the bottom. */
    private static String causes(Throwable error) {
        StringBuilder text = new StringBuilder();
        for (Throwable e = error; e != null; e = e.getCause()) {
            text.append(text.length() == 0 ? "" : "\n  caused by: ").append(e);
        }
        return text.toString();
    }
}
