"""``resolver capture``: from a PostgreSQL database to a landing folder, the rows it already holds and then
its changes, with no gap and nothing twice (docs/capture.md).

The first capture of a slot creates it with wal2json **exporting a snapshot**, and in that snapshot copies
every included table into one snapshot file: each row an insert at the slot's consistent point
(``resolver.snapshot_records``). The slot streams every transaction that commits after that point, so the
snapshot's rows and the slot's changes together are the database. Each capture then drains the slot up to
the WAL position current when it started into a landing file — written whole under a hidden name, flushed to
disk, renamed — and only then confirms that position to the slot, so PostgreSQL may recycle the WAL. A
capture killed at any point and started again loses nothing: an unfinished snapshot is taken again from a
new slot; changes not yet confirmed are read again, and the ledger and bronze's deduplication make a file
read twice harmless.

The landing folder's ``_capture/<slot>.json`` records the snapshot (its LSN, tables and file). This module
needs psycopg 3 (the ``[capture]`` extra) and no Spark.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resolver.capture_drain import STREAM_OPTIONS, drain
from resolver.capture_source import (
    SESSION_SETTINGS,
    check_source,
    connect,
    lock_tables,
    slot_error,
    source_tables,
)
from resolver.errors import ConfigError
from resolver.landing_files import write_durably
from resolver.lsn import format_lsn, parse_lsn
from resolver.snapshot_records import SnapshotTable, snapshot_transaction

if TYPE_CHECKING:
    import psycopg

__all__ = ["STREAM_OPTIONS", "CaptureOptions", "CaptureSummary", "capture_once", "resnapshot"]

log = logging.getLogger(__name__)

_SLOT = re.compile(r"[a-z0-9_]{1,63}")


@dataclass(frozen=True)
class CaptureOptions:
    """What ``capture_once`` captures: the database (a libpq DSN), the landing folder, the slot, and the
    tables (shell patterns on ``schema.table``, as a pipeline file's ``include``/``exclude``)."""

    dsn: str
    landing: str
    slot: str
    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()
    file_bytes: int = 64 * 1024 * 1024  # a landing file is cut at the first transaction end past this size

    def included(self, table: str) -> bool:
        return any(fnmatch.fnmatchcase(table, p) for p in self.include) and not any(
            fnmatch.fnmatchcase(table, p) for p in self.exclude
        )


@dataclass
class CaptureSummary:
    """What one capture did."""

    slot: str
    snapshot_lsn: str | None = None  # set when this capture took the snapshot
    snapshot_rows: dict[str, int] = field(default_factory=dict)  # rows copied per table
    changes: int = 0  # wal2json records drained from the slot (B and C included)
    confirmed_lsn: str | None = None  # what the slot may now forget
    files: list[str] = field(default_factory=list)  # landing files written

    def lines(self) -> list[str]:
        out = [f"slot                 {self.slot}"]
        if self.snapshot_lsn is not None:
            rows = sum(self.snapshot_rows.values())
            out.append(
                f"snapshot             {rows} row(s) of {len(self.snapshot_rows)} table(s) "
                f"at {self.snapshot_lsn}"
            )
        if self.confirmed_lsn is not None:  # a re-snapshot drains nothing
            out.append(f"records drained      {self.changes}")
            out.append(f"confirmed up to      {self.confirmed_lsn}")
        out += [f"file written         {f}" for f in self.files]
        return out


def capture_once(options: CaptureOptions) -> CaptureSummary:
    """Take the slot's snapshot if it was never taken, drain the slot up to the WAL position current now
    into a landing file, confirm that position and return what was done (``resolver capture --once``)."""
    if not _SLOT.fullmatch(options.slot):
        raise ConfigError(
            f"--slot {options.slot!r}: expected a replication slot name (1-63 lower-case letters, digits, _)"
        )
    landing = Path(options.landing)
    state = landing / "_capture" / f"{options.slot}.json"
    started = state.with_suffix(".started")
    state.parent.mkdir(parents=True, exist_ok=True)
    summary = CaptureSummary(options.slot)
    with connect(options.dsn) as conn:
        check_source(conn)
        query = "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s"
        exists = bool(conn.execute(query, (options.slot,)).fetchall())
        if exists and not state.exists():
            if not started.exists():
                raise ConfigError(
                    f"slot {options.slot} exists but was not made by resolver capture for {landing} (no "
                    f"{state}): expected a new slot name (the rows from before a slot cannot be copied "
                    "consistently with it)"
                )
            log.warning(
                "the snapshot of slot %s never finished: taking it again from a new slot", options.slot
            )
            conn.execute("SELECT pg_drop_replication_slot(%s)", (options.slot,))
            exists = False
    if not exists:
        write_durably(started, [json.dumps({"slot": options.slot})])
        _snapshot(options, landing, state, summary)
        started.unlink()
    drain(options, summary)
    return summary


def _snapshot(options: CaptureOptions, landing: Path, state: Path, summary: CaptureSummary) -> None:
    """Create the slot exporting a snapshot, copy the included tables in it into one snapshot file, then
    record it in ``state``. Killed before ``state`` is written, the next capture drops the slot and takes
    the snapshot again (the snapshot file it writes then replaces this one: same slot, a new LSN, and the
    half-written one was never renamed into place)."""
    command = f"CREATE_REPLICATION_SLOT {options.slot} LOGICAL wal2json (SNAPSHOT 'export')"
    point, counts, path = _copy_exported(
        options,
        command,
        options.included,
        lambda lsn: f"{options.slot}-{lsn:016X}-snapshot.json",
        lambda rows, tables, lsn, taken: snapshot_transaction(rows, lsn, taken),
    )
    record = {"slot": options.slot, "snapshot_lsn": format_lsn(point), "tables": counts, "file": path.name}
    write_durably(state, [json.dumps(record, ensure_ascii=False)])
    summary.snapshot_lsn = format_lsn(point)
    summary.snapshot_rows = counts
    summary.files.append(str(path))


def resnapshot(options: CaptureOptions, patterns: Sequence[str]) -> CaptureSummary:
    """Copy the captured tables matching ``patterns`` again, in a snapshot a temporary slot exports, into a
    re-snapshot file: each table truncated, then its rows, at that slot's consistent point
    (``resolver capture --resnapshot``). The capture's own slot keeps streaming every change before and
    after that point, so the lake converges to the database: rows it lost (a landing file deleted, changes
    applied wrongly by hand) are put back, rows that no longer exist are deleted. In the history, each
    re-copied row gets a new version at that point. A re-snapshot killed half-way leaves nothing: its
    temporary slot ends with it and its file is never renamed into place."""
    state = Path(options.landing) / "_capture" / f"{options.slot}.json"
    if not state.exists():
        raise ConfigError(
            f"slot {options.slot} has no snapshot in {options.landing} (no {state}): expected a capture "
            "of that slot first (its first capture copies every table)"
        )

    def chosen(table: str) -> bool:
        return options.included(table) and any(fnmatch.fnmatchcase(table, p) for p in patterns)

    slot = f"{options.slot[:55]}_resnap"
    command = f"CREATE_REPLICATION_SLOT {slot} TEMPORARY LOGICAL wal2json (SNAPSHOT 'export')"
    with connect(options.dsn) as conn:
        check_source(conn)
    point, counts, path = _copy_exported(
        options,
        command,
        chosen,
        lambda lsn: f"{options.slot}-{lsn:016X}-resnapshot.json",
        lambda rows, tables, lsn, taken: snapshot_transaction(rows, lsn, taken, truncated=tables),
    )
    if not counts:
        path.unlink()
        raise ConfigError(
            f"--resnapshot {' '.join(patterns)}: no captured table matches: expected a pattern on "
            "schema.table naming tables the capture includes"
        )
    summary = CaptureSummary(options.slot, snapshot_lsn=format_lsn(point), snapshot_rows=counts)
    summary.files.append(str(path))
    return summary


def _copy_exported(
    options: CaptureOptions,
    command: str,
    include: Callable[[str], bool],
    name: Callable[[int], str],
    render: Callable[
        [Iterator[tuple[SnapshotTable, tuple[str | None, ...]]], list[SnapshotTable], int, str], Iterator[str]
    ],
) -> tuple[int, dict[str, int], Path]:
    """Create a slot with ``command`` (exporting a snapshot), copy the tables ``include`` accepts in that
    snapshot into the landing file ``name(consistent point)``, its lines made by ``render``; return the
    point, the rows per table and the file."""
    import psycopg

    replication = psycopg.connect(options.dsn, autocommit=True, replication="database")
    try:
        result = replication.pgconn.exec_(command.encode())
        slot = command.split()[1]
        if result.status != psycopg.pq.ExecStatus.TUPLES_OK:
            raise slot_error(slot, (result.error_message or b"").decode(errors="replace"))
        point = parse_lsn(_text(result.get_value(0, 1)))
        exported = _text(result.get_value(0, 2))
        log.info("slot %s created at %s; copying the tables in its snapshot", slot, format_lsn(point))
        with psycopg.connect(options.dsn) as copy:
            copy.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            copy.read_only = True
            copy.execute(f"SET TRANSACTION SNAPSHOT '{exported}'".encode())
            for setting, value in SESSION_SETTINGS.items():
                copy.execute(f"SET {setting} = '{value}'".encode())
            taken = str(copy.execute("SELECT now()::text").fetchone()[0])  # type: ignore[index]
            tables = [t for t in source_tables(copy) if include(t.qualified)]
            lock_tables(copy, tables)
            path = Path(options.landing) / name(point)
            counts: dict[str, int] = {}
            write_durably(path, render(_rows(copy, tables, counts), tables, point, taken))
    finally:
        replication.close()  # the exported snapshot (and a temporary slot) end with this connection
    return point, counts, path


def _rows(
    conn: psycopg.Connection[Any], tables: Sequence[SnapshotTable], counts: dict[str, int]
) -> Iterator[tuple[SnapshotTable, tuple[str | None, ...]]]:
    """Each table's rows as output texts, in key order (``ctid`` order for a table without a key), read
    through a server-side cursor; ``counts`` gets each table's row count."""
    from psycopg import sql

    for table in tables:
        values = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c.name)) for c in table.columns)
        keys = [sql.Identifier(c.name) for c in table.primary_key]
        order = sql.SQL(", ").join(keys) if keys else sql.SQL("ctid")
        query = sql.SQL("SELECT {} FROM ONLY {}.{} ORDER BY {}").format(
            values, sql.Identifier(table.schema), sql.Identifier(table.name), order
        )
        counts[table.qualified] = 0
        with conn.cursor(name=f"snapshot_{len(counts)}") as cursor:
            cursor.itersize = 5000
            cursor.execute(query)
            for row in cursor:
                counts[table.qualified] += 1
                yield table, tuple(row)
        log.info("copied %s: %d row(s)", table.qualified, counts[table.qualified])


def _text(value: bytes | None) -> str:
    return (value or b"").decode()
