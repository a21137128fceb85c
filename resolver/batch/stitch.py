"""Stitch format-2 transactions cut by file boundaries back together, in Spark.

A transaction cut by file boundaries reaches Spark as fragment rows (``resolver.formats.wal2json.Fragment``,
parsed by ``resolver.batch.read``): its ``tail`` (B … end of file k), the ``middle`` of each file wholly
inside it (no B or C) and its ``head`` (start of file m … C). ``summarize`` takes one small aggregate over the
fragments (one row per file and role, never the events) for ``resolver.formats.stitch_plan.plan_stitching`` to
decide on the driver; ``stitch`` then joins that decision back onto the fragments: the events of the
stitched transactions (and of files without framing), and the fragments cut off, as quarantine rows.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from resolver.formats.stitch_plan import CUT_OFF, MATCHED, UNFRAMED, Part, Stitching

__all__ = ["stitch", "summarize"]

_REASONS = {
    "tail": "incomplete transaction: begun in this file, no commit before the end of the input (the next "
    "files of the batch do not continue it); it is not applied (rule: framing)",
    "head": "incomplete transaction: its commit is in this file but its begin is not at the end of the "
    "previous files of the batch; it is not applied (rule: framing)",
    "middle": "incomplete transaction: this file has no begin or commit, and the files around it do not "
    "hold the begin and the commit of the transaction it is inside; it is not applied (rule: framing)",
}

_PLAN_SCHEMA = T.StructType(
    [
        T.StructField("file_index", T.IntegerType(), False),
        T.StructField("role", T.StringType(), False),
        T.StructField("status", T.StringType(), False),
        T.StructField("offset", T.LongType(), True),
        T.StructField("pair_lsn", T.LongType(), True),
    ]
)


def summarize(parsed: DataFrame) -> list[Part]:
    """One row per file and role of the fragments, a ``whole`` row per file with complete transactions and
    a ``bad`` row per file with quarantined lines: a few rows per file, the one aggregate the plan needs
    (never the events)."""
    transactions = (F.col("kind") == "count") & (F.col("count_name") == "transactions")
    bad = F.col("kind") == "quarantine"
    role = F.when(transactions, F.lit("whole")).when(bad, F.lit("bad")).otherwise(F.col("role"))
    rows = (
        parsed.filter((F.col("kind") == "fragment") | transactions | bad)
        .withColumn("role", role)
        .groupBy("file_index", "role")
        .agg(
            F.max("commit_lsn").alias("lsn"),
            F.count("table").alias("events"),
            F.count("*").alias("lines"),
            F.max("count_value").alias("slots"),
        )
        .collect()
    )
    return [
        Part(r["file_index"], r["role"], r["lsn"], r["events"], r["lines"], int(r["slots"] or 0))
        for r in rows
    ]


def stitch(spark: SparkSession, fragments: DataFrame, plan: Stitching) -> tuple[DataFrame, DataFrame]:
    """The events of the stitched transactions and of unframed files (positions continued across the cuts,
    commit LSN from B or C), and the lines of fragments that found no partner, as quarantine rows
    (``kind``, ``reason`` set); both with the fragments' columns. Fragments left for a later batch are in
    neither."""
    columns = fragments.columns
    rows = [(f, role, status, off, lsn) for (f, role), (status, off, lsn) in plan.status.items()]
    decided = spark.createDataFrame(rows, _PLAN_SCHEMA)
    tagged = fragments.join(F.broadcast(decided), ["file_index", "role"], "left")
    status = F.col("status")
    position = (
        F.when(status == UNFRAMED, F.lit(0))  # each record its own unit, as without framing it is
        .otherwise(F.col("position") + F.col("offset"))
        .cast(fragments.schema["position"].dataType)
    )
    events = (
        tagged.filter(status.isin(MATCHED, UNFRAMED) & F.col("table").isNotNull())
        .withColumn("position", position)
        .withColumn("commit_lsn", F.when(status == MATCHED, F.col("pair_lsn")))
        .select(*columns)
    )
    reason = F.coalesce(*[F.when(F.col("role") == role, F.lit(why)) for role, why in _REASONS.items()])
    cut_off = (
        tagged.filter(status == CUT_OFF)
        .withColumn("reason", reason)
        .withColumn("kind", F.lit("quarantine"))
        .select(*columns)
    )
    return events, cut_off
