"""A table's layout for one batch: the lake's columns evolved by the batch and the schema file, its
key, type changes, drop points and schema-log rows (``resolver.table.explode.TableLayout``)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from pyspark.sql import SparkSession

from resolver.config.policy import Policy
from resolver.config.tableschema import ColumnSpec, TableSchema
from resolver.errors import ConfigError
from resolver.lake.delta import open_table, properties_and_size
from resolver.lake.folders import (
    DELETION_VECTORS_PROPERTY,
    DROPS_PROPERTY,
    KEY_PROPERTY,
    KEY_SOURCE_PROPERTY,
    SCHEMA_VERSION_PROPERTY,
    TablePaths,
)
from resolver.lake.markers import marker_of
from resolver.pgtypes import spark_type
from resolver.plan.drops import drop_points
from resolver.plan.evolution import TypeChange, evolve_type
from resolver.plan.keys import evolve_key, reported_key
from resolver.plan.schemalog import ColumnChanges, likely_renames, schema_log_entries
from resolver.plan.tablemeta import TableMeta, lsn_text
from resolver.tablelayout import Column_, TableLayout
from resolver.tablestate import Marker, TableState

log = logging.getLogger(__name__)


@dataclass
class _Lake:
    """What the lake already has of a table: its change store's columns (renamed by the schema file's
    hints), properties and size."""

    existing: list[Column_]
    props: dict[str, str]
    store_bytes: int
    renames: list[tuple[str, str]]


@dataclass
class _Evolved:
    """The table's columns after the batch, the type changes it brings and the values it refuses."""

    columns: dict[str, Column_]
    changes: list[TypeChange]
    rejected: list[tuple[str, str | None, str]]


def table_layout(
    spark: SparkSession,
    paths: TablePaths,
    meta: TableMeta,
    schema: TableSchema | None,
    policy: Policy = Policy.FAIL,
    lake_marker: Marker | None = None,
) -> TableLayout | None:
    """The table's columns and key: the lake's (if it has the table) evolved by the batch and the schema
    file; None when nothing tells the columns yet. Fails with one line when the batch reports a key that
    contradicts the lake's. ``lake_marker``: the table's entry in the lake's markers
    (``resolver.lake.markers``), the table's marker when newer than its store's."""
    table = paths.table
    pinned = {c.name: c for c in (schema.columns if schema else [])}
    renamed = schema.rename_map() if schema else {}
    have = _lake_columns(spark, paths.changes, pinned, renamed)
    evolved = _evolve_columns(table, meta, have.existing, pinned, renamed, policy)
    cols = tuple(evolved.columns.values())
    names = [c.name for c in cols]
    props = have.props
    if not names and not props:
        return None  # nothing tells the table's columns yet (a first batch holding only a truncate)
    key, source = _key(table, meta, schema, props, renamed, names)
    changes, renames = evolved.changes, have.renames
    notes = [
        f"column {c.column} widened from {c.old_type} to {c.new_type} at commit LSN {lsn_text(c.lsn)}"
        for c in changes
    ]
    notes += [f"column {old} renamed to {new} (renamed_from hint)" for old, new in renames]
    notes += likely_renames(table, meta, have.existing, evolved.columns, renamed)
    for note in notes[len(changes) + len(renames) :]:
        log.warning("table %s: %s", table, note)
    version = int(props.get(SCHEMA_VERSION_PROPERTY, "0"))
    existing_names = {c.name for c in have.existing}
    entries = schema_log_entries(table, meta, ColumnChanges(existing_names, cols, changes, renames, renamed))
    drops, new_drops, rescan = drop_points(
        json.loads(props.get(DROPS_PROPERTY, "{}")), meta, names, key, renamed
    )
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
        state=TableState(
            key=props.get(KEY_PROPERTY, ""),
            key_source=props.get(KEY_SOURCE_PROPERTY, ""),
            schema_version=version,
            marker=marker_of(props, lake_marker),
            store_bytes=have.store_bytes,
            deletion_vectors=props.get(DELETION_VECTORS_PROPERTY, "") == "true",
            drops_was=json.dumps(json.loads(props.get(DROPS_PROPERTY, "{}")), sort_keys=True)
            if props.get(DROPS_PROPERTY)
            else "",
        ),
        changes=tuple(changes),
        renames=tuple(renames),
        notes=tuple(notes),
        schema_log=tuple(entries),
        drops={c: tuple(tuple(p) for p in d["points"]) for c, d in drops.items() if d["points"]},
        drop_state=drops,
        rescan=rescan,
        rejected=tuple(evolved.rejected),
    )


def _lake_columns(
    spark: SparkSession, path: str, pinned: dict[str, ColumnSpec], renamed: dict[str, str]
) -> _Lake:
    """The change store's columns, properties and size (none for a table new to the lake); a lake column
    the schema file now says was renamed takes its new name (values kept)."""
    existing: list[Column_] = []
    props: dict[str, str] = {}
    store_bytes = 0
    target = open_table(spark, path)
    if target is not None:
        props, store_bytes = properties_and_size(target)
        existing = [
            Column_(
                f.name,
                f.dataType.simpleString(),
                tuple(pinned[f.name].renamed_from) if f.name in pinned else (),
            )
            for f in target.toDF().schema.fields
            if not f.name.startswith("__")
        ]
    renames: list[tuple[str, str]] = []
    for i, c in enumerate(existing):
        new_name = renamed.get(c.name)
        if new_name and new_name not in {e.name for e in existing}:
            spec = pinned[new_name]
            existing[i] = Column_(new_name, c.type, tuple(spec.renamed_from))
            renames.append((c.name, new_name))
    return _Lake(existing, props, store_bytes, renames)


def _evolve_columns(
    table: str,
    meta: TableMeta,
    existing: list[Column_],
    pinned: dict[str, ColumnSpec],
    renamed: dict[str, str],
    policy: Policy,
) -> _Evolved:
    """The lake's columns evolved by the types the batch carries; pinned columns keep their type."""
    columns = {c.name: c for c in existing}
    changes: list[TypeChange] = []
    rejected: list[tuple[str, str | None, str]] = []
    stream = dict(meta.old_keys)
    stream.update(meta.columns)
    for name in stream:
        lake_name = renamed.get(name) or name
        pin = pinned.get(lake_name)
        if pin and pin.type:  # pinned: values are cast to it, whatever the stream says
            if lake_name not in columns:
                columns[lake_name] = Column_(lake_name, pin.type, tuple(pin.renamed_from))
            continue
        incoming = [(spark_type(s.type), s.type, s.lsn, s.file, s.line) for s in meta.types.get(name, [])]
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
    return _Evolved(columns, changes, rejected)


def _key(
    table: str,
    meta: TableMeta,
    schema: TableSchema | None,
    props: dict[str, str],
    renamed: dict[str, str],
    names: list[str],
) -> tuple[tuple[str, ...], str]:
    """The table's key after the batch and where it came from; fails with one line when a key column is
    not among the columns."""
    reported = reported_key(meta, schema, renamed, names)
    if not props:
        key, source = reported or (tuple(names), "all_columns")
    else:
        # a key column renamed through a hint keeps being the key (also if a crash left the property behind)
        lake_key = tuple(k if k in names else renamed.get(k, k) for k in json.loads(props[KEY_PROPERTY]))
        key, source = evolve_key(table, lake_key, props, reported, names)
    missing = [k for k in key if k not in names]
    if missing:
        raise ConfigError(f"table {table}: key column(s) {missing} not found; columns are {names}")
    return key, source
