"""Ingest one batch: wal2json files -> ``quarantine`` + append-only ``bronze/change_events``.

A fixed job graph per batch, whatever the data: one parse (persisted), one small count aggregate, at most
one MERGE into quarantine and one insert-only MERGE into bronze, whose ON clause carries the batch's
commit-LSN range as literals so Delta skips bronze files outside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from resolver import delta, sql
from resolver.models import Format, IngestSummary, TableSummary
from resolver.pipeline import TableSettings
from resolver.plan import BatchPlan, plan_changes
from resolver.policy import Policies
from resolver.quarantine import write_quarantine
from resolver.read import EVENT_SCHEMA, QUARANTINE_SCHEMA, ParsedBatch, read_wal2json
from resolver.silver import apply_changes
from resolver.steps import step
from resolver.tableschema import TableSchema, load_schemas

__all__ = ["BRONZE_KEY", "ingest", "write_bronze"]

BRONZE_KEY = ("table", "commit_lsn", "position")
"""An event's identity in bronze. Without a commit LSN in the stream, its provenance (file, line) is added."""

BRONZE_PROPERTIES = {
    "delta.appendOnly": "true",
    "delta.enableChangeDataFeed": "true",  # the events each batch added, for the stages downstream
    "delta.dataSkippingNumIndexedCols": "6",
}


def ingest(
    spark: SparkSession,
    paths: Sequence[str],
    lake: str,
    fmt: Format | str,
    schemas: Mapping[str, TableSchema] | str | None = None,
    policies: Policies | None = None,
    *,
    settings: Callable[[str], TableSettings] | None = None,
    include: Callable[[str], bool] | None = None,
    isolate: bool = False,
    on_table: Callable[[TableSummary], None] | None = None,
    open_start: bool = False,
    open_end: bool = False,
) -> IngestSummary:
    """Read wal2json files as one batch: append what is new to bronze and quarantine, then bring every
    table's silver snapshot and history up to date (``resolver.silver.apply_changes``).

    ``schemas`` is a folder of ``<schema>.<table>.yaml`` files or what ``load_schemas`` returned;
    ``policies`` says what happens to unknown tables and columns and unsafe type changes
    (``resolver.policy``; a quarantined event is counted under ``quarantined``, not ``accepted``).
    ``settings``, ``include``, ``isolate`` and ``on_table`` are ``apply_changes``'s and ``plan_changes``'s;
    ``open_start`` / ``open_end`` are ``read_wal2json``'s (``resolver.run`` uses them all).

    Example::

        from resolver import ingest, local_session
        summary = ingest(local_session(), ["landing/0001.json"], "lake", "wal2json-v2")
        print("\\n".join(summary.lines()))
    """
    if isinstance(schemas, str):
        schemas = load_schemas(schemas)
    batch = read_wal2json(spark, paths, fmt, open_start=open_start, open_end=open_end)
    try:
        # may refuse the batch: nothing is written yet
        with step(spark, "ingest", "plan"):
            plan = plan_changes(
                spark, batch.events, lake, schemas, policies, settings, isolate=isolate, include=include
            )
        with step(spark, "ingest", "read and count"):
            counts = batch.counts()
            open_from = batch.open_from
        quarantined, refused = _quarantine(spark, lake, batch, plan, counts)
        plan = replace(plan, rejected=None)
        events = plan.accepted if plan.accepted is not None else batch.events
        with step(spark, "ingest", "bronze"):
            metrics, version = write_bronze(
                spark, lake, events, counts.get("min_commit_lsn"), counts.get("max_commit_lsn"), batch.files
            )
        tables = apply_changes(
            spark,
            events,
            lake,
            schemas,
            quarantine_format=batch.format.value,
            plan=plan,
            isolate=isolate,
            on_table=on_table,
            all_new=_all_new(metrics, counts),
        )
    finally:
        batch.unpersist()
    events_read = counts["events"]
    accepted = metrics.get("numTargetRowsInserted", 0)
    quarantined += refused
    return IngestSummary(
        files=len(batch.files),
        transactions=counts["transactions"],
        events_read=events_read,
        accepted=accepted,
        duplicates=events_read - accepted - refused,
        quarantined=quarantined,
        messages=counts["messages"],
        tombstones=counts["tombstones"],
        bronze_version=version,
        tables=tables,
        open_from=open_from,
    )


def _all_new(metrics: dict[str, int], counts: dict[str, int]) -> bool:
    """Whether bronze took every event the batch read as new: then no change store holds any of them (a
    store only ever holds events bronze took in an earlier batch)."""
    inserted = metrics.get("numTargetRowsInserted", 0)
    return inserted > 0 and inserted == counts["events"]


def _quarantine(
    spark: SparkSession, lake: str, batch: ParsedBatch, plan: BatchPlan, counts: dict[str, int]
) -> tuple[int, int]:
    """Send the records the reader could not read, and the events a quarantine policy took out of the
    batch, to the quarantine table; returns how many of each were new there."""
    with step(spark, "ingest", "quarantine"):
        unread = write_quarantine(spark, lake, batch.quarantine, batch.files) if counts["quarantined"] else 0
    refused = 0
    if plan.rejected is not None:  # events a quarantine policy took out of the batch
        records = plan.rejected.withColumn("format", F.lit(batch.format.value))
        records = records.select(*QUARANTINE_SCHEMA.fieldNames())
        with step(spark, "ingest", "quarantine"):
            refused = write_quarantine(spark, lake, records, batch.files)
    return unread, refused


def write_bronze(
    spark: SparkSession, lake: str, events: DataFrame, lo: int | None, hi: int | None, files: Sequence[str]
) -> tuple[dict[str, int], int]:
    """Append the events bronze does not have yet. Returns the MERGE metrics and bronze's version."""
    table = delta.ensure_table(
        spark,
        delta.table_path(lake, delta.BRONZE),
        EVENT_SCHEMA,
        BRONZE_PROPERTIES,
        "Every change event accepted, append-only, unique on (table, commit_lsn, position)",
    )
    provenance = F.when(
        F.col("commit_lsn").isNull(), F.concat_ws(":", "source_file", F.col("source_line").cast("string"))
    )
    first = Window.partitionBy(*BRONZE_KEY, provenance).orderBy("source_file", "source_line")
    ranked = events.withColumn("_rank", F.row_number().over(first))
    unique = ranked.filter(F.col("_rank") == 1).drop("_rank")
    if delta.version(table) == 0:  # bronze holds nothing yet (only its creation): nothing to look up
        return delta.append_counted(table, delta.table_path(lake, delta.BRONZE), unique)
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
