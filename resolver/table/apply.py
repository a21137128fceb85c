"""Bring one table's silver tables up to date with one batch: ``apply_table`` reads as its steps (open the
table's Delta tables, explode its rows, append them to the change store, find the affected keys, read their
changes, resolve them into versions, write history and snapshot, leave the marker that says the batch is
applied). The route is chosen once, at the start, and every route takes the same steps
(``resolver.table.table_steps``); what each step does differs: a table's first batch
(``resolver.table.first_batch``), a batch that only adds rows the table never held, a first batch of
inserts included (``resolver.table.append_batch``: appends), and every other
(``resolver.table.later_batch``)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, SparkSession

from resolver.models import TableSummary
from resolver.plan.coverage import HELD_NOTE
from resolver.plan.schemalog import with_found_drops
from resolver.plan.table_plan import TablePlan
from resolver.spark.steps import step
from resolver.table.append_batch import AppendBatch, appends_only, first_appends_only
from resolver.table.batch_tables import mark_applied, next_high, open_batch_tables
from resolver.table.exploded import bad_value_records, moved_events, table_rows
from resolver.table.first_batch import FirstBatch
from resolver.table.later_batch import ContinueBatch, LaterBatch, continues_only
from resolver.table.merge import late_events
from resolver.table.summaries import already_applied, empty_summary, table_summary
from resolver.table.table_steps import Affected, BatchEvents, BatchTables, Exploded, TableSteps
from resolver.table.truncates import defer_truncates
from resolver.tablestate import Marker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableApplied:
    """What one table's batch leaves (``apply_table``): its summary, the records of its values that did not
    fit their columns (None: none), and its marker for the lake's one commit after the batch's last table
    (``resolver.lake.markers``; None: nothing was applied, or the marker went to its change store with the
    properties the batch changed)."""

    summary: TableSummary
    bad: DataFrame | None = None
    marker: Marker | None = None


def apply_table(spark: SparkSession, events: BatchEvents, table: TablePlan) -> TableApplied:
    """Bring one table's silver tables up to date with the batch's ``events`` (``table``: what the plan
    hands the table, ``resolver.plan.batch_plan.BatchPlan.table``). The route is chosen once, at the start
    (``_route``), and each route takes the same steps."""
    meta, layout, paths = table.meta, table.layout, table.paths
    name = meta.table
    if layout is None:  # only truncates (resolver.plan.coverage): held until the table's first rows
        defer_truncates(spark, events.rows, paths.pending_truncates, name)
        return TableApplied(empty_summary(name, meta, None).model_copy(update={"notes": [HELD_NOTE]}))
    with step(spark, name, "tables"):
        opened = events.opened.get(name)
        tables = opened if opened is not None else open_batch_tables(spark, paths, layout)
    with step(spark, name, "explode"):
        exploded = table_rows(events, layout)
    steps = _route(spark, table, tables, events, exploded)
    stored = steps.store(events, exploded)
    if stored.done:
        return TableApplied(*already_applied(stored.exploded, layout, meta, stored.version))
    found = steps.drops(stored) if layout.rescan else {}
    if found:  # drops of columns new to the lake (or sent earlier than it knew) found among held inserts
        steps.layout = layout = with_found_drops(spark, paths.schema_log, layout, found)
        stored = replace(stored, flags_hold=False)  # the marker's flags knew none of these drops
    with step(spark, name, "affected keys"):
        affected = steps.affected(stored)
    with step(spark, name, "read changes"):
        changes = steps.changes(stored, affected)
    with step(spark, name, "resolve"):
        versions = steps.resolve(changes, affected)
    with step(spark, name, "counts"):
        counts = {"moved": moved_events(stored.exploded, stored.moved), "bad": stored.exploded.bad}
        counts["late"] = late_events(stored.exploded.rows, changes) if affected.late_possible else 0
    h_total, written = write_silver(steps, tables, versions, changes, affected)
    if h_total is not None:
        counts["h_total"] = h_total
    counts.update({f"s_{action}": n for action, n in written.items()})
    bad = bad_value_records(stored.exploded.rows, layout) if counts["bad"] else None
    with step(spark, name, "marker"):
        high = next_high(layout, stored.exploded, stored.held, tables)
        # the newest keyed commit LSN held: a later batch after it has no late event
        marker = Marker(
            stored.version, affected.has_moves, affected.has_truncates, affected.newest,
            affected.newest_known, high, stored.behind,
        )  # fmt: skip
        lake_marker = mark_applied(spark, layout, tables, marker)
    return TableApplied(table_summary(layout, meta, counts, affected.rounds), bad, lake_marker)


def _route(
    spark: SparkSession,
    table: TablePlan,
    tables: BatchTables,
    events: BatchEvents,
    exploded: Exploded,
) -> TableSteps:
    """The table's route for this batch, chosen once: a first batch that only inserts rows, each key once
    (``first_appends_only``), and a batch that only adds rows the table never held (``appends_only``),
    append; any other first batch (its tables just created) appends what it resolved; a batch that only
    continues what the table held (``continues_only``: no key change, no truncate, every event newer); or
    every other (``LaterBatch``)."""
    meta, layout = table.meta, table.layout
    assert layout is not None
    if first_appends_only(spark, meta, layout, tables, events, exploded):
        log.debug("%s: a first batch of inserts, each key once: appended", layout.table)
        return AppendBatch(spark, meta, layout, tables)
    if tables.first:
        return FirstBatch(spark, meta, layout, tables)
    if appends_only(meta, layout, tables, events, exploded):
        log.debug("%s: the batch only adds rows the table never held: appended", layout.table)
        return AppendBatch(spark, meta, layout, tables)
    if continues_only(meta, layout, tables, events, exploded):
        log.debug("%s: the batch only continues what the table held: its store left behind", layout.table)
        return ContinueBatch(spark, meta, layout, tables)
    return LaterBatch(spark, meta, layout, tables)


def write_silver(
    steps: TableSteps, tables: BatchTables, versions: DataFrame, changes: DataFrame, affected: Affected
) -> tuple[int | None, dict[str, int]]:
    """Write the history and the snapshot the table keeps (the history's rows written, None when it keeps
    none; the snapshot's by action, empty when it keeps none). The two write different Delta tables from
    the same materialized versions, and neither reads the other, so with both kept the history's MERGE runs
    on a thread of its own while this one runs the snapshot's: a MERGE's driver work (Delta's log, the
    query's planning) overlaps the other's Spark jobs. A failure of either fails the batch, as before; a
    run cut short between them is completed by applying the batch again, whichever committed."""
    if tables.history is None or tables.snapshot is None:
        h_total = steps.write_history(versions, changes, affected) if tables.history is not None else None
        written = steps.write_snapshot(versions, changes, affected) if tables.snapshot is not None else {}
        return h_total, written
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="history") as side:
        history = side.submit(steps.write_history, versions, changes, affected)
        try:
            written = steps.write_snapshot(versions, changes, affected)
        finally:
            h_total = history.result()  # waited for (and its error raised) whatever the snapshot's did
    return h_total, written
