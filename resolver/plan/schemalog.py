"""``_resolver/schema_log``: the rows a batch adds for the schema changes it makes (added, widened,
renamed, dropped columns), and the warning for a column that looks renamed without a hint."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from resolver.lake import delta
from resolver.lsn import format_lsn
from resolver.plan.evolution import TypeChange
from resolver.plan.tablemeta import TableMeta
from resolver.spark import sql
from resolver.tablelayout import Column_, TableLayout

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


_SCHEMA_LOG_LOCK = threading.Lock()


def write_schema_log(spark: SparkSession, path: str, rows: list[dict[str, Any]]) -> None:
    """Append schema changes to the lake's schema log at ``path`` (``_resolver/schema_log``), before the
    tables change: a rerun after a crash finds the same rows and adds nothing (``delta.insert_new``; a log
    that holds no commit but its creation is appended to without the lookup). Table threads take
    turns. A batch's rows are a few, written as one file (``delta.one_file``)."""
    if not rows:
        return
    now = datetime.now(UTC).replace(tzinfo=None)
    data = [tuple({**r, "logged_at": now}.get(f.name) for f in SCHEMA_LOG_SCHEMA.fields) for r in rows]
    target = delta.ensure_table(
        spark, path, SCHEMA_LOG_SCHEMA, {"delta.appendOnly": "true"}, "schema changes"
    )
    keys = ("table", "version", "change", "column")
    condition = " AND ".join(f"t.{sql.ident(k)} = s.{sql.ident(k)}" for k in keys)
    with _SCHEMA_LOG_LOCK:
        rows_df = delta.one_file(spark.createDataFrame(data, SCHEMA_LOG_SCHEMA))
        if delta.version(target) == 0:  # only its creation: no row to look for (a lake's first batch)
            delta.append(target, path, rows_df)
        else:
            delta.insert_new(target, rows_df, condition)


@dataclass(frozen=True)
class ColumnChanges:
    """What a batch does to a table's columns: the names the lake knew (``known``), the columns after the
    batch, its type changes, the renames it applies (old name, new name) and the schema file's rename map
    (a name sent -> the lake's name)."""

    known: set[str]
    columns: tuple[Column_, ...]
    changes: list[TypeChange]
    renames: list[tuple[str, str]]
    renamed: dict[str, str]


def schema_log_entries(table: str, meta: TableMeta, columns: ColumnChanges) -> list[dict[str, Any]]:
    """Rows of ``_resolver/schema_log`` for what this batch changes in the table's schema."""
    known, cols, changes = columns.known, columns.columns, columns.changes
    renames, renamed = columns.renames, columns.renamed
    first: dict[str, tuple[int, int]] = {}
    for name, at in meta.first.items():  # a lake column's first event, under any of its names
        lake_name = renamed.get(name, name)
        first[lake_name] = min(first.get(lake_name, at), at)
    pg_types = {renamed.get(n, n): e[-1].type for n, e in meta.types.items() if e}
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


def likely_renames(
    table: str,
    meta: TableMeta,
    lake: list[Column_],
    columns: dict[str, Column_],
    renamed: dict[str, str],
) -> list[str]:
    """Warnings for columns that look renamed without a hint: a column new to the lake appears while a
    column of the same type is no longer sent (the batch's last event carrying it is older, or the batch
    inserts rows without it), and no ``renamed_from`` hint links them."""
    known = {c.name for c in lake}
    first = meta.first
    out = []
    for name, at in first.items():
        if name in known or name in renamed or any(name in c.renamed_from for c in columns.values()):
            continue
        typ = columns[renamed.get(name, name)].type
        for old in columns.values():
            if old.name == name or old.type != typ:
                continue
            gone = meta.last.get(old.name)
            stopped = gone < at if gone is not None else (meta.last_insert or (-1, -1)) >= at
            if stopped:
                out.append(
                    f"column {name} ({typ}) first appears at commit LSN {format_lsn(at[0])} and {old.name} "
                    f"({typ}) is no longer sent: if it was renamed, add to {table}.yaml (columns: - name: "
                    f"{name}, renamed_from: [{old.name}]) before the next batch; until then they are two "
                    "columns"
                )
    return out


def with_found_drops(
    spark: SparkSession, schema_log: str, layout: TableLayout, found: dict[str, list[tuple[int, ...]]]
) -> TableLayout:
    """The layout with the drop points a rescan of the store found, logged in the schema log (at
    ``schema_log``)."""
    layout = replace(
        layout,
        drops={c: tuple(tuple(p) for p in d["points"]) for c, d in layout.drop_state.items() if d["points"]},
    )
    version = layout.state.schema_version + (0 if layout.schema_log else 1)
    more = [
        {"table": layout.table, "change": "dropped", "column": c, "lsn": p[0], "version": version}
        for c, points in sorted(found.items())
        for p in points
    ]
    write_schema_log(spark, schema_log, [*layout.schema_log, *more])
    return replace(
        layout, schema_log=(*layout.schema_log, *more), state=replace(layout.state, schema_version=version)
    )
