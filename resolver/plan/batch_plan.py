"""Plan a batch before anything is written: per table its metadata, layout and paths (``TablePlan``), and
the events the policies refuse or quarantine (``BatchPlan``)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver.config.batch_options import BatchOptions, batch_options
from resolver.config.pipeline import TableSettings
from resolver.config.tableschema import TableSchema
from resolver.errors import ConfigError
from resolver.lake.deletion_vectors import from_bytes
from resolver.lake.folders import Lake
from resolver.lake.markers import LakeMarkers, read_lake_markers
from resolver.models import SchemaChanges
from resolver.plan.coverage import unapplied
from resolver.plan.evolution import TypeChange
from resolver.plan.layout import table_layout
from resolver.plan.metadata import batch_metadata
from resolver.plan.rejects import unknown_reasons, unsafe_reasons
from resolver.plan.table_plan import TablePlan
from resolver.plan.tablemeta import TableMeta
from resolver.spark.expressions import interpret_below
from resolver.spark.parallelism import parallel_tables
from resolver.spark.small_graphs import small_graph_rows
from resolver.tablelayout import TableLayout
from resolver.tablestate import Waiting


@dataclass(frozen=True)
class BatchPlan:
    """What a batch will do to each table, decided before anything is written: the lake it goes to, the
    batch's metadata per table, the table's layout (None for a table whose columns are not known yet), and
    the events the policies send to quarantine (``rejected``, quarantine records; None when there are none)
    with the events left to apply (``accepted``)."""

    lake: Lake
    meta: dict[str, TableMeta]
    layouts: dict[str, TableLayout | None]
    accepted: DataFrame | None = None
    rejected: DataFrame | None = None
    failed: dict[str, str] = field(default_factory=dict)
    """Tables refused in this batch (with ``isolate``): table -> the one-line reason."""
    waiting: dict[str, Waiting] = field(default_factory=dict)
    """The lake's tables whose events wait in bronze before the batch (``resolver.batch.deferral``)."""
    waits: dict[str, Waiting] = field(default_factory=dict)
    """The tables the batch leaves waiting, with their events that wait after it (written with the
    tables' markers)."""
    due: frozenset[str] = frozenset()
    """The tables whose waiting events the batch applies with its own: once applied, nothing of theirs
    waits any more."""

    def table(self, table: str) -> TablePlan:
        """What the table's batch is handed."""
        return TablePlan(self.meta[table], self.layouts.get(table), self.lake.table(table))

    @property
    def unapplied(self) -> dict[str, str]:
        """Tables whose events this batch cannot apply (``resolver.plan.coverage.unapplied``): table -> why.
        Their events stay in bronze; each is reported in its summary's ``error``."""
        out = {t: unapplied(m, self.layouts.get(t)) for t, m in self.meta.items()}
        return {t: why for t, why in out.items() if why}

    @property
    def applied_layouts(self) -> dict[str, TableLayout]:
        """The layouts of the tables this batch applies: known columns, not ``unapplied``."""
        refused = self.unapplied
        return {t: layout for t, layout in self.layouts.items() if layout and t not in refused}

    @property
    def type_changes(self) -> list[TypeChange]:
        return [c for layout in self.layouts.values() if layout for c in layout.changes]


def plan_changes(
    spark: SparkSession,
    events: DataFrame,
    lake: str | Lake,
    schemas: Mapping[str, TableSchema] | None = None,
    options: BatchOptions | None = None,
) -> BatchPlan:
    """Check a batch against the lake without writing anything: one small aggregate over the events, then
    each table's key and columns, and the policies (``resolver.config.policy``) for unknown tables, unknown
    columns and unsafe type changes. Raises ``ConfigError`` (one line) for a key that contradicts the
    lake's or an event a ``fail`` policy refuses. ``schemas`` None means no schemas folder (no table is
    unknown). ``options`` (``resolver.config.batch_options.BatchOptions``): the ``policies``; ``settings``
    gives each table's ``resolver.config.pipeline.TableSettings`` (outputs, key override, tracked columns,
    clustering). When a ``quarantine`` policy takes events out, the plan is made again without them. With
    ``isolate``, a table refused in planning does not refuse the batch: it is left out of it and named in
    ``failed``. Tables ``include`` says no to get no silver tables (their events still go to bronze).

    Example::

        from resolver import plan_changes, read_wal2json
        batch = read_wal2json(spark, ["landing/0001.json"], "wal2json-v2")
        plan = plan_changes(spark, batch.events, "lake")   # raises ConfigError if the lake cannot take it
        for table, layout in sorted(plan.layouts.items()):
            print(table, layout.key if layout else "(columns not known yet)")
    """
    return plan_batch(spark, events, Lake.at(lake), schemas, batch_options(options))


def plan_batch(
    spark: SparkSession,
    events: DataFrame,
    lake: Lake,
    schemas: Mapping[str, TableSchema] | None,
    options: BatchOptions,
) -> BatchPlan:
    """``plan_changes`` with its lake and options resolved (``resolver.batch.ingest.ingest_batch``)."""
    from_bytes(spark)  # bad settings fail here, before anything is written
    parallel_tables(spark)
    small_graph_rows(spark)
    interpret_below(spark)
    policies, include = options.policies, options.include
    failed: dict[str, str] | None = {} if options.isolate else None

    def metadata(events: DataFrame) -> dict[str, TableMeta]:
        meta = batch_metadata(events)  # per table: leaving a table out changes no other table's
        return {t: m for t, m in meta.items() if include is None or include(t)}

    meta = metadata(events)
    held = read_lake_markers(spark, lake.markers)  # every table's, once: no Spark job
    waiting = held.waiting
    reasons = unknown_reasons(meta, schemas, policies, failed)
    layouts = _layouts(_Planning(spark, lake, held, schemas or {}, options), meta, failed)
    reasons += unsafe_reasons(layouts, schemas or {})
    if not reasons and not failed:
        return BatchPlan(lake, meta, layouts, waiting=waiting)
    if failed:  # their events are left out of this batch altogether (nothing written for those tables)
        events = events.filter(~F.col("table").isin(sorted(failed)))
    if not reasons:
        meta = metadata(events)
        layouts = _layouts(_Planning(spark, lake, held, schemas or {}, options), meta, None)
        return BatchPlan(lake, meta, layouts, events, None, failed or {}, waiting)
    reason: Column = F.coalesce(*reasons) if len(reasons) > 1 else reasons[0]
    tagged = events.withColumn("__reason", reason)
    accepted = tagged.filter(F.col("__reason").isNull()).drop("__reason")
    rejected = tagged.filter(F.col("__reason").isNotNull()).select(
        "source_file",
        F.col("source_line").cast("long").alias("source_line"),
        F.col("__reason").alias("reason"),
        F.to_json(F.struct(*[c for c in events.columns if c not in ("source_file", "source_line")])).alias(
            "raw"
        ),
        F.lit(None).cast("binary").alias("raw_bytes"),
    )
    meta = metadata(accepted)
    layouts = _layouts(_Planning(spark, lake, held, schemas or {}, options), meta, None)
    return BatchPlan(lake, meta, layouts, accepted, rejected, failed or {}, waiting)


@dataclass(frozen=True)
class _Planning:
    """What every table's layout is planned against: the session, the lake and its markers as read once
    (no Spark job), the schema files, and the batch's options."""

    spark: SparkSession
    lake: Lake
    held: LakeMarkers
    schemas: Mapping[str, TableSchema]
    options: BatchOptions


def _layouts(
    planning: _Planning, meta: dict[str, TableMeta], failed: dict[str, str] | None
) -> dict[str, TableLayout | None]:
    spark, lake, held, schemas, options = (
        planning.spark, planning.lake, planning.held, planning.schemas, planning.options
    )  # fmt: skip

    def layout_or_failure(table: str) -> TableLayout | None:
        if failed is None:
            return layout(table)
        try:
            return layout(table)
        except ConfigError as e:
            failed[table] = str(e)
            return None

    def layout(table: str) -> TableLayout | None:
        schema = schemas.get(table)
        settings = options.settings(table) if options.settings else TableSettings()
        if settings.key:  # the pipeline's key wins over the schema file's and the stream's
            schema = (schema or TableSchema(table=table)).model_copy(update={"primary_key": settings.key})
        policy = (schema.unsafe_type_change if schema else None) or options.policies.unsafe_type_change
        out = table_layout(spark, lake.table(table), meta[table], schema, policy, held.markers.get(table))
        if out is None:
            return None
        missing = [c for c in settings.track_history or [] if c not in out.names]
        if missing:
            raise ConfigError(
                f"table {table}: track_history column(s) {missing} not found; columns are {out.names}"
            )
        return replace(
            out,
            snapshot=settings.snapshot,
            history=settings.history,
            track=tuple(settings.track_history or ()),
            cluster=bool(settings.cluster_by_key),
            schema_changes=settings.schema_changes or SchemaChanges.REWRITE,
        )

    tables = [t for t in sorted(meta) if not failed or t not in failed]
    with ThreadPoolExecutor(max_workers=max(1, min(parallel_tables(spark), len(tables)))) as pool:
        return dict(zip(tables, pool.map(layout_or_failure, tables), strict=True))
