import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.Header;
import io.debezium.engine.format.Json;
import io.debezium.engine.format.KeyValueHeaderChangeEventFormat;
import java.io.IOException;
import java.io.Reader;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Runs a Debezium embedded engine and appends one JSON line per record to a file.
 *
 * <p>Usage: {@code java -cp 'classes:lib/*' CaptureToFile connector.properties out.jsonl}. The properties
 * are the engine's and the connector's (see tests/debezium_harness.py). Each line is
 * {@code {"topic": ..., "key": <JSON or null>, "value": <JSON or null>, "headers": {name: <JSON or string>}}},
 * where key, value and header values are the JsonConverter's text spliced in unchanged (value null for a
 * tombstone). The file is flushed after every batch, before the batch's offsets are marked processed.
 * SIGTERM closes the engine (exit status 143); an engine failure prints one line starting with
 * "CaptureToFile: engine failed:" to stderr and exits with status 1.
 */
public final class CaptureToFile {
    private static final ObjectMapper JSON = new ObjectMapper()
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    private CaptureToFile() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: CaptureToFile <connector.properties> <out.jsonl>");
            System.exit(2);
        }
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
                System.getProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn"));
        Properties props = new Properties();
        try (Reader in = Files.newBufferedReader(Path.of(args[0]), StandardCharsets.UTF_8)) {
            props.load(in);
        }
        Writer out = Files.newBufferedWriter(Path.of(args[1]), StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        CountDownLatch finished = new CountDownLatch(1);
        AtomicReference<String> failure = new AtomicReference<>();
        AtomicBoolean stopping = new AtomicBoolean();

        DebeziumEngine<ChangeEvent<String, String>> engine;
        try {
            engine = DebeziumEngine.create(KeyValueHeaderChangeEventFormat.of(Json.class, Json.class, Json.class))
                    .using(props)
                    .notifying((List<ChangeEvent<String, String>> records,
                            DebeziumEngine.RecordCommitter<ChangeEvent<String, String>> committer) -> {
                        writeBatch(out, records);
                        for (ChangeEvent<String, String> record : records) {
                            committer.markProcessed(record);
                        }
                        committer.markBatchFinished();
                    })
                    .using((boolean success, String message, Throwable error) -> {
                        if (!success) {
                            failure.set(message + (error == null ? "" : " (" + error + ")"));
                        }
                        finished.countDown();
                    })
                    .build();
        }
        catch (RuntimeException e) {
            System.err.println("CaptureToFile: engine failed: " + (failure.get() != null ? failure.get() : e));
            System.exit(1);
            return;
        }

        Thread hook = new Thread(() -> {
            stopping.set(true);
            closeEngine(engine, finished);
            synchronized (out) {
                try {
                    out.close();
                }
                catch (IOException ignored) {
                    // nothing left to do at exit
                }
            }
        }, "capture-to-file-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);

        engine.run(); // returns once the engine has stopped and called the completion callback
        finished.await();
        if (stopping.get()) {
            return; // SIGTERM: the shutdown hook finishes the job
        }
        Runtime.getRuntime().removeShutdownHook(hook);
        synchronized (out) {
            out.close();
        }
        if (failure.get() != null) {
            System.err.println("CaptureToFile: engine failed: " + failure.get());
            System.exit(1);
        }
    }

    /** Appends the batch's lines and flushes them (an IOException fails the engine). */
    private static void writeBatch(Writer out, List<ChangeEvent<String, String>> records) {
        synchronized (out) {
            try {
                for (ChangeEvent<String, String> record : records) {
                    out.write(line(record));
                    out.write('\n');
                }
                out.flush();
            }
            catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** One record as a JSON object; the converters' JSON is compact (one line) and spliced in unchanged. */
    static String line(ChangeEvent<String, String> record) throws IOException {
        StringBuilder sb = new StringBuilder(256);
        sb.append("{\"topic\":").append(JSON.writeValueAsString(record.destination()));
        sb.append(",\"key\":").append(record.key() == null ? "null" : record.key());
        sb.append(",\"value\":").append(record.value() == null ? "null" : record.value());
        sb.append(",\"headers\":{");
        String sep = "";
        for (Header<String> header : record.<String>headers()) {
            sb.append(sep).append(JSON.writeValueAsString(header.getKey())).append(':');
            sb.append(jsonOrString(header.getValue()));
            sep = ",";
        }
        return sb.append("}}").toString();
    }

    /** The text itself when it is one JSON value, else the text as a JSON string. */
    private static String jsonOrString(String text) throws IOException {
        if (text == null) {
            return "null";
        }
        try {
            JsonNode node = JSON.readTree(text);
            if (node == null || node.isMissingNode()) {
                return JSON.writeValueAsString(text);
            }
            return text.indexOf('\n') < 0 ? text : JSON.writeValueAsString(node);
        }
        catch (IOException notJson) {
            return JSON.writeValueAsString(text);
        }
    }

    /** Closes the engine (retrying while its tasks are starting) and waits up to 25 s for it to finish. */
    private static void closeEngine(DebeziumEngine<?> engine, CountDownLatch finished) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (finished.getCount() > 0) {
            try {
                engine.close();
                break;
            }
            catch (IllegalStateException starting) {
                if (!String.valueOf(starting.getMessage()).contains("starting") || System.nanoTime() > deadline) {
                    break; // already stopping or stopped
                }
                sleep(100);
            }
            catch (IOException e) {
                System.err.println("CaptureToFile: closing the engine failed: " + e);
                break;
            }
        }
        try {
            finished.await(25, TimeUnit.SECONDS);
        }
        catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        }
        catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
