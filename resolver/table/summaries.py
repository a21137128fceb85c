"""A table's summary of one batch: applied, found applied already, or not applied (columns not known yet,
or the table failed)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from resolver.models import TableSummary
from resolver.plan.tablemeta import TableMeta
from resolver.table.exploded import bad_value_records, moved_events
from resolver.table.table_steps import Exploded
from resolver.tablelayout import TableLayout

__all__ = ["already_applied", "empty_summary", "table_summary"]


def table_summary(layout: TableLayout, meta: TableMeta, counts: dict[str, int], rounds: int) -> TableSummary:
    """A table's summary of a batch that was applied, from ``counts``: what the MERGEs changed (``s_insert``,
    ``s_update``, ``s_delete``, ``h_total``) and the batch's moves, late events and bad values
    (``resolver.table.exploded``, ``resolver.table.merge.late_events``)."""
    return TableSummary(
        table=layout.table,
        events=meta.events,
        skipped=meta.skipped,
        inserted=counts.get("s_insert", 0),
        updated=counts.get("s_update", 0),
        deleted=counts.get("s_delete", 0),
        moved=counts.get("moved", 0),
        late=counts.get("late", 0),
        versions_written=counts.get("h_total", 0),
        bad_values=counts.get("bad", 0),
        rounds=rounds,
        notes=list(layout.notes),
    )


def already_applied(
    exploded: Exploded, layout: TableLayout, meta: TableMeta, store_version: int
) -> tuple[TableSummary, DataFrame | None]:
    """The summary of a batch whose every event the store already held, with silver up to date: the
    batch's own moves and bad values (measured when it was exploded), nothing resolved or written. Its bad
    values are sent to the quarantine again, which keeps one record per file, line and reason."""
    moved, bad = moved_events(exploded), exploded.bad
    note = (
        f"every event was already applied (change store version {store_version}, silver tables up to "
        "date): nothing to resolve"
    )
    return TableSummary(
        table=layout.table,
        events=meta.events,
        skipped=meta.skipped,
        inserted=0,
        updated=0,
        deleted=0,
        moved=moved,
        late=0,
        versions_written=0,
        bad_values=bad,
        rounds=0,
        notes=[*layout.notes, note],
    ), (bad_value_records(exploded.rows, layout) if bad else None)


def empty_summary(table: str, meta: TableMeta | None, error: str | None) -> TableSummary:
    """A table's summary when nothing was applied to it (columns not known yet, or it failed)."""
    return TableSummary(
        table=table,
        events=meta.events if meta else 0,
        skipped=meta.skipped if meta else 0,
        inserted=0,
        updated=0,
        deleted=0,
        moved=0,
        late=0,
        versions_written=0,
        bad_values=0,
        rounds=0,
        error=error,
    )
