"""The change store's rows: key changes, key hashes, the rescan of drop points among held inserts,
and the rewrite of its keys when a table's key columns change."""

from __future__ import annotations

import json
import logging
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver.lake.delta import set_properties
from resolver.lake.folders import (
    KEY_PROPERTY,
    KEY_SOURCE_PROPERTY,
    TablePaths,
)
from resolver.plan.drops import add_point
from resolver.spark import sql
from resolver.spark.session_settings import lake_writes
from resolver.tablelayout import TableLayout

log = logging.getLogger(__name__)


def key_hash(col: Column) -> Column:
    return F.when(col.isNotNull(), F.xxhash64(col))


def rescan_drops(changes: DataFrame, layout: TableLayout) -> dict[str, list[tuple[int, ...]]]:
    """Drop points of the columns in ``layout.rescan`` among the inserts the store holds: the first insert
    without the column after the first event that carried it (one small aggregate over the range)."""
    lo = min(first[0] for first, _ in layout.rescan.values())
    row = changes.filter((F.col("__op") == "insert") & (F.col("__lsn") >= lo)).agg(*rescan_aggregates(layout))
    got = row.first()
    return drops_found(layout, got.asDict() if got is not None else {})


def rescan_aggregates(layout: TableLayout) -> list[Column]:
    """Per column in ``layout.rescan`` (``rescan<i>``, in its order), the first insert among the rows
    aggregated that lacks the column after the first event that carried it (and before the one the lake
    knew, when it knew one): (commit LSN, position, commit time in microseconds), NULL when none."""
    at = F.struct("__lsn", "__pos")
    aggs = []
    for i, (c, (first, was)) in enumerate(layout.rescan.items()):
        after = at > F.struct(F.lit(first[0]).cast("bigint"), F.lit(first[1]).cast("int"))
        if was:
            after = after & (at < F.struct(F.lit(was[0]).cast("bigint"), F.lit(was[1]).cast("int")))
        lacking = (F.col("__op") == "insert") & ~F.array_contains("__present", c) & after
        point = F.struct("__lsn", "__pos", F.unix_micros("__time").alias("t"))
        aggs.append(F.min(F.when(lacking, point)).alias(f"rescan{i}"))
    return aggs


def drops_found(layout: TableLayout, got: dict[str, Any]) -> dict[str, list[tuple[int, ...]]]:
    """The drop points ``rescan_aggregates``' values (``got``) add to ``layout.drop_state`` (which takes
    them), per column."""
    found: dict[str, list[tuple[int, ...]]] = {}
    for i, c in enumerate(layout.rescan):
        p = got.get(f"rescan{i}")
        if p is not None and add_point(layout.drop_state[c], (p[0], p[1], p[2])):
            found.setdefault(c, []).append((p[0], p[1], p[2]))
    return found


def rekey(
    spark: SparkSession,
    table_paths: TablePaths,
    layout: TableLayout,
    store: DeltaTable,
    history: DeltaTable | None,
    snapshot: DeltaTable | None,
) -> bool:
    """Record a new key or key source in the tables' properties; when the key columns changed (evidence
    that a table without a primary key is REPLICA IDENTITY FULL, or that it has an index identity),
    rewrite the change store's keys and clear the history's lineage so the whole table is resolved again.
    Returns whether the key columns changed. This happens at most twice in a table's life."""
    was = layout.state
    if was.is_new or (json.loads(was.key), was.key_source) == (list(layout.key), layout.key_source):
        return False
    now_named = {old: c.name for c in layout.columns for old in c.renamed_from}
    old_key = tuple(k if k in layout.names else now_named.get(k, k) for k in json.loads(was.key))
    props = {KEY_PROPERTY: json.dumps(list(layout.key)), KEY_SOURCE_PROPERTY: layout.key_source}
    paths = [table_paths.changes]
    paths += [table_paths.history] if history is not None else []
    paths += [table_paths.snapshot] if snapshot is not None else []
    if old_key == layout.key:
        for path in paths:
            set_properties(spark, path, props)
        return False
    log.warning(
        "table %s: re-keying from %s (%s) to %s (%s); the change store is rewritten once",
        layout.table,
        list(old_key),
        was.key_source,
        list(layout.key),
        layout.key_source,
    )
    key_t = layout.key_struct_type()
    new_key = F.struct(*[sql.col(k).cast(key_t[k].dataType).alias(k) for k in layout.key])
    old_image = F.struct(
        *[
            (F.col("__old_key").getField(k) if k in old_key else F.lit(None)).cast(key_t[k].dataType).alias(k)
            for k in layout.key
        ]
    )
    op = F.col("__op")
    has_old = F.col("__old_key").isNotNull()
    changes = store.toDF()
    changes = changes.withColumn("__key", F.when(op.isin("insert", "update"), new_key)).withColumn(
        "__old_key",
        F.when((op == "update") & has_old, old_image)
        .when(op == "update", new_key)
        .when((op == "delete") & has_old, old_image),
    )
    set_properties(spark, paths[0], {"delta.appendOnly": "false"})
    with lake_writes(spark):
        changes.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(paths[0])
    set_properties(spark, paths[0], {**props, "delta.appendOnly": "true"})
    if history is not None:
        versions = history.toDF()
        for c in ("__moved_from", "__moved_to"):
            versions = versions.withColumn(c, F.lit(None).cast(key_t))
        with lake_writes(spark):
            versions.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(paths[1])
    for path in paths[1:]:
        set_properties(spark, path, props)
    return True
