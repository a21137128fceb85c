"""The data model: one frozen pydantic definition per record the resolver stores.

The Spark schemas of the lake tables are derived from these classes (``resolver.spark.sparkschema``), so a
field is declared once, here. This module does not import Spark.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SchemaChanges",
    "ChangeEvent",
    "Format",
    "IngestSummary",
    "Operation",
    "QuarantineRecord",
    "ResolverModel",
    "RunSummary",
    "TableSummary",
]


class ResolverModel(BaseModel):
    """Base of every model: immutable, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Operation(StrEnum):
    """What a change event does to its table."""

    INSERT = "insert"
    """A new row; ``column_*`` hold its full image (minus columns the producer left out)."""
    UPDATE = "update"
    """A changed row; ``old_key_*`` identify the row before the change, ``column_*`` hold its new values.
    Columns absent from ``column_names`` (unchanged TOAST values) keep their previous value."""
    DELETE = "delete"
    """A removed row, identified by ``old_key_*``; no ``column_*``."""
    TRUNCATE = "truncate"
    """Every row of the table removed (format-version 2 only: format 1 cannot show truncates)."""


class SchemaChanges(StrEnum):
    """How a rename or a type change reaches a table's snapshot and history (docs/schema-evolution.md)."""

    REWRITE = "rewrite"
    """The table is rewritten with the new names and types in the batch that carries the change: a plain
    Delta table that every reader reads (delta-rs, Polars, DuckDB, Trino, Spark)."""
    METADATA = "metadata"
    """Delta column mapping (a rename) and type widening (a type change): metadata only, no file is
    rewritten; read right by Spark with Delta 3.3+ and DuckDB, not by delta-rs or Polars today."""


class Format(StrEnum):
    """Input formats ``resolver ingest --format`` accepts."""

    WAL2JSON_V1 = "wal2json-v1"
    """wal2json ``format-version=1``: one JSON object per transaction (compact, pretty-printed or
    written in chunks)."""
    WAL2JSON_V2 = "wal2json-v2"
    """wal2json ``format-version=2``: one JSON object per record, transactions framed by B … C."""
    DEBEZIUM_JSON = "debezium-json"
    """Debezium's PostgreSQL connector: one Kafka record per line, its value as Kafka Connect JSON (with or
    without the schema envelope), or a whole record ``{"key", "value", "headers"}``
    (``resolver.formats.debezium``)."""


class ChangeEvent(ResolverModel):
    """One row change, independent of the wire format. A row of ``bronze/change_events``.

    Order: events are totally ordered by ``(commit_lsn, position)``. When the stream carries no LSN
    (``include-lsn`` off), ``commit_lsn`` is NULL and the order is the stream position
    ``(source_file, source_line, position)``. ``change_lsn`` and ``commit_time`` are data, never the order.
    Values are the exact text wal2json printed (JSON numbers keep their literal digits); a table schema
    types them later.
    """

    table: str = Field(description="Source table as <schema>.<table> (leaf partition name for partitions)")
    operation: Operation = Field(description="insert, update, delete or truncate")
    commit_lsn: int | None = Field(
        None, description="End of the transaction's commit record (v1 nextlsn, v2 B/C nextlsn) as 64-bit int"
    )
    position: int = Field(description="0-based position of the change among its transaction's changes")
    change_lsn: int | None = Field(None, description="The change's own WAL position (v2 only); not an order")
    xid: int | None = Field(None, description="Top-level transaction id (32-bit, wraps around)")
    commit_time: datetime | None = Field(None, description="Commit timestamp (UTC)")
    column_names: list[str] | None = Field(None, description="Names of the columns carried (insert, update)")
    column_types: list[str] | None = Field(None, description="PostgreSQL types of those columns, if sent")
    column_values: list[str | None] | None = Field(None, description="Values as text; NULL is SQL NULL")
    old_key_names: list[str] | None = Field(None, description="Replica-identity columns (update, delete)")
    old_key_types: list[str] | None = Field(None, description="PostgreSQL types of the identity columns")
    old_key_values: list[str | None] | None = Field(None, description="Identity values before the change")
    primary_key: list[str] | None = Field(
        None, description="Primary-key column names the stream reported (include-pk); [] for none"
    )
    source_file: str = Field(description="File the event was read from")
    source_line: int = Field(description="1-based line where its record (v2) or transaction (v1) starts")


class QuarantineRecord(ResolverModel):
    """A record that could not be accepted. A row of the ``quarantine`` table. Nothing is dropped silently:
    the raw text is kept (and the raw bytes when they are not valid UTF-8)."""

    source_file: str = Field(description="File the record was read from")
    source_line: int = Field(description="1-based line where the record starts")
    format: Format = Field(description="Format the file was read as")
    reason: str = Field(description="Why: the JSON path and the rule that failed, or the framing problem")
    raw: str = Field(description="The record's text (invalid UTF-8 bytes replaced by U+FFFD)")
    raw_bytes: bytes | None = Field(None, description="The exact bytes, when they are not valid UTF-8")


class TableSummary(ResolverModel):
    """What one batch did to one source table's silver tables."""

    table: str = Field(description="Source table as <schema>.<table>")
    events: int = Field(0, description="Change events of this table in the batch (with a commit LSN)")
    skipped: int = Field(0, description="Events not resolved: no commit LSN in the stream")
    inserted: int = Field(0, description="Keys added to the snapshot")
    updated: int = Field(0, description="Snapshot rows whose values changed")
    deleted: int = Field(0, description="Keys removed from the snapshot")
    moved: int = Field(0, description="Primary-key changes among the batch's events")
    late: int = Field(0, description="Events older than a change the lake already held for their key")
    versions_written: int = Field(0, description="History rows inserted, changed or removed")
    bad_values: int = Field(0, description="Values that did not fit their column's type (quarantined)")
    rounds: int = Field(
        0, description="Spark rounds run for key-change graphs (0 when the driver solved them: small graphs)"
    )
    notes: list[str] = Field(
        default_factory=list,
        description="Schema changes the batch made, and warnings such as a likely rename",
    )
    error: str | None = Field(
        default=None,
        description="Why this table failed (in runs that isolate tables: the other tables were applied)",
    )


class IngestSummary(ResolverModel):
    """What one ``ingest`` call did (printed by the CLI, returned by the library)."""

    files: int = Field(description="Input files read")
    transactions: int = Field(description="Complete transactions read (including empty ones)")
    events_read: int = Field(description="Change events parsed from the input")
    accepted: int = Field(description="Events appended to bronze (new to the lake)")
    duplicates: int = Field(description="Events skipped because bronze already had them (or the batch twice)")
    quarantined: int = Field(
        description="Records written to the quarantine table: records that could not be read, events a "
        "policy refused, and values that did not fit their column (their events applied with NULL there)"
    )
    messages: int = Field(description="Logical-decoding messages (not row changes), skipped")
    tombstones: int = Field(0, description="Debezium tombstones (records without a value), skipped")
    bronze_version: int | None = Field(None, description="Delta version of bronze after this batch")
    tables: list[TableSummary] = Field(default_factory=list, description="Per table: what silver got")
    open_from: str | None = Field(
        None,
        description="With open_end: the file where a transaction still open at the end of the input began "
        "(its commit has not landed yet); a stream read in pieces reads it again from there",
    )

    def lines(self) -> list[str]:
        """The summary as the CLI prints it."""
        return [
            f"files read           {self.files}",
            f"transactions         {self.transactions}",
            f"events read          {self.events_read}",
            f"accepted (new)       {self.accepted}",
            f"duplicates skipped   {self.duplicates}",
            f"quarantined          {self.quarantined}",
            f"messages skipped     {self.messages}",
            *([f"tombstones skipped   {self.tombstones}"] if self.tombstones else []),
            *table_lines(self.tables),
        ]


def table_lines(tables: list[TableSummary]) -> list[str]:
    """The per-table summary as an aligned text table (nothing when there are no tables)."""
    if not tables:
        return []
    heads = ["table", "events", "inserted", "updated", "deleted", "moved", "late", "quarantined", "skipped"]
    rows = [
        [str(v) for v in (t.table, t.events, t.inserted, t.updated, t.deleted, t.moved, t.late)]
        + [str(t.bad_values), str(t.skipped)]
        for t in tables
    ]
    widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(len(heads))]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    notes = [f"{t.table}: {note}" for t in tables for note in t.notes]
    notes += [f"{t.table}: FAILED: {t.error}" for t in tables if t.error]
    return ["", fmt.format(*heads), *(fmt.format(*r) for r in rows), *([""] + notes if notes else [])]


class RunSummary(ResolverModel):
    """What one ``resolver run`` did (printed by the CLI, ``--json`` for schedulers)."""

    run_id: str = Field(description="This run's id (also in the ledger and the lock)")
    lake: str = Field(description="The lake folder")
    files_seen: int = Field(description="Files in the source")
    files_new: int = Field(description="Files not in the ledger (new, or changed since they were applied)")
    files_applied: int = Field(description="Files recorded in the ledger by this run")
    batches: list[IngestSummary] = Field(default_factory=list, description="One summary per batch")
    failed_tables: dict[str, str] = Field(
        default_factory=dict, description="Tables that failed, with why; their files are read again next run"
    )
    seconds: float = Field(default=0.0, description="Wall-clock time of the run")
    warnings: list[str] = Field(
        default_factory=list,
        description="What the lake cannot follow by itself: tables to copy again (rows a partition's "
        "truncate, attach, detach or drop moved without change events), one line each",
    )

    @property
    def status(self) -> str:
        """ok, partial (some tables failed, the others were applied) or idle (nothing new)."""
        if self.failed_tables:
            return "partial"
        return "ok" if self.files_new else "idle"

    def tables(self) -> list[TableSummary]:
        """Per table, the batches' summaries added up (the last error kept)."""
        out: dict[str, dict[str, Any]] = {}
        for batch in self.batches:
            for t in batch.tables:
                acc = out.setdefault(t.table, {"table": t.table, "notes": [], "error": None})
                for name in _COUNTS:
                    acc[name] = acc.get(name, 0) + getattr(t, name)
                acc["notes"] += t.notes
                acc["error"] = t.error or None
        return [TableSummary(**v) for _, v in sorted(out.items())]

    def lines(self) -> list[str]:
        """The summary as the CLI prints it."""
        total = {
            name: sum(getattr(b, name) for b in self.batches)
            for name in ("events_read", "accepted", "duplicates", "quarantined")
        }
        return [
            f"run                  {self.run_id}",
            f"status               {self.status}",
            f"files new            {self.files_new} of {self.files_seen} (applied {self.files_applied})",
            f"batches              {len(self.batches)}",
            f"events read          {total['events_read']}",
            f"accepted (new)       {total['accepted']}",
            f"duplicates skipped   {total['duplicates']}",
            f"quarantined          {total['quarantined']}",
            *table_lines(self.tables()),
            *[f"warning: {line}" for line in self.warnings],
            f"elapsed              {self.seconds:.1f} s",
        ]


_COUNTS = [
    "events", "skipped", "inserted", "updated", "deleted", "moved", "late", "versions_written", "bad_values",
    "rounds",
]  # fmt: skip
