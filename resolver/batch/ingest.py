"""One batch, as its steps (``ingest``): read the files, plan the batch against the lake (which may refuse it
before anything is written), quarantine what could not be read or what a policy refused, append what is new
to bronze (the batch's schema changes logged beside it), then bring every table's silver tables up to date
(``apply_tables``: every table's rows exploded in one Spark job, then the tables on a pool of threads, a
table's steps in ``resolver.table.apply.apply_table``) and quarantine the values that did not fit their
columns. Under a freshness bound, small tables' events wait in bronze and a later batch applies them with
its own (``resolver.batch.deferral``); ``apply_waiting`` is a batch of no new events that applies those
whose bound ran out (``resolver run`` runs it when the source brought no new file).
``resolver.batch.silver.apply_changes`` takes the same last steps for a DataFrame of events
(``apply_planned``: the schema log, then the tables)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace
from datetime import UTC, datetime
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver.batch.bronze import first_of_each, write_bronze
from resolver.batch.deferral import applied_plan, decide, due_now, leave_waiting, read_waiting, waiting_note
from resolver.batch.read import ParsedBatch, read_wal2json
from resolver.config.batch_options import BatchOptions, batch_options
from resolver.config.tableschema import TableSchema, load_schemas
from resolver.lake.catalog import LakeTable, check_names, lake_tables, register_names
from resolver.lake.folders import Lake
from resolver.lake.markers import read_lake_markers, write_markers
from resolver.lake.quarantine import write_quarantine, write_records
from resolver.lake.sidecars import drop_stale_sidecars
from resolver.models import Format, IngestSummary, TableSummary
from resolver.plan.batch_plan import BatchPlan, plan_batch
from resolver.plan.coverage import check_covered
from resolver.plan.schemalog import write_schema_log
from resolver.spark.expressions import expressions_for
from resolver.spark.parallelism import parallel_tables
from resolver.spark.sparkschema import QUARANTINE_SCHEMA
from resolver.spark.steps import step
from resolver.table.apply import TableApplied, apply_table
from resolver.table.batch_tables import open_first_tables
from resolver.table.exploded import explode_tables, release
from resolver.table.summaries import empty_summary
from resolver.table.table_steps import BatchEvents, BatchTables, Exploded
from resolver.tablelayout import TableLayout
from resolver.tablestate import Waiting

__all__ = ["apply_planned", "apply_tables", "apply_waiting", "ingest", "ingest_batch", "log_schema_changes"]

log = logging.getLogger(__name__)


def ingest(
    spark: SparkSession,
    paths: Sequence[str],
    lake: str | Lake,
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
    if isinstance(schemas, str):
        schemas = load_schemas(schemas)
    at = Lake.at(lake)
    try:
        return ingest_batch(spark, paths, at, fmt, schemas, batch_options(options))
    finally:
        drop_stale_sidecars(at.root)  # a local lake read through Hadoop's checksums elsewhere stays readable


def ingest_batch(
    spark: SparkSession,
    paths: Sequence[str],
    lake: Lake,
    fmt: Format | str,
    schemas: Mapping[str, TableSchema] | None,
    options: BatchOptions,
) -> IngestSummary:
    """``ingest`` with its lake, schemas and options resolved (``resolver.pipelines.run`` resolves them once
    for all its batches): the batch's steps."""
    batch = read_wal2json(spark, paths, fmt, window=options.window, partitions=options.partitions)
    try:
        with step(spark, "ingest", "plan"):  # may refuse the batch: nothing is written yet
            plan = plan_batch(spark, batch.events, lake, schemas, options)
            named = _catalog_names(spark, lake, plan, options)  # a name of another lake's: refused here
            deferral = decide(plan, options.freshness, time.time())
            events = plan.accepted if plan.accepted is not None else batch.events
            # the tables the batch applies, with the events that waited for them read back from bronze
            applied, rows = applied_plan(
                spark, plan, deferral, events, lambda rows: plan_batch(spark, rows, lake, schemas, options)
            )
        with step(spark, "ingest", "read and count"):
            counts = batch.counts()
            open_from = batch.open_from
        with expressions_for(spark, counts["events"]):  # a small batch's expressions interpreted
            unread, refused = _quarantine(spark, lake.quarantine, batch, plan, counts["quarantined"])
            if applied.rejected is not None and applied is not plan:  # waiting events a policy now refuses
                refused += write_records(spark, lake.quarantine, applied.rejected, batch.format.value)
            # bronze and the schema log are different Delta tables, and neither is read before the tables'
            # steps: the schema log's write (a lake's first batch, a schema change), the tables' explode
            # (mostly the driver's planning of each table's projections) and the creation of the tables
            # that have none yet (driver work and commits) run beside bronze's write
            with ThreadPoolExecutor(max_workers=3, thread_name_prefix="beside-bronze") as side:
                logged = side.submit(log_schema_changes, spark, applied)
                exploding = side.submit(explode_applied, spark, rows, applied)
                opening = side.submit(open_applied, spark, applied)
                try:
                    with step(spark, "ingest", "bronze"):
                        lo, hi = counts.get("min_commit_lsn"), counts.get("max_commit_lsn")
                        unique = events if batch.distinct else first_of_each(events)
                        metrics, version = write_bronze(spark, lake.bronze, unique, lo, hi, batch.files)
                    logged.result()  # its error raised, whatever bronze's write did
                    opened = opening.result()
                except BaseException:
                    wait([logged, exploding, opening])
                    if exploding.exception() is None:
                        release(e.rows for e in exploding.result().values())
                    raise
                exploded = exploding.result()
            accepted = metrics.get("numTargetRowsInserted", 0)
            unseen = accepted > 0 and accepted == counts["events"]  # then no change store holds any of them
            applied = leave_waiting(applied, plan, deferral, version if accepted else None)
            read_back = {t: w for t, w in deferral.due.items() if w.versions}
            tables, bad = apply_tables(
                spark, BatchEvents(rows, unseen, exploded, read_back, opened), applied, options
            )
            tables = [_with_waited(t, deferral.due.get(t.table)) for t in tables]
            tables = sorted(tables + _waiting_summaries(applied, plan, options), key=lambda t: t.table)
            # the values that did not fit their columns (their events applied with NULL there)
            unfit = write_records(spark, lake.quarantine, bad, batch.format.value)
        if options.catalog is not None:
            with step(spark, "ingest", "catalog"):
                for name in register_names(spark, options.catalog, named):
                    log.info("registered %s", name)
    finally:
        batch.unpersist()
    return IngestSummary(
        files=len(batch.files),
        transactions=counts["transactions"],
        events_read=counts["events"],
        accepted=accepted,
        duplicates=counts["events"] - accepted - refused,
        quarantined=unread + refused + unfit,
        messages=counts["messages"],
        tombstones=counts["tombstones"],
        bronze_version=version,
        tables=tables,
        open_from=open_from,
    )


def apply_waiting(
    spark: SparkSession,
    lake: Lake,
    schemas: Mapping[str, TableSchema] | None,
    options: BatchOptions,
    fmt: Format,
) -> list[TableSummary]:
    """Apply the events that wait in bronze and are due now (``due_now``: all of them without
    ``options.freshness``), read back from bronze, as a batch of their own; returns the tables' summaries
    (none when nothing is due). ``fmt``: the format the source's files are read as (the quarantine's
    records of values that did not fit name it). The caller holds the lake's lock."""
    with step(spark, "ingest", "plan"):
        due = due_now(read_lake_markers(spark, lake.markers).waiting, options.freshness, time.time())
        if not due:
            return []
        rows = read_waiting(spark, lake.bronze, due)
        if rows is None:  # their batches added nothing new to bronze: nothing waits
            write_markers(spark, lake.markers, {}, dict.fromkeys(due))
            return []
        plan = replace(plan_batch(spark, rows, lake, schemas, options), due=frozenset(due))
    log.info("applying the events that waited in bronze of %d table(s): %s", len(due), ", ".join(sorted(due)))
    read_back = {t: w for t, w in due.items() if w.versions}
    exploded = explode_applied(spark, rows, plan)
    tables, bad = apply_tables(spark, BatchEvents(rows, True, exploded, read_back), plan, options)
    for records in (plan.rejected, bad):  # events a policy now refuses; values that did not fit
        write_records(spark, lake.quarantine, records, fmt.value)
    return tables


def _with_waited(summary: TableSummary, waited: Waiting | None) -> TableSummary:
    """A table's summary, with a note of the events that had waited in bronze when the batch applied them
    with its own (its ``events`` count them)."""
    if waited is None or summary.error is not None:
        return summary
    since = datetime.fromtimestamp(waited.since, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    note = f"applied with {waited.events} event(s) that waited in bronze since {since}"
    return summary.model_copy(update={"notes": [*summary.notes, note]})


def _waiting_summaries(applied: BatchPlan, own: BatchPlan, options: BatchOptions) -> list[TableSummary]:
    """The summaries of the tables whose events the batch leaves waiting in bronze (nothing applied to their
    silver tables), each with a note of what waits (``resolver.batch.deferral``)."""
    seconds = options.freshness.seconds if options.freshness else None
    out = []
    for table, waiting in sorted(applied.waits.items()):
        summary = empty_summary(table, own.meta[table], None)
        summary = summary.model_copy(update={"notes": [waiting_note(waiting, seconds)]})
        if options.on_table is not None:
            options.on_table(summary)
        out.append(summary)
    return out


def _catalog_names(
    spark: SparkSession, lake: Lake, plan: BatchPlan, options: BatchOptions
) -> list[LakeTable]:
    """The catalog names of the lake's tables this batch may write (none without ``options.catalog``),
    checked: a name the catalog holds at another path fails the batch before anything is written."""
    if options.catalog is None:
        return []
    from resolver.files.hadoop_files import HadoopFiles
    from resolver.lake.folders import LOCAL_FOLDERS, silver_tables

    held = silver_tables(lake.root, HadoopFiles(spark) if lake.uri else LOCAL_FOLDERS).values()
    tables = {*held, *(t for t, layout in plan.layouts.items() if layout is not None)}
    settings = options.settings
    overrides = {t: settings(t).catalog_name if settings else None for t in tables}
    named = lake_tables(lake, tables, overrides)
    check_names(spark, options.catalog, named)
    return named


def _quarantine(
    spark: SparkSession, path: str, batch: ParsedBatch, plan: BatchPlan, unreadable: int
) -> tuple[int, int]:
    """Send the records the reader could not read, and the events a quarantine policy took out of the
    batch, to the quarantine table (at ``path``); returns how many of each were new there."""
    with step(spark, "ingest", "quarantine"):
        unread = write_quarantine(spark, path, batch.quarantine, batch.files) if unreadable else 0
    refused = 0
    if plan.rejected is not None:  # events a quarantine policy took out of the batch
        records = plan.rejected.withColumn("format", F.lit(batch.format.value))
        records = records.select(*QUARANTINE_SCHEMA.fieldNames())
        with step(spark, "ingest", "quarantine"):
            refused = write_quarantine(spark, path, records, batch.files)
    return unread, refused


def explode_applied(spark: SparkSession, rows: DataFrame, plan: BatchPlan) -> Mapping[str, Exploded]:
    """Every table's rows the planned batch applies (``rows``: the batch's events), exploded in one Spark
    job (``_explode_tables``), for ``apply_tables``."""
    if plan.accepted is not None:
        rows = plan.accepted
    return _explode_tables(spark, rows, plan.applied_layouts)


def open_applied(spark: SparkSession, plan: BatchPlan) -> Mapping[str, BatchTables]:
    """The Delta tables of the planned batch's applied tables that have none yet, created
    (``resolver.table.batch_tables.open_first_tables``), for ``apply_tables``."""
    with step(spark, "ingest", "tables"):
        return open_first_tables(spark, [plan.table(t) for t in plan.applied_layouts])


def _explode_tables(
    spark: SparkSession, rows: DataFrame, layouts: Mapping[str, TableLayout]
) -> Mapping[str, Exploded]:
    """Every applied table's rows of the batch exploded in one Spark job (``explode_tables``). Should that
    pass fail, each table explodes its own rows in its steps, as a failure there stays the table's (a batch
    with ``isolate`` goes on with the other tables)."""
    try:
        with step(spark, "ingest", "explode"):
            return explode_tables(rows, layouts)
    except Exception:  # noqa: BLE001  # the tables' own explodes raise it again where it belongs
        log.warning(
            "the batch's tables could not be exploded in one pass; each explodes its own rows", exc_info=True
        )
        return {}


def apply_planned(
    spark: SparkSession, events: BatchEvents, plan: BatchPlan, options: BatchOptions
) -> tuple[list[TableSummary], DataFrame | None]:
    """Apply a planned batch (``plan_changes``) to every table's silver tables: the batch's schema changes
    are logged first (``log_schema_changes``), then the tables are applied (``apply_tables``)."""
    log_schema_changes(spark, plan)
    return apply_tables(
        spark, replace(events, exploded=explode_applied(spark, events.rows, plan)), plan, options
    )


def log_schema_changes(spark: SparkSession, plan: BatchPlan) -> None:
    """Append the batch's schema changes of the tables it applies to the lake's schema log, before any
    table changes (``resolver.plan.schemalog.write_schema_log``; nothing when there are none)."""
    logged = [e for layout in plan.applied_layouts.values() for e in layout.schema_log]
    with step(spark, "ingest", "schema log"):  # its jobs were counted under no step
        write_schema_log(spark, plan.lake.schema_log, logged)


def apply_tables(
    spark: SparkSession, events: BatchEvents, plan: BatchPlan, options: BatchOptions
) -> tuple[list[TableSummary], DataFrame | None]:
    """Apply a planned batch whose schema changes are logged to every table's silver tables: every applied
    table's rows exploded by the caller in one Spark job (``explode_applied``: ``events.exploded``), then
    the tables on a pool of threads
    (``resolver.table.apply.apply_table``). Returns the tables' summaries, sorted by table name, and the
    records of values that did not fit their columns, for the quarantine (None: there were none).
    ``events.unseen`` says the lake held none of these events before (``ingest`` knows it from bronze's
    write): each table's change store is then appended to without looking for them first."""
    if plan.accepted is not None:
        events = replace(events, rows=plan.accepted)
    meta = plan.meta
    refused = plan.unapplied
    for table, why in sorted(refused.items()):
        log.info("table %s not applied: %s", table, why)

    def one(table: str) -> TableApplied:
        result: TableApplied
        try:
            if table in refused:  # left alone: its events stay in bronze, the summary says why
                result = TableApplied(empty_summary(table, meta[table], refused[table]))
            else:
                result = apply_table(spark, events, plan.table(table))
        except Exception as e:
            if not options.isolate:
                raise
            log.exception("table %s failed; the other tables go on", table)
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            result = TableApplied(empty_summary(table, meta[table], f"{type(e).__name__}: {first}"))
        if options.on_table is not None:
            options.on_table(result.summary)
        return result

    # tables are independent: their jobs overlap on one session (Delta commits per table do not conflict)
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(parallel_tables(spark), len(meta)))) as pool:
            results = list(pool.map(one, sorted(meta)))
        markers = {r.summary.table: r.marker for r in results if r.marker is not None}
        # what waits after the batch: the tables it left waiting, and nothing of the ones it applied
        done = {
            r.summary.table for r in results if r.summary.error is None and r.summary.table not in refused
        }
        nothing = {t for t in plan.due if t not in meta and t not in plan.failed}  # no event was left of it
        waiting: dict[str, Waiting | None] = {t: None for t in plan.due if t in done or t in nothing}
        waiting.update(plan.waits)
        with step(spark, "ingest", "markers"):  # the batch's tables' markers: one commit, after the last
            write_markers(spark, plan.lake.markers, markers, waiting)
        bad = [r.bad for r in results if r.bad is not None]
        records = reduce(DataFrame.unionByName, bad) if bad else None
        if records is not None and events.exploded:  # read from the rows let go of below: kept first
            records = records.localCheckpoint(eager=True)
    finally:
        release(e.rows for e in events.exploded.values())
    failed = [empty_summary(t, None, why) for t, why in plan.failed.items()]
    summaries = sorted([r.summary for r in results] + failed, key=lambda t: t.table)
    check_covered(meta, plan.layouts, summaries)
    return summaries, records
