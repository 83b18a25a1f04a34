import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.ObjectOutputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;

import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.debezium.embedded.Connect;
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;

/**
 * The Debezium side of bench/vs_flinkcdc.py: Debezium's embedded engine (its MariaDB connector,
 * jars/debezium/pom.xml) with Kafka Connect's records (the Connect format: each change a
 * {@code SourceRecord} whose value holds the row as a {@code Struct}), every column of every row
 * read by a consumer that counts the changes by the bench's RowKinds.
 *
 * <p>One JVM serves every run of a bench, as FlinkCdcPeer.java does: it prints
 * {@code {"ready_ms": <JVM uptime>}} once, then reads one JSON request a line on stdin,
 * {@code {"name": "...", "properties": {<the engine's and the connector's properties>},
 * "binlog_offset": {"file": "...", "pos": 4, "gtids": "0-1-5"} or absent, "expected": <rows>, "timeout_s": 900}},
 * runs one engine and prints one JSON line: the rows counted by kind ({@code "+I"} for a
 * snapshot read or a create, {@code "-U"} and {@code "+U"} for one update event, which carries
 * both images, {@code "-D"} for a delete), {@code submit_s} (the engine built),
 * {@code first_row_s} and {@code last_row_s} (from the engine's start: its connections, its
 * schema read and its snapshot's or binlog's start count here, as a Flink job's do), or
 * {@code error}. The engine is closed once {@code expected} rows have arrived, or at the time
 * limit (then the counts show what was missing), or when it stops by itself.
 *
 * <p>Offsets go to a file store in a temp dir of the run's own. A binlog catch-up starts where
 * {@code binlog_offset} says: the harness writes that offset into the store before the engine
 * starts (the key and value as the engine's JSON converter writes them), and the connector, in
 * {@code snapshot.mode=recovery}, reads the tables' schemas from the server and streams from
 * the stored position: exact, whatever was written meanwhile.
 */
public final class DebeziumPeer {
    private static final String[] KINDS = {"+I", "-U", "+U", "-D"};

    /** One run's counts and times; the engine's consumer thread writes them. */
    private static final class Run {
        final long[] counts = new long[KINDS.length];
        final long expected;
        final CountDownLatch done = new CountDownLatch(1);
        final AtomicReference<String> error = new AtomicReference<>();
        long total;
        long firstNanos;
        long lastNanos;
        // the columns' values folded in, so that reading them is work the JIT cannot drop
        long touched;

        Run(long expected) {
            this.expected = expected;
        }

        void accept(SourceRecord record) {
            Struct value = (Struct) record.value();
            if (value == null) {
                return; // a tombstone (tombstones.on.delete is off; none are expected)
            }
            switch (value.getString("op")) {
                case "r", "c" -> {
                    touch(value.getStruct("after"));
                    counts[0]++;
                }
                case "u" -> {
                    touch(value.getStruct("before"));
                    touch(value.getStruct("after"));
                    counts[1]++;
                    counts[2]++;
                }
                case "d" -> {
                    touch(value.getStruct("before"));
                    counts[3]++;
                }
                default -> {
                    return;
                }
            }
            if (total == 0) {
                firstNanos = System.nanoTime();
            }
            total += value.getString("op").equals("u") ? 2 : 1;
            if (total >= expected && lastNanos == 0) {
                lastNanos = System.nanoTime();
                done.countDown();
            }
        }

        private void touch(Struct row) {
            for (Field field : row.schema().fields()) {
                Object column = row.get(field);
                touched += column == null ? 0 : column.hashCode();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper();
        System.out.println(json.writeValueAsString(
                Map.of("ready_ms", ManagementFactory.getRuntimeMXBean().getUptime())));
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            Map<String, Object> result;
            try {
                result = run(json.readTree(line));
            } catch (Exception e) {
                result = new LinkedHashMap<>();
                result.put("error", causes(e));
            }
            System.out.println(json.writeValueAsString(result));
            System.out.flush();
        }
    }

    private static Map<String, Object> run(JsonNode request) throws Exception {
        Path workdir = Files.createTempDirectory("sparkcdc-debezium-peer-");
        try {
            return run(request, workdir);
        } finally {
            try (Stream<Path> paths = Files.walk(workdir)) {
                paths.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
            }
        }
    }

    private static Map<String, Object> run(JsonNode request, Path workdir) throws Exception {
        Properties properties = new Properties();
        request.get("properties").fields()
                .forEachRemaining(p -> properties.setProperty(p.getKey(), p.getValue().asText()));
        Path offsets = workdir.resolve("offsets.dat");
        properties.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
        properties.setProperty("offset.storage.file.filename", offsets.toString());
        JsonNode binlogOffset = request.path("binlog_offset");
        if (!binlogOffset.isMissingNode()) {
            Map<String, Object> offset = new LinkedHashMap<>();
            offset.put("file", binlogOffset.get("file").asText());
            offset.put("pos", binlogOffset.get("pos").asLong());
            offset.put("gtids", binlogOffset.get("gtids").asText());
            writeOffset(offsets, properties.getProperty("name"), properties.getProperty("topic.prefix"), offset);
        }
        Run run = new Run(request.get("expected").asLong());
        long began = System.nanoTime();
        DebeziumEngine<ChangeEvent<SourceRecord, SourceRecord>> engine = DebeziumEngine.create(Connect.class)
                .using(properties)
                .using((success, message, error) -> {
                    if (!success) {
                        run.error.compareAndSet(null, "the engine stopped: " + message
                                + (error == null ? "" : " (" + causes(error) + ")"));
                    }
                    run.done.countDown();
                })
                .notifying((records, committer) -> {
                    for (ChangeEvent<SourceRecord, SourceRecord> record : records) {
                        run.accept(record.value());
                        committer.markProcessed(record);
                    }
                    committer.markBatchFinished();
                })
                .build();
        long built = System.nanoTime();
        Thread thread = new Thread(engine, "debezium-engine");
        thread.start();
        boolean ended = run.done.await(request.get("timeout_s").asLong(), TimeUnit.SECONDS);
        try {
            engine.close();
        } catch (IllegalStateException e) {
            // it stopped by itself (run.error says why, if it failed)
        }
        thread.join(TimeUnit.SECONDS.toMillis(60));
        Map<String, Object> result = new LinkedHashMap<>();
        if (run.error.get() != null && run.lastNanos == 0) {
            result.put("error", run.error.get());
        } else if (run.lastNanos == 0) {
            result.put("error", (ended ? "the engine ended" : "the engine ran out of time") + " with "
                    + run.total + " of " + run.expected + " rows");
        }
        Map<String, Long> counts = new LinkedHashMap<>();
        for (int i = 0; i < KINDS.length; i++) {
            counts.put(KINDS[i], run.counts[i]);
        }
        result.put("counts", counts);
        result.put("submit_s", (built - began) / 1e9);
        result.put("first_row_s", run.firstNanos == 0 ? null : (run.firstNanos - built) / 1e9);
        result.put("last_row_s", run.lastNanos == 0 ? null : (run.lastNanos - built) / 1e9);
        result.put("touched", run.touched);
        return result;
    }

    /**
     * Writes the connector's binlog position (file, pos and the server's GTID position there:
     * the MariaDB connector streams by GTID where the server has them) into a FileOffsetBackingStore's file: a serialized
     * map of the key ({@code ["<engine name>", {"server": "<topic.prefix>"}]}) to the offset,
     * both as the engine's schemaless JSON converter writes them.
     */
    private static void writeOffset(Path file, String engine, String server, Map<String, Object> offset)
            throws Exception {
        byte[] key;
        byte[] value;
        try (JsonConverter keys = new JsonConverter(); JsonConverter values = new JsonConverter()) {
            keys.configure(Map.of("schemas.enable", "false"), true);
            values.configure(Map.of("schemas.enable", "false"), false);
            key = keys.fromConnectData(engine, null, List.of(engine, Map.of("server", server)));
            value = values.fromConnectData(engine, null, offset);
        }
        HashMap<byte[], byte[]> raw = new HashMap<>();
        raw.put(key, value);
        try (ObjectOutputStream out = new ObjectOutputStream(Files.newOutputStream(file))) {
            out.writeObject(raw);
        }
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
