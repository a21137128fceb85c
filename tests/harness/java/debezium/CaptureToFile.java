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
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Runs a Debezium embedded engine and appends one JSON line per record to a file, and optionally first
 * produces the records to Kafka.
 *
 * <p>Usage: {@code java -cp 'classes:lib/*' CaptureToFile connector.properties out.jsonl [bootstrap]}. The
 * properties are the engine's and the connector's (see tests/harness/debezium.py). Each line is
 * {@code {"topic": ..., "key": <JSON or null>, "value": <JSON or null>, "headers": {name: <JSON or string>}}},
 * where key, value and header values are the JsonConverter's text spliced in unchanged (value null for a
 * tombstone). The file is flushed after every batch, before the batch's offsets are marked processed.
 *
 * <p>With a Kafka bootstrap address ({@code host:port}) each batch is first produced to Kafka (acks=all,
 * idempotent): topic = the record's destination, key, value and headers = the same JsonConverter text as
 * UTF-8 bytes (a null value stays null: a tombstone), partition chosen by the default partitioner. Only
 * once every record of the batch is acknowledged is the batch appended to the file, so the file holds
 * exactly what reached Kafka, in the same order. A failed send fails the engine.
 * SIGTERM closes the engine (exit status 143); an engine failure prints one line starting with
 * "CaptureToFile: engine failed:" to stderr and exits with status 1.
 */
public final class CaptureToFile {
    private static final ObjectMapper JSON = new ObjectMapper()
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    private CaptureToFile() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2 && args.length != 3) {
            System.err.println("usage: CaptureToFile <connector.properties> <out.jsonl> [kafka-bootstrap]");
            System.exit(2);
        }
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
                System.getProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn"));
        // a broker that cannot be reached is reported once, as the failed send, not every 50 ms
        System.setProperty("org.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient", "error");
        Properties props = new Properties();
        try (Reader in = Files.newBufferedReader(Path.of(args[0]), StandardCharsets.UTF_8)) {
            props.load(in);
        }
        Writer out = Files.newBufferedWriter(Path.of(args[1]), StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        KafkaProducer<byte[], byte[]> producer = args.length == 3 ? producer(args[2]) : null;
        CountDownLatch finished = new CountDownLatch(1);
        AtomicReference<String> failure = new AtomicReference<>();
        AtomicBoolean stopping = new AtomicBoolean();

        DebeziumEngine<ChangeEvent<String, String>> engine;
        try {
            engine = DebeziumEngine.create(KeyValueHeaderChangeEventFormat.of(Json.class, Json.class, Json.class))
                    .using(props)
                    .notifying((List<ChangeEvent<String, String>> records,
                            DebeziumEngine.RecordCommitter<ChangeEvent<String, String>> committer) -> {
                        if (producer != null) {
                            produceBatch(producer, records);
                        }
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
            closeProducer(producer);
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
        closeProducer(producer);
        synchronized (out) {
            out.close();
        }
        if (failure.get() != null) {
            System.err.println("CaptureToFile: engine failed: " + failure.get());
            System.exit(1);
        }
    }

    /** An idempotent producer of byte keys and values that waits for every in-sync replica. */
    private static KafkaProducer<byte[], byte[]> producer(String bootstrap) {
        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        config.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        config.put(ProducerConfig.CLIENT_ID_CONFIG, "capture-to-file");
        return new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
    }

    /** Sends the batch, flushes and waits for every acknowledgement (a failure fails the engine). */
    private static void produceBatch(KafkaProducer<byte[], byte[]> producer,
            List<ChangeEvent<String, String>> records) {
        List<Future<RecordMetadata>> sent = new ArrayList<>(records.size());
        for (ChangeEvent<String, String> record : records) {
            RecordHeaders headers = new RecordHeaders();
            for (Header<String> header : record.<String>headers()) {
                headers.add(header.getKey(), utf8(header.getValue()));
            }
            Future<RecordMetadata> ack = producer.send(new ProducerRecord<>(record.destination(), null,
                    utf8(record.key()), utf8(record.value()), headers));
            if (ack.isDone()) {
                acknowledged(ack); // failed already (no metadata within max.block.ms): stop at the first
            }
            sent.add(ack);
        }
        producer.flush();
        for (Future<RecordMetadata> ack : sent) {
            acknowledged(ack);
        }
    }

    private static void acknowledged(Future<RecordMetadata> ack) {
        try {
            ack.get();
        }
        catch (ExecutionException e) {
            throw new IllegalStateException("producing to Kafka failed: " + e.getCause(), e.getCause());
        }
        catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while producing to Kafka", e);
        }
    }

    private static byte[] utf8(String text) {
        return text == null ? null : text.getBytes(StandardCharsets.UTF_8);
    }

    private static void closeProducer(KafkaProducer<byte[], byte[]> producer) {
        if (producer != null) {
            producer.close(Duration.ofSeconds(10));
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
