"""The quarantine table (``resolver.lake.folders.Lake.quarantine``): records that could not be accepted, with
their raw text, where they came from (file, line) and why; one record per file, line and reason. Also the
records of values that did not fit their column (the event was applied with NULL there:
``resolver.table.exploded.bad_value_records``)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver.lake import delta
from resolver.spark import sql
from resolver.spark.sparkschema import QUARANTINE_SCHEMA

__all__ = ["write_records", "write_quarantine"]


def write_quarantine(spark: SparkSession, path: str, records: DataFrame, files: Sequence[str]) -> int:
    """Add quarantined records not already there (same file, line and reason) to the quarantine table at
    ``path`` (``resolver.lake.folders.Lake.quarantine``). Returns how many were added."""
    table = delta.ensure_table(
        spark,
        path,
        QUARANTINE_SCHEMA,
        {"delta.appendOnly": "true"},
        "Records that could not be accepted, with their raw text and the reason",
    )
    in_files = ", ".join(sql.string(f) for f in files)
    condition = (
        f"t.source_file IN ({in_files}) AND t.source_file = s.source_file "
        "AND t.source_line = s.source_line AND t.reason = s.reason"
    )
    unique = records.dropDuplicates(["source_file", "source_line", "reason"])
    metrics, _ = delta.insert_new(table, unique, condition)
    return metrics.get("numTargetRowsInserted", 0)


def write_records(spark: SparkSession, path: str, records: DataFrame | None, fmt: str) -> int:
    """Add a batch's records of values that did not fit (``bad_value_records``) and of events a policy
    refused, in the stream format ``fmt``, if there are any; the quarantine's MERGE is bounded by the
    files they came from (a few names, collected). Returns how many were added."""
    if records is None:
        return 0
    records = records.withColumn("format", F.lit(fmt))
    files = [r[0] for r in records.select("source_file").distinct().collect()]  # a few file names
    return write_quarantine(spark, path, records.select(*QUARANTINE_SCHEMA.fieldNames()), files)
