"""Seed 000's history merge, written by us from the seed: ``transform`` then two MERGEs per batch.

``transform`` drops duplicate events, numbers each key's events by time (``__row_number``: earliest first,
``__row_number_desc``: latest first) and takes the next event's time and type (``lead``) to set
``__end_time``, ``__is_current`` and ``__is_deleted`` of each event's version. MERGE 1 closes the current
row of every key whose earliest batch event is an UPDATE or a DELETE (``t.id = s.id``, current, older);
MERGE 2 inserts every non-DELETE event as a version (``t.id = s.id AND t.__start_time = s.__time``, not
matched). As the seed advises at its end, the time is the commit LSN (with the position as a tie-break).

Semantics: no primary-key changes; no late events (MERGE 1 closes only an older current row, so an event
older than the current row is inserted as a second, overlapping version); several changes to one key in
one transaction stay several versions (ours collapses them).
"""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from bench.baselines import flat_events

__all__ = ["COLUMNS", "merge"]

COLUMNS = {"start": "__start_time", "end": "__end_time", "current": "__is_current", "deleted": "__is_deleted"}


def transform(events: DataFrame) -> DataFrame:
    flat = flat_events(events).select(
        F.col("op").alias("__type"),
        F.col("lsn").alias("__time"),
        "pos",
        F.coalesce("id", "old_id").alias("id"),
        "val",
        "name",
    )
    earliest = Window.partitionBy("id").orderBy("__time", "pos")
    latest = Window.partitionBy("id").orderBy(F.desc("__time"), F.desc("pos"))
    nxt = F.lead(F.struct("__type", "__time"), 1).over(earliest)
    return (
        flat.dropDuplicates()
        .withColumn("__row_number_desc", F.row_number().over(latest))
        .withColumn("__row_number", F.row_number().over(earliest))
        .withColumn("__next_event", nxt)
        .withColumn("__end_time", F.col("__next_event.__time"))
        .withColumn("__is_current", F.col("__row_number_desc") == 1)
        .withColumn("__is_deleted", F.coalesce(F.col("__next_event.__type") == "DELETE", F.lit(False)))
    )


def merge(spark: SparkSession, events: DataFrame, path: str) -> None:
    changes = transform(events)
    target = DeltaTable.forPath(spark, path)
    (
        target.alias("table")
        .merge(changes.where(F.col("__row_number") == 1).alias("event"), "table.id = event.id")
        .whenMatchedUpdate(
            "event.__type = 'DELETE' AND table.__start_time < event.__time AND table.__is_current = true",
            set={"__is_current": "false", "__is_deleted": "true", "__end_time": "event.__time"},
        )
        .whenMatchedUpdate(
            "event.__type = 'UPDATE' AND table.__start_time < event.__time AND table.__is_current = true",
            set={"__is_current": "false", "__end_time": "event.__time"},
        )
        .execute()
    )
    (
        target.alias("table")
        .merge(
            changes.where(F.col("__type") != "DELETE").alias("event"),
            "table.id = event.id AND table.__start_time = event.__time",
        )
        .whenNotMatchedInsert(
            values={
                "id": "event.id",
                "val": "event.val",
                "name": "event.name",
                "__start_time": "event.__time",
                "__end_time": "event.__end_time",
                "__is_current": "event.__is_current",
                "__is_deleted": "event.__is_deleted",
            }
        )
        .execute()
    )
