"""A table's first batch: its Delta tables were created by this batch, so they are empty. The batch's own
rows are all the changes there are, so nothing is read back, no key is looked up and nothing is diffed:
the change store, history and snapshot are appended to (about a third of the Spark jobs of a later batch).

A run killed part-way leaves tables that exist, so the next run takes the general path
(``resolver.apply``), which diffs against what was written and completes it.
"""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from resolver import delta, sql
from resolver.affected import Affected, resolve_affected
from resolver.batch_tables import BatchTables, mark_applied
from resolver.explode import TableLayout
from resolver.exploded import explode_batch, moved_events
from resolver.lake import changes_path, history_path, snapshot_path
from resolver.models import TableSummary
from resolver.quarantine import bad_value_records
from resolver.schemalog import with_found_drops
from resolver.steps import step
from resolver.store import rescan_drops
from resolver.summaries import table_summary
from resolver.tablemeta import TableMeta
from resolver.truncates import pending_truncates

__all__ = ["apply_first_batch", "is_first_batch"]


def is_first_batch(spark: SparkSession, lake: str, layout: TableLayout) -> bool:
    """Whether none of the table's Delta tables exists yet (checked before they are opened): the lake had no
    change store for it (``layout.extra["key"]`` is read from one) and no silver table either."""
    if layout.extra.get("key"):
        return False
    paths = (
        changes_path(lake, layout.table),
        history_path(lake, layout.table),
        snapshot_path(lake, layout.table),
    )
    return not any(DeltaTable.isDeltaTable(spark, p) for p in paths)


def apply_first_batch(
    spark: SparkSession,
    events: DataFrame,
    lake: str,
    meta: TableMeta,
    layout: TableLayout,
    tables: BatchTables,
) -> tuple[TableSummary, DataFrame | None]:
    """Apply a table's first batch to the empty tables ``tables`` (just created); also returns its
    quarantine records, if any."""
    name = layout.table
    with step(spark, name, "explode"):
        exploded = explode_batch(events, layout)
    rows = exploded.rows
    store_schema = tables.store.toDF().schema
    changes = rows.dropDuplicates(["__lsn", "__pos"]).select(*[sql.col(f.name) for f in store_schema.fields])
    pending = pending_truncates(spark, lake, name, store_schema)  # truncates that came before the first rows
    if pending is not None:
        changes = changes.unionByName(pending)
    with step(spark, name, "read changes"):
        changes = changes.localCheckpoint(eager=True)
    with step(spark, name, "store append"):
        version = delta.append(tables.store, changes_path(lake, name), changes)
    found = rescan_drops(changes, layout) if layout.rescan else {}
    if found:  # drops of columns sent before the lake knew them, found among the batch's inserts
        layout = with_found_drops(spark, lake, layout, found)
    with step(spark, name, "counts"):
        counts = {"moved": moved_events(exploded), "bad": exploded.bad}
    # the store held nothing before: its truncates are the batch's, or kept from before its first rows
    truncates = bool(meta.truncates) or pending is not None
    affected = Affected(None, has_moves=exploded.moves > 0, has_truncates=truncates, moves=exploded.moves)
    affected.newest, affected.newest_known = meta.hi, True  # at most the batch's newest: no later one is late
    with step(spark, name, "resolve"):
        versions = resolve_affected(changes, layout, affected)
    # the rows written are counted on their way in (an observed metric of each append, no job of its own)
    if tables.history is not None:
        with step(spark, name, "history append"):
            written, _ = delta.append_counted(tables.history, history_path(lake, name), versions)
        counts["h_total"] = written.get("numTargetRowsInserted", 0)
    if tables.snapshot is not None:
        with step(spark, name, "snapshot append"):
            current = versions.filter("__is_current")
            written, _ = delta.append_counted(tables.snapshot, snapshot_path(lake, name), current)
        counts["s_insert"] = written.get("numTargetRowsInserted", 0)
    bad_records = bad_value_records(rows, layout) if counts.get("bad") else None
    mark_applied(spark, lake, layout, tables, version, affected)
    return table_summary(layout, meta, counts, affected.rounds), bad_records
