"""mack's ``type_2_scd_upsert`` (PyPI ``mack``, the ``bench`` extra) on the latest change per key.

mack keeps ``is_current``, ``effective_time`` and ``end_time`` next to the attributes and takes one row
per key with its ``effective_time`` (here the commit LSN). Semantics: upserts only (no deletes, no key
changes), one version per key per batch, no late events.
"""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.baselines import flat_events

__all__ = ["COLUMNS", "upsert"]

COLUMNS = {"start": "effective_time", "end": "end_time", "current": "is_current"}


def upsert(spark: SparkSession, events: DataFrame, path: str) -> None:
    import mack

    flat = flat_events(events).filter(F.col("op") != "DELETE")
    latest = flat.groupBy("id").agg(F.max(F.struct("lsn", "pos", "val", "name")).alias("s"))
    updates = latest.select("id", "s.val", "s.name", F.col("s.lsn").alias("effective_time"))
    mack.type_2_scd_upsert(DeltaTable.forPath(spark, path), updates, "id", ["val", "name"])
