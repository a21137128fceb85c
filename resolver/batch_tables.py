"""A table's Delta tables for one batch: opened at its start (created, evolved, re-keyed, deletion vectors
turned on when large), and the batch's last write, the change store's marker."""

from __future__ import annotations

import json
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from resolver import deletion_vectors
from resolver.affected import Affected
from resolver.delta import set_properties
from resolver.explode import TableLayout
from resolver.lake import (
    APPLIED_PROPERTY,
    DELETION_VECTORS_PROPERTY,
    DROPS_PROPERTY,
    HOLDS_PROPERTY,
    SCHEMA_VERSION_PROPERTY,
    changes_path,
    history_path,
    snapshot_path,
)
from resolver.store import rekey
from resolver.tables import open_tables

__all__ = ["BatchTables", "mark_applied", "open_batch_tables"]


@dataclass
class BatchTables:
    """A table's Delta tables for this batch (None: a silver table its settings do not keep)."""

    store: DeltaTable
    history: DeltaTable | None
    snapshot: DeltaTable | None
    rekeyed: bool
    deletion_vectors: bool  # deletion vectors were turned on for the silver tables now


def open_batch_tables(spark: SparkSession, lake: str, layout: TableLayout) -> BatchTables:
    """The table's Delta tables, created or evolved, and re-keyed when its key columns changed."""
    name = layout.table
    store, history, snapshot = open_tables(spark, lake, layout)
    rekeyed = rekey(spark, lake, layout, store, history, snapshot)
    if rekeyed:  # the tables' schemas changed under these handles
        store = DeltaTable.forPath(spark, changes_path(lake, name))
        history = DeltaTable.forPath(spark, history_path(lake, name)) if history is not None else None
        snapshot = DeltaTable.forPath(spark, snapshot_path(lake, name)) if snapshot is not None else None
    silver = [(history_path(lake, name), history), (snapshot_path(lake, name), snapshot)]
    return BatchTables(store, history, snapshot, rekeyed, deletion_vectors.turn_on(spark, layout, silver))


def mark_applied(
    spark: SparkSession, lake: str, layout: TableLayout, tables: BatchTables, version: int, affected: Affected
) -> None:
    """The batch's last write: the store's marker (the silver tables now hold everything the store held at
    ``version``; the store takes no other commit during a batch, and a commit by anyone else only makes
    the marker stale), with the schema version and drop points the batch changed."""
    name = layout.table
    store_props = {}
    if layout.schema_log and layout.extra["key"]:  # existing tables now have this schema version
        store_props[SCHEMA_VERSION_PROPERTY] = layout.extra["version"]
        for path, kept in (
            (history_path(lake, name), tables.history is not None),
            (snapshot_path(lake, name), tables.snapshot is not None),
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
    set_properties(spark, changes_path(lake, name), store_props)
