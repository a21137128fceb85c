"""A table's batch when the table already has Delta tables (``resolver.table.table_steps``): the batch's new
rows are added to the change store, the affected keys are found in it and their held changes read back, and
the versions resolved from them are MERGEd into the history (diffed first unless every event is newer than all
the table held) and the snapshot. A run killed part-way is completed by this path too.

A batch that only continues what the table held (``continues_only``: every event new to the lake and newer
than everything the table held, no key change and no truncate held or sent, no schema change or drop point,
and a snapshot to read the affected keys' current rows from: the common case of a stream applied in order)
takes the same steps without writing the change store (``ContinueBatch``; docs/silver.md): it is resolved
from the affected keys' current rows in the snapshot and its own, so nothing of it reads the store, and its
events are left in bronze, the store's marker listing their commit-LSN range as *behind*
(``resolver.tablestate.Marker.behind``). The next batch that reads the store (a late event, a key change, a
truncate, a new column's drop point) adds them to it from bronze first (``LaterBatch._catch_up``). A table
whose stream stays in order never writes its store again: a Spark job and a Delta commit fewer per table
and batch."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver.lake import delta
from resolver.plan.tablemeta import TableMeta
from resolver.spark import sql
from resolver.spark.steps import step
from resolver.table.affected import (
    affected_keys,
    current_rows_suffice,
    read_changes,
    resolve_affected,
    seeded_changes,
)
from resolver.table.continuation import (
    batch_alone_suffices,
    continued_rows,
    continued_versions,
    merge_continued_snapshot,
    merge_continuing,
)
from resolver.table.exploded import counting_moves, each_event_once, explode_batch
from resolver.table.key_ranges import keys_of, range_sql
from resolver.table.merge import (
    diff_rows,
    merge_changes,
    merge_snapshot,
    merge_versions,
    newest_rows,
    replace_snapshot,
    snapshot_rows,
)
from resolver.table.store import key_hash, rescan_drops
from resolver.table.table_steps import Affected, BatchEvents, BatchTables, Exploded, Stored
from resolver.table.truncates import pending_truncates
from resolver.tablelayout import TableLayout

__all__ = ["ContinueBatch", "LaterBatch", "continues_only"]

log = logging.getLogger(__name__)


@dataclass
class LaterBatch:
    """The steps of a batch of a table whose Delta tables exist (``tables``, opened for this batch)."""

    spark: SparkSession
    meta: TableMeta
    layout: TableLayout
    tables: BatchTables

    def store(self, events: BatchEvents, exploded: Exploded) -> Stored:
        """Explode the batch and add its new rows to the change store, with the truncates a new table kept.
        When the lake held none of the batch's events (``events.unseen``: bronze took them all as new, and the
        store only ever holds events bronze took before), or every event is newer than all the store holds
        (``_newer_than_held``), they are appended blindly; otherwise by
        ``delta.insert_new`` on (commit LSN, position), bounded by the batch's LSN range, which skips those
        held already. A store that fell behind (``Marker.behind``: batches appended to the silver tables
        only) catches up from bronze first."""
        spark, layout, store = self.spark, self.layout, self.tables.store
        name = layout.table
        caught = self._catch_up()
        batch = each_event_once(exploded, events).select(*[sql.col(c) for c in store.toDF().columns])
        adopted = False
        if layout.state.is_new:  # a new table: truncates that came before its first rows
            pending = pending_truncates(spark, self.tables.paths.pending_truncates, name, store.toDF().schema)
            if pending is not None:
                batch, adopted = batch.unionByName(pending), True
        moved = None
        if events.unseen_by(name, self.tables, self.layout.state.marker) or self._newer_than_held(caught):
            counted, moves = counting_moves(batch)
            with step(spark, name, "store append"):
                inserted, version = True, delta.append(store, self.tables.paths.changes, counted)
            moved = int(moves.get["n"] or 0)  # counted by the append's job
        else:
            condition = "t.__lsn = s.__lsn AND t.__pos = s.__pos"
            if self.meta.lo is not None:
                lo, hi = int(self.meta.lo), int(self.meta.hi or self.meta.lo)
                condition = f"t.__lsn BETWEEN {lo} AND {hi} AND " + condition
            with step(spark, name, "store merge"):
                metrics, version = delta.insert_new(store, batch, condition)
            inserted = bool(metrics)
        marker = layout.state.marker
        # the marker's key-change and truncate flags still describe the store before this batch's rows (the
        # rows caught up with are inserts the marker counted already)
        flags_hold = marker.fresh(version - (1 if inserted else 0) - caught)
        done = (
            not caught
            and marker.fresh(version)  # nothing was committed to the store since the marker
            and not (self.tables.whole or adopted or layout.rescan or layout.schema_log)
        )  # every event of the batch is in the store, and the silver tables hold all the store has
        return Stored(exploded, store.toDF(), version, adopted, flags_hold, done, moved)

    def _newer_than_held(self, caught: int) -> bool:
        """Whether no event of the batch can be in the store already, from the marker alone: it still
        describes the store (``caught``: the commits the catch-up just made, of events the marker counted),
        it knows the store's newest keyed commit LSN, and every event of the batch is newer (a truncate,
        which has no key, is held apart from that LSN: a batch that brings one is looked up). A library
        call's batch (no bronze to tell new events) then appends as a batch bronze took does."""
        marker, lo = self.layout.state.marker, self.meta.lo
        if self.meta.truncates or lo is None or not marker.flags_known:
            return False
        if not marker.fresh(delta.version(self.tables.store) - caught):
            return False
        return marker.lsn is None or int(lo) > marker.lsn

    def _catch_up(self) -> int:
        """Add the events the store fell behind on (``Marker.behind``) from bronze: the table's events in
        those commit-LSN ranges, exploded against the layout, less those the store holds (a catch-up cut
        short and run again adds nothing twice). Returns the store's commits it made (0 or 1)."""
        behind = self.layout.state.marker.behind
        if not behind:
            return 0
        spark, layout, store = self.spark, self.layout, self.tables.store
        within = " OR ".join(f"commit_lsn BETWEEN {lo} AND {hi}" for lo, hi in behind)
        events = spark.read.format("delta").load(self.tables.paths.bronze)
        events = events.filter(F.col("table") == F.lit(layout.table)).filter(within)
        held = " OR ".join(f"t.__lsn BETWEEN {lo} AND {hi}" for lo, hi in behind)
        with step(spark, layout.table, "store catch-up"):
            rows = explode_batch(events, layout).rows.select(*[sql.col(c) for c in store.toDF().columns])
            metrics, _ = delta.insert_new(
                store, rows, f"({held}) AND t.__lsn = s.__lsn AND t.__pos = s.__pos"
            )
        log.info(
            "%s: the change store caught up with %s event(s) from bronze",
            layout.table,
            metrics.get("numTargetRowsInserted", 0),
        )
        return 1 if metrics else 0

    def drops(self, stored: Stored) -> dict[str, list[tuple[int, ...]]]:
        """The drop points among the inserts the store holds (``resolver.table.store.rescan_drops``)."""
        return rescan_drops(stored.held, self.layout)

    def affected(self, stored: Stored) -> Affected:
        """The batch's affected keys, looked up in the store (``resolver.table.affected.affected_keys``)."""
        return affected_keys(stored, self.layout, self.meta, self.tables)

    def changes(self, stored: Stored, affected: Affected) -> DataFrame:
        """The affected keys' held changes, read from the store in one scan; or, when the batch only
        continues what the table held (``current_rows_suffice``: the common case of a stream applied in
        order), their current rows in the snapshot with the batch's own rows, so that the read and the
        resolution grow with the batch, not with the keys' past."""
        snapshot = self.tables.snapshot
        if batch_alone_suffices(affected, self.layout, stored.exploded, self.tables):
            log.debug("%s: resolved from the batch's own rows alone", self.layout.table)
            affected.alone = True
            return stored.exploded.rows
        if snapshot is not None and current_rows_suffice(affected, self.layout, self.tables):
            log.debug("%s: the affected keys' current rows read from the snapshot", self.layout.table)
            return seeded_changes(stored.exploded.rows, snapshot.toDF(), affected, self.layout)
        return read_changes(stored.held, affected, self.layout)

    def resolve(self, changes: DataFrame, affected: Affected) -> DataFrame:
        """The affected keys' versions (``resolve_affected``); resolved from the batch's own rows alone, with
        what the MERGEs continue the held rows with (``continued_versions``)."""
        if affected.alone:
            return continued_versions(changes, self.layout, affected)
        return resolve_affected(changes, self.layout, affected)

    def write_history(self, versions: DataFrame, changes: DataFrame, affected: Affected) -> int:
        """Make the history hold ``versions`` for the affected keys; returns the rows written. A batch whose
        every event is newer than all the table held (the common case) only closes open versions and opens
        new ones: one MERGE straight from the versions. Otherwise (late events, a truncate or a new key
        affecting every key, a run completed after a crash) the versions are diffed against the history
        rows of those keys first, and the diff's deletes remove versions that no longer exist."""
        spark, name, layout, history = self.spark, self.layout.table, self.layout, self.tables.history
        assert history is not None  # apply_table writes only the silver tables the table keeps
        cols = history.toDF().columns
        if affected.alone:
            with step(spark, name, "history merge"):
                written = merge_continuing(history, versions, layout, affected.ranges)
            return sum(written.values())
        if affected.after_held and affected.nodes is not None and self.meta.lo is not None:
            with step(spark, name, "history merge"):
                written = merge_versions(
                    history, versions, list(layout.key), cols, affected.ranges, int(self.meta.lo)
                )
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

    def write_snapshot(self, versions: DataFrame, changes: DataFrame, affected: Affected) -> dict[str, int]:
        """MERGE the affected keys' current versions into the snapshot, straight from the versions: the
        snapshot's own rows are the MERGE's target, so a run killed between the two MERGEs is completed
        too. When every event of the batch is newer than all the table held (the common case), each
        affected key's newest version says what its row is (``newest_rows``); otherwise every affected key
        is named by one of its changes and takes its current version or goes (``snapshot_rows``). With every
        key affected, the whole snapshot is replaced."""
        snapshot, key = self.tables.snapshot, list(self.layout.key)
        assert snapshot is not None  # apply_table writes only the silver tables the table keeps
        cols = snapshot.toDF().columns
        with step(self.spark, self.layout.table, "snapshot merge"):
            if affected.nodes is None:
                current = versions.filter("__is_current").select(*[sql.col(c) for c in cols])
                return replace_snapshot(snapshot, current, key, cols)
            if affected.alone:
                rows = continued_rows(versions, key, cols)
                return merge_continued_snapshot(snapshot, rows, self.layout, affected.ranges)
            if affected.after_held:
                rows = newest_rows(versions, key, cols)
            else:
                current = versions.filter("__is_current").select(*[sql.col(c) for c in cols])
                rows = snapshot_rows(current, keys_of(changes, key).distinct(), key, cols)
            return merge_snapshot(snapshot, rows, key, cols, affected.ranges)


def continues_only(
    meta: TableMeta, layout: TableLayout, tables: BatchTables, events: BatchEvents, exploded: Exploded
) -> bool:
    """Whether the table's batch only continues what the table held (see the module docstring), from what
    the plan, bronze's write, the explode's pass and the store's marker already know: no job of its own."""
    state, marker = layout.state, layout.state.marker
    if state.is_new or meta.lo is None or tables.snapshot is None:
        return False
    if not events.unseen_by(layout.table, tables, marker):
        return False
    if meta.truncates or meta.skipped or exploded.moves:
        return False
    if layout.schema_log or layout.changes or layout.renames or layout.drops or layout.rescan:
        return False
    if tables.whole or not marker.flags_known or marker.moves or marker.truncates:
        return False
    if not marker.fresh(delta.version(tables.store)):
        return False
    return marker.lsn is None or meta.lo > marker.lsn


class ContinueBatch(LaterBatch):
    """The steps of a batch that only continues what the table held (``continues_only``): those of
    ``LaterBatch``, less the change store's write."""

    def store(self, events: BatchEvents, exploded: Exploded) -> Stored:
        """Nothing written to the change store: bronze holds the batch's events, and the store's marker
        lists their commit-LSN range as behind (``Marker.falling_behind``). The marker's flags still describe
        the store and its events: the batch brings no key change and no truncate."""
        assert self.meta.lo is not None and self.meta.hi is not None  # continues_only
        version = delta.version(self.tables.store)
        behind = self.layout.state.marker.falling_behind(int(self.meta.lo), int(self.meta.hi))
        held = self.tables.store.toDF()  # not read by this route (the snapshot's rows stand in)
        return Stored(exploded, held, version, False, True, False, moved=0, behind=behind)
