"""The Kafka harness (tests/harness/kafka.py) against a real Apache Kafka 4.3.0 broker, and a real Debezium
3.6.1.Final capture (tests/harness/debezium.py) producing into it.

The broker is the session's ``kafka_broker`` (KRaft, broker and controller in one JVM); each test uses its
own topic names. What the harness puts in is read back from the broker by a separate consumer: keys,
values and tombstones byte for byte, in order, with their offsets, on one and on several partitions.
"""

from __future__ import annotations

import json
import re
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.harness.debezium import DebeziumCapture, payload
from tests.harness.kafka import READY_TOPIC, KafkaBroker, KafkaHarnessError, KafkaRecord, cluster_id
from tests.harness.postgres import PgDatabase

pytestmark = pytest.mark.kafka


def _topic(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_the_broker_serves_requests_on_its_loopback_port(kafka_broker: KafkaBroker) -> None:
    host, port = kafka_broker.bootstrap.split(":")
    assert host == "127.0.0.1" and int(port) == kafka_broker.port != kafka_broker.controller_port
    with socket.create_connection((host, int(port)), timeout=5):
        pass
    props = kafka_broker.properties()
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == f"1@127.0.0.1:{kafka_broker.controller_port}"
    assert kafka_broker.root is not None and (kafka_broker.root / "data" / "meta.properties").is_file()
    meta = (kafka_broker.root / "data" / "meta.properties").read_text()
    assert f"cluster.id={kafka_broker.cluster_id}" in meta and "node.id=1" in meta
    assert kafka_broker.records(READY_TOPIC) == []  # start() created it: the controller had accepted a topic
    assert 0 < kafka_broker.start_seconds < 60


def test_records_round_trip_in_order_with_offsets_and_tombstones(kafka_broker: KafkaBroker) -> None:
    topic = _topic("lines")  # not created first: the broker creates it with one partition
    line = b'{"action":"I","schema":"public","table":"t","columns":[{"name":"id","value":1}]}'
    sent: list[tuple[bytes | None, bytes | None]] = [
        (None, line),  # a wal2json line: no key
        (b'{"id":1}', b'{"op":"c"}'),
        (b'{"id":1}', None),  # a tombstone
        (b"", b""),  # empty is not null
        (b"\x00\t\n\xff", "é\n€".encode()),  # any bytes
    ]
    assert kafka_broker.produce(topic, sent) == [(0, offset) for offset in range(5)]
    assert kafka_broker.produce(topic, [(b"k", b"later")]) == [(0, 5)]
    expected = [KafkaRecord(topic, 0, offset, key, value) for offset, (key, value) in enumerate(sent)]
    assert kafka_broker.records(topic) == [*expected, KafkaRecord(topic, 0, 5, b"k", b"later")]


def test_a_topic_with_several_partitions(kafka_broker: KafkaBroker) -> None:
    topic = _topic("parts")
    kafka_broker.create_topic(topic, partitions=3)
    assert kafka_broker.records(topic) == []
    assert kafka_broker.produce(topic, [(None, b"a"), (None, b"b")], partition=2) == [(2, 0), (2, 1)]
    keyed = [(f"key{i % 4}".encode(), f"v{i}".encode()) for i in range(12)]
    placed = kafka_broker.produce(topic, keyed)
    partition_of = {key: p for (key, _), (p, _) in zip(keyed, placed, strict=True)}
    assert all(p == partition_of[key] for (key, _), (p, _) in zip(keyed, placed, strict=True))  # by key
    records = kafka_broker.records(topic)
    assert [(r.partition, r.offset) for r in records] == sorted((r.partition, r.offset) for r in records)
    for p in range(3):  # each partition: offsets from 0, records in the order they were sent
        mine = [r for r in records if r.partition == p]
        assert [r.offset for r in mine] == list(range(len(mine)))
        sent: list[tuple[bytes | None, bytes]] = [(None, b"a"), (None, b"b")] if p == 2 else []
        sent += [(k, v) for (k, v), (q, _) in zip(keyed, placed, strict=True) if q == p]
        assert [(r.key, r.value) for r in mine] == sent
    with pytest.raises(KafkaHarnessError, match="create failed: .*TopicExistsException"):
        kafka_broker.create_topic(topic)
    with pytest.raises(KafkaHarnessError, match="dump failed: .*topic nothing-here does not exist"):
        kafka_broker.records("nothing-here")
    on_0 = sum(r.partition == 0 for r in records)
    assert kafka_broker.produce(topic, [(None, b"still serving")], partition=0) == [(0, on_0)]


def test_a_broker_of_its_own_stops_on_exit_and_leaves_nothing() -> None:
    with KafkaBroker(heap="256m") as broker:
        root, port = broker.root, broker.port
        assert root is not None and root.is_dir()
        assert broker.produce("own", [(b"k", b"v")]) == [(0, 0)]
        assert [r.value for r in broker.records("own")] == [b"v"]
    assert broker.exit_status == 143, broker.exit_log  # SIGTERM, handled by Kafka's shutdown hook
    assert "shutting down" in broker.exit_log.lower()
    assert not root.exists() and broker.root is None
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    with pytest.raises(KafkaHarnessError, match="not running"):
        broker.produce("own", [(None, b"after the end")])


@pytest.mark.parametrize(
    ("options", "why"),
    [
        (
            {"extra": {"controller.quorum.voters": "nobody"}},
            "formatting the storage failed: .*ConfigException",
        ),
        ({"heap": "1m"}, r"initialization of VM \| Too small maximum heap"),
    ],
    ids=["storage-not-formatted", "jvm-refused"],
)
def test_a_broker_that_cannot_start_is_reported_in_one_line_with_its_log(options: Any, why: str) -> None:
    broker = KafkaBroker(**options)
    with pytest.raises(KafkaHarnessError) as failure:
        broker.start()
    message = str(failure.value)
    assert "\n" not in message
    assert message.startswith("the Kafka broker exited with status 1 while starting; log ")
    assert re.search(why, message), message
    assert broker.root is None and broker.exit_status == 1


def test_a_cluster_id_is_a_kafka_uuid() -> None:
    ids = {cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 22 and not i.startswith("-") and set(i) <= set(_URLSAFE) for i in ids)


_URLSAFE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _as_file_line(record: KafkaRecord) -> dict[str, Any]:
    """A Kafka record as CaptureToFile writes it to its file."""

    def parsed(data: bytes | None) -> Any:
        return None if data is None else json.loads(data)

    return {
        "topic": record.topic,
        "key": parsed(record.key),
        "value": parsed(record.value),
        "headers": {name: parsed(value) for name, value in record.headers},
    }


@pytest.mark.postgres
def test_debezium_produces_to_kafka_what_it_writes_to_its_file(
    kafka_broker: KafkaBroker, pg_db: PgDatabase, tmp_path: Path
) -> None:
    prefix = _topic("cap")
    pg_db.execute("CREATE TABLE public.items (id int PRIMARY KEY, name text)")
    # a topic the test made with two partitions is kept (the others are created on first use, with one)
    kafka_broker.create_topic(f"{prefix}.transaction", partitions=2)
    capture = DebeziumCapture(
        pg_db.dsn, tmp_path / "out.jsonl", ["public.items"], kafka=kafka_broker.bootstrap, topic_prefix=prefix
    )
    with capture:
        pg_db.execute("INSERT INTO public.items VALUES (1, 'first')")
        pg_db.execute("UPDATE public.items SET name = 'second' WHERE id = 1")
        pg_db.execute("UPDATE public.items SET id = 2 WHERE id = 1")  # delete + tombstone + create
        pg_db.execute("DELETE FROM public.items WHERE id = 2")
        capture.sync()
        lines = capture.lines()
    assert capture.exit_status == 143, capture.exit_log

    items = f"{prefix}.public.items"
    assert {line["topic"] for line in lines} == {items, capture.marker_topic, capture.transaction_topic}
    for topic in (items, capture.marker_topic):  # one partition: Kafka's order is the file's
        records = kafka_broker.records(topic)
        assert {r.partition for r in records} == {0}
        assert [r.offset for r in records] == list(range(len(records)))
        assert [_as_file_line(r) for r in records] == [line for line in lines if line["topic"] == topic]
    transactions = kafka_broker.records(capture.transaction_topic)
    in_file = [line for line in lines if line["topic"] == capture.transaction_topic]
    as_lines = [_as_file_line(r) for r in transactions]
    assert sorted(map(json.dumps, as_lines)) == sorted(map(json.dumps, in_file))
    for p in (0, 1):  # each partition in the file's order
        mine = [line for r, line in zip(transactions, as_lines, strict=True) if r.partition == p]
        assert mine == [line for line in in_file if line in mine]

    events = [line for line in lines if line["topic"] == items]
    ops = [payload(e["value"]) and payload(e["value"])["op"] for e in events]
    assert ops == ["c", "u", "d", None, "c", "d", None]  # a tombstone after each delete
    assert [payload(e["key"]) for e in events] == [{"id": 1}] * 4 + [{"id": 2}] * 3
    assert payload(events[2]["headers"]["__debezium.newkey"]) == {"id": 2}
    assert payload(events[4]["headers"]["__debezium.oldkey"]) == {"id": 1}
    tombstones = [r for r in kafka_broker.records(items) if r.value is None]
    assert [json.loads(r.key or b"null")["payload"] for r in tombstones] == [{"id": 1}, {"id": 2}]
