"""The slot's changes into landing files (``resolver capture``'s second half, docs/capture.md).

A drain reads everything the slot holds up to the WAL position current when it begins
(``pg_logical_slot_peek_changes`` through a server-side cursor, so a large backlog streams through without
being held in memory), keeps the changes of the captured tables, writes them into landing files cut at
transaction ends (``resolver.landing_files.LandingParts``), and only once every file is durable confirms
that position to the slot. A transaction with no captured change leaves no line (its position is confirmed
all the same: WAL does not pile up behind quiet tables). A table whose snapshot was copied after the slot
was made (a capture killed during its snapshot copies the tables it had not finished at a later point)
has its changes committed up to that point left out: they are in its copy. Needs psycopg 3, no Spark.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from resolver.capture_options import CaptureOptions, CaptureSummary
from resolver.capture_source import connect
from resolver.landing_files import LandingParts
from resolver.lsn import parse_lsn

__all__ = ["STREAM_OPTIONS", "drain"]

log = logging.getLogger("resolver.capture")

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


def _starts(state: Path) -> dict[str, int]:
    """Each copied table's snapshot point: its changes committed up to it are in its copy."""
    if not state.exists():
        return {}
    starts = json.loads(state.read_text(encoding="utf-8")).get("starts", {})
    return {name: parse_lsn(lsn) for name, lsn in starts.items()}


def drain(options: CaptureOptions, summary: CaptureSummary) -> None:
    """Everything the slot holds up to the WAL position current now into landing files (none when no
    captured table changed), then that position confirmed to the slot."""
    flat = [item for pair in STREAM_OPTIONS.items() for item in pair]
    parts = LandingParts(Path(options.landing), options.slot, options.file_bytes)
    starts = _starts(Path(options.landing) / "_capture" / f"{options.slot}.json")
    commit = 0  # the commit LSN of the transaction being read
    kept = 0  # changes of captured tables
    with connect(options.dsn) as conn:
        upto = str(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])  # type: ignore[index]
        log.info("reading slot %s up to %s", options.slot, upto)
        begin: str | None = None  # a transaction's B, written with its first captured change
        opened = False
        with conn.transaction(), conn.cursor(name="drain") as cursor:
            cursor.itersize = 10_000
            query = "SELECT data FROM pg_logical_slot_peek_changes(%s, %s::pg_lsn, NULL, VARIADIC %s::text[])"
            cursor.execute(query, (options.slot, upto, flat))
            for (text,) in cursor:
                summary.changes += 1
                record = json.loads(text)
                action = record["action"]
                if action == "B":
                    begin, opened = str(text), False
                    commit = parse_lsn(record["nextlsn"])
                    continue
                if action == "C":
                    if opened:
                        parts.write(str(text))
                        parts.transaction_ended(parse_lsn(record["nextlsn"]))
                    begin, opened = None, False
                    continue
                if "table" in record:
                    table = f"{record['schema']}.{record['table']}"
                    if not options.included(table) or commit <= starts.get(table, -1):
                        continue  # not captured, or in the table's copy (made after the slot)
                if begin is not None and not opened:
                    parts.write(begin)
                    opened = True
                parts.write(str(text))
                kept += "table" in record
        files = parts.finish()
        for path in files:
            summary.files.append(str(path))
        if files:
            log.info("landed %d file(s) (%d change(s)); confirming %s", len(files), kept, upto)
        conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (options.slot, upto))
        summary.confirmed_lsn = upto
