"""A table's Delta tables for one batch: opened at its start (created, evolved, re-keyed, deletion vectors
turned on when large), and the batch's marker (on the change store with the properties the batch changed,
else for the lake's markers)."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from resolver.lake import deletion_vectors, delta
from resolver.lake.delta import set_properties
from resolver.lake.folders import (
    APPLIED_PROPERTY,
    DELETION_VECTORS_PROPERTY,
    DROPS_PROPERTY,
    HOLDS_PROPERTY,
    SCHEMA_VERSION_PROPERTY,
    TablePaths,
)
from resolver.lake.tables import open_tables
from resolver.plan.table_plan import TablePlan
from resolver.spark.parallelism import parallel_tables
from resolver.table.key_ranges import BOUNDED, key_ranges, keys_of
from resolver.table.store import rekey
from resolver.table.table_steps import BatchTables, Exploded
from resolver.tablelayout import TableLayout
from resolver.tablestate import KeyHigh, Marker

__all__ = ["is_first_batch", "mark_applied", "next_high", "open_batch_tables", "open_first_tables"]

log = logging.getLogger(__name__)


def is_first_batch(spark: SparkSession, paths: TablePaths, layout: TableLayout) -> bool:
    """Whether none of the table's Delta tables exists yet (checked before they are opened): the lake had no
    change store for it (``layout.state``'s key is read from one) and no silver table either."""
    if not layout.state.is_new:
        return False
    return not any(DeltaTable.isDeltaTable(spark, p) for p in (paths.changes, paths.history, paths.snapshot))


def open_batch_tables(spark: SparkSession, paths: TablePaths, layout: TableLayout) -> BatchTables:
    """The table's Delta tables, created or evolved, and re-keyed when its key columns changed
    (``BatchTables.first``: none existed before: the table's first batch). A silver table
    the table's settings keep now but did not before (``outputs``) is created empty beside a change store that
    holds rows already: ``BatchTables.silver_added`` says so, and the batch then fills it from every change
    held (every key affected), as a re-key does."""
    first = is_first_batch(spark, paths, layout)
    opened = open_tables(spark, paths, layout)
    store, history, snapshot = opened.store, opened.history, opened.snapshot
    added = not layout.state.is_new and opened.silver_created
    rekeyed = rekey(spark, paths, layout, store, history, snapshot)
    dv = deletion_vectors.turn_on(spark, layout, [(paths.history, history), (paths.snapshot, snapshot)])
    if rekeyed or dv:  # the schemas (a re-key) or the silver protocols (a feature) changed under the handles
        store = DeltaTable.forPath(spark, paths.changes) if rekeyed else store
        history = DeltaTable.forPath(spark, paths.history) if history is not None else None
        snapshot = DeltaTable.forPath(spark, paths.snapshot) if snapshot is not None else None
    return BatchTables(paths, store, history, snapshot, rekeyed, dv, added, first)


def open_first_tables(spark: SparkSession, tables: Sequence[TablePlan]) -> dict[str, BatchTables]:
    """The Delta tables of those of ``tables`` that have none yet (this batch is their first), created, by
    table name. Creating a table is driver work and Delta commits, no Spark job over the batch's rows, so
    ``resolver.batch.ingest`` runs this beside bronze's write (an initial load's three creations took 0.8 s
    after it; beside it, within the load's noise: bench/README); the tables on the pool of table threads.
    A table whose creation fails is left out: its own steps open it again and fail where the failure
    belongs (a batch with ``isolate`` goes on with the other tables)."""

    def created(table: TablePlan) -> BatchTables | None:
        layout = table.layout
        if layout is None:
            return None
        try:
            if not is_first_batch(spark, table.paths, layout):
                return None
            opened = open_batch_tables(spark, table.paths, layout)
            log.debug("%s: its tables created beside bronze", layout.table)
            return opened
        except Exception:  # noqa: BLE001  # raised again by the table's own steps, as the table's failure
            log.debug("%s: its tables were not created beside bronze", layout.table, exc_info=True)
            return None

    if not tables:
        return {}
    with ThreadPoolExecutor(max_workers=min(parallel_tables(spark), len(tables))) as pool:
        opened = dict(zip((t.meta.table for t in tables), pool.map(created, tables), strict=True))
    return {name: t for name, t in opened.items() if t is not None}


def mark_applied(
    spark: SparkSession, layout: TableLayout, tables: BatchTables, marker: Marker
) -> Marker | None:
    """The batch's marker (the silver tables now hold everything the store held at ``marker.applied``), with
    the silver tables' versions after the batch's writes (``Marker.silver``).
    When the batch changed the table's schema version, drop points or deletion-vector flag, it is written
    with them to the store's properties, the table's last write (one commit; returns None), and the silver
    tables take the schema version. Otherwise it is returned, for the lake's markers: one commit for every
    table of the batch, after the last (``resolver.lake.markers``; the store takes no commit)."""
    state = layout.state
    store_props = {}
    if layout.schema_log and not state.is_new:  # existing tables now have this schema version
        store_props[SCHEMA_VERSION_PROPERTY] = str(state.schema_version)
        for path, kept in (
            (tables.paths.history, tables.history is not None),
            (tables.paths.snapshot, tables.snapshot is not None),
        ):
            if kept:
                set_properties(spark, path, {SCHEMA_VERSION_PROPERTY: str(state.schema_version)})
    # the silver tables' versions now: a later batch tells from them that nothing was written since
    silver = tuple(-1 if t is None else delta.version(t) for t in (tables.history, tables.snapshot))
    marker = dataclasses.replace(marker, silver=(silver[0], silver[1]))
    drops = json.dumps(layout.drop_state, sort_keys=True) if layout.drop_state else ""
    if drops and drops != state.drops_was:
        store_props[DROPS_PROPERTY] = drops
    if tables.deletion_vectors:
        store_props[DELETION_VECTORS_PROPERTY] = "true"
    if not store_props:
        return marker
    store_props[APPLIED_PROPERTY] = str(marker.applied)
    store_props[HOLDS_PROPERTY] = marker.holds_text()
    set_properties(spark, tables.paths.changes, store_props)
    return None


def next_high(
    layout: TableLayout, exploded: Exploded, held: DataFrame, tables: BatchTables
) -> KeyHigh | None:
    """The high-water mark of the table's first key column after the batch (``resolver.tablestate.KeyHigh``):
    the marker's raised by the batch's largest value of it (measured by the explode's pass); a table's first
    batch starts it; a store whose marker has none yet (a lake of an earlier release) gets it from one
    aggregate over the change store (``held``), once. None when the column has no mark (a type without
    an order a mark keeps, a key with NULLs: a table keyed by its whole row)."""
    column = layout.key[0] if layout.key else None
    if column is None or layout.key_source in ("all_columns", "identity_full"):
        return None
    bound = next((r for r in exploded.ranges if r[0] == column), None)
    if bound is not None and bound[3]:  # a NULL key value: no order to reason with
        return None
    old = layout.state.marker.high
    if tables.first or layout.state.is_new:
        return KeyHigh.of(column, bound[2]) if bound is not None else None
    if old is None or old.column != column:
        if not _bounded(layout, column):
            return None
        found = key_ranges(keys_of(held, [column]), [column])  # once per table: the store's whole range
        if not found or found[0][3]:
            return None
        old = KeyHigh.of(column, found[0][2])
        return old
    if bound is None:  # a batch of truncates names no key (no range at all): the mark stays
        return old if not exploded.ranges else None
    return old.raised(bound[2])


def _bounded(layout: TableLayout, column: str) -> bool:
    """Whether the key column has a range the explode measures (integral, string or date)."""
    types = {f.name: f.dataType for f in layout.key_struct_type().fields}
    return isinstance(types.get(column), BOUNDED)
