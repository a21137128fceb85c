"""The quarantine table: records that could not be accepted, with their raw text, where they came from
(file, line) and why; one record per file, line and reason. Also the records of values that did not fit
their column (the event was applied with NULL there)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver.lake import delta
from resolver.spark import sql
from resolver.spark.sparkschema import QUARANTINE_SCHEMA
from resolver.tablelayout import TableLayout

__all__ = ["bad_value_records", "write_records", "write_quarantine"]


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


def write_records(spark: SparkSession, path: str, records: DataFrame | None, fmt: str) -> None:
    """Add a batch's records of values that did not fit (``bad_value_records``) and of events a policy
    refused, in the stream format ``fmt``, if there are any; the quarantine's MERGE is bounded by the
    files they came from (a few names, collected)."""
    if records is None:
        return
    records = records.withColumn("format", F.lit(fmt))
    files = [r[0] for r in records.select("source_file").distinct().collect()]  # a few file names
    write_quarantine(spark, path, records.select(*QUARANTINE_SCHEMA.fieldNames()), files)


def bad_value_records(rows: DataFrame, layout: TableLayout) -> DataFrame:
    """Quarantine records for the values that did not fit their column (the event was applied with NULL
    there): which table, column, type, commit LSN and position, and the value's text."""
    bad = rows.select("__file", "__line", "__lsn", "__pos", F.explode("__bad").alias("bad"))
    column = F.substring_index("bad", ": ", 1)
    text = F.expr("substring(bad, length(substring_index(bad, ': ', 1)) + 3)")
    types = F.create_map(*[x for c in layout.columns for x in (F.lit(c.name), F.lit(c.type))])
    return bad.select(
        F.col("__file").alias("source_file"),
        F.col("__line").cast("long").alias("source_line"),
        F.concat(
            F.lit(f"{layout.table}."),
            column,
            F.lit(": value does not fit type "),
            F.coalesce(types[F.regexp_replace(column, r" \(old key\)$", "")], F.lit("?")),
            F.lit(" (commit LSN "),
            F.col("__lsn").cast("string"),
            F.lit(", position "),
            F.col("__pos").cast("string"),
            F.lit("); stored as NULL"),
        ).alias("reason"),
        text.alias("raw"),
        F.lit(None).cast("binary").alias("raw_bytes"),
    )
