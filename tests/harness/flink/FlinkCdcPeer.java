import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.SinkFunction;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The Flink CDC side of bench/vs_flinkcdc.py: Flink CDC's MySQL SQL connector in a local
 * MiniCluster, its changelog (full rows, as Flink's Row) into a sink that counts RowKinds.
 *
 * <p>One JVM serves every run of a bench, so that its JIT warms up as the bench's Spark session
 * does: it prints {@code {"ready_ms": <JVM uptime>}} once, then reads one JSON request a line on
 * stdin, {@code {"name": "...", "columns": "<DDL column list with its PRIMARY KEY>",
 * "options": {<the mysql-cdc table's WITH options>}, "parallelism": 2, "expected": <rows>,
 * "timeout_s": 900}}, runs it as one job and prints one JSON line: the rows counted by RowKind
 * ({@code "+I"}, {@code "-U"}, {@code "+U"}, {@code "-D"}), {@code submit_s} (a MiniCluster
 * started and the job submitted), {@code first_row_s} and {@code last_row_s} (from the
 * submission's end), or {@code error}. A bounded job (scan.startup.mode=snapshot) ends by itself;
 * an unbounded one is cancelled once {@code expected} rows have arrived, or at the time limit
 * (then the counts show what was missing).
 */
public final class FlinkCdcPeer {
    // The sink's instances run in this JVM (a MiniCluster loads the job's classes from the
    // application class path), so they count into these.
    private static final AtomicLong[] COUNTS = new AtomicLong[RowKind.values().length];
    private static final AtomicLong TOTAL = new AtomicLong();
    private static volatile long expected;
    private static volatile long firstNanos;
    private static volatile long lastNanos;

    /** Counts each row by kind; notes when the first and the expected last arrived. */
    public static final class CountingSink implements SinkFunction<Row> {
        @Override
        public void invoke(Row row, Context context) {
            COUNTS[row.getKind().ordinal()].incrementAndGet();
            long n = TOTAL.incrementAndGet();
            if (n == 1) {
                firstNanos = System.nanoTime();
            }
            if (n >= expected) {
                lastNanos = System.nanoTime();
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
        for (int i = 0; i < COUNTS.length; i++) {
            COUNTS[i] = new AtomicLong();
        }
        TOTAL.set(0);
        expected = request.get("expected").asLong();
        firstNanos = 0;
        lastNanos = 0;
        int parallelism = request.get("parallelism").asInt();
        Configuration configuration = new Configuration();
        configuration.setString("parallelism.default", Integer.toString(parallelism));
        configuration.setString("taskmanager.numberOfTaskSlots", Integer.toString(parallelism));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(configuration);
        env.setParallelism(parallelism);
        StreamTableEnvironment tables = StreamTableEnvironment.create(env);
        StringBuilder ddl = new StringBuilder("CREATE TABLE src (")
                .append(request.get("columns").asText()).append(") WITH ('connector' = 'mysql-cdc'");
        request.get("options").fields().forEachRemaining(option -> ddl.append(", ")
                .append(quote(option.getKey())).append(" = ").append(quote(option.getValue().asText())));
        tables.executeSql(ddl.append(")").toString());
        tables.toChangelogStream(tables.from("src")).addSink(new CountingSink()).name("count-rowkinds");

        long began = System.nanoTime();
        JobClient job = env.executeAsync(request.get("name").asText());
        long submitted = System.nanoTime();
        long deadline = submitted + TimeUnit.SECONDS.toNanos(request.get("timeout_s").asLong());
        // the job's end, not its status: a MiniCluster of a finished job is shut down at once,
        // and asking it for a status then fails
        CompletableFuture<JobExecutionResult> finished = job.getJobExecutionResult();
        boolean bounded = request.get("options").path("scan.startup.mode").asText().equals("snapshot");
        while ((lastNanos == 0 || bounded) && !finished.isDone() && System.nanoTime() < deadline) {
            // a bounded job that has all its rows ends by itself: waiting for that shows extra
            // rows; an unbounded one is cancelled
            Thread.sleep(5);
        }
        boolean cancelled = false;
        if (!finished.isDone()) {
            cancelled = true;
            try {
                job.cancel().get();
            } catch (ExecutionException e) {
                // it ended meanwhile: its result below says how
            }
        }
        Map<String, Object> result = new LinkedHashMap<>();
        try {
            finished.get();
        } catch (ExecutionException e) {
            if (!cancelled) {
                result.put("error", "the Flink job failed: " + causes(e));
            }
        }
        if (lastNanos == 0 && !result.containsKey("error")) {
            result.put("error", "the job ended or ran out of time with " + TOTAL.get() + " of "
                    + expected + " rows");
        }
        Map<String, Long> counts = new LinkedHashMap<>();
        for (RowKind kind : RowKind.values()) {
            counts.put(kind.shortString(), COUNTS[kind.ordinal()].get());
        }
        result.put("counts", counts);
        result.put("submit_s", (submitted - began) / 1e9);
        result.put("first_row_s", firstNanos == 0 ? null : (firstNanos - submitted) / 1e9);
        result.put("last_row_s", lastNanos == 0 ? null : (lastNanos - submitted) / 1e9);
        return result;
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
