"""A table's Delta tables for one batch: opened at its start (created, evolved, re-keyed, deletion vectors
turned on when large), and the batch's last write, the change store's marker."""

from __future__ import annotations

import json

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from resolver.lake import deletion_vectors
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
from resolver.table.store import rekey
from resolver.table.table_steps import Affected, BatchTables
from resolver.tablelayout import TableLayout

__all__ = ["mark_applied", "open_batch_tables"]


def open_batch_tables(spark: SparkSession, paths: TablePaths, layout: TableLayout) -> BatchTables:
    """The table's Delta tables, created or evolved, and re-keyed when its key columns changed. A silver table
    the table's settings keep now but did not before (``outputs``) is created empty beside a change store that
    holds rows already: ``BatchTables.silver_added`` says so, and the batch then fills it from every change
    held (every key affected), as a re-key does."""
    kept = [(layout.history, paths.history), (layout.snapshot, paths.snapshot)]
    added = bool(layout.extra.get("key")) and any(
        keep and not DeltaTable.isDeltaTable(spark, path) for keep, path in kept
    )
    store, history, snapshot = open_tables(spark, paths, layout)
    rekeyed = rekey(spark, paths, layout, store, history, snapshot)
    dv = deletion_vectors.turn_on(spark, layout, [(paths.history, history), (paths.snapshot, snapshot)])
    if rekeyed or dv:  # the schemas (a re-key) or the silver protocols (a feature) changed under the handles
        store = DeltaTable.forPath(spark, paths.changes) if rekeyed else store
        history = DeltaTable.forPath(spark, paths.history) if history is not None else None
        snapshot = DeltaTable.forPath(spark, paths.snapshot) if snapshot is not None else None
    return BatchTables(paths, store, history, snapshot, rekeyed, dv, added)


def mark_applied(
    spark: SparkSession, layout: TableLayout, tables: BatchTables, version: int, affected: Affected
) -> None:
    """The batch's last write: the store's marker (the silver tables now hold everything the store held at
    ``version``; the store takes no other commit during a batch, and a commit by anyone else only makes
    the marker stale), with the schema version and drop points the batch changed."""
    store_props = {}
    if layout.schema_log and layout.extra["key"]:  # existing tables now have this schema version
        store_props[SCHEMA_VERSION_PROPERTY] = layout.extra["version"]
        for path, kept in (
            (tables.paths.history, tables.history is not None),
            (tables.paths.snapshot, tables.snapshot is not None),
        ):
            if kept:
                set_properties(spark, path, {SCHEMA_VERSION_PROPERTY: layout.extra["version"]})
    drops = json.dumps(layout.drop_state, sort_keys=True) if layout.drop_state else ""
    if drops and drops != layout.extra.get("drops_was"):
        store_props[DROPS_PROPERTY] = drops
    if tables.deletion_vectors:
        store_props[DELETION_VECTORS_PROPERTY] = "true"
    store_props[APPLIED_PROPERTY] = str(version)
    holds: dict[str, object] = {"moves": affected.has_moves, "truncates": affected.has_truncates}
    if affected.newest_known:  # the newest keyed commit LSN held: a later batch after it has no late event
        holds["lsn"] = affected.newest
    store_props[HOLDS_PROPERTY] = json.dumps(holds)
    set_properties(spark, tables.paths.changes, store_props)
