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
from resolver.explode import TableLayout, explode_events
from resolver.first_batch import apply_first_batch, is_first_batch
from resolver.merge import diff_rows, event_counts, merge_changes, range_sql
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

    rows: DataFrame  # the batch exploded against the layout, materialized
    version: int  # the store's version afterwards
    adopted: bool  # truncates kept from before the table's first rows came with it
    flags_hold: bool  # the marker's key-change and truncate flags still describe the store before it
    done: bool  # every event was held already and the silver tables hold all the store has


def apply_table(
    spark: SparkSession, events: DataFrame, lake: str, meta: TableMeta, layout: TableLayout | None
) -> tuple[TableSummary, DataFrame | None]:
    """Bring one table's silver tables up to date; also returns its quarantine records, if any."""
    name = meta.table
    if layout is None:
        defer_truncates(spark, events, lake, name)
        return empty_summary(name, meta, None), None
    with step(spark, name, "tables"):
        first = is_first_batch(spark, lake, layout)
        tables = open_batch_tables(spark, lake, layout)
    if first:
        return apply_first_batch(spark, events, lake, meta, layout, tables)
    stored = _store(spark, events, lake, meta, layout, tables)
    if stored.done:
        return already_applied(stored.rows, layout, meta, stored.version)
    all_changes = tables.store.toDF()
    found = rescan_drops(all_changes, layout) if layout.rescan else {}
    if found:  # drops of columns new to the lake (or sent earlier than it knew) found among held inserts
        layout = with_found_drops(spark, lake, layout, found)
    with step(spark, name, "affected keys"):
        affected = affected_keys(
            stored.rows,
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
    hist_changes, snap_changes = _diffs(spark, name, versions, tables, layout, affected)
    with step(spark, name, "counts"):
        counts = event_counts(stored.rows, changes)
    if tables.history is not None and hist_changes is not None:
        with step(spark, name, "history merge"):
            cols = tables.history.toDF().columns
            written = merge_changes(
                tables.history, hist_changes, [*layout.key, "__start_lsn"], cols, affected.ranges
            )
        counts["h_total"] = sum(written.values())
    if tables.snapshot is not None and snap_changes is not None:
        with step(spark, name, "snapshot merge"):
            cols = tables.snapshot.toDF().columns
            written = merge_changes(tables.snapshot, snap_changes, list(layout.key), cols, affected.ranges)
        counts.update({f"s_{action}": n for action, n in written.items()})
    bad = bad_value_records(stored.rows, layout) if counts.get("bad") else None
    mark_applied(spark, lake, layout, tables, stored.version, affected)
    return table_summary(layout, meta, counts, affected.rounds), bad


def _store(
    spark: SparkSession,
    events: DataFrame,
    lake: str,
    meta: TableMeta,
    layout: TableLayout,
    tables: BatchTables,
) -> _Stored:
    """Explode the batch and append its new rows to the change store (an insert-only MERGE on (commit LSN,
    position), bounded by the batch's LSN range), with the truncates a new table kept."""
    name, store = layout.table, tables.store
    with step(spark, name, "explode"):
        rows = explode_events(events, layout).localCheckpoint(eager=True)
    batch = rows.dropDuplicates(["__lsn", "__pos"]).select(*[sql.col(c) for c in store.toDF().columns])
    adopted = False
    if not layout.extra["key"]:  # a new table: truncates that came before its first rows
        pending = pending_truncates(spark, lake, name, store.toDF().schema)
        if pending is not None:
            batch, adopted = batch.unionByName(pending), True
    condition = "t.__lsn = s.__lsn AND t.__pos = s.__pos"
    if meta.lo is not None:
        condition = f"t.__lsn BETWEEN {int(meta.lo)} AND {int(meta.hi or meta.lo)} AND " + condition
    with step(spark, name, "store merge"):
        inserted, version = delta.insert_new(store, batch, condition)
    applied = layout.extra.get("applied", "")
    # the marker's key-change and truncate flags still describe the store before this batch's rows
    flags_hold = applied.isdigit() and int(applied) + 1 == version - (1 if inserted else 0)
    done = (
        applied.isdigit()
        and int(applied) + 1 == version  # nothing was committed to the store since the marker
        and not (tables.rekeyed or adopted or layout.rescan or layout.schema_log)
    )  # every event of the batch is in the store, and the silver tables hold all the store has
    return _Stored(rows, version, adopted, flags_hold, done)


def _diffs(
    spark: SparkSession,
    name: str,
    versions: DataFrame,
    tables: BatchTables,
    layout: TableLayout,
    affected: Affected,
) -> tuple[DataFrame | None, DataFrame | None]:
    """The changes that make the history, and the snapshot, hold ``versions`` (each materialized; None
    for a silver table the settings do not keep)."""

    def of_affected(table: DeltaTable) -> DataFrame:
        df = table.toDF()
        for bound in range_sql(affected.ranges, ""):
            df = df.filter(bound)
        df = df.withColumn("__kh", key_hash(F.struct(*[sql.col(k) for k in layout.key])))
        if affected.nodes is not None:
            df = df.join(affected.nodes, F.col("__kh") == F.col("node"), "left_semi")
        return df

    hist_changes = snap_changes = None
    if tables.history is not None:
        with step(spark, name, "read history"):
            hist = of_affected(tables.history)
        h_cols = list(tables.history.toDF().columns)
        with step(spark, name, "diff history"):
            hist_changes = diff_rows(
                versions, hist, h_cols, ["__kh", "__start_lsn"], [*layout.key, "__start_lsn"]
            ).localCheckpoint(eager=True)
    if tables.snapshot is not None:
        s_cols = tables.snapshot.toDF().columns
        current = versions.filter("__is_current").select("__kh", *[sql.col(c) for c in s_cols])
        # the snapshot itself, not the history's open versions: a run killed between the two MERGEs
        # leaves them apart, and only a diff against the snapshot's own rows completes it
        with step(spark, name, "read snapshot"):
            was_current = of_affected(tables.snapshot).select("__kh", *[sql.col(c) for c in s_cols])
        with step(spark, name, "diff snapshot"):
            snap_changes = diff_rows(
                current, was_current, s_cols, ["__kh"], list(layout.key)
            ).localCheckpoint(eager=True)
    return hist_changes, snap_changes
