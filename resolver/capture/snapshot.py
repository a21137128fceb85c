"""``resolver capture``: from a PostgreSQL database to a landing folder, the rows it already holds and then
its changes, with no gap and nothing twice (docs/capture.md).

The first capture of a slot creates it with wal2json **exporting a snapshot**, and in that snapshot copies
every included table into snapshot files: each row an insert at the slot's consistent point
(``resolver.capture.records``), a table's one transaction cut between rows into files of about
``--file-mb`` (a reader stitches them back together, and reads each file in a task of its own). The slot
streams every transaction that commits after that point, so the snapshot's rows and the slot's changes
together are the database. Each capture then drains the slot up to
the WAL position current when it started into a landing file — written whole under a hidden name, flushed to
disk, renamed — and only then confirms that position to the slot, so PostgreSQL may recycle the WAL. A
capture killed at any point and started again loses nothing: an unfinished snapshot is taken again from a
new slot; changes not yet confirmed are read again, and the ledger and bronze's deduplication make a file
read twice harmless.

The landing folder's ``_capture/<slot>.json`` records the snapshot (its LSN, tables and files). The landing
folder may be local or in S3 (``resolver.capture.landing``). This module needs psycopg 3 (the ``[capture]``
extra) and no Spark.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from resolver.capture.copy import TableCopy, copy_table, in_snapshot
from resolver.capture.drain import STREAM_OPTIONS, drain
from resolver.capture.landing import Landing, landing_at
from resolver.capture.options import CaptureOptions, CaptureSummary, Partitions
from resolver.capture.partitions import PartitionWatch, routes_name
from resolver.capture.records import SnapshotTable
from resolver.capture.source import (
    check_source,
    connect,
    lock_tables,
    replication_refused,
    slot_error,
    source_tables,
)
from resolver.errors import ConfigError
from resolver.formats.names import SLOT_NAME, SLOT_NAME_EXPECTED, qualified
from resolver.lsn import format_lsn, parse_lsn

if TYPE_CHECKING:
    import psycopg

__all__ = ["STREAM_OPTIONS", "CaptureOptions", "CaptureSummary", "capture_once", "resnapshot"]

log = logging.getLogger(__name__)

#: how long a capture waits for its slot while another client reads it
_IN_USE_GRACE_SECONDS = 5.0


def capture_once(options: CaptureOptions) -> CaptureSummary:
    """Take the slot's snapshot if it was never taken, drain the slot up to the WAL position current now
    into a landing file, confirm that position and return what was done (``resolver capture --once``).

    Example::

        from resolver import CaptureOptions, capture_once
        # the database "shop" on the server PGHOST, PGPORT and PGUSER name; its tables of schema public
        summary = capture_once(CaptureOptions("dbname=shop", "landing/", "shop", include=("public.*",)))
        for line in summary.lines():   # the snapshot's rows, the records drained, the files written
            print(line)
    """
    if not SLOT_NAME.fullmatch(options.slot):
        raise ConfigError(f"--slot {options.slot!r}: expected {SLOT_NAME_EXPECTED}")
    landing = landing_at(options.landing)
    state, started = f"_capture/{options.slot}.json", f"_capture/{options.slot}.started"
    summary = CaptureSummary(options.slot)
    with connect(options.dsn) as conn:
        check_source(conn)
        exists = _slot_free(conn, options.slot)
    has_state = landing.read(state) is not None
    watch = None
    if options.partitions is Partitions.ROOT:  # a capture from before routes: its partitions were tables
        upgrade = has_state and landing.read(routes_name(options.slot)) is None
        watch = PartitionWatch(options, landing, upgrade)
    if exists and not has_state and landing.read(started) is None:
        raise ConfigError(
            f"slot {options.slot} exists but was not made by resolver capture for {options.landing} (no "
            f"{landing.location(state)}): "
            "expected a new slot name (the rows from before a slot cannot be copied consistently with it)"
        )
    if not has_state:
        if not exists:  # a first capture, or one whose slot is gone: whatever was copied for it is void
            landing.delete_under(_pending(options.slot))
            landing.write(started, [json.dumps({"slot": options.slot, "tables": {}})])
            command = f"CREATE_REPLICATION_SLOT {options.slot} LOGICAL wal2json (SNAPSHOT 'export')"
        else:
            log.warning(
                "the snapshot of slot %s stopped before it finished: the tables it had not copied are copied "
                "in a new snapshot (a temporary slot); slot %s streams on",
                options.slot,
                options.slot,
            )
            command = f"CREATE_REPLICATION_SLOT {_temporary(options.slot)} TEMPORARY LOGICAL wal2json " + (
                "(SNAPSHOT 'export')"
            )
        _snapshot(options, landing, command, summary, watch)
        _publish(landing, options.slot, summary)
    _finish_resnapshot(landing, options.slot, summary.files)  # one cut short while moving its files
    try:
        drain(options, summary, watch)
    finally:
        if watch is not None:
            watch.close()
    return summary


def _slot_free(conn: psycopg.Connection[Any], slot: str) -> bool:
    """Whether the slot exists; refused in one line while another client reads it (after a grace period:
    the server process of a capture just killed takes a moment to notice)."""
    query = "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s"
    deadline = time.monotonic() + _IN_USE_GRACE_SECONDS
    while True:
        found = conn.execute(query, (slot,)).fetchall()
        if not found or found[0][0] is None:
            return bool(found)
        if time.monotonic() >= deadline:
            raise ConfigError(
                f"slot {slot} is in use by another client (server process {found[0][0]}): expected one "
                "capture per slot at a time (stop the other one, or give this one its own --slot)"
            )
        time.sleep(0.5)


def _pending(slot: str) -> str:
    """Where a snapshot's files wait until every table is copied (no run reads ``_`` folders)."""
    return f"_capture/{slot}.pending"


def _temporary(slot: str) -> str:
    return f"{slot[:55]}_copy"


def _snapshot(
    options: CaptureOptions,
    landing: Landing,
    command: str,
    summary: CaptureSummary,
    watch: PartitionWatch | None,
) -> None:
    """Create a slot with ``command`` exporting a snapshot and copy, in that snapshot, each included table
    that ``started`` does not list as copied yet into a file of its own in the pending folder, recording it
    in ``started`` once the file is durable. A table copied at a later point than the capture's slot was
    made starts there: the drain leaves out its changes committed up to that point (they are in its copy)."""
    started = f"_capture/{options.slot}.started"
    progress = json.loads(landing.read(started) or "{}")
    copied: dict[str, Any] = progress.setdefault("tables", {})
    pending = _pending(options.slot)

    def done(table: SnapshotTable, point: int, rows: int, names: list[str]) -> None:
        files = [name.rsplit("/", 1)[-1] for name in names]
        copied[table.qualified] = {"lsn": format_lsn(point), "rows": rows, "files": files}
        landing.write(started, [json.dumps(progress, ensure_ascii=False)])
        summary.snapshot_lsn = format_lsn(point)
        summary.snapshot_rows[table.qualified] = rows

    copying = _Copy(
        lambda table: options.included(table) and table not in copied,
        lambda lsn, n: f"{pending}/{options.slot}-{lsn:016X}-snapshot-{n:04d}",
        False,
        done,
    )
    _copy_exported(options, landing, command, copying, watch)


def _publish(landing: Landing, slot: str, summary: CaptureSummary) -> None:
    """Every table copied: the snapshot's files into the landing folder (a file already moved by a capture
    killed half-way through this is skipped), then the state recorded and the pending folder removed."""
    started = f"_capture/{slot}.started"
    progress = json.loads(landing.read(started) or "{}")
    pending = _pending(slot)
    for entry in progress["tables"].values():
        for file in _files(entry):
            landing.move(f"{pending}/{file}", file)
            summary.files.append(landing.location(file))
    tables = progress["tables"]
    first = min((parse_lsn(t["lsn"]) for t in tables.values()), default=None)
    record = {
        "slot": slot,
        "snapshot_lsn": format_lsn(first) if first is not None else summary.snapshot_lsn,
        "tables": {name: t["rows"] for name, t in tables.items()},
        "starts": {name: t["lsn"] for name, t in tables.items()},
        "files": {name: _files(t) for name, t in tables.items()},
    }
    landing.write(f"_capture/{slot}.json", [json.dumps(record, ensure_ascii=False)])
    landing.delete(started)
    landing.delete_under(pending)
    summary.snapshot_rows = dict(record["tables"])  # type: ignore[arg-type]


def resnapshot(options: CaptureOptions, patterns: Sequence[str]) -> CaptureSummary:
    """Copy the captured tables matching ``patterns`` again, in a snapshot a temporary slot exports, into a
    re-snapshot file: each table truncated, then its rows, at that slot's consistent point
    (``resolver capture --resnapshot``). The capture's own slot keeps streaming every change before and
    after that point, so the lake converges to the database: rows it lost (a landing file deleted, changes
    applied wrongly by hand) are put back, rows that no longer exist are deleted. In the history, each
    re-copied row gets a new version at that point. A re-snapshot killed while it copies leaves nothing: its
    temporary slot ends with it and its files wait in ``_capture/<slot>.resnapshot/``, which the next one
    clears; once every file is there they are listed in ``_capture/<slot>.resnapshot.json`` and moved into
    place, a move cut short is finished by the next capture of the slot."""
    landing = landing_at(options.landing)
    _finish_resnapshot(landing, options.slot, [])
    state = f"_capture/{options.slot}.json"
    if landing.read(state) is None:
        raise ConfigError(
            f"slot {options.slot} has no snapshot in {options.landing} (no {landing.location(state)}): "
            "expected a capture "
            "of that slot first (its first capture copies every table)"
        )

    def chosen(table: str) -> bool:
        return options.included(table) and any(fnmatch.fnmatchcase(table, p) for p in patterns)

    slot = f"{options.slot[:55]}_resnap"
    command = f"CREATE_REPLICATION_SLOT {slot} TEMPORARY LOGICAL wal2json (SNAPSHOT 'export')"
    with connect(options.dsn) as conn:
        check_source(conn)
    summary = CaptureSummary(options.slot)
    waiting = f"_capture/{options.slot}.resnapshot"
    landing.delete_under(waiting)  # left by a re-snapshot killed while it copied
    names: list[str] = []
    copied: set[str] = set()  # as the readers name them

    def done(table: SnapshotTable, point: int, rows: int, files: list[str]) -> None:
        summary.snapshot_lsn = format_lsn(point)
        summary.snapshot_rows[table.qualified] = rows
        names.extend(name.rsplit("/", 1)[-1] for name in files)
        copied.add(qualified(table.schema, table.name))

    copying = _Copy(
        chosen, lambda lsn, n: f"{waiting}/{options.slot}-{lsn:016X}-resnapshot-{n:04d}", True, done
    )
    _copy_exported(options, landing, command, copying)
    if not names:
        raise ConfigError(
            f"--resnapshot {' '.join(patterns)}: no captured table matches: expected a pattern on "
            "schema.table naming tables the capture includes"
        )
    landing.write(f"{waiting}.json", [json.dumps({"files": names})])
    _finish_resnapshot(landing, options.slot, summary.files)
    if options.partitions is Partitions.ROOT and summary.snapshot_lsn is not None:  # hints settled by it
        PartitionWatch(options, landing).copied_again(copied, parse_lsn(summary.snapshot_lsn))
    return summary


def _finish_resnapshot(landing: Landing, slot: str, moved: list[str]) -> None:
    """Move a re-snapshot's files into place, if one is listed as complete (``moved`` gets where each is
    now); a file moved before is skipped."""
    waiting = f"_capture/{slot}.resnapshot"
    listed = landing.read(f"{waiting}.json")
    if listed is None:
        return
    for file in json.loads(listed)["files"]:
        landing.move(f"{waiting}/{file}", file)
        moved.append(landing.location(file))
    landing.delete(f"{waiting}.json")
    landing.delete_under(waiting)


def _files(entry: dict[str, Any]) -> list[str]:
    """A copied table's files (``file``: one, as captures before files were cut by size recorded it)."""
    return list(entry["files"]) if "files" in entry else [entry["file"]]


@dataclass(frozen=True)
class _Copy:
    """What a copy in an exported snapshot makes: the tables it takes (``include``), where each one's files
    go (``prefix(consistent point, n)`` for the n-th table: ``resolver.capture.copy``), whether each begins
    with its table's truncate (a re-snapshot), and what it records once a table's files are durable
    (``done(table, point, rows, files)``)."""

    include: Callable[[str], bool]
    prefix: Callable[[int, int], str]
    truncate: bool
    done: Callable[[SnapshotTable, int, int, list[str]], None]


def _copy_exported(
    options: CaptureOptions,
    landing: Landing,
    command: str,
    copying: _Copy,
    watch: PartitionWatch | None = None,
) -> None:
    """Create a slot with ``command`` (exporting a snapshot) and copy the tables ``copying`` takes, in that
    snapshot, each into files of ``landing`` (``resolver.capture.copy``); ``watch`` (a capture's first
    snapshot) gets the partitions as the snapshot sees them, each routed to its root from the start."""
    import psycopg

    try:
        replication = psycopg.connect(options.dsn, autocommit=True, replication="database")
    except psycopg.OperationalError as exc:
        raise replication_refused(exc) from None
    try:
        result = replication.pgconn.exec_(command.encode())
        slot = command.split()[1]
        if result.status != psycopg.pq.ExecStatus.TUPLES_OK:
            raise slot_error(slot, (result.error_message or b"").decode(errors="replace"))
        point = parse_lsn(_text(result.get_value(0, 1)))
        exported = _text(result.get_value(0, 2))
        log.info("slot %s created at %s; copying the tables in its snapshot", slot, format_lsn(point))
        with psycopg.connect(options.dsn) as conn:
            in_snapshot(conn, exported)  # its time is printed as the rows are
            taken = str(conn.execute("SELECT now()::text").fetchone()[0])  # type: ignore[index]
            roots = options.partitions is Partitions.ROOT
            tables = [t for t in source_tables(conn, roots) if copying.include(t.qualified)]
            if watch is not None:
                watch.position = point
                watch.refresh(conn)
            lock_tables(conn, tables)  # held until this transaction ends: after every chunk is copied
            for n, table in enumerate(tables):
                where = copying.prefix(point, n)
                copy = TableCopy(
                    options.dsn, exported, table, options.landing, where, options.file_bytes, point, taken,
                    copying.truncate,
                )  # fmt: skip
                rows, files = copy_table(copy, conn, options.copy_processes)
                copying.done(table, point, rows, files)
                shown = files[0].rsplit("/", 1)[-1] + (f" and {len(files) - 1} more" * (len(files) > 1))
                log.info("copied %s: %d row(s) into %s", table.qualified, rows, shown)
    finally:
        replication.close()  # the exported snapshot (and a temporary slot) end with this connection


def _text(value: bytes | None) -> str:
    return (value or b"").decode()
