"""``resolver capture`` left running: the slot's changes as they commit, over PostgreSQL's streaming
replication protocol, into landing files cut at transaction ends by size and by time (docs/capture.md).
 The protocol comes from psycopg2's ``LogicalReplicationConnection`` (the ``[capture]`` extra): psycopg 3
has no replication protocol, and ``pg_recvlogical`` would need PostgreSQL's client programs on the capture's
machine and cuts its output file anywhere, not at a transaction's end. The server sends each transaction
when it commits; a landing file is closed at the first transaction end once it holds ``file_bytes`` or has
been open ``file_seconds`` (so a change waits at most about that long before a run can read it). Only once
a file is durable (``resolver.capture.landing``) is the end of its last transaction confirmed to the slot
(the standby status's flush position); between files, when no captured change is waiting, the end of the
last transaction read is confirmed, so a slot whose tables are quiet moves on with the database. A capture
stopped (SIGINT, SIGTERM) closes its file at a transaction end, confirms it and ends; one killed loses only
what it had not confirmed, which the slot sends again to the next one. Needs no Spark.
"""

from __future__ import annotations

import logging
import select
import threading
import time
from typing import Any

from resolver.capture.drain import STREAM_OPTIONS, CapturedLines, slot_position
from resolver.capture.landing import landing_at
from resolver.capture.options import CaptureOptions, CaptureSummary, Partitions
from resolver.capture.partitions import PartitionWatch
from resolver.capture.parts import LandingParts
from resolver.capture.source import SESSION_SETTINGS, connect, replication_refused
from resolver.errors import ConfigError
from resolver.lsn import format_lsn

__all__ = ["stream_changes"]

log = logging.getLogger("resolver.capture.snapshot")

#: how often, at most, the loop looks at the clock and the stop flag while the server sends nothing
_TICK_SECONDS = 0.5
#: how often a running capture looks at the catalog for partitions attached, detached or dropped
_LOOK_SECONDS = 30.0
#: how often psycopg2 tells the server where the capture is, even when nothing changes (its keepalive)
_STATUS_SECONDS = 10


def stream_changes(options: CaptureOptions, file_seconds: float, stop: threading.Event) -> CaptureSummary:
    """Land the slot's changes as they commit until ``stop`` is set: a file at the first transaction end
    past ``options.file_bytes`` or ``file_seconds``, each confirmed once durable. The slot must exist and
    its snapshot be taken (``resolver.capture.snapshot.capture_once`` first). Returns what was landed."""
    summary = CaptureSummary(options.slot)
    landing = landing_at(options.landing)
    parts = LandingParts(landing, options.slot, options.file_bytes)
    watch = PartitionWatch(options, landing) if options.partitions is Partitions.ROOT else None
    if watch is not None:
        with connect(options.dsn) as regular:
            watch.position = slot_position(regular, options.slot)
            watch.refresh(regular)
    lines = CapturedLines(options, parts, watch)
    looked = time.monotonic()
    conn = _replication_connection(options.dsn)
    try:
        cursor = conn.cursor()
        _start(cursor, options.slot)
        log.info("streaming slot %s (a file at most every %g s)", options.slot, file_seconds)
        confirm = _Confirmation(cursor, summary)
        read = 0  # where the last transaction read ends: everything before it is landed or not captured
        while True:
            message = cursor.read_message()
            if message is not None:
                end = lines.take(message.payload)
                if end is None:
                    continue
                read = max(read, end)
            elif lines.inside:  # the rest of a transaction is on its way: no cut may fall here
                select.select([cursor], [], [], _TICK_SECONDS)
                continue
            elif not parts.is_open:  # nothing waits: everything the server sent so far is read
                read = max(read, int(cursor.wal_end or 0))
            if parts.is_open and (stop.is_set() or parts.open_seconds() >= file_seconds):
                parts.cut()
            if watch is not None and not lines.inside and time.monotonic() - looked >= _LOOK_SECONDS:
                watch.refresh()  # partitions detached, dropped or attached since the last look
                looked = time.monotonic()
            confirm.landed(parts, lines, read, now=message is None or stop.is_set())
            if stop.is_set():
                break
            if message is None:
                select.select([cursor], [], [], _TICK_SECONDS)
    finally:
        conn.close()
        if watch is not None:
            watch.close()
    summary.changes = lines.records
    return summary


class _Confirmation:
    """What the slot is told: the files closed are reported, and the end of the last transaction read is
    confirmed when no captured change waits in an open file (every earlier one is then in a durable file or
    was not captured), at most every ``_TICK_SECONDS`` while transactions stream in (psycopg2 repeats the
    last position to the server every ``_STATUS_SECONDS``)."""

    def __init__(self, cursor: Any, summary: CaptureSummary) -> None:
        self.cursor, self.summary = cursor, summary
        self._sent_at = 0.0

    def landed(self, parts: LandingParts, lines: CapturedLines, read: int, now: bool) -> None:
        for where in parts.files[len(self.summary.files) :]:
            self.summary.files.append(where)
            log.info("landed %s (%d change(s) so far)", where.rsplit("/", 1)[-1], lines.kept)
            now = True
        if parts.is_open or not read or (not now and time.monotonic() - self._sent_at < _TICK_SECONDS):
            return
        confirmed = format_lsn(read)
        if confirmed != self.summary.confirmed_lsn:
            self.cursor.send_feedback(flush_lsn=read, force=True)
            self.summary.confirmed_lsn = confirmed
            self._sent_at = time.monotonic()


def _replication_connection(dsn: str) -> Any:
    """A replication connection (``replication=database``) printing values as the snapshot's copy does;
    one line when psycopg2 is missing or the server refuses it."""
    try:
        import psycopg2
        import psycopg2.extras
    except ImportError:
        raise ConfigError(
            "psycopg2 is not installed: expected it for a running resolver capture "
            "(pip install 'pg-change-resolver[capture]')"
        ) from None
    settings = " ".join(f"-c {name}={value}" for name, value in SESSION_SETTINGS.items())
    try:
        return psycopg2.connect(
            dsn, connection_factory=psycopg2.extras.LogicalReplicationConnection, options=settings
        )
    except psycopg2.OperationalError as exc:
        raise replication_refused(exc) from None


def _start(cursor: Any, slot: str) -> None:
    """Start streaming from where the slot was last confirmed; one line when another client is on it."""
    import psycopg2

    try:
        cursor.start_replication(
            slot_name=slot, decode=True, options=STREAM_OPTIONS, status_interval=_STATUS_SECONDS
        )
    except psycopg2.Error as exc:
        found = " ".join(str(exc).split())
        raise ConfigError(
            f"slot {slot} could not be streamed ({found}): expected one capture per slot at a time (stop the "
            "other one, or give this one its own --slot)"
        ) from None
