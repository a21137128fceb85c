"""What one batch holds for one table (``TableMeta``), as the plan and the per-table steps read it: counts,
the commit-LSN range, columns and types, the keys the stream reports, and where each column first and last
appears. ``resolver.plan.metadata`` fills it from one small aggregate over the batch. No Spark."""

from __future__ import annotations

from dataclasses import dataclass, field

from resolver.lsn import format_lsn

Point = tuple[int, int]
"""An event's place in the stream: (commit LSN, position in its transaction)."""


@dataclass(frozen=True)
class Seen:
    """Where a column first came with one type: the type's PostgreSQL name (None when the stream sends no
    types), and the commit LSN, file and line of that first event."""

    type: str | None
    lsn: int | None
    file: str
    line: int


@dataclass(frozen=True)
class FirstEvent:
    """A table's first event of the batch (for error messages)."""

    lsn: int | None
    position: int | None
    file: str
    line: int


@dataclass(frozen=True)
class InsertSet:
    """One column set the batch's inserts came with, and its first insert: (commit LSN, position,
    commit time in microseconds)."""

    columns: frozenset[str]
    first: tuple[int, int, int]


@dataclass(frozen=True)
class TableMeta:
    """What one batch holds for one table."""

    table: str
    events: int = 0  # events with a commit LSN
    skipped: int = 0  # events without one (nothing to order them by: counted, not applied)
    truncates: int = 0
    changes: int = 0  # updates and deletes (they need the key to find their row)
    lo: int | None = None  # the batch's lowest and highest commit LSN of this table
    hi: int | None = None
    columns: dict[str, str | None] = field(default_factory=dict)  # name -> PostgreSQL type (None: untyped)
    old_keys: dict[str, str | None] = field(default_factory=dict)  # the old-key columns, the same way
    identities: list[list[str]] = field(default_factory=list)  # old-key column lists of updates, deletes
    pks: list[list[str]] = field(default_factory=list)  # primary keys the stream reports
    types: dict[str, list[Seen]] = field(default_factory=dict)  # per column, each type, first seen first
    first: dict[str, Point] = field(default_factory=dict)  # per column, its first event
    last: dict[str, Point] = field(default_factory=dict)  # per column, its last event
    insert_sets: list[InsertSet] = field(default_factory=list)
    last_insert: Point | None = None
    first_event: FirstEvent | None = None

    def where_first(self, column: str | None = None) -> str:
        """Where the table's (or one of its columns') first event of the batch is, for error messages."""
        seen = min(self.types.get(column or "", []), key=lambda s: (s.lsn is None, s.lsn or 0), default=None)
        if column is not None and seen is not None:
            return f"commit LSN {lsn_text(seen.lsn)} ({seen.file}:{seen.line})"
        first = self.first_event
        if first is None:
            return "commit LSN unknown"
        return f"commit LSN {lsn_text(first.lsn)} ({first.file}:{first.line})"


def lsn_text(lsn: int | None) -> str:
    return "unknown" if lsn is None else format_lsn(lsn)
