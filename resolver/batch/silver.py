"""Apply a planned batch of change events to every table's silver snapshot and history (``docs/silver.md``):
``apply_planned`` (the batch's part after bronze: the schema log, then the tables; ``resolver.batch.ingest``
logs the schema beside bronze's write and calls ``apply_tables`` itself) and ``apply_changes`` (the
library's call for any DataFrame of change events: plan, apply, quarantine).

1. ``resolver.plan.batch_plan``: one small aggregate over the events (``resolver.plan.metadata``), then each
   table's key (``resolver.plan.keys``) and layout (``resolver.plan.layout``: columns, type changes, drop
   points, schema-log rows), and the events the policies refuse (``resolver.plan.rejects``); nothing is
   written yet;
2. ``resolver.plan.schemalog``: the batch's schema changes, logged before any table changes;
3. every applied table's rows exploded against its layout, all tables in one Spark job, and measured in it
   (``resolver.table.exploded.explode_tables``: key changes, bad values, key ranges); then per table, on a
   pool of threads, ``resolver.table.apply.apply_table``'s steps: the table's Delta tables created or
   evolved (``resolver.lake.tables``), its rows added to the change store;
   the *affected keys*: the keys the batch touches, closed under primary-key changes
   (``resolver.table.store``,
   ``resolver.table.moves.linked_keys``; a truncate affects every key); every change of those keys resolved
   into versions (``resolver.table.resolve.resolve_versions``: the result depends only on the set of events
   held, so replays and any delivery order give the same rows); the versions written to the history and the
   current ones to the snapshot (``resolver.table.first_batch``: appended to a new table's;
   ``resolver.table.later_batch``: MERGEd, diffed first when events came late);
4. ``resolver.lake.quarantine``: values that did not fit their column, and events a policy quarantined.
 The change store is written first and the silver tables are recomputed from it, so a batch cut short by a
crash is completed by running it again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import reduce

from pyspark.sql import DataFrame, SparkSession

from resolver.batch.ingest import apply_planned
from resolver.config.batch_options import BatchOptions, batch_options
from resolver.config.tableschema import TableSchema
from resolver.lake.folders import Lake, changes_path, history_path, schema_log_path, snapshot_path
from resolver.lake.quarantine import write_records
from resolver.models import TableSummary
from resolver.plan.batch_plan import BatchPlan, plan_batch, plan_changes
from resolver.spark.expressions import expressions_for
from resolver.table.table_steps import BatchEvents

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
    lake: str | Lake,
    schemas: Mapping[str, TableSchema] | None = None,
    options: BatchOptions | None = None,
) -> list[TableSummary]:
    """Apply a batch of change events (a DataFrame with ``resolver.models.ChangeEvent`` columns, e.g.
    ``read_wal2json(...).events``) to the silver tables of every table in it. One call is one batch.

    ``schemas`` maps ``<schema>.<table>`` to its schema file (``resolver.config.tableschema.load_schemas``);
    ``options`` is a ``resolver.config.batch_options.BatchOptions`` (policies, per-table settings, the tables
    to include, ``isolate``, ``on_table``). Returns one summary per table, sorted by table name. Every check
    that can refuse the batch (a key or a column type the lake cannot take, an event a ``fail`` policy
    refuses) runs first, in ``plan_changes``, before anything is written. Events a ``quarantine`` policy
    (``resolver.config.policy``) takes out go to the quarantine table with the values that did not fit.

    Example::

        from resolver import apply_changes, read_wal2json
        batch = read_wal2json(spark, ["landing/0001.json"], "wal2json-v2")
        for t in apply_changes(spark, batch.events, "lake"):
            print(t.table, t.inserted, t.updated, t.deleted)
    """
    options = batch_options(options)
    plan = plan_batch(spark, events, Lake.at(lake), schemas, options)
    with expressions_for(spark, sum(m.events + m.skipped for m in plan.meta.values())):
        tables, bad = apply_planned(spark, BatchEvents(events), plan, options)
        refused = [r for r in (bad, plan.rejected) if r is not None]
        write_records(
            spark, plan.lake.quarantine, reduce(DataFrame.unionByName, refused) if refused else None, "events"
        )
    return tables
