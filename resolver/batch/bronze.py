"""The append-only ``bronze/change_events`` table: every change event accepted, once (``write_bronze``).
 One write per batch (``resolver.batch.ingest.ingest``), whatever the data: the batch's events, each
identity once (``first_of_each``: a window over the batch, left out when the batch's events are distinct as
read, a load of snapshot files), left-anti-joined with bronze's on their identity, the join carrying the
batch's commit-LSN range as literals so Delta skips bronze files outside it, and appended
(``resolver.lake.delta.insert_new``, under the lake's lock); the first batch appends without the join.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from resolver.lake import delta
from resolver.spark import sql
from resolver.spark.sparkschema import EVENT_SCHEMA

__all__ = ["BRONZE_KEY", "first_of_each", "write_bronze"]

BRONZE_KEY = ("table", "commit_lsn", "position")
"""An event's identity in bronze. Without a commit LSN in the stream, its provenance (file, line) is added."""

BRONZE_PROPERTIES = {
    "delta.appendOnly": "true",
    "delta.enableChangeDataFeed": "true",  # the events each batch added, for the stages downstream
    "delta.dataSkippingNumIndexedCols": "6",
}


def first_of_each(events: DataFrame) -> DataFrame:
    """The batch's events, each identity (``BRONZE_KEY``, with its provenance where it has no commit LSN)
    once: the first by file and line. A batch may hold an event twice (a file given twice, files that
    overlap)."""
    provenance = F.when(
        F.col("commit_lsn").isNull(), F.concat_ws(":", "source_file", F.col("source_line").cast("string"))
    )
    first = Window.partitionBy(*BRONZE_KEY, provenance).orderBy("source_file", "source_line")
    ranked = events.withColumn("_rank", F.row_number().over(first))
    return ranked.filter(F.col("_rank") == 1).drop("_rank")


def write_bronze(
    spark: SparkSession, path: str, unique: DataFrame, lo: int | None, hi: int | None, files: Sequence[str]
) -> tuple[dict[str, int], int]:
    """Append the events bronze (the Delta table at ``path``: ``resolver.lake.folders.Lake.bronze``) does not
    have yet; ``unique``: the batch's events, each identity once (``first_of_each``, or a batch whose events
    are distinct as read: ``resolver.batch.read.ParsedBatch.distinct``). Returns what ``delta.insert_new``
    returns: the rows added and bronze's version."""
    table = delta.ensure_table(
        spark,
        path,
        EVENT_SCHEMA,
        BRONZE_PROPERTIES,
        "Every change event accepted, append-only, unique on (table, commit_lsn, position)",
    )
    if delta.version(table) == 0:  # bronze holds nothing yet (only its creation): nothing to look up
        return delta.append_counted(table, path, unique)
    bounds = []
    if lo is not None and hi is not None:
        bounds.append(f"(t.commit_lsn BETWEEN {lo} AND {hi})")
    in_files = ", ".join(sql.string(f) for f in files)
    bounds.append(f"(t.commit_lsn IS NULL AND t.source_file IN ({in_files}))")
    condition = (
        f"({' OR '.join(bounds)}) AND t.table = s.table AND t.position = s.position "
        "AND t.commit_lsn <=> s.commit_lsn "
        "AND (s.commit_lsn IS NOT NULL OR (t.source_file = s.source_file AND t.source_line = s.source_line))"
    )
    return delta.insert_new(table, unique, condition)
