"""The Delta Lake documentation's MERGE recipes ("Upsert into a table using merge"), written by us.

* ``scd1``: "write change data into a Delta table": the latest change per key
  (``groupBy(key).agg(max(struct(time, values, deleted)))``), then one MERGE on ``t.id = s.id`` with
  ``whenMatchedDelete(deleted)``, ``whenMatchedUpdate`` and ``whenNotMatchedInsert(not deleted)``.
* ``scd2``: "slowly changing data (SCD) Type 2": the latest change per key; the rows whose values differ from
  the current row are staged twice, once with ``mergeKey = NULL`` (they match nothing, so they are
  inserted as the new current version) and once with ``mergeKey = id`` (they close the current version);
  one MERGE on ``t.id = mergeKey``.

Semantics (checked in ``bench.checks``): one version per key per batch (the latest change), no primary-key
changes, no late events (the target's order is not consulted); ``scd2`` takes no deletes.
"""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.baselines import flat_events

__all__ = ["SCD2_COLUMNS", "scd1", "scd2"]

SCD2_COLUMNS = {"start": "effective_lsn", "end": "end_lsn", "current": "current"}


def _latest(events: DataFrame) -> DataFrame:
    flat = flat_events(events).withColumn("key", F.coalesce("id", "old_id"))
    latest = F.max(F.struct("lsn", "pos", "val", "name", (F.col("op") == "DELETE").alias("deleted")))
    return (
        flat.groupBy("key")
        .agg(latest.alias("s"))
        .select(F.col("key").alias("id"), "s.lsn", "s.val", "s.name", "s.deleted")
    )


def scd1(spark: SparkSession, events: DataFrame, path: str) -> None:
    target = DeltaTable.forPath(spark, path)
    (
        target.alias("t")
        .merge(_latest(events).alias("s"), "t.id = s.id")
        .whenMatchedDelete("s.deleted = true")
        .whenMatchedUpdate(set={"val": "s.val", "name": "s.name"})
        .whenNotMatchedInsert("s.deleted = false", values={"id": "s.id", "val": "s.val", "name": "s.name"})
        .execute()
    )


def scd2(spark: SparkSession, events: DataFrame, path: str) -> None:
    target = DeltaTable.forPath(spark, path)
    updates = _latest(events).filter(~F.col("deleted"))
    current = spark.read.format("delta").load(path).filter(F.col("current"))
    changed = (
        updates.alias("u")
        .join(current.alias("c"), "id")
        .where("c.val <> u.val OR c.name <> u.name")
        .select(F.lit(None).cast("bigint").alias("merge_key"), "u.*")
    )
    staged = changed.unionByName(updates.select(F.col("id").alias("merge_key"), "*"))
    (
        target.alias("t")
        .merge(staged.alias("s"), "t.id = s.merge_key")
        .whenMatchedUpdate(
            "t.current = true AND (t.val <> s.val OR t.name <> s.name)",
            set={"current": "false", "end_lsn": "s.lsn"},
        )
        .whenNotMatchedInsert(
            values={
                "id": "s.id",
                "val": "s.val",
                "name": "s.name",
                "current": "true",
                "effective_lsn": "s.lsn",
                "end_lsn": "NULL",
            }
        )
        .execute()
    )
