"""The slot's changes into landing files (``resolver capture``'s second half, docs/capture.md).
 A drain reads everything the slot holds up to the WAL position current when it begins
(``pg_logical_slot_peek_changes`` through a server-side cursor, so a large backlog streams through without
being held in memory), keeps the changes of the captured tables, writes them into landing files cut at
transaction ends (``resolver.capture.parts.LandingParts``), and only once every file is durable confirms
that position to the slot. A transaction with no captured change leaves no line (its position is confirmed
all the same: WAL does not pile up behind quiet tables). A table whose snapshot was copied after the slot
was made (a capture killed during its snapshot copies the tables it had not finished at a later point)
has its changes committed up to that point left out: they are in its copy. Needs psycopg 3, no Spark.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import msgspec

from resolver.capture.landing import Landing, landing_at
from resolver.capture.options import CaptureOptions, CaptureSummary
from resolver.capture.partitions import PartitionWatch
from resolver.capture.parts import LandingParts
from resolver.capture.source import connect
from resolver.lsn import parse_lsn

if TYPE_CHECKING:
    import psycopg

__all__ = ["STREAM_OPTIONS", "CapturedLines", "drain", "slot_position", "starts_of"]

log = logging.getLogger("resolver.capture.snapshot")

#: wal2json's options: the README's (format 2 with positions, ids, times, keys and types)
STREAM_OPTIONS = {
    "format-version": "2",
    "include-xids": "1",
    "include-timestamp": "1",
    "include-lsn": "1",
    "include-pk": "1",
    "include-types": "1",
    "include-transaction": "1",
}


class _Head(msgspec.Struct):
    """What the capture reads of a wal2json record: its action, a B's or C's end LSN, a change's table. The
    rest (a change's columns: nearly all of its bytes) is skipped by msgspec's decoder without being built
    into Python objects, and the record's text is landed as it came."""

    action: str
    nextlsn: str | None = None
    lsn: str | None = None
    schema: str | None = None
    table: str | None = None


_HEAD = msgspec.json.Decoder(_Head)


def starts_of(landing: Landing, slot: str) -> dict[str, int]:
    """Each copied table's snapshot point: its changes committed up to it are in its copy."""
    state = landing.read(f"_capture/{slot}.json")
    if state is None:
        return {}
    starts = json.loads(state).get("starts", {})
    return {name: parse_lsn(lsn) for name, lsn in starts.items()}


class CapturedLines:
    """The slot's wal2json records, one at a time (``take``), into landing parts: the captured tables'
    changes, each transaction framed by its B and C; a transaction with none of them leaves no line, and a
    change a table's copy already holds (committed up to its snapshot point) is left out."""

    def __init__(
        self, options: CaptureOptions, parts: LandingParts, watch: PartitionWatch | None = None
    ) -> None:
        self.options, self.parts, self.watch = options, parts, watch
        self.starts = starts_of(parts.landing, options.slot)
        self.records = 0  # wal2json records read (B and C included)
        self.kept = 0  # changes of captured tables
        self._commit = 0  # the end LSN of the transaction being read
        self._begin: str | None = None  # its B, written with its first captured change
        self._opened = False
        self._captured: dict[str, str | None] = {}  # a table's name -> the name it is captured under, or None
        self._looks = -1  # the watch's looks at the catalog when ``_captured`` was last right
        self._truncated: tuple[str | None, str | None] = (None, None)  # the change LSN and root of a root's
        # truncate: its partitions' truncates of the same statement follow it

    @property
    def inside(self) -> bool:
        """Whether a transaction's B was read and not yet its C (no cut may fall here)."""
        return self._begin is not None

    def take(self, text: str) -> int | None:
        """One record; for a transaction's C, the LSN where that transaction ends (all before it is read)."""
        self.records += 1
        record = _HEAD.decode(text)
        action = record.action
        if action == "B":
            self._begin, self._opened = text, False
            self._commit = parse_lsn(_lsn(record))
            return None
        if action == "C":
            end = parse_lsn(_lsn(record))
            if self._opened:
                self.parts.write(text)
                self.parts.transaction_ended(end)
            self._begin, self._opened = None, False
            if self.watch is not None:
                self.watch.position = end
            return end
        if record.table is not None:
            captured = self._captured_as(record.schema or "public", record.table)
            if captured is None or self._commit <= self.starts.get(captured, -1):
                return None  # not captured, or in the table's copy (made after the slot)
            if action == "T" and self.watch is not None:
                self._truncate(record, captured)
        if self._begin is not None and not self._opened:
            self.parts.write(self._begin)
            self._opened = True
        self.parts.write(text)
        self.kept += record.table is not None
        return None

    def _captured_as(self, schema: str, table: str) -> str | None:
        """The name ``schema.table``'s changes are captured under (its root's, for a partition), or None
        when the capture leaves it out; matched once per table (and again after a look at the catalog)."""
        if self.watch is not None and self.watch.looks != self._looks:
            self._captured, self._looks = {}, self.watch.looks
        name = f"{schema}.{table}"
        if name not in self._captured:  # the patterns are matched once per table, not once per change
            under = self.watch.captured_as(schema, table) if self.watch is not None else name
            self._captured[name] = under if self.options.included(under) else None
        return self._captured[name]

    def _truncate(self, record: _Head, captured: str) -> None:
        """A TRUNCATE: a root's own is noted (its partitions' of the same statement follow it), a partition's
        alone is told to the watch (a root to copy again)."""
        name = f"{record.schema}.{record.table}"
        if name == captured:
            self._truncated = (record.lsn, captured)
            return
        part_of = self._truncated[1] if self._truncated[0] == record.lsn else None
        assert self.watch is not None
        self.watch.truncated(record.schema or "public", str(record.table), part_of)


def slot_position(conn: psycopg.Connection[Any], slot: str) -> int:
    """Where the slot's next change begins: what it confirmed (its restart point for this drain)."""
    row = conn.execute(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", (slot,)
    ).fetchone()
    return parse_lsn(str(row[0])) if row is not None and row[0] is not None else 0


def _lsn(record: _Head) -> str:
    """A B's or C's end LSN (wal2json's ``include-lsn``, which the capture always asks for)."""
    if record.nextlsn is None:
        raise ValueError(f"a wal2json {record.action} record without nextlsn: expected include-lsn=1")
    return record.nextlsn


def drain(options: CaptureOptions, summary: CaptureSummary, watch: PartitionWatch | None = None) -> None:
    """Everything the slot holds up to the WAL position current now into landing files (none when no
    captured table changed), then that position confirmed to the slot. ``watch``: the capture's partitions
    (``resolver.capture.partitions``), which looks at the catalog first."""
    flat = [item for pair in STREAM_OPTIONS.items() for item in pair]
    parts = LandingParts(landing_at(options.landing), options.slot, options.file_bytes)
    lines = CapturedLines(options, parts, watch)
    with connect(options.dsn) as conn:
        upto = str(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])  # type: ignore[index]
        if watch is not None:  # the catalog as of the end of what this drain reads, or later
            watch.position = slot_position(conn, options.slot)
            watch.refresh(conn)
        log.info("reading slot %s up to %s", options.slot, upto)
        with conn.transaction(), conn.cursor(name="drain") as cursor:
            cursor.itersize = 10_000
            query = "SELECT data FROM pg_logical_slot_peek_changes(%s, %s::pg_lsn, NULL, VARIADIC %s::text[])"
            cursor.execute(query, (options.slot, upto, flat))
            for (text,) in cursor:
                lines.take(str(text))
        summary.changes += lines.records
        files = parts.finish()
        summary.files += files
        if files:
            log.info("landed %d file(s) (%d change(s)); confirming %s", len(files), lines.kept, upto)
        conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (options.slot, upto))
        summary.confirmed_lsn = upto
