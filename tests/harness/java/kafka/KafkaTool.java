import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The test-only Kafka client of tests/harness/kafka.py: {@code java KafkaTool BOOTSTRAP} reads commands from
 * stdin, one a line with tab-separated fields, and answers each on stdout with its data lines and then
 * {@code ok} or {@code error<TAB>message} (one line). It keeps one admin client and one producer open.
 *
 * <pre>
 * ready   TOPIC TIMEOUT_MS        retry creating TOPIC (1 partition) until the broker accepts it and the
 *                                 partition has a leader (the broker is serving requests)
 * create  TOPIC PARTITIONS        create a topic (replication factor 1) and wait for its leaders
 * produce TOPIC PARTITION|- N     then N lines KEY TAB VALUE: send them in order (acks=all, idempotent),
 *                                 wait for all; answers PARTITION TAB OFFSET for each
 * dump    TOPIC                   every record of every partition, from the start up to the end offsets
 *                                 seen first, by partition and offset:
 *                                 PARTITION TAB OFFSET TAB KEY TAB VALUE TAB HEADERS
 * </pre>
 *
 * <p>Keys, values and header values are base64, "-" for null; HEADERS is "NAME:VALUE" pairs (name base64)
 * joined by ",", empty when none. End of stdin closes the clients and exits with status 0.
 */
public final class KafkaTool {
    private static final Base64.Encoder B64 = Base64.getEncoder();
    private static final Base64.Decoder UNB64 = Base64.getDecoder();

    private final String bootstrap;
    private final Admin admin;
    private final PrintStream out;
    private KafkaProducer<byte[], byte[]> producer;

    private KafkaTool(String bootstrap, PrintStream out) {
        this.bootstrap = bootstrap;
        this.admin = admin(bootstrap);
        this.out = out;
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: KafkaTool BOOTSTRAP (commands on stdin)");
            System.exit(2);
        }
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
                System.getProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn"));
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        KafkaTool tool = new KafkaTool(args[0], out);
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] command = line.split("\t", -1);
            try {
                tool.run(command, in);
                out.println("ok");
            }
            catch (Exception e) {
                Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                out.println("error\t" + command[0] + " failed: " + String.valueOf(cause).replaceAll("\\s+", " "));
            }
            out.flush();
        }
        tool.close();
        System.exit(0); // the clients are closed; do not wait for a straggling thread
    }

    private void run(String[] command, BufferedReader in) throws Exception {
        switch (command.length > 0 ? command[0] : "") {
            case "ready" -> ready(field(command, 1), Long.parseLong(field(command, 2)));
            case "create" -> create(field(command, 1), Integer.parseInt(field(command, 2)));
            case "produce" -> {
                List<String> lines = new ArrayList<>();
                for (int i = Integer.parseInt(field(command, 3)); i > 0; i--) {
                    String line = in.readLine();
                    if (line == null) {
                        throw new IllegalArgumentException("stdin ended inside a produce command");
                    }
                    lines.add(line);
                }
                String partition = field(command, 2);
                produce(field(command, 1), partition.equals("-") ? null : Integer.valueOf(partition), lines);
            }
            case "dump" -> dump(field(command, 1));
            default -> throw new IllegalArgumentException("unknown command " + String.join(" ", command));
        }
    }

    private static String field(String[] command, int index) {
        if (index >= command.length) {
            throw new IllegalArgumentException("missing field " + index + " in " + String.join(" ", command));
        }
        return command[index];
    }

    private void close() {
        if (producer != null) {
            producer.close(Duration.ofSeconds(10));
        }
        admin.close(Duration.ofSeconds(10));
    }

    private static Admin admin(String bootstrap) {
        Properties config = new Properties();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "2000");
        config.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        config.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        config.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "50");
        config.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "200");
        return Admin.create(config);
    }

    private void ready(String topic, long timeoutMs) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        Throwable last = null;
        while (System.currentTimeMillis() < deadline) {
            try {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            }
            catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    last = e.getCause();
                    Thread.sleep(50);
                    continue;
                }
            }
            try {
                if (leaders(topic) == 1) {
                    return;
                }
            }
            catch (ExecutionException e) {
                last = e.getCause();
            }
            Thread.sleep(50);
        }
        throw new IllegalStateException("the broker did not create a topic with a leader within " + timeoutMs
                + " ms" + (last == null ? "" : "; last error: " + last));
    }

    private void create(String topic, int partitions) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
        long deadline = System.currentTimeMillis() + 30000;
        while (ledOrUnknown(topic) < partitions) { // just created, its metadata may not be known yet
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("topic " + topic + " has no leader for some partitions");
            }
            Thread.sleep(50);
        }
    }

    /** The number of partitions of the topic that have a leader, 0 while the topic is not known yet. */
    private int ledOrUnknown(String topic) throws Exception {
        try {
            return leaders(topic);
        }
        catch (IllegalArgumentException e) {
            return 0;
        }
    }

    /** The number of partitions of the topic that have a leader. */
    private int leaders(String topic) throws Exception {
        int led = 0;
        for (TopicPartitionInfo partition : describe(topic).partitions()) {
            led += partition.leader() != null ? 1 : 0;
        }
        return led;
    }

    private TopicDescription describe(String topic) throws Exception {
        try {
            return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        }
        catch (ExecutionException e) {
            if (e.getCause() instanceof UnknownTopicOrPartitionException) {
                throw new IllegalArgumentException("topic " + topic + " does not exist");
            }
            throw e;
        }
    }

    private void produce(String topic, Integer partition, List<String> lines) throws Exception {
        if (producer == null) {
            Properties config = new Properties();
            config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            config.put(ProducerConfig.ACKS_CONFIG, "all");
            config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
            config.put(ProducerConfig.LINGER_MS_CONFIG, "0");
            config.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
            config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
            config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
            producer = new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
        }
        List<Future<RecordMetadata>> sent = new ArrayList<>(lines.size());
        for (String line : lines) {
            String[] fields = line.split("\t", -1);
            if (fields.length != 2) {
                throw new IllegalArgumentException("expected KEY<TAB>VALUE, got " + line);
            }
            sent.add(producer.send(new ProducerRecord<>(topic, partition, bytes(fields[0]), bytes(fields[1]))));
        }
        producer.flush();
        List<String> answer = new ArrayList<>(sent.size());
        for (Future<RecordMetadata> ack : sent) {
            RecordMetadata meta = ack.get();
            answer.add(meta.partition() + "\t" + meta.offset());
        }
        answer.forEach(out::println);
    }

    private void dump(String topic) throws Exception {
        List<TopicPartition> assigned = new ArrayList<>();
        for (TopicPartitionInfo partition : describe(topic).partitions()) {
            assigned.add(new TopicPartition(topic, partition.partition()));
        }
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false");
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config, new ByteArrayDeserializer(),
                new ByteArrayDeserializer())) {
            consumer.assign(assigned);
            consumer.seekToBeginning(assigned);
            Map<TopicPartition, Long> end = consumer.endOffsets(assigned);
            long deadline = System.currentTimeMillis() + 60000;
            while (!caughtUp(consumer, end)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("could not read " + topic + " up to " + end + " in 60 s");
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(100))) {
                    if (record.offset() < end.get(new TopicPartition(topic, record.partition()))) {
                        got.add(record);
                    }
                }
            }
        }
        got.sort(Comparator.<ConsumerRecord<byte[], byte[]>>comparingInt(ConsumerRecord::partition)
                .thenComparingLong(ConsumerRecord::offset));
        for (ConsumerRecord<byte[], byte[]> record : got) {
            StringBuilder headers = new StringBuilder();
            for (Header header : record.headers()) {
                headers.append(headers.length() == 0 ? "" : ",")
                        .append(text(header.key().getBytes(StandardCharsets.UTF_8))).append(':')
                        .append(text(header.value()));
            }
            out.println(record.partition() + "\t" + record.offset() + "\t" + text(record.key()) + "\t"
                    + text(record.value()) + "\t" + headers);
        }
    }

    private static boolean caughtUp(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> partition : end.entrySet()) {
            if (consumer.position(partition.getKey()) < partition.getValue()) {
                return false;
            }
        }
        return true;
    }

    private static byte[] bytes(String field) {
        return field.equals("-") ? null : UNB64.decode(field);
    }

    private static String text(byte[] data) {
        return data == null ? "-" : B64.encodeToString(data);
    }
}
