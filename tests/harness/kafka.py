"""A real Apache Kafka 4.3.0 broker (KRaft, broker and controller in one process) for the tests.

``kafka_classpath()`` builds once per machine a cache folder with the jars (Maven, from
``tests/harness/java/kafka/pom.xml``) and the compiled ``tests/harness/java/kafka/*.java``:
``FormatAndStart`` (Kafka's own StorageTool formats the storage, then the broker runs, in one JVM) and
``KafkaTool``, the tests' client.
``KafkaBroker`` starts the broker in a temporary folder on free loopback ports::

    with KafkaBroker() as kafka:                        # or the session fixture ``kafka_broker``
        kafka.create_topic("lines", partitions=2)
        kafka.produce("lines", [(b"k", b"v"), (b"k", None)])   # None value: a tombstone
        kafka.records("lines")    # [KafkaRecord(topic, partition, offset, key, value, headers), ...]

``start()`` returns once the broker has created a topic (``READY_TOPIC``) with a leader, so it serves
requests. The broker creates a missing topic on first use (one partition). ``create_topic``, ``produce``
and ``records`` are commands to one KafkaTool JVM started with the broker (tens of milliseconds each once
it is warm). On exit KafkaTool's input is closed, the broker gets SIGTERM (SIGKILL after 30 s) and the
temporary folder is removed. Needs Java 17+ and Maven (first build only).
"""

from __future__ import annotations

import base64
import os
import select
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.harness.javabuild import (
    cache_folder,
    cached_build,
    classpath_of,
    die_with_parent,
    file_tail,
    stop_process,
)
from tests.harness.postgres import free_port
from tests.harness.service import Service

KAFKA_VERSION = "4.3.0"
SOURCES = Path(__file__).resolve().parent / "java" / "kafka"
READY_TOPIC = "_harness.ready"
JAVA_SOURCES = ["FormatAndStart.java", "KafkaTool.java"]
#: Small and quick to start: the C1 compiler only, a serial collector, a small heap.
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Djava.awt.headless=true"]


class KafkaHarnessError(RuntimeError):
    """Building the Kafka programs, or starting, using or stopping the test broker, failed."""


@dataclass(frozen=True)
class KafkaRecord:
    """One record read back from a topic; ``value`` None is a tombstone."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def kafka_classpath() -> Path:
    """The cache folder holding ``lib/*.jar`` and ``classes/`` (``JAVA_SOURCES`` compiled), built when
    missing or when ``tests/harness/java/kafka/pom.xml`` or one of the sources changed (their hash is
    ``inputs.sha256``).

    The folder is ``$RESOLVER_KAFKA_CACHE`` or ``~/.cache/pg-change-resolver/kafka-4.3.0``, built atomically
    by :func:`tests.harness.javabuild.cached_build`. The Java class path is ``classpath_of(folder)``.
    """
    cache = cache_folder("RESOLVER_KAFKA_CACHE", f"kafka-{KAFKA_VERSION}")
    return cached_build(cache, SOURCES, JAVA_SOURCES, KAFKA_VERSION, KafkaHarnessError)


def cluster_id() -> str:
    """A new cluster id as Kafka writes one (``Uuid.randomUuid()``: 16 bytes, URL-safe base64 without
    padding, never starting with ``-``)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _b64(data: bytes | None) -> str:
    return "-" if data is None else base64.b64encode(data).decode()


def _unb64(text: str) -> bytes | None:
    return None if text == "-" else base64.b64decode(text)


class KafkaBroker(Service):
    """One Kafka broker and KRaft controller in one JVM, in a temporary folder, on loopback ports.

    ``heap`` is the JVM's ``-Xmx``; ``extra`` adds or overrides server properties. ``bootstrap`` is
    ``127.0.0.1:PORT`` of the PLAINTEXT listener; the controller listens on ``controller_port``. The folder
    (``root``) holds ``server.properties``, the data (``root/data``) and the server's log (``log``).
    """

    def __init__(self, *, heap: str = "512m", extra: dict[str, str] | None = None) -> None:
        self.heap = heap
        self.extra = dict(extra or {})
        self.port = self.controller_port = 0
        self.cluster_id = ""
        self.root: Path | None = None
        self.log = Path("/nonexistent")
        self.start_seconds = self.stop_seconds = 0.0
        self.exit_status: int | None = None  # the broker's, once stopped: 143 after a clean SIGTERM
        self.exit_log = ""  # the tail of its log, once stopped (the temporary folder is removed)
        self._proc: subprocess.Popen[bytes] | None = None
        self._tool: subprocess.Popen[bytes] | None = None
        self._buffer = b""  # what KafkaTool wrote that is not yet a whole line
        self._busy = False  # a command was sent and its answer not read (it failed or timed out)
        self._cache = Path("/nonexistent")

    @property
    def bootstrap(self) -> str:
        if self._proc is None:
            raise KafkaHarnessError("the Kafka test broker is not running")
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        """The server's properties (the data folder and the ports are those of the current start)."""
        data = self.root / "data" if self.root is not None else Path("/nonexistent")
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
        }
        return props | self.extra

    def start(self, timeout: float = 60.0) -> None:
        """Format a new storage folder, start the broker and wait until it creates ``READY_TOPIC``. A port
        taken between choosing and binding it is retried twice with new ports."""
        if self._proc is not None:
            raise KafkaHarnessError(f"the Kafka test broker is already running on {self.bootstrap}")
        self._cache = kafka_classpath()
        began = time.monotonic()
        for attempt in range(3):
            try:
                self._start_once(timeout)
                break
            except KafkaHarnessError:
                in_use = "Address already in use" in (
                    self.log.read_text(errors="replace") if self.log.exists() else ""
                )
                self.stop()
                if attempt == 2 or not in_use:
                    raise
            except BaseException:
                self.stop()
                raise
        self.start_seconds = time.monotonic() - began

    def _start_once(self, timeout: float) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="kafkabroker-"))
        self.log = self.root / "server.log"
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.cluster_id = cluster_id()
        config = self.root / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()), encoding="utf-8")
        cmd = [*self._java(self.heap), "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
               "-Dorg.slf4j.simpleLogger.showDateTime=true", "FormatAndStart", self.cluster_id,
               str(config)]  # fmt: skip
        with open(self.log, "wb") as log:
            self._proc = subprocess.Popen(
                cmd,
                cwd=self.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,
            )
        with open(self.root / "tool.log", "wb") as tool_log:
            self._tool = subprocess.Popen(
                [*self._java("256m"), "KafkaTool", self.bootstrap],
                cwd=self.root,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=tool_log,
                preexec_fn=die_with_parent,
            )
        self._buffer = b""
        self._command(["ready", READY_TOPIC, str(int(timeout * 1000))], [], timeout + 30, "starting")

    def _java(self, heap: str) -> list[str]:
        if shutil.which("java") is None:
            raise KafkaHarnessError("the Kafka test broker needs java (17+) on PATH")
        return ["java", *JVM_OPTIONS, f"-Xmx{heap}", "-cp", classpath_of(self._cache)]

    def _command(
        self, fields: list[str], body: list[str], timeout: float = 120.0, doing: str = ""
    ) -> list[str]:
        """Send one command (tab-separated ``fields``, then the ``body`` lines) to KafkaTool; the lines it
        answers before ``ok``. Its ``error`` line, its exit, the broker's exit or ``timeout`` raise (after a
        timeout KafkaTool is stopped, so later commands fail)."""
        tool = self._tool
        if tool is None or tool.stdin is None or tool.stdout is None:
            raise KafkaHarnessError("the Kafka test broker is not running")
        what = " ".join(fields)
        self._busy = True
        try:
            tool.stdin.write("".join(line + "\n" for line in ["\t".join(fields), *body]).encode())
            tool.stdin.flush()
        except BrokenPipeError:
            pass  # it exited: reported below
        answer: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            if b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                text = line.decode()
                if text == "ok" or text.startswith("error\t"):
                    self._busy = False
                if text == "ok":
                    return answer
                if text.startswith("error\t"):  # while starting, the broker's log says why
                    why = f": {self.log_tail()}" if doing == "starting" else ""
                    raise KafkaHarnessError(f"KafkaTool {text[6:]}; broker log {self.log}{why}")
                answer.append(text)
                continue
            tool_log = self.log.with_name("tool.log")
            for proc, name, log in (
                (self._proc, "the Kafka broker", self.log),
                (tool, "KafkaTool", tool_log),
            ):
                if proc is not None and proc.poll() is not None:
                    raise KafkaHarnessError(
                        f"{name} exited with status {proc.returncode} while {doing or what}; "
                        f"log {log}: {file_tail(log)}"
                    )
            if time.monotonic() > deadline:  # a late answer would be taken for the next one's: stop it
                self._tool = None
                stop_process(tool, 5)
                raise KafkaHarnessError(
                    f"KafkaTool did not answer {what!r} within {timeout:.0f} s; broker log {self.log}: "
                    f"{self.log_tail()}"
                )
            if select.select([tool.stdout], [], [], 0.05)[0]:
                chunk = os.read(tool.stdout.fileno(), 1 << 16)
                self._buffer += chunk
                if not chunk:
                    tool.wait(5)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic (replication factor 1) and wait until every partition has a leader."""
        self._command(["create", name, str(int(partitions))], [])

    def produce(
        self, topic: str, records: Sequence[tuple[bytes | None, bytes | None]], partition: int | None = None
    ) -> list[tuple[int, int]]:
        """Send ``(key, value)`` pairs in order with one idempotent producer (acks=all) and wait for all
        of them; ``partition`` None lets the default partitioner choose (by key). The ``(partition,
        offset)`` of each record, in order."""
        lines = [f"{_b64(key)}\t{_b64(value)}" for key, value in records]
        where = "-" if partition is None else str(int(partition))
        answer = self._command(["produce", topic, where, str(len(lines))], lines)
        return [(int(p), int(o)) for p, o in (line.split("\t") for line in answer)]

    def records(self, topic: str) -> list[KafkaRecord]:
        """Every record of an existing topic from the beginning, by partition then offset."""
        found = []
        for line in self._command(["dump", topic], []):
            partition, offset, key, value, headers = line.split("\t")
            pairs = [pair.split(":") for pair in headers.split(",")] if headers else []
            found.append(
                KafkaRecord(
                    topic,
                    int(partition),
                    int(offset),
                    _unb64(key),
                    _unb64(value),
                    tuple((base64.b64decode(name).decode(), _unb64(data)) for name, data in pairs),
                )
            )
        return found

    def log_tail(self, lines: int = 30) -> str:
        return file_tail(self.log, lines)

    def stop(self) -> None:
        """Close KafkaTool's input (it exits; stopped at once inside a command that failed, else after 5 s),
        SIGTERM the broker (SIGKILL after 30 s), keep its exit status and log tail in ``exit_status`` and
        ``exit_log``, and remove its temporary folder. Safe to call twice."""
        began = time.monotonic()
        tool, self._tool = self._tool, None
        if tool is not None:  # idle, it closes its clients and exits; inside a command, it is stopped
            try:
                if tool.stdin is not None:
                    tool.stdin.close()
                tool.wait(0 if self._busy else 5)
            except (OSError, subprocess.TimeoutExpired):
                stop_process(tool, 5)
            if tool.stdout is not None:
                tool.stdout.close()
        proc, self._proc = self._proc, None
        if proc is not None:
            self.exit_status = stop_process(proc, 30)
        if self.log.exists():
            self.exit_log = "\n".join(self.log.read_text(errors="replace").splitlines()[-200:])
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        self.stop_seconds = time.monotonic() - began
