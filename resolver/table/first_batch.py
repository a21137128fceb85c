"""A table's first batch (``resolver.table.table_steps``): its Delta tables were created by this batch, so
they are empty. The batch's own rows are all the changes there are, so no key is looked up, nothing is read
back and nothing is diffed: the change store, history and snapshot are appended to (about a third of the Spark
jobs of a later batch). A first batch of inserts only, each key once (an initial load), takes the append
route instead (``resolver.table.append_batch.first_appends_only``): no store append and no resolution.

A run killed part-way leaves tables that exist, so the next run takes the general path
(``resolver.table.later_batch``), which diffs against what was written and completes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from resolver.lake import delta
from resolver.plan.tablemeta import TableMeta
from resolver.spark import sql
from resolver.spark.steps import step
from resolver.table.affected import resolve_affected
from resolver.table.exploded import counting_moves, each_event_once
from resolver.table.store import drops_found
from resolver.table.table_steps import Affected, BatchEvents, BatchTables, Exploded, Stored
from resolver.table.truncates import pending_truncates
from resolver.tablelayout import TableLayout

__all__ = ["FirstBatch"]


@dataclass
class FirstBatch:
    """The steps of a table's first batch, into the empty tables ``tables`` (just created)."""

    spark: SparkSession
    meta: TableMeta
    layout: TableLayout
    tables: BatchTables

    def store(self, events: BatchEvents, exploded: Exploded) -> Stored:
        """Materialize the batch's changes (with the truncates that came before the table's first rows) and
        append them to the empty change store."""
        spark, name = self.spark, self.layout.table
        store_schema = self.tables.store.toDF().schema
        changes, moves = counting_moves(
            each_event_once(exploded, events).select(*[sql.col(f.name) for f in store_schema.fields])
        )
        pending = pending_truncates(spark, self.tables.paths.pending_truncates, name, store_schema)
        if pending is not None:
            changes = changes.unionByName(pending)
        with step(spark, name, "read changes"):
            changes = changes.localCheckpoint(eager=True)
        with step(spark, name, "store append"):
            version = delta.append(self.tables.store, self.tables.paths.changes, changes)
        moved = int(moves.get["n"] or 0)  # counted by the checkpoint's job
        adopted = pending is not None
        return Stored(exploded, changes, version, adopted, flags_hold=False, done=False, moved=moved)

    def drops(self, stored: Stored) -> dict[str, list[tuple[int, ...]]]:
        """The drop points among the batch's own inserts (the store holds no other), as explode's pass
        measured them: no job."""
        return drops_found(self.layout, stored.exploded.rescanned)

    def affected(self, stored: Stored) -> Affected:
        """Every key the batch names (nothing else is held), and what the store now holds: the batch's key
        changes and truncates, its newest commit LSN (no later batch's event older than that is late)."""
        exploded = stored.exploded
        truncates = bool(self.meta.truncates) or stored.adopted
        affected = Affected(None, has_moves=exploded.moves > 0, has_truncates=truncates, moves=exploded.moves)
        affected.has_updates = exploded.updates > 0
        affected.late_possible = False  # nothing was held before: no event of the batch is late
        affected.newest, affected.newest_known = self.meta.hi, True
        return affected

    def changes(self, stored: Stored, affected: Affected) -> DataFrame:
        """The batch's own changes, materialized when they were stored."""
        return stored.held

    def resolve(self, changes: DataFrame, affected: Affected) -> DataFrame:
        """The versions of every key the batch names (``resolve_affected``)."""
        return resolve_affected(changes, self.layout, affected)

    def write_history(self, versions: DataFrame, changes: DataFrame, affected: Affected) -> int:
        """Append the versions to the empty history; the rows written are counted on their way in (an
        observed metric of the append, no job of its own)."""
        assert self.tables.history is not None  # apply_table writes only the silver tables the table keeps
        with step(self.spark, self.layout.table, "history append"):
            path = self.tables.paths.history
            written, _ = delta.append_counted(self.tables.history, path, versions)
        return written.get("numTargetRowsInserted", 0)

    def write_snapshot(self, versions: DataFrame, changes: DataFrame, affected: Affected) -> dict[str, int]:
        """Append the current versions to the empty snapshot."""
        assert self.tables.snapshot is not None  # apply_table writes only the silver tables the table keeps
        with step(self.spark, self.layout.table, "snapshot append"):
            path = self.tables.paths.snapshot
            current = versions.filter("__is_current")
            written, _ = delta.append_counted(self.tables.snapshot, path, current)
        return {"insert": written.get("numTargetRowsInserted", 0)}
