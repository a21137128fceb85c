"""Apply one batch of change events to the silver snapshot and history tables (``docs/silver.md``).

The flow of one batch, each step in its own module:

1. ``resolver.plan``: one small aggregate over the events (``resolver.metadata``), then each table's key
   (``resolver.keys``) and layout (``resolver.layout``: columns, type changes, drop points, schema-log rows),
   and the events the policies refuse (``resolver.rejects``); nothing is written yet;
2. ``resolver.schemalog``: the batch's schema changes, logged before any table changes;
3. per table, on a pool of threads (``resolver.apply.apply_table``): the table's Delta tables created or
   evolved (``resolver.tables``), the batch exploded against the layout and measured in the same job
   (``resolver.exploded``: key changes, bad values, key ranges) and appended to the change store (an
   insert-only MERGE on (commit LSN, position)); the *affected keys*: the keys the batch
   touches, closed under primary-key changes (``resolver.store``, ``resolver.moves.linked_keys``; a
   truncate affects every key); every change of those keys resolved into versions
   (``resolver.resolve.resolve_versions``: the result depends only on the set of events held, so replays and
   any delivery order give the same rows); the versions diffed against the history rows of those keys and
   MERGEd into the history, the current versions MERGEd straight into the snapshot (``resolver.merge``;
   what each MERGE did is its own result; late events are searched for only when the store's marker
   cannot rule them out);
4. ``resolver.quarantine``: values that did not fit their column, and events a policy quarantined.

The change store is written first and the silver tables are recomputed from it, so a batch cut short by a
crash is completed by running it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver.apply import apply_table
from resolver.coverage import check_covered
from resolver.lake import changes_path, history_path, schema_log_path, snapshot_path
from resolver.models import TableSummary
from resolver.parallelism import parallel_tables
from resolver.pipeline import TableSettings
from resolver.plan import BatchPlan, plan_changes
from resolver.policy import Policies
from resolver.quarantine import write_quarantine
from resolver.read import QUARANTINE_SCHEMA
from resolver.schemalog import write_schema_log
from resolver.summaries import empty_summary
from resolver.tableschema import TableSchema

# the paths and the plan are re-exported: callers that knew them from here keep working
__all__ = [
    "BatchPlan",
    "apply_changes",
    "changes_path",
    "history_path",
    "plan_changes",
    "schema_log_path",
    "snapshot_path",
]

log = logging.getLogger(__name__)


def apply_changes(
    spark: SparkSession,
    events: DataFrame,
    lake: str,
    schemas: Mapping[str, TableSchema] | None = None,
    *,
    quarantine_format: str = "events",
    plan: BatchPlan | None = None,
    policies: Policies | None = None,
    settings: Callable[[str], TableSettings] | None = None,
    isolate: bool = False,
    on_table: Callable[[TableSummary], None] | None = None,
    all_new: bool = False,
) -> list[TableSummary]:
    """Apply a batch of change events (a DataFrame with ``resolver.models.ChangeEvent`` columns, e.g.
    ``read_wal2json(...).events``) to the silver tables of every table in it. One call is one batch.

    ``schemas`` maps ``<schema>.<table>`` to its schema file (``resolver.tableschema.load_schemas``).
    Returns one summary per table, sorted by table name. Every check that can refuse the batch (a key or
    a column type the lake cannot take, an event a ``fail`` policy refuses) runs first, in
    ``plan_changes``, before anything is written; pass its ``plan`` when you have one. Events a
    ``quarantine`` policy (``resolver.policy``) takes out go to the quarantine table. With ``isolate``,
    a table that fails (in planning or while applying) does not stop the others: its summary carries the
    ``error``. ``on_table`` is called with each table's summary as soon as the table is done. ``all_new``
    says the lake held none of these events before (``resolver.bronze.ingest`` knows it from bronze's
    write): each table's change store is then appended to without looking for them first.

    Example::

        from resolver import apply_changes, read_wal2json
        batch = read_wal2json(spark, ["landing/0001.json"], "wal2json-v2")
        for t in apply_changes(spark, batch.events, "lake"):
            print(t.table, t.inserted, t.updated, t.deleted)
    """
    plan = plan or plan_changes(spark, events, lake, schemas, policies, settings, isolate=isolate)
    if plan.accepted is not None:
        events = plan.accepted
    meta = plan.meta
    refused = plan.unapplied
    for table, why in sorted(refused.items()):
        log.info("table %s not applied: %s", table, why)
    write_schema_log(
        spark,
        lake,
        [e for t, layout in plan.layouts.items() if layout and t not in refused for e in layout.schema_log],
    )

    def one(table: str) -> tuple[TableSummary, DataFrame | None]:
        result: tuple[TableSummary, DataFrame | None]
        try:
            if table in refused:  # left alone: its events stay in bronze, the summary says why
                result = (empty_summary(table, meta[table], refused[table]), None)
            else:
                result = apply_table(spark, events, lake, meta[table], plan.layouts[table], all_new)
        except Exception as e:
            if not isolate:
                raise
            log.exception("table %s failed; the other tables go on", table)
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            result = (empty_summary(table, meta[table], f"{type(e).__name__}: {first}"), None)
        if on_table is not None:
            on_table(result[0])
        return result

    # tables are independent: their jobs overlap on one session (Delta commits per table do not conflict)
    with ThreadPoolExecutor(max_workers=max(1, min(parallel_tables(spark), len(meta)))) as pool:
        results = list(pool.map(one, sorted(meta)))
    bad = [b for _, b in results if b is not None]
    if plan.rejected is not None:
        bad.append(plan.rejected)
    if bad:
        records = reduce(DataFrame.unionByName, bad).withColumn("format", F.lit(quarantine_format))
        files = [r[0] for r in records.select("source_file").distinct().collect()]  # a few file names
        write_quarantine(spark, lake, records.select(*QUARANTINE_SCHEMA.fieldNames()), files)
    failed = [empty_summary(t, None, why) for t, why in plan.failed.items()]
    summaries = sorted([summary for summary, _ in results] + failed, key=lambda t: t.table)
    check_covered(meta, plan.layouts, summaries)
    return summaries
