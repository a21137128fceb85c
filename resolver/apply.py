"""Bring one table's silver tables up to date with one batch (``apply_table``, which reads as its steps):
open the table's Delta tables, append the batch to the change store, find the affected keys
(``resolver.affected``), read their changes, resolve them into versions, diff and MERGE history and
snapshot (``resolver.merge``), and leave the marker that says the batch is applied."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver import delta, sql
from resolver.affected import Affected, affected_keys, read_changes, resolve_affected
from resolver.batch_tables import BatchTables, mark_applied, open_batch_tables
from resolver.coverage import HELD_NOTE
from resolver.explode import TableLayout
from resolver.exploded import Exploded, explode_batch, moved_events
from resolver.first_batch import apply_first_batch, is_first_batch
from resolver.lake import changes_path
from resolver.merge import (
    diff_rows,
    keys_of,
    late_events,
    merge_changes,
    merge_snapshot,
    merge_versions,
    range_sql,
    replace_snapshot,
)
from resolver.models import TableSummary
from resolver.quarantine import bad_value_records
from resolver.schemalog import with_found_drops
from resolver.steps import step
from resolver.store import key_hash, rescan_drops
from resolver.summaries import already_applied, empty_summary, table_summary
from resolver.tablemeta import TableMeta
from resolver.truncates import defer_truncates, pending_truncates

log = logging.getLogger(__name__)


@dataclass
class _Stored:
    """What appending the batch to the change store found."""

    exploded: Exploded  # the batch exploded against the layout, materialized and measured
    version: int  # the store's version afterwards
    adopted: bool  # truncates kept from before the table's first rows came with it
    flags_hold: bool  # the marker's key-change and truncate flags still describe the store before it
    done: bool  # every event was held already and the silver tables hold all the store has


def apply_table(
    spark: SparkSession,
    events: DataFrame,
    lake: str,
    meta: TableMeta,
    layout: TableLayout | None,
    all_new: bool = False,
) -> tuple[TableSummary, DataFrame | None]:
    """Bring one table's silver tables up to date; also returns its quarantine records, if any.
    ``all_new``: the lake held none of the batch's events before it (bronze took every one as new)."""
    name = meta.table
    if layout is None:  # only truncates (resolver.coverage): held until the table's first rows
        defer_truncates(spark, events, lake, name)
        return empty_summary(name, meta, None).model_copy(update={"notes": [HELD_NOTE]}), None
    with step(spark, name, "tables"):
        first = is_first_batch(spark, lake, layout)
        tables = open_batch_tables(spark, lake, layout)
    if first:
        return apply_first_batch(spark, events, lake, meta, layout, tables)
    stored = _store(spark, events, lake, meta, layout, tables, all_new)
    if stored.done:
        return already_applied(stored.exploded, layout, meta, stored.version)
    all_changes = tables.store.toDF()
    found = rescan_drops(all_changes, layout) if layout.rescan else {}
    if found:  # drops of columns new to the lake (or sent earlier than it knew) found among held inserts
        layout = with_found_drops(spark, lake, layout, found)
    with step(spark, name, "affected keys"):
        affected = affected_keys(
            stored.exploded,
            all_changes,
            layout,
            meta,
            flags_hold=stored.flags_hold and not found,
            rekeyed=tables.rekeyed,
            adopted=stored.adopted,
        )
    with step(spark, name, "read changes"):
        changes = read_changes(all_changes, affected, layout)
    with step(spark, name, "resolve"):
        versions = resolve_affected(changes, layout, affected)
    with step(spark, name, "counts"):
        counts = {"moved": moved_events(stored.exploded), "bad": stored.exploded.bad}
        counts["late"] = late_events(stored.exploded.rows, changes) if affected.late_possible else 0
    if tables.history is not None:
        counts["h_total"] = _merge_history(spark, name, versions, tables.history, layout, affected, meta)
    if tables.snapshot is not None:
        with step(spark, name, "snapshot merge"):
            written = _merge_snapshot(tables.snapshot, versions, changes, layout, affected)
        counts.update({f"s_{action}": n for action, n in written.items()})
    bad = bad_value_records(stored.exploded.rows, layout) if counts["bad"] else None
    mark_applied(spark, lake, layout, tables, stored.version, affected)
    return table_summary(layout, meta, counts, affected.rounds), bad


def _store(
    spark: SparkSession,
    events: DataFrame,
    lake: str,
    meta: TableMeta,
    layout: TableLayout,
    tables: BatchTables,
    all_new: bool,
) -> _Stored:
    """Explode the batch and add its new rows to the change store, with the truncates a new table kept.
    When the lake held none of the batch's events (``all_new``: bronze took them all as new, and the store
    only ever holds events bronze took before), they are appended blindly; otherwise by an insert-only
    MERGE on (commit LSN, position), bounded by the batch's LSN range, which skips those held already."""
    name, store = layout.table, tables.store
    with step(spark, name, "explode"):
        exploded = explode_batch(events, layout)
    batch = exploded.rows.dropDuplicates(["__lsn", "__pos"]).select(
        *[sql.col(c) for c in store.toDF().columns]
    )
    adopted = False
    if not layout.extra["key"]:  # a new table: truncates that came before its first rows
        pending = pending_truncates(spark, lake, name, store.toDF().schema)
        if pending is not None:
            batch, adopted = batch.unionByName(pending), True
    if all_new:
        with step(spark, name, "store append"):
            inserted, version = True, delta.append(store, changes_path(lake, name), batch)
    else:
        condition = "t.__lsn = s.__lsn AND t.__pos = s.__pos"
        if meta.lo is not None:
            condition = f"t.__lsn BETWEEN {int(meta.lo)} AND {int(meta.hi or meta.lo)} AND " + condition
        with step(spark, name, "store merge"):
            metrics, version = delta.insert_new(store, batch, condition)
        inserted = bool(metrics)
    applied = layout.extra.get("applied", "")
    # the marker's key-change and truncate flags still describe the store before this batch's rows
    flags_hold = applied.isdigit() and int(applied) + 1 == version - (1 if inserted else 0)
    done = (
        applied.isdigit()
        and int(applied) + 1 == version  # nothing was committed to the store since the marker
        and not (tables.rekeyed or adopted or layout.rescan or layout.schema_log)
    )  # every event of the batch is in the store, and the silver tables hold all the store has
    return _Stored(exploded, version, adopted, flags_hold, done)


def _merge_history(
    spark: SparkSession,
    name: str,
    versions: DataFrame,
    history: DeltaTable,
    layout: TableLayout,
    affected: Affected,
    meta: TableMeta,
) -> int:
    """Make the history hold ``versions`` for the affected keys; returns the rows written. A batch whose
    every event is newer than all the table held (the common case) only closes open versions and opens new
    ones: one MERGE straight from the versions. Otherwise (late events, a truncate or a new key affecting
    every key, a run completed after a crash) the versions are diffed against the history rows of those
    keys first, and the diff's deletes remove versions that no longer exist."""
    cols = history.toDF().columns
    if affected.after_held and affected.nodes is not None and meta.lo is not None:
        with step(spark, name, "history merge"):
            written = merge_versions(history, versions, list(layout.key), cols, affected.ranges, int(meta.lo))
        return sum(written.values())
    with step(spark, name, "read history"):
        hist = history.toDF()
        for bound in range_sql(affected.ranges, ""):
            hist = hist.filter(bound)
        hist = hist.withColumn("__kh", key_hash(F.struct(*[sql.col(k) for k in layout.key])))
        if affected.nodes is not None:
            hist = hist.join(affected.nodes, F.col("__kh") == F.col("node"), "left_semi")
    with step(spark, name, "diff history"):
        diff = diff_rows(
            versions, hist, cols, ["__kh", "__start_lsn"], [*layout.key, "__start_lsn"]
        ).localCheckpoint(eager=True)
    with step(spark, name, "history merge"):
        written = merge_changes(history, diff, [*layout.key, "__start_lsn"], cols, affected.ranges)
    return sum(written.values())


def _merge_snapshot(
    snapshot: DeltaTable, versions: DataFrame, changes: DataFrame, layout: TableLayout, affected: Affected
) -> dict[str, int]:
    """MERGE the affected keys' current versions into the snapshot, straight from the versions: the
    snapshot's own rows are the MERGE's target, so a run killed between the two MERGEs is completed too.
    Every affected key is named by one of its changes; with every key affected, the whole snapshot is
    replaced."""
    cols = snapshot.toDF().columns
    current = versions.filter("__is_current").select(*[sql.col(c) for c in cols])
    if affected.nodes is None:
        return replace_snapshot(snapshot, current, list(layout.key), cols)
    keys = keys_of(changes, layout.key).distinct()
    return merge_snapshot(snapshot, current, keys, list(layout.key), cols, affected.ranges)
