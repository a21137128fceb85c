"""A table's three Delta tables (change store, history, snapshot): created, renamed and widened to
the layout's columns."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from resolver.lake import deletion_vectors, delta
from resolver.lake.delta import set_properties
from resolver.lake.folders import (
    KEY_PROPERTY,
    KEY_SOURCE_PROPERTY,
    SCHEMA_VERSION_PROPERTY,
    TABLE_PROPERTY,
    TablePaths,
)
from resolver.spark import sql
from resolver.spark.session_settings import lake_writes
from resolver.tablelayout import SchemaChanges, TableLayout

log = logging.getLogger(__name__)


#: change data feed for readers downstream; the deletion-vector feature, in use once the table is large
#: (``resolver.lake.deletion_vectors``: a MERGE then marks the rows it replaces instead of rewriting every
#: file they are in; OPTIMIZE / ``resolver optimize`` purges)
#: what every new silver table is created with (and ``deletion_vectors.created_with``)
SILVER_PROPERTIES = {"delta.enableChangeDataFeed": "true"}


#: the ``userMetadata`` of the commit that rewrites a silver table for a rename or type change: it changes
#: no row (its change feed, every row deleted and inserted again, is left out by ``resolver.ops.changes``)
REWRITE_COMMIT = "resolver: schema change rewrite"
#: a column's field metadata: the names it had before a rewrite renamed it (oldest first)
FORMER_NAMES = "resolver.former_names"
_KEY_STRUCTS = ("__key", "__old_key", "__moved_from", "__moved_to")


#: what a new history is partitioned by (unless its table is clustered): open versions apart from closed ones,
#: so that a batch's MERGE, which closes open versions and opens new ones, rewrites only files of open
#: versions (as many rows as the snapshot holds) however many closed ones the history has gathered; a history
#: created before is left as it is (``resolver optimize`` partitions it: ``resolver.ops.upgrades``)
HISTORY_PARTITION = ("__is_current",)


TECH_SNAPSHOT = [("__start_lsn", "bigint"), ("__start_time", "timestamp")]


TECH_HISTORY = [
    ("__start_lsn", "bigint"),
    ("__end_lsn", "bigint"),
    ("__start_time", "timestamp"),
    ("__end_time", "timestamp"),
    ("__is_current", "boolean"),
    ("__is_deleted", "boolean"),
]


@dataclass(frozen=True)
class OpenedTables:
    """The table's change store, history and snapshot (None: a silver table its settings do not keep), and
    whether this opening created a silver table."""

    store: DeltaTable
    history: DeltaTable | None
    snapshot: DeltaTable | None
    silver_created: bool


def open_tables(spark: SparkSession, paths: TablePaths, layout: TableLayout) -> OpenedTables:
    """The change store, history and snapshot of the table, created or widened to the layout's columns."""
    source = T.StructType([T.StructField(c.name, sql.parse_type(c.type)) for c in layout.columns])
    props = {
        KEY_PROPERTY: json.dumps(list(layout.key)),
        KEY_SOURCE_PROPERTY: layout.key_source,
        SCHEMA_VERSION_PROPERTY: str(layout.state.schema_version),
        TABLE_PROPERTY: layout.table,
        **delta.properties_for_names(c.name for c in layout.columns),
    }
    store_schema, history_schema, snapshot_schema = _schemas(source, layout.key_struct_type())
    cluster = delta.FileLayout(cluster_by=layout.key) if layout.cluster else delta.FileLayout()
    history_files = cluster if layout.cluster else delta.FileLayout(partition_by=HISTORY_PARTITION)
    store_spec = _Spec(
        store_schema, {"delta.appendOnly": "true", **props}, f"{layout.table}: typed change events"
    )
    store, _ = _open(spark, paths.changes, store_spec, source, layout, SchemaChanges.METADATA)
    history = snapshot = None
    history_created = snapshot_created = False
    silver_props = {**SILVER_PROPERTIES, **deletion_vectors.created_with(spark), **props}
    if layout.history:
        spec = _Spec(history_schema, silver_props, f"{layout.table}: history (SCD2)", history_files)
        history, history_created = _open(spark, paths.history, spec, source, layout, layout.schema_changes)
    if layout.snapshot:
        spec = _Spec(snapshot_schema, silver_props, f"{layout.table}: snapshot (SCD1)", cluster)
        snapshot, snapshot_created = _open(spark, paths.snapshot, spec, source, layout, layout.schema_changes)
    return OpenedTables(store, history, snapshot, history_created or snapshot_created)


def _schemas(source: T.StructType, key_t: T.StructType) -> tuple[T.StructType, T.StructType, T.StructType]:
    """The change store's, history's and snapshot's schemas for the table's columns."""
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
    tech_h = [T.StructField(n, sql.parse_type(t)) for n, t in TECH_HISTORY]
    history_schema = T.StructType(
        [*source.fields, *tech_h, T.StructField("__moved_from", key_t), T.StructField("__moved_to", key_t)]
    )
    snapshot_schema = T.StructType(
        [*source.fields, *[T.StructField(n, sql.parse_type(t)) for n, t in TECH_SNAPSHOT]]
    )
    return store_schema, history_schema, snapshot_schema


@dataclass(frozen=True)
class _Spec:
    """How one of the table's Delta tables is made when it is new: its columns, properties, comment and how
    its files are laid out."""

    schema: T.StructType
    properties: dict[str, str]
    comment: str
    files: delta.FileLayout = delta.FileLayout()


def _open(
    spark: SparkSession,
    path: str,
    spec: _Spec,
    source: T.StructType,
    layout: TableLayout,
    changes: SchemaChanges,
) -> tuple[DeltaTable, bool]:
    """One Delta table of the table, created if new (``spec``), its columns renamed, added and widened to
    ``source``: renames and type changes rewritten into the table or made in its metadata (``changes``).
    Returns the table and whether it was created."""
    table = delta.open_table(spark, path)  # a table that exists is opened (its creation a no-op, slower)
    created = table is None
    if table is None:
        table = delta.ensure_table(spark, path, spec.schema, spec.properties, spec.comment, spec.files)
    elif changes is SchemaChanges.REWRITE and _rewrite(spark, path, table, spec.schema, layout):
        table = DeltaTable.forPath(spark, path)
    fields = table.toDF().schema.fields
    if _rename(spark, path, {f.name for f in fields}, layout):
        table = DeltaTable.forPath(spark, path)
        fields = table.toDF().schema.fields
    have = {f.name: f.dataType for f in fields}
    new = [f for f in source.fields if f.name not in have]
    changed = [f for f in source.fields if f.name not in have or have[f.name] != f.dataType]
    if any(isinstance(f.dataType, T.TimestampNTZType) for f in changed):
        set_properties(spark, path, {"delta.feature.timestampNtz": "supported"})
    if new and delta.properties_for_names(f.name for f in new):
        set_properties(spark, path, delta.properties_for_names(f.name for f in new))
    if new:
        added = ", ".join(f"{sql.ident(f.name)} {f.dataType.simpleString()}" for f in new)
        spark.sql(f"ALTER TABLE {sql.delta_path(path)} ADD COLUMNS ({added})")
    widened = _widen(spark, path, have, source, layout)
    if new or widened:
        table = DeltaTable.forPath(spark, path)
    return table, created


def _rename(spark: SparkSession, path: str, have: set[str], layout: TableLayout) -> bool:
    """Give the table's columns (and the key structs' fields) the names the schema file's ``renamed_from``
    hints give them. Delta column mapping makes a rename a metadata change: no file is rewritten, and
    every value written under the old name reads under the new one. Returns whether anything changed."""
    todo = [(old, new) for old, new in layout.renames if old in have and new not in have]
    if not todo:
        return False
    set_properties(spark, path, delta.COLUMN_MAPPING)
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
    set_properties(spark, path, {"delta.enableTypeWidening": "true"})
    for column, typ in alters:
        log.info("%s: widening %s to %s", path, column, typ.simpleString())
        spark.sql(f"ALTER TABLE {sql.delta_path(path)} ALTER COLUMN {column} TYPE {typ.simpleString()}")
    return True


def _rewrite(
    spark: SparkSession, path: str, table: DeltaTable, target: T.StructType, layout: TableLayout
) -> bool:
    """Rewrite the table with the names the schema file's ``renamed_from`` hints give its columns and the
    types ``target`` widens them to (key structs included): one overwrite commit marked ``REWRITE_COMMIT``,
    every value kept, a renamed column's earlier names in its field metadata (``FORMER_NAMES``). Columns
    ``target`` adds are left to ``ALTER TABLE ADD COLUMNS`` after. Returns whether it rewrote."""
    rows = table.toDF()
    have = {f.name for f in rows.schema.fields}
    renames = {old: new for old, new in layout.renames if old in have and new not in have}
    wanted = {f.name: f.dataType for f in target.fields}
    shaped = []
    for f in rows.schema.fields:
        name = renames.get(f.name, f.name)
        typ = wanted.get(name, f.dataType)
        if isinstance(f.dataType, T.StructType):  # a key struct: its fields renamed and widened, no more
            typ = _reshaped(f.dataType, typ, renames)
        shaped.append((f, name, typ))
    if all(name == f.name and typ == f.dataType for f, name, typ in shaped):
        return False  # decided in Python: the columns below are built only for a rewrite
    columns = []
    for f, name, typ in shaped:
        if name == f.name and typ == f.dataType:
            columns.append(F.col(sql.ident(f.name)))
            continue
        meta = {k: v for k, v in f.metadata.items() if not k.startswith("delta.")}
        if name != f.name:
            meta[FORMER_NAMES] = [*meta.get(FORMER_NAMES, []), f.name]
            log.warning("%s: renaming column %s to %s (renamed_from in its schema file)", path, f.name, name)
        elif f.name not in _KEY_STRUCTS:
            log.info("%s: widening %s to %s", path, f.name, typ.simpleString())
        columns.append(F.col(sql.ident(f.name)).cast(typ).alias(name, metadata=meta))
    if any(isinstance(t, T.TimestampNTZType) for t in wanted.values()):
        set_properties(spark, path, {"delta.feature.timestampNtz": "supported"})
    with lake_writes(spark):
        (
            rows.select(columns)
            .write.format("delta")
            .mode("overwrite")
            .option("overwriteSchema", "true")
            .option("userMetadata", REWRITE_COMMIT)
            .partitionBy(*delta.partition_columns(table))  # an overwrite of the schema drops them otherwise
            .save(path)
        )
    return True


def _reshaped(have: T.StructType, target: T.DataType, renames: dict[str, str]) -> T.StructType:
    """A key struct's type with its fields renamed and given ``target``'s types (fields ``target`` adds
    are not added here: the struct's type follows the key's columns as before)."""
    wanted = {f.name: f.dataType for f in target.fields} if isinstance(target, T.StructType) else {}
    fields = []
    for f in have.fields:
        name = renames.get(f.name, f.name)
        fields.append(T.StructField(name, wanted.get(name, f.dataType), f.nullable, f.metadata))
    return T.StructType(fields)
