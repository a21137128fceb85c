"""A real Debezium 3.6.1.Final (embedded engine, PostgreSQL connector, pgoutput) capturing into JSON lines.

``debezium_classpath()`` builds once per machine a cache folder with the jars (Maven, from
``tests/harness/java/debezium/pom.xml``) and the compiled ``tests/harness/java/debezium/CaptureToFile.java``.
``DebeziumCapture`` runs that program on a database of a :class:`~tests.harness.postgres.PgServer`::

    with DebeziumCapture(pg_db.dsn, tmp_path / "out.jsonl", ["public.items"]) as capture:
        pg_db.execute("INSERT INTO public.items VALUES (1, 'a', NULL)")
        capture.sync()                    # every change committed so far is in the file
        records = capture.lines()         # [{"topic", "key", "value", "headers"}, ...]

Each line of the file is ``{"topic": ..., "key": <JSON or null>, "value": <JSON or null>, "headers":
{name: <JSON or string>}}`` (value null for a tombstone). ``sync()`` works with a marker table
``public.__dbz_marker`` that the capture includes: its records (topic ``dbz.public.__dbz_marker``, and its
transactions in ``dbz.transaction``) stay in the file, so readers filter them (see ``MARKER_TOPIC``).
With ``kafka="127.0.0.1:PORT"`` (a :class:`~tests.harness.kafka.KafkaBroker`'s ``bootstrap``) each batch is
first produced to that broker (topic = the line's ``topic``; key, value and headers = the same JSON as
UTF-8 bytes; a tombstone's value null) and appended to the file only once Kafka acknowledged all of it, so
the file is a copy of what reached Kafka and ``sync()`` works the same.
On exit the program gets SIGTERM (then SIGKILL after 30 s) and the replication slot and the publication
are dropped, so the database can be dropped. Needs Java 17+, Maven (first build only) and psycopg 3.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tests.harness.javabuild import cache_folder, cached_build, classpath_of, file_tail, stop_process
from tests.harness.postgres import PgDatabase
from tests.harness.service import Service

DEBEZIUM_VERSION = "3.6.1.Final"
SOURCES = Path(__file__).resolve().parent / "java" / "debezium"
TOPIC_PREFIX = "dbz"
MARKER_TABLE = "public.__dbz_marker"
MARKER_TOPIC = f"{TOPIC_PREFIX}.{MARKER_TABLE}"
TRANSACTION_TOPIC = f"{TOPIC_PREFIX}.transaction"


class DebeziumHarnessError(RuntimeError):
    """Building the Debezium program, or starting, syncing or stopping a capture, failed."""


def debezium_classpath() -> Path:
    """The cache folder holding ``lib/*.jar`` and ``classes/CaptureToFile.class``, built when missing or
    when ``tests/harness/java/debezium/pom.xml`` or ``CaptureToFile.java`` changed (their hash is
    ``inputs.sha256``).

    The folder is ``$RESOLVER_DEBEZIUM_CACHE`` or ``~/.cache/pg-change-resolver/debezium-3.6.1.Final``, built
    atomically by :func:`tests.harness.javabuild.cached_build`. The Java class path is
    ``classpath_of(folder)``.
    """
    cache = cache_folder("RESOLVER_DEBEZIUM_CACHE", f"debezium-{DEBEZIUM_VERSION}")
    return cached_build(cache, SOURCES, ["CaptureToFile.java"], DEBEZIUM_VERSION, DebeziumHarnessError)


def payload(value: Any) -> Any:
    """A record value without its schema: ``value["payload"]`` for a ``{schema, payload}`` envelope."""
    if isinstance(value, dict) and set(value) == {"schema", "payload"}:
        return value["payload"]
    return value


def _properties_text(props: dict[str, str]) -> str:
    def esc(text: str) -> str:
        text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return "\\" + text if text.startswith(" ") else text

    return "".join(f"{esc(k).replace('=', chr(92) + '=').replace(':', chr(92) + ':')}={esc(v)}\n"
                   for k, v in props.items())  # fmt: skip


def _conninfo(dsn: str) -> dict[str, str]:
    from psycopg.conninfo import conninfo_to_dict

    return {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}


class DebeziumCapture(Service):
    """One running Debezium capture of some tables of one database into the JSON-lines file ``out``.

    ``tables`` are ``schema.table`` names (matched literally); ``schemas`` is the JsonConverter's
    ``schemas.enable`` for keys, values and headers; ``transaction_metadata`` is the connector's
    ``provide.transaction.metadata`` (BEGIN/END records on ``dbz.transaction`` and a ``transaction``
    block on events); ``snapshot_mode`` is the connector's (``no_data``: stream only); ``extra`` adds or
    overrides connector/engine properties. The tables must exist before ``start()``: the publication
    (``publication.autocreate.mode=filtered``) is created then, for them and the marker table. The slot and
    the publication get unique names (``slot``, ``publication``); the properties, offsets and the
    program's log (``log``) are in a temporary folder. ``kafka`` is a bootstrap address: produce every
    batch there (acks=all, idempotent) before writing it to the file; the broker creates missing topics.
    ``topic_prefix`` is the connector's ``topic.prefix`` (captures sharing a broker use different ones);
    ``marker_topic`` and ``transaction_topic`` follow it (``MARKER_TOPIC`` and ``TRANSACTION_TOPIC`` for
    the default).
    """

    def __init__(
        self,
        dsn: str,
        out: Path,
        tables: list[str],
        *,
        schemas: bool = True,
        transaction_metadata: bool = True,
        snapshot_mode: str = "no_data",
        extra: dict[str, str] | None = None,
        kafka: str | None = None,
        topic_prefix: str = TOPIC_PREFIX,
    ) -> None:
        self.dsn = dsn
        self.out = Path(out)
        self.tables = list(tables)
        self.schemas = schemas
        self.db = PgDatabase(dsn, _conninfo(dsn).get("dbname", ""))
        suffix = uuid.uuid4().hex[:12]
        self.slot, self.publication = f"dbz_{suffix}", f"dbz_pub_{suffix}"
        self.transaction_metadata = transaction_metadata
        self.snapshot_mode = snapshot_mode
        self.extra = dict(extra or {})
        self.kafka = kafka
        self.topic_prefix = topic_prefix
        self.marker_topic = f"{topic_prefix}.{MARKER_TABLE}"
        self.transaction_topic = f"{topic_prefix}.transaction"
        self.workdir = Path("/nonexistent")
        self.log = Path("/nonexistent")
        self.start_seconds = 0.0
        self.exit_status: int | None = None  # the program's, once stopped: 143 after a clean SIGTERM
        self.exit_log = ""  # the tail of its log, once stopped (the temporary folder is removed)
        self._proc: subprocess.Popen[bytes] | None = None
        self._marker = uuid.uuid4().int >> 66  # a random start (62 bits): marker ids never repeat

    def properties(self) -> dict[str, str]:
        """The engine's and the connector's properties (without the temporary folder's files)."""
        info = _conninfo(self.dsn)
        schemas = "true" if self.schemas else "false"
        included = [*self.tables, MARKER_TABLE]
        props = {
            "name": f"capture-{self.slot}",
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "plugin.name": "pgoutput",
            "database.hostname": info.get("host", "127.0.0.1"),
            "database.port": info.get("port", "5432"),
            "database.user": info.get("user", "postgres"),
            "database.password": info.get("password", ""),
            "database.dbname": info.get("dbname", "postgres"),
            "slot.name": self.slot,
            "publication.name": self.publication,
            "publication.autocreate.mode": "filtered",
            "table.include.list": ",".join(re.escape(t) for t in included),
            "topic.prefix": self.topic_prefix,
            "snapshot.mode": self.snapshot_mode,
            "provide.transaction.metadata": "true" if self.transaction_metadata else "false",
            "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
            "offset.flush.interval.ms": "0",
            # the embedded engine reads converter.* (common) and key./value./header.converter.* (each);
            # key.converter/value.converter name the class as a Kafka Connect worker would
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "converter.schemas.enable": schemas,
            "key.converter.schemas.enable": schemas,
            "value.converter.schemas.enable": schemas,
            "header.converter.schemas.enable": schemas,
        }
        return props | self.extra

    def start(self, timeout: float = 120.0) -> None:
        """Create the marker table, start the program and wait until its replication slot is active."""
        cache = debezium_classpath()
        began = time.monotonic()
        self.db.execute(f"CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (id bigint PRIMARY KEY, at text)")
        self.workdir = Path(tempfile.mkdtemp(prefix="dbzcapture-"))
        self.log = self.workdir / "capture.log"
        props = self.properties() | {"offset.storage.file.filename": str(self.workdir / "offsets.dat")}
        (self.workdir / "connector.properties").write_text(_properties_text(props), encoding="utf-8")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.touch()
        cmd = ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx512m",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath_of(cache), "CaptureToFile",
               str(self.workdir / "connector.properties"), str(self.out)]  # fmt: skip
        if self.kafka is not None:
            cmd.append(self.kafka)
        with open(self.log, "wb") as log:
            self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            self._wait(
                self._slot_active,
                "starting",
                timeout,
                f"Debezium did not start streaming within {timeout:.0f} s (slot {self.slot} not active)",
            )
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began

    def sync(self, timeout: float = 120.0) -> None:
        """Wait until every change committed so far is in the file: insert a new row into the marker
        table and wait for its create record (which Debezium writes after all earlier commits)."""
        self._marker += 1
        marker = self._marker
        self.db.execute(f"INSERT INTO {MARKER_TABLE} (id, at) VALUES ({int(marker)}, now()::text)")

        def arrived() -> bool:
            return any(
                record["topic"] == self.marker_topic
                and ((payload(record["value"]) or {}).get("after") or {}).get("id") == marker
                for record in self.lines()
            )

        self._wait(
            arrived, "syncing", timeout, f"marker {marker} did not reach {self.out} within {timeout:.0f} s"
        )

    def _wait(self, done: Any, doing: str, timeout: float, failure: str) -> None:
        """Poll ``done()`` until it is true; the program must keep running, and ``timeout`` is the limit."""
        deadline = time.monotonic() + timeout
        while not done():
            self._check_running(doing)
            if time.monotonic() > deadline:
                raise DebeziumHarnessError(f"{failure}; log {self.log}: {self.log_tail()}")
            time.sleep(0.1)

    def lines(self) -> list[dict[str, Any]]:
        """The records written so far, parsed (a last line still being written is left out)."""
        data = self.out.read_bytes() if self.out.exists() else b""
        complete = data[: data.rfind(b"\n") + 1]
        return [json.loads(line) for line in complete.splitlines() if line.strip()]

    def log_tail(self, lines: int = 30) -> str:
        return file_tail(self.log, lines)

    def stop(self) -> None:
        """SIGTERM the program (SIGKILL after 30 s), then drop its slot and publication; keep the exit
        status and the log's tail in ``exit_status`` and ``exit_log``. The temporary folder is removed
        when the program exited cleanly (143 after SIGTERM), else kept for its log. Safe to call twice."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc, 30)
            text = self.log.read_text(errors="replace") if self.log.exists() else ""
            self.exit_status, self.exit_log = proc.returncode, "\n".join(text.splitlines()[-200:])
            self._drop_slot_and_publication()
        if self.exit_status in (0, 143) and self.workdir.name.startswith("dbzcapture-"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _slot_active(self) -> bool:
        rows = self.db.query("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (self.slot,))
        return bool(rows and rows[0][0])

    def _check_running(self, doing: str) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise DebeziumHarnessError(
                f"the Debezium capture exited with status {self._proc.returncode} while {doing}; "
                f"log {self.log}: {self.log_tail()}"
            )

    def _drop_slot_and_publication(self) -> None:
        deadline = time.monotonic() + 30
        while self._slot_active() and time.monotonic() < deadline:
            time.sleep(0.1)
        slot = "FROM pg_replication_slots WHERE slot_name = %s"
        self.db.query(f"SELECT pg_terminate_backend(active_pid) {slot} AND active", (self.slot,))
        for _ in range(50):
            try:
                self.db.query(f"SELECT pg_drop_replication_slot(slot_name) {slot}", (self.slot,))
                break
            except Exception:  # still active for a moment after the terminate
                time.sleep(0.1)
        self.db.execute(f'DROP PUBLICATION IF EXISTS "{self.publication}"')
