"""One batch, as its steps (``ingest``): read the files, plan the batch against the lake (which may refuse it
before anything is written), quarantine what could not be read or what a policy refused, append what is new
to bronze, then bring every table's silver tables up to date (``resolver.batch.silver.apply_planned``, a
table's steps in ``resolver.table.apply.apply_table``) and quarantine the values that did not fit their
columns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from resolver.batch.bronze import write_bronze
from resolver.batch.read import ParsedBatch, read_wal2json
from resolver.batch.silver import apply_planned
from resolver.config.batch_options import BatchOptions, batch_options
from resolver.config.tableschema import TableSchema, load_schemas
from resolver.models import Format, IngestSummary
from resolver.plan.batch_plan import BatchPlan, plan_changes
from resolver.spark.sparkschema import QUARANTINE_SCHEMA
from resolver.spark.steps import step
from resolver.table.quarantine import write_quarantine, write_records

__all__ = ["ingest"]


def ingest(
    spark: SparkSession,
    paths: Sequence[str],
    lake: str,
    fmt: Format | str,
    schemas: Mapping[str, TableSchema] | str | None = None,
    options: BatchOptions | None = None,
) -> IngestSummary:
    """Read wal2json or Debezium files as one batch: append what is new to bronze and quarantine, then bring
    every table's silver snapshot and history up to date.

    ``schemas`` is a folder of ``<schema>.<table>.yaml`` files or what ``load_schemas`` returned;
    ``options`` (``resolver.config.batch_options.BatchOptions``) carries the policies for unknown tables and
    columns and unsafe type changes, per-table settings, the tables to include, whether a failing table
    stops the others, a callback per table done and the read window (``resolver.pipelines.run`` uses them
    all).

    Example::

        from resolver import BatchOptions, Policies, Policy, ingest, local_session
        options = BatchOptions(policies=Policies(unknown_columns=Policy.QUARANTINE))
        summary = ingest(local_session(), ["landing/0001.json"], "lake", "wal2json-v2", options=options)
        print("\\n".join(summary.lines()))
    """
    options = batch_options(options)
    if isinstance(schemas, str):
        schemas = load_schemas(schemas)
    batch = read_wal2json(spark, paths, fmt, window=options.window)
    try:
        with step(spark, "ingest", "plan"):  # may refuse the batch: nothing is written yet
            plan = plan_changes(spark, batch.events, lake, schemas, options)
        with step(spark, "ingest", "read and count"):
            counts = batch.counts()
            open_from = batch.open_from
        unread, refused = _quarantine(spark, lake, batch, plan, counts["quarantined"])
        events = plan.accepted if plan.accepted is not None else batch.events
        with step(spark, "ingest", "bronze"):
            lo, hi = counts.get("min_commit_lsn"), counts.get("max_commit_lsn")
            metrics, version = write_bronze(spark, lake, events, lo, hi, batch.files)
        accepted = metrics.get("numTargetRowsInserted", 0)
        all_new = accepted > 0 and accepted == counts["events"]  # then no change store holds any of them
        tables, bad = apply_planned(spark, events, lake, plan, options, all_new)
        write_records(spark, lake, bad, batch.format.value)
    finally:
        batch.unpersist()
    return IngestSummary(
        files=len(batch.files),
        transactions=counts["transactions"],
        events_read=counts["events"],
        accepted=accepted,
        duplicates=counts["events"] - accepted - refused,
        quarantined=unread + refused,
        messages=counts["messages"],
        tombstones=counts["tombstones"],
        bronze_version=version,
        tables=tables,
        open_from=open_from,
    )


def _quarantine(
    spark: SparkSession, lake: str, batch: ParsedBatch, plan: BatchPlan, unreadable: int
) -> tuple[int, int]:
    """Send the records the reader could not read, and the events a quarantine policy took out of the
    batch, to the quarantine table; returns how many of each were new there."""
    with step(spark, "ingest", "quarantine"):
        unread = write_quarantine(spark, lake, batch.quarantine, batch.files) if unreadable else 0
    refused = 0
    if plan.rejected is not None:  # events a quarantine policy took out of the batch
        records = plan.rejected.withColumn("format", F.lit(batch.format.value))
        records = records.select(*QUARANTINE_SCHEMA.fieldNames())
        with step(spark, "ingest", "quarantine"):
            refused = write_quarantine(spark, lake, records, batch.files)
    return unread, refused
