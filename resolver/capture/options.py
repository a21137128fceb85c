"""What a capture is asked to do and what it did: ``CaptureOptions`` (the database, the landing folder, the
slot, the tables) and ``CaptureSummary``, shared by the snapshot (``resolver.capture.snapshot``), the drain
(``resolver.capture.drain``) and the command (``resolver.cli.capture_command``)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

from resolver.config.pipeline import Partitions

__all__ = ["CaptureOptions", "CaptureSummary", "Partitions"]


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
    copy_processes: int = 2  # worker processes copying a table of several chunks (resolver.capture.copy)
    partitions: Partitions = Partitions.ROOT  # a partitioned table as one table, or each partition its own

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
