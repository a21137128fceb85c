"""Apply one batch of change events to the silver snapshot and history tables (``docs/silver.md``).

Per table in the batch, a fixed job graph plus O(log chain) pointer-jumping rounds:

1. explode the batch's events against the table's layout (``resolver.explode``) and append the new ones to
   ``_resolver/changes/<schema>.<table>`` (an insert-only MERGE on (commit LSN, position));
2. the *affected keys*: the keys the batch touches, closed under primary-key changes (connected components
   of the move graph, ``resolver.resolve.components``); a truncate affects every key;
3. resolve every change of the affected keys into versions (``resolver.resolve.resolve_versions``): the
   result depends only on the set of events held, so replays and any delivery order give the same rows;
4. diff the versions against the history rows of those keys, and the current versions against the
   snapshot rows, keeping only real changes; one aggregate counts them for the summary;
5. one MERGE into the history and one into the snapshot, skipped when there is nothing to change.

The change store is written first and the silver tables are recomputed from it, so a batch cut short by a
crash is completed by running it again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import reduce
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from resolver import delta, sql
from resolver.errors import ConfigError
from resolver.evolution import TypeChange, evolve_type
from resolver.explode import Column_, TableLayout, explode_events
from resolver.lake import (  # the paths are re-exported: tests and bench import them from here
    TABLE_PROPERTY,
    changes_path,
    history_path,
    pending_truncates_path,
    schema_log_path,
    snapshot_path,
)
from resolver.models import TableSummary
from resolver.pgtypes import spark_type
from resolver.pipeline import TableSettings
from resolver.policy import Policies, Policy
from resolver.read import QUARANTINE_SCHEMA
from resolver.resolve import collapse_untracked, linked_keys, resolve_versions
from resolver.tableschema import TableSchema
from resolver.wal2json import format_lsn

__all__ = ["BatchPlan", "apply_changes", "history_path", "plan_changes", "schema_log_path", "snapshot_path"]

log = logging.getLogger(__name__)

#: change data feed for readers downstream; deletion vectors so that a MERGE marks the rows it replaces
#: instead of rewriting every file they are in (merge-on-read: OPTIMIZE / ``resolver optimize`` purges)
SILVER_PROPERTIES = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"}
_PARALLEL_TABLES = 4
KEY_PROPERTY = "resolver.key"
KEY_SOURCE_PROPERTY = "resolver.keySource"
SCHEMA_VERSION_PROPERTY = "resolver.schemaVersion"
DROPS_PROPERTY = "resolver.droppedAt"
#: on the change store: its version the silver tables were last brought up to, set in the store's own
#: commit right after it (the last write of a batch), so a re-applied batch finds nothing to do cheaply
APPLIED_PROPERTY = "resolver.appliedVersion"
#: on the change store, in the same commit: whether the store held a key change, a truncate, at that version
HOLDS_PROPERTY = "resolver.holds"
SCHEMA_LOG_SCHEMA = T.StructType(
    [
        T.StructField("table", T.StringType()),
        T.StructField("version", T.IntegerType()),
        T.StructField("change", T.StringType()),
        T.StructField("column", T.StringType()),
        T.StructField("old_name", T.StringType()),
        T.StructField("old_type", T.StringType()),
        T.StructField("new_type", T.StringType()),
        T.StructField("pg_type", T.StringType()),
        T.StructField("lsn", T.LongType()),
        T.StructField("logged_at", T.TimestampType()),
    ]
)
_TECH_SNAPSHOT = [("__start_lsn", "bigint"), ("__start_time", "timestamp")]
_TECH_HISTORY = [
    ("__start_lsn", "bigint"),
    ("__end_lsn", "bigint"),
    ("__start_time", "timestamp"),
    ("__end_time", "timestamp"),
    ("__is_current", "boolean"),
    ("__is_deleted", "boolean"),
]


_PENDING_SCHEMA = T.StructType(
    [
        T.StructField("table", T.StringType()),
        T.StructField("__lsn", T.LongType()),
        T.StructField("__pos", T.IntegerType()),
        T.StructField("__time", T.TimestampType()),
        T.StructField("__xid", T.LongType()),
        T.StructField("__file", T.StringType()),
        T.StructField("__line", T.LongType()),
    ]
)


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
) -> list[TableSummary]:
    """Apply a batch of change events (a DataFrame with ``resolver.models.ChangeEvent`` columns, e.g.
    ``read_wal2json(...).events``) to the silver tables of every table in it. One call is one batch.

    ``schemas`` maps ``<schema>.<table>`` to its schema file (``resolver.tableschema.load_schemas``).
    Returns one summary per table, sorted by table name. Every check that can refuse the batch (a key or
    a column type the lake cannot take, an event a ``fail`` policy refuses) runs first, in
    ``plan_changes``, before anything is written; pass its ``plan`` when you have one. Events a
    ``quarantine`` policy (``resolver.policy``) takes out go to the quarantine table. With ``isolate``,
    a table that fails (in planning or while applying) does not stop the others: its summary carries the
    ``error``. ``on_table`` is called with each table's summary as soon as the table is done.

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
    _write_schema_log(
        spark, lake, [e for layout in plan.layouts.values() if layout for e in layout.schema_log]
    )

    def one(table: str) -> tuple[TableSummary, DataFrame | None]:
        try:
            result = _apply_table(spark, events, lake, {**meta[table], "table": table}, plan.layouts[table])
        except Exception as e:
            if not isolate:
                raise
            log.exception("table %s failed; the other tables go on", table)
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            result = (_empty_summary(table, meta[table], f"{type(e).__name__}: {first}"), None)
        if on_table is not None:
            on_table(result[0])
        return result

    # tables are independent: their jobs overlap on one session (Delta commits per table do not conflict)
    with ThreadPoolExecutor(max_workers=max(1, min(_PARALLEL_TABLES, len(meta)))) as pool:
        results = list(pool.map(one, sorted(meta)))
    bad = [b for _, b in results if b is not None]
    if plan.rejected is not None:
        bad.append(plan.rejected)
    if bad:
        from resolver.bronze import write_quarantine

        records = reduce(DataFrame.unionByName, bad).withColumn("format", F.lit(quarantine_format))
        files = [r[0] for r in records.select("source_file").distinct().collect()]  # a few file names
        write_quarantine(spark, lake, records.select(*QUARANTINE_SCHEMA.fieldNames()), files)
    failed = [_empty_summary(t, None, why) for t, why in plan.failed.items()]
    return sorted([summary for summary, _ in results] + failed, key=lambda t: t.table)


@dataclass(frozen=True)
class BatchPlan:
    """What a batch will do to each table, decided before anything is written: the batch's metadata per
    table, the table's layout (None for a table whose columns are not known yet), and the events the
    policies send to quarantine (``rejected``, quarantine records; None when there are none) with the
    events left to apply (``accepted``)."""

    meta: dict[str, dict[str, Any]]
    layouts: dict[str, TableLayout | None]
    accepted: DataFrame | None = None
    rejected: DataFrame | None = None
    failed: dict[str, str] = field(default_factory=dict)
    """Tables refused in this batch (with ``isolate``): table -> the one-line reason."""

    @property
    def type_changes(self) -> list[TypeChange]:
        return [c for layout in self.layouts.values() if layout for c in layout.changes]


def plan_changes(
    spark: SparkSession,
    events: DataFrame,
    lake: str,
    schemas: Mapping[str, TableSchema] | None = None,
    policies: Policies | None = None,
    settings: Callable[[str], TableSettings] | None = None,
    *,
    isolate: bool = False,
    include: Callable[[str], bool] | None = None,
) -> BatchPlan:
    """Check a batch against the lake without writing anything: one small aggregate over the events, then
    each table's key and columns, and the policies (``resolver.policy``) for unknown tables, unknown
    columns and unsafe type changes. Raises ``ConfigError`` (one line) for a key that contradicts the
    lake's or an event a ``fail`` policy refuses. ``schemas`` None means no schemas folder (no table is
    unknown). ``settings`` gives each table's ``resolver.pipeline.TableSettings`` (outputs, key override,
    tracked columns, clustering). When a ``quarantine`` policy takes events out, the plan is made again
    without them. With ``isolate``, a table refused in planning does not refuse the batch: it is left out
    of it and named in ``failed``. Tables ``include`` says no to get no silver tables (their events still
    go to bronze).

    Example::

        from resolver import plan_changes, read_wal2json
        batch = read_wal2json(spark, ["landing/0001.json"], "wal2json-v2")
        plan = plan_changes(spark, batch.events, "lake")   # raises ConfigError if the lake cannot take it
        for table, layout in sorted(plan.layouts.items()):
            print(table, layout.key if layout else "(columns not known yet)")
    """
    policies = policies or Policies()
    failed: dict[str, str] | None = {} if isolate else None

    def metadata(events: DataFrame) -> dict[str, dict[str, Any]]:
        meta = _batch_metadata(events)  # per table: leaving a table out changes no other table's
        return {t: m for t, m in meta.items() if include is None or include(t)}

    meta = metadata(events)
    reasons = _unknown(meta, schemas, policies, failed)
    layouts = _layouts(spark, lake, meta, schemas or {}, policies, settings, failed)
    reasons += _unsafe(layouts, schemas or {})
    if not reasons and not failed:
        return BatchPlan(meta, layouts)
    if failed:  # their events are left out of this batch altogether (nothing written for those tables)
        events = events.filter(~F.col("table").isin(sorted(failed)))
    if not reasons:
        meta = metadata(events)
        layouts = _layouts(spark, lake, meta, schemas or {}, policies, settings, None)
        return BatchPlan(meta, layouts, events, None, failed or {})
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
    layouts = _layouts(spark, lake, meta, schemas or {}, policies, settings, None)
    return BatchPlan(meta, layouts, accepted, rejected, failed or {})


def _layouts(
    spark: SparkSession,
    lake: str,
    meta: dict[str, dict[str, Any]],
    schemas: Mapping[str, TableSchema],
    policies: Policies,
    settings: Callable[[str], TableSettings] | None,
    failed: dict[str, str] | None,
) -> dict[str, TableLayout | None]:
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
        options = settings(table) if settings else TableSettings()
        if options.key:  # the pipeline's key wins over the schema file's and the stream's
            schema = (schema or TableSchema(table=table)).model_copy(update={"primary_key": options.key})
        policy = (schema.unsafe_type_change if schema else None) or policies.unsafe_type_change
        out = _layout(spark, lake, table, {**meta[table], "table": table}, schema, policy)
        if out is None:
            return None
        missing = [c for c in options.track_history or [] if c not in out.names]
        if missing:
            raise ConfigError(
                f"table {table}: track_history column(s) {missing} not found; columns are {out.names}"
            )
        return replace(
            out,
            snapshot=options.snapshot,
            history=options.history,
            track=tuple(options.track_history or ()),
            cluster=bool(options.cluster_by_key),
        )

    tables = [t for t in sorted(meta) if not failed or t not in failed]
    with ThreadPoolExecutor(max_workers=max(1, min(_PARALLEL_TABLES, len(tables)))) as pool:
        return dict(zip(tables, pool.map(layout_or_failure, tables), strict=True))


def _where(meta: dict[str, Any], column: str | None = None) -> str:
    """Where a table's (or one of its columns') first event of the batch is, for error messages."""
    first = min(meta["types"].get(column, []), key=lambda e: (e[1] is None, e[1] or 0), default=None)
    if column is None or first is None:
        first = meta["first_event"]
        return f"commit LSN {_lsn(first['commit_lsn'])} ({first['source_file']}:{first['source_line']})"
    return f"commit LSN {_lsn(first[1])} ({first[2]}:{first[3]})"


def _event_text(table: str) -> Column:
    """'<table> <operation> at commit LSN X/Y, change N of its transaction' for a quarantine reason."""
    lsn = F.col("commit_lsn")
    hexed = F.concat(
        F.hex(F.shiftrightunsigned(lsn, 32)), F.lit("/"), F.hex(lsn.bitwiseAND(F.lit(0xFFFFFFFF)))
    )
    return F.concat(
        F.lit(f"{table} "),
        F.col("operation"),
        F.lit(" at commit LSN "),
        F.coalesce(hexed, F.lit("unknown")),
        F.lit(", change "),
        F.col("position").cast("string"),
        F.lit(" of its transaction"),
    )


def _carries(names: list[str]) -> Column:
    """The event carries one of these columns (new values or old key)."""
    wanted = F.array(*[F.lit(n) for n in names])
    return F.arrays_overlap(F.coalesce("column_names", F.array().cast("array<string>")), wanted) | (
        F.arrays_overlap(F.coalesce("old_key_names", F.array().cast("array<string>")), wanted)
    )


def _unknown(
    meta: dict[str, dict[str, Any]],
    schemas: Mapping[str, TableSchema] | None,
    policies: Policies,
    failed: dict[str, str] | None,
) -> list[Column]:
    """Quarantine reasons (Spark expressions, NULL for an event they do not catch) for unknown tables and
    columns; raises ``ConfigError`` for one a ``fail`` policy refuses (or, given ``failed``, records it
    there)."""
    if schemas is None:
        return []
    reasons: list[Column] = []
    for table in sorted(meta):
        try:
            reasons += _unknown_in(table, meta[table], schemas.get(table), policies)
        except ConfigError as e:
            if failed is None:
                raise
            failed[table] = str(e)
    return reasons


def _unknown_in(
    table: str, meta: dict[str, Any], schema: TableSchema | None, policies: Policies
) -> list[Column]:
    """The quarantine reasons of one table (see ``_unknown``)."""
    if schema is None:
        if policies.unknown_table == Policy.FAIL:
            raise ConfigError(
                f"table {table} has no schema file: found {meta['events'] + meta['skipped']} event(s), the "
                f"first at {_where(meta)}, expected {table}.yaml in the schemas folder "
                "(unknown_table is 'fail'; nothing was written)"
            )
        if policies.unknown_table == Policy.QUARANTINE:
            why = f": table {table} has no schema file (unknown_table: quarantine)"
            return [F.when(F.col("table") == table, F.concat(_event_text(table), F.lit(why)))]
        return []
    known = schema.known_columns()
    policy = schema.unknown_columns or policies.unknown_columns
    if known is None or policy == Policy.EVOLVE:
        return []
    unknown = [c for c in sorted(set(meta["columns"]) | set(meta["old_keys"])) if c not in known]
    if unknown and policy == Policy.FAIL:
        raise ConfigError(
            f"table {table}: column {unknown[0]} is not in {table}.yaml, first at "
            f"{_where(meta, unknown[0])}; expected one of {', '.join(sorted(known))} (add it to the file's "
            "columns, or a renamed_from; unknown_columns is 'fail'; nothing was written)"
        )
    return [
        F.when(
            (F.col("table") == table) & _carries([column]),
            F.concat(
                _event_text(table),
                F.lit(f": column {column} is not in {table}.yaml (unknown_columns: quarantine)"),
            ),
        )
        for column in unknown
    ]


def _typed_columns() -> Column:
    """Each column an event carries as 'name\u0001PostgreSQL type' (new values and old key)."""
    empty = F.array().cast("array<string>")
    names = F.concat(F.coalesce("column_names", empty), F.coalesce("old_key_names", empty))
    types = F.concat(F.coalesce("column_types", empty), F.coalesce("old_key_types", empty))
    return F.zip_with(names, types, lambda n, t: F.concat(n, F.lit("\u0001"), F.coalesce(t, F.lit(""))))


def _unsafe(layouts: dict[str, TableLayout | None], schemas: Mapping[str, TableSchema]) -> list[Column]:
    """Quarantine reasons for the events carrying a type their lake column cannot widen to."""
    reasons: list[Column] = []
    for table, layout in sorted(layouts.items()):
        for column, pg_type, lake_type in layout.rejected if layout else ():
            hit = F.array_contains(_typed_columns(), F.lit(column + "\u0001" + (pg_type or "")))
            reasons.append(
                F.when(
                    (F.col("table") == table) & hit,
                    F.concat(
                        _event_text(table),
                        F.lit(
                            f": column {column} has type {pg_type}, which its lake column ({lake_type}) "
                            "cannot be widened to (unsafe_type_change: quarantine)"
                        ),
                    ),
                )
            )
    return reasons


_SCHEMA_LOG_LOCK = threading.Lock()


def _write_schema_log(spark: SparkSession, lake: str, rows: list[dict[str, Any]]) -> None:
    """Append schema changes to ``_resolver/schema_log`` (before the tables change: a rerun after a crash
    finds the same rows and adds nothing). Table threads take turns."""
    if not rows:
        return
    now = datetime.now(UTC).replace(tzinfo=None)
    data = [tuple({**r, "logged_at": now}.get(f.name) for f in SCHEMA_LOG_SCHEMA.fields) for r in rows]
    target = delta.ensure_table(
        spark, schema_log_path(lake), SCHEMA_LOG_SCHEMA, {"delta.appendOnly": "true"}, "schema changes"
    )
    keys = ("table", "version", "change", "column")
    condition = " AND ".join(f"t.{sql.ident(k)} = s.{sql.ident(k)}" for k in keys)
    with _SCHEMA_LOG_LOCK:
        delta.insert_new(target, spark.createDataFrame(data, SCHEMA_LOG_SCHEMA), condition)


def _batch_metadata(events: DataFrame) -> dict[str, dict[str, Any]]:
    """One small aggregate over the batch: per table, its columns and types, the keys the stream reports,
    the commit-LSN range and counts."""
    op = F.col("operation")
    rows = (
        events.groupBy("table")
        .agg(
            F.count(F.when(F.col("commit_lsn").isNotNull(), 1)).alias("events"),
            F.count(F.when(F.col("commit_lsn").isNull(), 1)).alias("skipped"),
            F.count(F.when(op == "truncate", 1)).alias("truncates"),
            F.min("commit_lsn").alias("lo"),
            F.max("commit_lsn").alias("hi"),
            F.max(F.when(op == "insert", F.struct("commit_lsn", "position"))).alias("last_insert"),
            F.min(F.struct("commit_lsn", "position", "source_file", "source_line")).alias("first_event"),
            F.collect_set(F.arrays_zip("column_names", "column_types")).alias("columns"),
            F.collect_set(F.arrays_zip("old_key_names", "old_key_types")).alias("old_keys"),
            F.collect_set(F.when(op.isin("update", "delete"), F.col("old_key_names"))).alias("identities"),
            F.collect_set("primary_key").alias("pks"),
        )
        .collect()
    )  # one row per table
    names = F.concat(F.coalesce("column_names", F.array()), F.coalesce("old_key_names", F.array()))
    types = F.concat(F.coalesce("column_types", F.array()), F.coalesce("old_key_types", F.array()))
    where = ["table", "commit_lsn", "position", "source_file", "source_line"]
    typed = (
        events.select(*where, names.alias("n"), types.alias("t"))
        .select(*where, F.explode(F.arrays_zip("n", "t")).alias("c"))
        .filter(F.col("c.t").isNotNull())  # no types in the stream (include-types=0): nothing to compare
        .groupBy("table", F.col("c.n").alias("name"), F.col("c.t").alias("type"))
        .agg(
            F.min(F.struct("commit_lsn", "position", "source_file", "source_line")).alias("first"),
            F.max(F.struct("commit_lsn", "position")).alias("last"),
        )
        .collect()
    )  # one row per table, column and type
    seen: dict[str, dict[str, list[tuple[str | None, int | None, str, int]]]] = {}
    first_at: dict[str, dict[str, tuple[int, int]]] = {}
    last: dict[str, dict[str, tuple[int, int]]] = {}
    for r in sorted(typed, key=lambda r: (r["first"]["commit_lsn"] is None, r["first"]["commit_lsn"] or 0)):
        first = r["first"]
        entry = (r["type"], first["commit_lsn"], first["source_file"], first["source_line"])
        seen.setdefault(r["table"], {}).setdefault(r["name"], []).append(entry)
        if first["commit_lsn"] is not None:  # (commit LSN, position) of the first and last event carrying it
            at = (first["commit_lsn"], first["position"])
            mine = first_at.setdefault(r["table"], {})
            mine[r["name"]] = min(mine.get(r["name"], at), at)
            end = (r["last"]["commit_lsn"], r["last"]["position"])
            mine = last.setdefault(r["table"], {})
            mine[r["name"]] = max(mine.get(r["name"], end), end)
    inserts = (
        events.filter((op == "insert") & F.col("commit_lsn").isNotNull())
        .groupBy("table", F.array_sort("column_names").alias("cols"))
        .agg(
            F.min(F.struct("commit_lsn", "position", F.unix_micros("commit_time").alias("t"))).alias("first")
        )
        .collect()
    )  # one row per table and column set of its inserts (a handful: one per schema the batch spans)
    insert_sets: dict[str, list[tuple[frozenset[str], tuple[int, int, int]]]] = {}
    for r in inserts:
        point = (r["first"]["commit_lsn"], r["first"]["position"], r["first"]["t"])
        insert_sets.setdefault(r["table"], []).append((frozenset(r["cols"] or []), point))
    out = {}
    for r in rows:
        columns: dict[str, str | None] = {}
        for zipped in r["columns"]:
            for pair in zipped or []:
                columns.setdefault(pair[0], pair[1])
        old_keys: dict[str, str | None] = {}
        for zipped in r["old_keys"]:
            for pair in zipped or []:
                old_keys.setdefault(pair[0], pair[1])
        out[r["table"]] = {
            "events": r["events"],
            "skipped": r["skipped"],
            "truncates": r["truncates"],
            "lo": r["lo"],
            "hi": r["hi"],
            "columns": columns,
            "old_keys": old_keys,
            "identities": [list(x) for x in r["identities"] if x],
            "pks": [list(x) for x in r["pks"] if x],
            "types": seen.get(r["table"], {}),
            "first": first_at.get(r["table"], {}),
            "insert_sets": insert_sets.get(r["table"], []),
            "last": last.get(r["table"], {}),
            "last_insert": tuple(r["last_insert"]) if r["last_insert"] is not None else None,
            "first_event": r["first_event"].asDict(),
        }
    return out


def _layout(
    spark: SparkSession,
    lake: str,
    table: str,
    meta: dict[str, Any],
    schema: TableSchema | None,
    policy: Policy = Policy.FAIL,
) -> TableLayout | None:
    """The table's columns and key: the lake's (if it has the table) evolved by the batch and the schema
    file; None when nothing tells the columns yet. Fails with one line when the batch reports a key that
    contradicts the lake's."""
    pinned = {c.name: c for c in (schema.columns if schema else [])}
    renamed = schema.rename_map() if schema else {}
    existing: list[Column_] = []
    props: dict[str, str] = {}
    path = changes_path(lake, table)
    if DeltaTable.isDeltaTable(spark, path):
        target = DeltaTable.forPath(spark, path)
        detail = target.detail().select("properties").first()
        props = dict(detail[0] or {}) if detail else {}
        existing = [
            Column_(
                f.name,
                f.dataType.simpleString(),
                tuple(pinned[f.name].renamed_from) if f.name in pinned else (),
            )
            for f in target.toDF().schema.fields
            if not f.name.startswith("__")
        ]
    # a lake column the schema file now says was renamed takes its new name (values kept; see _rename)
    renames: list[tuple[str, str]] = []
    for i, c in enumerate(existing):
        new_name = renamed.get(c.name)
        if new_name and new_name not in {e.name for e in existing}:
            spec = pinned[new_name]
            existing[i] = Column_(new_name, c.type, tuple(spec.renamed_from))
            renames.append((c.name, new_name))
    columns = {c.name: c for c in existing}
    changes: list[TypeChange] = []
    rejected: list[tuple[str, str | None, str]] = []
    stream = dict(meta["old_keys"])
    stream.update(meta["columns"])
    for name in stream:
        lake_name = renamed.get(name) or name
        pin = pinned.get(lake_name)
        if pin and pin.type:  # pinned: values are cast to it, whatever the stream says
            if lake_name not in columns:
                columns[lake_name] = Column_(lake_name, pin.type, tuple(pin.renamed_from))
            continue
        incoming = [(spark_type(t), t, lsn, file, line) for t, lsn, file, line in meta["types"].get(name, [])]
        if not incoming:  # the stream sends no types (include-types=0): the lake's, else text
            incoming = [(columns[lake_name].type if lake_name in columns else "string", None, None, "?", 0)]
        if lake_name in columns:
            have, pg_was = columns[lake_name].type, None
        else:
            have, pg_was, incoming = incoming[0][0], incoming[0][1], incoming[1:]
        typ, found, refused = evolve_type(table, lake_name, have, pg_was, incoming, policy)
        changes += found
        rejected += [(name, pg_t, typ) for _, pg_t in refused]
        columns[lake_name] = Column_(lake_name, typ, tuple(pin.renamed_from) if pin else ())
    for name, spec in pinned.items():  # pinned columns the batch did not carry
        if name not in columns and spec.type:
            columns[name] = Column_(name, spec.type, tuple(spec.renamed_from))
    cols = tuple(columns.values())
    names = [c.name for c in cols]
    if not names and not props:
        return None  # nothing tells the table's columns yet (a first batch holding only a truncate)
    reported = _reported_key(meta, schema, renamed, names)
    if not props:
        key, source = reported or (tuple(names), "all_columns")
    else:
        # a key column renamed through a hint keeps being the key (also if a crash left the property behind)
        lake_key = tuple(k if k in names else renamed.get(k, k) for k in json.loads(props[KEY_PROPERTY]))
        key, source = _evolve_key(table, lake_key, props, reported, names)
    missing = [k for k in key if k not in names]
    if missing:
        raise ConfigError(f"table {table}: key column(s) {missing} not found; columns are {names}")
    notes = [
        f"column {c.column} widened from {c.old_type} to {c.new_type} at commit LSN {_lsn(c.lsn)}"
        for c in changes
    ]
    notes += [f"column {old} renamed to {new} (renamed_from hint)" for old, new in renames]
    notes += _likely_renames(table, meta, existing, columns, renamed)
    for note in notes[len(changes) + len(renames) :]:
        log.warning("table %s: %s", table, note)
    was = {"key": props.get(KEY_PROPERTY, ""), "source": props.get(KEY_SOURCE_PROPERTY, "")}
    version = int(props.get(SCHEMA_VERSION_PROPERTY, "0"))
    entries = _schema_log_entries(table, meta, {c.name for c in existing}, cols, changes, renames, renamed)
    drops, new_drops, rescan = _drops(json.loads(props.get(DROPS_PROPERTY, "{}")), meta, names, key, renamed)
    entries += [
        {"table": table, "change": "dropped", "column": c, "lsn": point[0]}
        for c, points in sorted(new_drops.items())
        for point in points
    ]
    if entries:
        version += 1
        entries = [{**e, "version": version} for e in entries]
    return TableLayout(
        table,
        cols,
        key,
        source,
        extra={
            **was,
            "version": str(version),
            "applied": props.get(APPLIED_PROPERTY, ""),
            "holds": props.get(HOLDS_PROPERTY, ""),
            "drops_was": json.dumps(json.loads(props.get(DROPS_PROPERTY, "{}")), sort_keys=True)
            if props.get(DROPS_PROPERTY)
            else "",
        },
        changes=tuple(changes),
        renames=tuple(renames),
        notes=tuple(notes),
        schema_log=tuple(entries),
        drops={c: tuple(tuple(p) for p in d["points"]) for c, d in drops.items() if d["points"]},
        drop_state=drops,
        rescan=rescan,
        rejected=tuple(rejected),
    )


def _drops(
    known: dict[str, dict[str, Any]],
    meta: dict[str, Any],
    names: list[str],
    key: tuple[str, ...],
    renamed: dict[str, str],
) -> tuple[dict[str, dict[str, Any]], dict[str, list[tuple[int, ...]]], dict[str, tuple[Any, Any]]]:
    """Where columns stopped existing. An insert carries every column its table has, so an insert without a
    column that was sent before it is a point where the column did not exist (it was dropped); a value
    carried before such a point is not carried past it (``resolve_versions``).

    Per column the lake keeps the first event that carried it, its drop points, and the last event that
    carried it after a drop (a column added back). Returns that state, the points this batch's inserts add,
    and the columns whose first event moved earlier (new columns, late batches) with the range of the
    change store to search for inserts without them (``_rescan_drops``). A point adds nothing when an
    earlier one covers it (the column was not sent in between), so the list stays short."""
    out = {
        c: {"first": d.get("first"), "points": [tuple(p) for p in d["points"]], "carried": d.get("carried")}
        for c, d in known.items()
    }
    first: dict[str, tuple[int, int]] = {}
    last: dict[str, tuple[int, int]] = {}
    for name, at in meta["first"].items():
        lake_name = renamed.get(name, name)
        first[lake_name] = min(first.get(lake_name, at), at)
        end = meta["last"][name]
        last[lake_name] = max(last.get(lake_name, end), end)
    rescan: dict[str, tuple[Any, Any]] = {}
    for c in names:
        if c in key or c not in first:
            continue
        d = out.setdefault(c, {"first": None, "points": [], "carried": None})
        was = tuple(d["first"]) if d["first"] else None
        if was is None or first[c] < was:
            rescan[c] = (first[c], was)
            d["first"] = first[c]
        if d["points"] and (d["carried"] is None or tuple(d["carried"]) < last[c]):
            d["carried"] = last[c]  # sent again after a drop (added back)
    added: dict[str, list[tuple[int, ...]]] = {}
    for cols, point in sorted(meta["insert_sets"], key=lambda s: s[1]):
        carried = {renamed.get(n, n) for n in cols}
        for c in names:
            state = out.get(c)
            if c in carried or c in rescan or not state or not state["first"]:
                continue
            if tuple(state["first"]) < point[:2] and add_point(state, point):
                added.setdefault(c, []).append(point)
    return out, added, rescan


def add_point(state: dict[str, Any], point: tuple[int, ...]) -> bool:
    """Add a drop point to a column's state unless an earlier point covers it."""
    carried = tuple(state["carried"]) if state["carried"] else None
    if any(q <= point and (carried is None or carried < q[:2]) for q in state["points"]):
        return False
    state["points"] = sorted([*state["points"], tuple(point)])
    return True


def _schema_log_entries(
    table: str,
    meta: dict[str, Any],
    known: set[str],
    cols: tuple[Column_, ...],
    changes: list[TypeChange],
    renames: list[tuple[str, str]],
    renamed: dict[str, str],
) -> list[dict[str, Any]]:
    """Rows of ``_resolver/schema_log`` for what this batch changes in the table's schema."""
    first: dict[str, tuple[int, int]] = {}
    for name, at in meta["first"].items():  # a lake column's first event, under any of its names
        lake_name = renamed.get(name, name)
        first[lake_name] = min(first.get(lake_name, at), at)
    pg_types = {renamed.get(n, n): e[-1][0] for n, e in meta["types"].items() if e}
    entries = []
    for c in cols:
        if c.name not in known:
            at = first.get(c.name)
            entries.append(
                {"change": "added", "column": c.name, "new_type": c.type, "pg_type": pg_types.get(c.name),
                 "lsn": at[0] if at else None}
            )  # fmt: skip
    for ch in changes:
        if ch.column in known:
            entries.append(
                {"change": "widened", "column": ch.column, "old_type": ch.old_type, "new_type": ch.new_type,
                 "pg_type": ch.pg_type, "lsn": ch.lsn}
            )  # fmt: skip
    for old, new in renames:
        at = first.get(new)
        entries.append({"change": "renamed", "column": new, "old_name": old, "lsn": at[0] if at else None})
    return [{"table": table, **e} for e in entries]


def _lsn(lsn: int | None) -> str:
    return "unknown" if lsn is None else format_lsn(lsn)


def _likely_renames(
    table: str,
    meta: dict[str, Any],
    lake: list[Column_],
    columns: dict[str, Column_],
    renamed: dict[str, str],
) -> list[str]:
    """Warnings for columns that look renamed without a hint: a column new to the lake appears while a
    column of the same type is no longer sent (the batch's last event carrying it is older, or the batch
    inserts rows without it), and no ``renamed_from`` hint links them."""
    known = {c.name for c in lake}
    first = meta["first"]
    out = []
    for name, at in first.items():
        if name in known or name in renamed or any(name in c.renamed_from for c in columns.values()):
            continue
        typ = columns[renamed.get(name, name)].type
        for old in columns.values():
            if old.name == name or old.type != typ:
                continue
            gone = meta["last"].get(old.name)
            stopped = gone < at if gone is not None else (meta["last_insert"] or (-1, -1)) >= at
            if stopped:
                out.append(
                    f"column {name} ({typ}) first appears at commit LSN {format_lsn(at[0])} and {old.name} "
                    f"({typ}) is no longer sent: if it was renamed, add to {table}.yaml (columns: - name: "
                    f"{name}, renamed_from: [{old.name}]) before the next batch; until then they are two "
                    "columns"
                )
    return out


def _reported_key(
    meta: dict[str, Any], schema: TableSchema | None, renamed: dict[str, str], names: list[str]
) -> tuple[tuple[str, ...], str] | None:
    """The key the schema file or the batch gives, and where it came from (``KEY_SOURCES``).

    Without a primary key, the replica identity of the batch's updates and deletes is the key, unless it is
    REPLICA IDENTITY FULL (the whole old row; key = every column). Format 1 leaves NULL old values out of
    a FULL identity, so FULL shows as identities that differ between events or that hold every column; an
    index identity (USING INDEX) is the same NOT NULL columns in every event."""
    if schema and schema.primary_key:
        return tuple(schema.primary_key), "schema_file"
    if meta["pks"]:
        pks = sorted({tuple(renamed.get(k, k) for k in pk) for pk in meta["pks"]})
        if len(pks) > 1:
            raise ConfigError(
                f"table {meta['table']}: the batch reports different primary keys "
                f"{', '.join(str(list(p)) for p in pks)}; if a key column was renamed, add renamed_from "
                f"hints to {meta['table']}.yaml (columns: - name: <new name>, renamed_from: [<old name>])"
            )
        return pks[0], "primary_key"
    idents = {tuple(sorted(renamed.get(k, k) for k in ident)) for ident in meta["identities"]}
    if not idents:
        return None
    if len(idents) > 1 or any(set(i) >= set(names) and len(i) > 1 for i in idents):
        return tuple(names), "identity_full"
    ident = set(next(iter(idents)))
    return tuple(n for n in names if n in ident), "identity"


def _evolve_key(
    table: str,
    key: tuple[str, ...],
    props: dict[str, str],
    reported: tuple[tuple[str, ...], str] | None,
    names: list[str],
) -> tuple[tuple[str, ...], str]:
    """The table's key after this batch, given the lake's key and what the batch reports. Evidence only
    accumulates (no key -> index identity -> FULL identity), so the result does not depend on the order in
    which batches arrive; a key change that evidence cannot explain fails with one line."""
    source = props.get(KEY_SOURCE_PROPERTY, "primary_key")
    if reported is None or source == "schema_file":
        return key, source
    new_key, new_source = reported
    if new_source == "schema_file":
        return new_key, new_source  # pinned by the user (a different key re-keys the lake)
    if new_source == "primary_key":
        if source in ("primary_key", "identity") and new_key == key:
            return key, "primary_key"
        if source in ("all_columns", "identity_full"):
            raise ConfigError(
                f"table {table}: the stream now reports primary key {list(new_key)} but the lake was created "
                f"without one (every column is its key); pin primary_key in {table}.yaml"
            )
        raise ConfigError(
            f"table {table}: the stream reports key {list(new_key)} but the lake was created with "
            f"key {list(key)}; pin primary_key in {table}.yaml"
        )
    if source == "primary_key":
        return key, source  # an identity (FULL, or format 1 without include-pk) never overrides the key
    if source == "identity_full":
        return key, source
    if new_source == "identity_full":
        return (key if source == "all_columns" else tuple(names)), "identity_full"
    if source == "identity" and new_key != key:
        return tuple(names), "identity_full"  # an index identity never changes: it was FULL all along
    return new_key, "identity"


def _tables(
    spark: SparkSession, lake: str, layout: TableLayout
) -> tuple[DeltaTable, DeltaTable | None, DeltaTable | None]:
    """The change store, history and snapshot of the table, created or widened to the layout's columns
    (None for a silver table the table's settings do not keep)."""
    source = T.StructType([T.StructField(c.name, T._parse_datatype_string(c.type)) for c in layout.columns])  # noqa: SLF001
    key_t = layout.key_struct_type()
    props = {
        KEY_PROPERTY: json.dumps(list(layout.key)),
        KEY_SOURCE_PROPERTY: layout.key_source,
        SCHEMA_VERSION_PROPERTY: layout.extra.get("version", "0"),
        TABLE_PROPERTY: layout.table,
        **delta.properties_for_names(c.name for c in layout.columns),
    }
    store_schema = T.StructType(
        [
            T.StructField("__lsn", T.LongType()),
            T.StructField("__pos", T.IntegerType()),
            T.StructField("__op", T.StringType()),
            T.StructField("__time", T.TimestampType()),
            T.StructField("__xid", T.LongType()),
            T.StructField("__key", key_t),
            T.StructField("__old_key", key_t),
            T.StructField("__present", T.ArrayType(T.StringType())),
            *source.fields,
            T.StructField("__bad", T.ArrayType(T.StringType())),
            T.StructField("__file", T.StringType()),
            T.StructField("__line", T.LongType()),
        ]
    )
    tech_h = [T.StructField(n, T._parse_datatype_string(t)) for n, t in _TECH_HISTORY]  # noqa: SLF001
    history_schema = T.StructType(
        [*source.fields, *tech_h, T.StructField("__moved_from", key_t), T.StructField("__moved_to", key_t)]
    )
    snapshot_schema = T.StructType(
        [*source.fields, *[T.StructField(n, T._parse_datatype_string(t)) for n, t in _TECH_SNAPSHOT]]  # noqa: SLF001
    )
    out: list[DeltaTable | None] = []
    cluster = layout.key if layout.cluster else ()
    for path, schema, extra, comment, keep, by in (
        (
            changes_path(lake, layout.table),
            store_schema,
            {"delta.appendOnly": "true"},
            "typed change events",
            True,
            (),
        ),
        (
            history_path(lake, layout.table),
            history_schema,
            SILVER_PROPERTIES,
            "history (SCD2)",
            layout.history,
            cluster,
        ),
        (
            snapshot_path(lake, layout.table),
            snapshot_schema,
            SILVER_PROPERTIES,
            "snapshot (SCD1)",
            layout.snapshot,
            cluster,
        ),
    ):
        if not keep:
            out.append(None)
            continue
        table = delta.ensure_table(spark, path, schema, {**extra, **props}, f"{layout.table}: {comment}", by)
        if _rename(spark, path, {f.name for f in table.toDF().schema.fields}, layout):
            table = DeltaTable.forPath(spark, path)
        have = {f.name: f.dataType for f in table.toDF().schema.fields}
        new = [f for f in source.fields if f.name not in have]
        changed = [f for f in source.fields if f.name not in have or have[f.name] != f.dataType]
        if any(isinstance(f.dataType, T.TimestampNTZType) for f in changed):
            _set_properties(spark, path, {"delta.feature.timestampNtz": "supported"})
        if new and delta.properties_for_names(f.name for f in new):
            _set_properties(spark, path, delta.properties_for_names(f.name for f in new))
        if new:
            spec = ", ".join(f"{sql.ident(f.name)} {f.dataType.simpleString()}" for f in new)
            spark.sql(f"ALTER TABLE {sql.delta_path(path)} ADD COLUMNS ({spec})")
        widened = _widen(spark, path, have, source, layout)
        if new or widened:
            table = DeltaTable.forPath(spark, path)
        out.append(table)
    assert out[0] is not None
    return out[0], out[1], out[2]


def _rename(spark: SparkSession, path: str, have: set[str], layout: TableLayout) -> bool:
    """Give the table's columns (and the key structs' fields) the names the schema file's ``renamed_from``
    hints give them. Delta column mapping makes a rename a metadata change: no file is rewritten, and
    every value written under the old name reads under the new one. Returns whether anything changed."""
    todo = [(old, new) for old, new in layout.renames if old in have and new not in have]
    if not todo:
        return False
    _set_properties(spark, path, delta.COLUMN_MAPPING)
    for old, new in todo:
        log.warning("%s: renaming column %s to %s (renamed_from in its schema file)", path, old, new)
        spark.sql(f"ALTER TABLE {sql.delta_path(path)} RENAME COLUMN {sql.ident(old)} TO {sql.ident(new)}")
        if new in layout.key:
            for struct in ("__key", "__old_key", "__moved_from", "__moved_to"):
                if struct in have:
                    spark.sql(
                        f"ALTER TABLE {sql.delta_path(path)} RENAME COLUMN "
                        f"{sql.ident(struct)}.{sql.ident(old)} TO {sql.ident(new)}"
                    )
    return True


def _widen(
    spark: SparkSession, path: str, have: dict[str, T.DataType], source: T.StructType, layout: TableLayout
) -> bool:
    """Widen the table's columns (and the key structs' fields) whose type the layout widened, in place
    (Delta type widening: metadata only, no file is rewritten). Returns whether anything changed."""
    alters = []
    for f in source.fields:
        if f.name in have and have[f.name] != f.dataType:
            alters.append((sql.ident(f.name), f.dataType))
            if f.name in layout.key:
                alters += [
                    (f"{sql.ident(s)}.{sql.ident(f.name)}", f.dataType)
                    for s in ("__key", "__old_key", "__moved_from", "__moved_to")
                    if s in have
                ]
    if not alters:
        return False
    _set_properties(spark, path, {"delta.enableTypeWidening": "true"})
    for column, typ in alters:
        log.info("%s: widening %s to %s", path, column, typ.simpleString())
        spark.sql(f"ALTER TABLE {sql.delta_path(path)} ALTER COLUMN {column} TYPE {typ.simpleString()}")
    return True


@contextmanager
def _step(table: str, name: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    log.debug("%s: %s took %.2f s", table, name, time.perf_counter() - start)


def _is_move() -> Column:
    """A change row that changes its row's key."""
    return (F.col("__op") == "update") & ~F.col("__old_key").eqNullSafe(F.col("__key"))


def _key_hash(col: Column) -> Column:
    return F.when(col.isNotNull(), F.xxhash64(col))


def _apply_table(
    spark: SparkSession, events: DataFrame, lake: str, meta: dict[str, Any], layout: TableLayout | None
) -> tuple[TableSummary, DataFrame | None]:
    """Bring one table's silver tables up to date; also returns its quarantine records, if any."""
    name = meta["table"]
    if layout is None:
        _defer_truncates(spark, events, lake, name)
        return _empty_summary(name, meta, None), None
    with _step(name, "tables"):
        store, history, snapshot = _tables(spark, lake, layout)
        rekeyed = _rekey(spark, lake, layout, store, history, snapshot)
        if rekeyed:  # the tables' schemas changed under these handles
            store = DeltaTable.forPath(spark, changes_path(lake, name))
            history = DeltaTable.forPath(spark, history_path(lake, name)) if history is not None else None
            snapshot = DeltaTable.forPath(spark, snapshot_path(lake, name)) if snapshot is not None else None
    with _step(name, "explode"):
        rows = explode_events(events, layout).localCheckpoint(eager=True)
    seq = ["__lsn", "__pos"]
    store_cols = store.toDF().columns
    batch = rows.dropDuplicates(seq).select(*[sql.col(c) for c in store_cols])
    adopted = False
    if not layout.extra["key"]:  # a new table: truncates that came before its first rows
        pending = _pending_truncates(spark, lake, name, store.toDF().schema)
        if pending is not None:
            batch, adopted = batch.unionByName(pending), True
    condition = "t.__lsn = s.__lsn AND t.__pos = s.__pos"
    if meta["lo"] is not None:
        condition = f"t.__lsn BETWEEN {int(meta['lo'])} AND {int(meta['hi'])} AND " + condition
    with _step(name, "store merge"):
        inserted, store_version = delta.insert_new(store, batch, condition)
    applied = layout.extra.get("applied", "")
    # the marker's key-change and truncate flags still describe the store before this batch's rows
    flags_hold = applied.isdigit() and int(applied) + 1 == store_version - (1 if inserted else 0)
    if (
        applied.isdigit()
        and int(applied) + 1 == store_version  # nothing was committed to the store since the marker
        and not (rekeyed or adopted or layout.rescan or layout.schema_log)
    ):  # every event of the batch is in the store, and the silver tables hold all the store has
        return _already_applied(rows, layout, meta, store_version)

    all_changes = store.toDF()
    found = _rescan_drops(all_changes, layout) if layout.rescan else {}
    if found:  # drops of columns new to the lake (or sent earlier than it knew) found among held inserts
        layout = replace(
            layout,
            drops={
                c: tuple(tuple(p) for p in d["points"]) for c, d in layout.drop_state.items() if d["points"]
            },
        )
        version = int(layout.extra["version"]) + (0 if layout.schema_log else 1)
        more = [
            {"table": name, "change": "dropped", "column": c, "lsn": p[0], "version": version}
            for c, points in sorted(found.items())
            for p in points
        ]
        _write_schema_log(spark, lake, [*layout.schema_log, *more])
        layout = replace(
            layout, schema_log=(*layout.schema_log, *more), extra={**layout.extra, "version": str(version)}
        )
    # affected keys: touched by the batch, closed under key changes
    touched = (
        rows.select(_key_hash(F.col("__key")).alias("node"))
        .union(rows.select(_key_hash(F.col("__old_key")).alias("node")))
        .filter(F.col("node").isNotNull())
        .distinct()
    )
    rounds = 0
    with _step(name, "affected keys"):
        moves = all_changes.filter(_is_move()).select(
            "__lsn", "__pos", _key_hash(F.col("__old_key")).alias("u"), _key_hash(F.col("__key")).alias("v")
        )
        moves = moves.filter(F.col("u").isNotNull() & F.col("v").isNotNull())
        holds = json.loads(layout.extra.get("holds") or "{}")
        if flags_hold and not found and {"moves", "truncates"} <= holds.keys():  # the flags and the batch
            has_moves = bool(holds["moves"]) or not rows.filter(_is_move()).isEmpty()
            has_truncates = bool(holds["truncates"] or meta["truncates"] or adopted)
        else:
            held = all_changes.agg(  # one pass: does the store hold a key change, a truncate?
                F.count(F.when(_is_move(), 1)).alias("moves"),
                F.count(F.when(F.col("__op") == "truncate", 1)).alias("truncates"),
            ).first()
            has_moves = bool(held and held["moves"])
            has_truncates = bool(held and held["truncates"])
        dropped = any(e["change"] == "dropped" for e in layout.schema_log)  # rows held then lose the column
        ranges: list[KeyRange] = []  # the affected keys' range, as literals Delta skips files with
        if meta["truncates"] or rekeyed or adopted or dropped:
            affected = None  # a truncate touches every key; a new key changes every key
        elif not has_moves:  # the affected keys are the batch's own
            affected = touched.localCheckpoint(eager=True)
            ranges = _key_ranges(_keys_of(rows, layout.key), layout.key)
        else:
            comps, rounds = linked_keys(moves)
            hit = comps.join(touched, "node", "left_semi").select("comp").distinct()
            linked = comps.join(hit, "comp", "left_semi").select("node")
            affected = touched.union(linked).distinct().localCheckpoint(eager=True)
    with _step(name, "read changes"):
        if affected is None:
            changes = all_changes
        else:  # one scan: each change under both of its keys, kept once if either is affected
            nodes = F.explode(F.array(_key_hash(F.col("__key")), _key_hash(F.col("__old_key"))))
            held_changes = all_changes
            if ranges:  # no key changes: a change of an affected key names it under __key or __old_key
                held_changes = held_changes.filter(
                    " OR ".join(
                        "(" + " AND ".join(_range_sql(ranges, prefix)) + ")"
                        for prefix in ("`__key`.", "`__old_key`.")
                    )
                )
            changes = held_changes.withColumn("node", nodes).join(F.broadcast(affected), "node", "left_semi")
            changes = changes.drop("node")
            if has_truncates:  # a held truncate ends the versions of every key before it
                changes = changes.union(all_changes.filter(F.col("__op") == "truncate"))
            changes = changes.dropDuplicates(seq)
        changes = changes.localCheckpoint(eager=True)
        if affected is not None and has_moves:  # every affected key is named by one of its changes
            ranges = _key_ranges(_keys_of(changes, layout.key), layout.key)
    with _step(name, "resolve"):
        versions, jump_rounds = resolve_versions(changes, layout, moves=has_moves, truncates=has_truncates)
        rounds += jump_rounds
        if layout.track:
            versions = collapse_untracked(versions, layout)
        versions = versions.withColumn(
            "__kh", _key_hash(F.struct(*[sql.col(k) for k in layout.key]))
        ).localCheckpoint(eager=True)

    def of_affected(table: DeltaTable) -> DataFrame:
        df = table.toDF()
        for bound in _range_sql(ranges, ""):
            df = df.filter(bound)
        df = df.withColumn("__kh", _key_hash(F.struct(*[sql.col(k) for k in layout.key])))
        if affected is not None:
            df = df.join(affected, F.col("__kh") == F.col("node"), "left_semi")
        return df

    hist_changes = snap_changes = None
    if history is not None:
        with _step(name, "read history"):
            hist = of_affected(history)
        h_cols = list(history.toDF().columns)
        with _step(name, "diff history"):
            hist_changes = _diff(
                versions, hist, h_cols, ["__kh", "__start_lsn"], [*layout.key, "__start_lsn"]
            ).localCheckpoint(eager=True)
    if snapshot is not None:
        s_cols = snapshot.toDF().columns
        current = versions.filter("__is_current").select("__kh", *[sql.col(c) for c in s_cols])
        # the snapshot itself, not the history's open versions: a run killed between the two MERGEs
        # leaves them apart, and only a diff against the snapshot's own rows completes it
        with _step(name, "read snapshot"):
            was_current = of_affected(snapshot).select("__kh", *[sql.col(c) for c in s_cols])
        with _step(name, "diff snapshot"):
            snap_changes = _diff(current, was_current, s_cols, ["__kh"], list(layout.key)).localCheckpoint(
                eager=True
            )
    with _step(name, "counts"):
        counts = _counts(rows, changes, hist_changes, snap_changes, layout)
    if history is not None and hist_changes is not None and counts.get("h_total"):
        with _step(name, "history merge"):
            _merge(history, hist_changes, [*layout.key, "__start_lsn"], h_cols, ranges)
    if snapshot is not None and snap_changes is not None and counts.get("s_total"):
        with _step(name, "snapshot merge"):
            _merge(snapshot, snap_changes, list(layout.key), s_cols, ranges)
    bad = _bad_values(rows, layout) if counts.get("bad") else None
    store_props = {}
    if layout.schema_log and layout.extra["key"]:  # existing tables now have this schema version
        store_props[SCHEMA_VERSION_PROPERTY] = layout.extra["version"]
        for path, kept in (
            (history_path(lake, name), history is not None),
            (snapshot_path(lake, name), snapshot is not None),
        ):
            if kept:
                _set_properties(spark, path, {SCHEMA_VERSION_PROPERTY: layout.extra["version"]})
    drops = json.dumps(layout.drop_state, sort_keys=True) if layout.drop_state else ""
    if drops and drops != layout.extra.get("drops_was"):
        store_props[DROPS_PROPERTY] = drops
    # the batch's last write: the silver tables now hold everything the store held at store_version
    # (the store takes no other commit during a batch; a commit by anyone else only makes the marker stale)
    store_props[APPLIED_PROPERTY] = str(store_version)
    store_props[HOLDS_PROPERTY] = json.dumps({"moves": has_moves, "truncates": has_truncates})
    _set_properties(spark, changes_path(lake, name), store_props)
    return TableSummary(
        table=layout.table,
        events=meta["events"],
        skipped=meta["skipped"],
        inserted=counts.get("s_insert", 0),
        updated=counts.get("s_update", 0),
        deleted=counts.get("s_delete", 0),
        moved=counts.get("moved", 0),
        late=counts.get("late", 0),
        versions_written=counts.get("h_total", 0),
        bad_values=counts.get("bad", 0),
        rounds=rounds,
        notes=list(layout.notes),
    ), bad


def _already_applied(
    rows: DataFrame, layout: TableLayout, meta: dict[str, Any], store_version: int
) -> tuple[TableSummary, DataFrame | None]:
    """The summary of a batch whose every event the store already held, with silver up to date: the
    batch's own moves and bad values (one small aggregate), nothing resolved or written. Its bad values
    are sent to the quarantine again, which keeps one record per file, line and reason."""
    got = rows.agg(
        F.count_distinct(F.when(_is_move(), F.struct("__lsn", "__pos"))).alias("moved"),
        F.sum(F.when(F.col("__bad").isNotNull(), F.size("__bad"))).alias("bad"),
    ).first()
    moved, bad = (int(got["moved"] or 0), int(got["bad"] or 0)) if got else (0, 0)
    note = (
        f"every event was already applied (change store version {store_version}, silver tables up to "
        "date): nothing to resolve"
    )
    return TableSummary(
        table=layout.table,
        events=meta["events"],
        skipped=meta["skipped"],
        inserted=0,
        updated=0,
        deleted=0,
        moved=moved,
        late=0,
        versions_written=0,
        bad_values=bad,
        rounds=0,
        notes=[*layout.notes, note],
    ), (_bad_values(rows, layout) if bad else None)


def _empty_summary(table: str, meta: dict[str, Any] | None, error: str | None) -> TableSummary:
    """A table's summary when nothing was applied to it (columns not known yet, or it failed)."""
    return TableSummary(
        table=table,
        events=meta["events"] if meta else 0,
        skipped=meta["skipped"] if meta else 0,
        inserted=0,
        updated=0,
        deleted=0,
        moved=0,
        late=0,
        versions_written=0,
        bad_values=0,
        rounds=0,
        error=error,
    )


def _rescan_drops(changes: DataFrame, layout: TableLayout) -> dict[str, list[tuple[int, ...]]]:
    """Drop points of the columns in ``layout.rescan`` among the inserts the store holds: the first insert
    without the column after the first event that carried it (one small aggregate over the range)."""
    at = F.struct("__lsn", "__pos")
    aggs = []
    for c, (first, was) in layout.rescan.items():
        after = at > F.struct(F.lit(first[0]).cast("bigint"), F.lit(first[1]).cast("int"))
        if was:
            after = after & (at < F.struct(F.lit(was[0]).cast("bigint"), F.lit(was[1]).cast("int")))
        lacking = (F.col("__op") == "insert") & ~F.array_contains("__present", c) & after
        point = F.struct("__lsn", "__pos", F.unix_micros("__time").alias("t"))
        aggs.append(F.min(F.when(lacking, point)).alias(c))
    lo = min(first[0] for first, _ in layout.rescan.values())
    row = changes.filter((F.col("__op") == "insert") & (F.col("__lsn") >= lo)).agg(*aggs).first()
    found: dict[str, list[tuple[int, ...]]] = {}
    for c in layout.rescan:
        p = row[c] if row is not None else None
        if p is not None and add_point(layout.drop_state[c], (p[0], p[1], p[2])):
            found.setdefault(c, []).append((p[0], p[1], p[2]))
    return found


def _defer_truncates(spark: SparkSession, events: DataFrame, lake: str, table: str) -> None:
    """Keep the truncates of a table whose columns are unknown until its first rows arrive (they may be
    older rows delivered late, which the truncate must end)."""
    rows = events.filter((F.col("table") == table) & (F.col("operation") == "truncate")).select(
        "table",
        F.col("commit_lsn").alias("__lsn"),
        F.col("position").cast("int").alias("__pos"),
        F.col("commit_time").alias("__time"),
        F.col("xid").alias("__xid"),
        F.col("source_file").alias("__file"),
        F.col("source_line").cast("long").alias("__line"),
    )
    rows = rows.filter(F.col("__lsn").isNotNull())
    with _PENDING_LOCK:  # one table shared by the table threads: creating or merging it at once conflicts
        target = delta.ensure_table(
            spark,
            pending_truncates_path(lake),
            _PENDING_SCHEMA,
            {},
            "truncates of tables without columns yet",
        )
        delta.insert_new(target, rows, "t.table = s.table AND t.__lsn = s.__lsn AND t.__pos = s.__pos")


_PENDING_LOCK = threading.Lock()


def _pending_truncates(spark: SparkSession, lake: str, table: str, store: T.StructType) -> DataFrame | None:
    """The kept truncates of ``table`` as change-store rows, or None."""
    path = pending_truncates_path(lake)
    if not DeltaTable.isDeltaTable(spark, path):
        return None
    rows = spark.read.format("delta").load(path).filter(F.col("table") == table)
    if rows.isEmpty():
        return None
    given = {f.name for f in _PENDING_SCHEMA.fields}
    return rows.select(
        *[
            sql.col(f.name)
            if f.name in given
            else F.lit("truncate").alias(f.name)
            if f.name == "__op"
            else F.lit(None).cast(f.dataType).alias(f.name)
            for f in store.fields
        ]
    )


def _rekey(
    spark: SparkSession,
    lake: str,
    layout: TableLayout,
    store: DeltaTable,
    history: DeltaTable | None,
    snapshot: DeltaTable | None,
) -> bool:
    """Record a new key or key source in the tables' properties; when the key columns changed (evidence
    that a table without a primary key is REPLICA IDENTITY FULL, or that it has an index identity),
    rewrite the change store's keys and clear the history's lineage so the whole table is resolved again.
    Returns whether the key columns changed. This happens at most twice in a table's life."""
    was = layout.extra
    if not was["key"] or (json.loads(was["key"]), was["source"]) == (list(layout.key), layout.key_source):
        return False
    now_named = {old: c.name for c in layout.columns for old in c.renamed_from}
    old_key = tuple(k if k in layout.names else now_named.get(k, k) for k in json.loads(was["key"]))
    props = {KEY_PROPERTY: json.dumps(list(layout.key)), KEY_SOURCE_PROPERTY: layout.key_source}
    paths = [changes_path(lake, layout.table)]
    paths += [history_path(lake, layout.table)] if history is not None else []
    paths += [snapshot_path(lake, layout.table)] if snapshot is not None else []
    if old_key == layout.key:
        for path in paths:
            _set_properties(spark, path, props)
        return False
    log.warning(
        "table %s: re-keying from %s (%s) to %s (%s); the change store is rewritten once",
        layout.table,
        list(old_key),
        was["source"],
        list(layout.key),
        layout.key_source,
    )
    key_t = layout.key_struct_type()
    new_key = F.struct(*[sql.col(k).cast(key_t[k].dataType).alias(k) for k in layout.key])
    old_image = F.struct(
        *[
            (F.col("__old_key").getField(k) if k in old_key else F.lit(None)).cast(key_t[k].dataType).alias(k)
            for k in layout.key
        ]
    )
    op = F.col("__op")
    has_old = F.col("__old_key").isNotNull()
    changes = store.toDF()
    changes = changes.withColumn("__key", F.when(op.isin("insert", "update"), new_key)).withColumn(
        "__old_key",
        F.when((op == "update") & has_old, old_image)
        .when(op == "update", new_key)
        .when((op == "delete") & has_old, old_image),
    )
    _set_properties(spark, paths[0], {"delta.appendOnly": "false"})
    changes.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(paths[0])
    _set_properties(spark, paths[0], {**props, "delta.appendOnly": "true"})
    if history is not None:
        versions = history.toDF()
        for c in ("__moved_from", "__moved_to"):
            versions = versions.withColumn(c, F.lit(None).cast(key_t))
        versions.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(paths[1])
    for path in paths[1:]:
        _set_properties(spark, path, props)
    return True


def _set_properties(spark: SparkSession, path: str, props: dict[str, str]) -> None:
    spec = ", ".join(f"{sql.string(k)} = {sql.string(v)}" for k, v in props.items())
    spark.sql(f"ALTER TABLE {sql.delta_path(path)} SET TBLPROPERTIES ({spec})")


def _diff(new: DataFrame, old: DataFrame, cols: list[str], join_on: list[str], key: list[str]) -> DataFrame:
    """Rows to insert, update or delete so that ``old`` becomes ``new`` (``__action`` says which);
    identical rows are left out. Rows match on ``join_on`` plus null-safe equality of ``key``."""
    n, o = (
        new.select(*[sql.col(c) for c in join_on], *[sql.col(c) for c in cols if c not in join_on]),
        old.select(*[sql.col(c) for c in join_on], *[sql.col(c) for c in cols if c not in join_on]),
    )
    cond = [n[c] == o[c] for c in join_on] + [n[c].eqNullSafe(o[c]) for c in key if c not in join_on]
    joined = n.alias("n").join(o.alias("o"), cond, "full_outer")
    has_n = F.col("n.__start_lsn").isNotNull()
    has_o = F.col("o.__start_lsn").isNotNull()
    same = F.lit(True)
    for c in cols:
        same = same & sql.col("n", c).eqNullSafe(sql.col("o", c))
    action = F.when(has_n & ~has_o, "insert").when(~has_n & has_o, "delete").when(~same, "update")
    picked = [F.when(has_n, sql.col("n", c)).otherwise(sql.col("o", c)).alias(c) for c in cols]
    return joined.select(*picked, action.alias("__action")).filter(F.col("__action").isNotNull())


def _counts(
    rows: DataFrame,
    changes: DataFrame,
    hist: DataFrame | None,
    snap: DataFrame | None,
    layout: TableLayout,
) -> dict[str, int]:
    """One aggregate: history/snapshot changes by action, the batch's moves, late events and bad values."""
    in_batch = rows.select(*["__lsn", "__pos"]).distinct().withColumn("__in", F.lit(True))
    touches = (
        changes.select("__lsn", "__pos", F.col("__key").alias("__k"))
        .union(changes.select("__lsn", "__pos", F.col("__old_key").alias("__k")))
        .filter(F.col("__k").isNotNull())
        .join(in_batch, ["__lsn", "__pos"], "left")
    )
    newest_held = touches.filter(F.col("__in").isNull()).groupBy("__k").agg(F.max("__lsn").alias("__held"))
    late = (
        touches.filter(F.col("__in"))
        .join(newest_held, "__k")
        .filter(F.col("__lsn") < F.col("__held"))
        .select("__lsn", "__pos")
        .distinct()
        .select(F.lit("late").alias("name"))
    )
    labels = rows.dropDuplicates(["__lsn", "__pos"]).filter(_is_move()).select(F.lit("moved").alias("name"))
    for prefix, diff in (("h_", hist), ("s_", snap)):
        if diff is not None:
            labels = labels.union(diff.select(F.concat(F.lit(prefix), "__action"))).union(
                diff.select(F.lit(prefix + "total"))
            )
    labels = labels.union(rows.select(F.explode("__bad")).select(F.lit("bad"))).union(late)
    return {r["name"]: int(r["n"]) for r in labels.groupBy("name").agg(F.count("*").alias("n")).collect()}


def _merge(
    target: DeltaTable, changes: DataFrame, key: list[str], cols: list[str], ranges: list[KeyRange]
) -> None:
    """One MERGE applying ``changes`` (with ``__action``) to ``target``, matching on ``key`` null-safely.
    The condition also bounds the target's key columns by ``ranges`` (the affected keys' range) or, when
    there are none, by the changes' own key range (``_key_bounds``), as literals Delta can skip files with
    (a join condition alone prunes nothing)."""
    bounds = _range_sql(ranges, "t.") if ranges else _key_bounds(changes, key)
    on = " AND ".join([*bounds, *[f"t.{sql.ident(k)} <=> s.{sql.ident(k)}" for k in key]])
    values: dict[str, str | Column] = {sql.ident(c): f"s.{sql.ident(c)}" for c in cols}
    (
        target.alias("t")
        .merge(changes.alias("s"), on)
        .whenMatchedDelete("s.__action = 'delete'")
        .whenMatchedUpdate("s.__action = 'update'", values)
        .whenNotMatchedInsert("s.__action = 'insert'", values)
        .execute()
    )


_BOUNDED = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.StringType, T.DateType)


def _key_bounds(changes: DataFrame, key: list[str]) -> list[str]:
    """``t.k BETWEEN lo AND hi`` (or ``IS NULL``) for each integral, string or date key column of
    ``changes`` (the batch's diff, already materialized), from one small aggregate."""
    return _range_sql(_key_ranges(changes, key), "t.")


KeyRange = tuple[str, Any, Any, bool]
"""A key column's name, its smallest and largest value, and whether it is ever NULL."""


def _key_ranges(df: DataFrame, key: Sequence[str]) -> list[KeyRange]:
    """The range of each integral, string or date key column of ``df``, from one aggregate; none when
    ``df`` is empty or no key column has such a type."""
    types = {f.name: f.dataType for f in df.schema.fields}
    bounded = [k for k in key if isinstance(types.get(k), _BOUNDED)]
    if not bounded:
        return []
    aggs = [
        agg
        for i, k in enumerate(bounded)
        for agg in (
            F.min(sql.col(k)).alias(f"lo{i}"),
            F.max(sql.col(k)).alias(f"hi{i}"),
            F.max(sql.col(k).isNull()).alias(f"null{i}"),
        )
    ]
    row = df.agg(*aggs).first()
    if row is None or row["null0"] is None:  # no rows: nothing to bound
        return []
    return [(k, row[f"lo{i}"], row[f"hi{i}"], bool(row[f"null{i}"])) for i, k in enumerate(bounded)]


def _range_sql(ranges: list[KeyRange], prefix: str) -> list[str]:
    """One condition per range, on the column ``prefix`` + its name (``t.``, ``__key.``)."""
    out = []
    for k, lo, hi, nulls in ranges:
        name = prefix + sql.ident(k)
        parts = [f"{name} BETWEEN {sql.literal(lo)} AND {sql.literal(hi)}"] if lo is not None else []
        if nulls:
            parts.append(f"{name} IS NULL")
        out.append("(" + " OR ".join(parts) + ")")
    return out


def _keys_of(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """Every key ``changes`` name, under ``__key`` or ``__old_key``, as the key columns."""
    new, old = (
        changes.filter(F.col(s).isNotNull()).select(*[F.col(s)[k].alias(k) for k in key])
        for s in ("__key", "__old_key")
    )
    return new.union(old)


def _bad_values(rows: DataFrame, layout: TableLayout) -> DataFrame:
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
