"""What one batch holds per table (``resolver.plan.tablemeta.TableMeta``), from one small aggregate over its
events: columns and types, the keys the stream reports, commit-LSN ranges, first and last events per column,
insert column sets.

The three kinds of facts are grouped differently (per table; per table, column and type; per table and
insert column set), so the events are projected into one row shape per kind, unioned, and grouped once by
``(kind, table, name, type, cols)``: one shuffle and one collect of a few rows per table, not three."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from resolver.plan.tablemeta import FirstEvent, InsertSet, Point, Seen, TableMeta

_TABLE, _COLUMN, _INSERTS = 0, 1, 2
_WHERE = ["commit_lsn", "position", "source_file", "source_line"]
_ARRAYS = ["column_names", "column_types", "old_key_names", "old_key_types", "primary_key"]


def batch_metadata(events: DataFrame) -> dict[str, TableMeta]:
    """Per table: its columns and types, the keys the stream reports, the commit-LSN range and counts."""
    rows = _facts(events)
    types, first, last = _column_types([r for r in rows if r["kind"] == _COLUMN])
    insert_sets = _insert_sets([r for r in rows if r["kind"] == _INSERTS])
    out = {}
    for r in (r for r in rows if r["kind"] == _TABLE):
        table = r["table"]
        first_event = r["first_event"]
        out[table] = TableMeta(
            table=table,
            events=r["events"],
            skipped=r["skipped"],
            truncates=r["truncates"],
            changes=r["changes"],
            lo=r["lo"],
            hi=r["hi"],
            columns=_name_types(r["columns"]),
            old_keys=_name_types(r["old_keys"]),
            identities=[list(x) for x in r["identities"] if x],
            pks=[list(x) for x in r["pks"] if x],
            types=types.get(table, {}),
            first=first.get(table, {}),
            last=last.get(table, {}),
            insert_sets=insert_sets.get(table, []),
            last_insert=tuple(r["last_insert"]) if r["last_insert"] is not None else None,
            first_event=FirstEvent(
                first_event["commit_lsn"],
                first_event["position"],
                first_event["source_file"],
                first_event["source_line"],
            ),
        )
    return out


def _facts(events: DataFrame) -> list[Any]:
    """The batch's facts in one aggregate: a row per table (counts, LSN range, column sets, keys reported),
    per table, column and type (first and last event), and per table and insert column set (first insert)."""
    base = events.select("table", "operation", "commit_time", *_WHERE, *_ARRAYS)
    empty = {c: F.lit(None).cast(base.schema[c].dataType) for c in _ARRAYS}
    names = F.concat(F.coalesce("column_names", F.array()), F.coalesce("old_key_names", F.array()))
    types = F.concat(F.coalesce("column_types", F.array()), F.coalesce("old_key_types", F.array()))

    def shaped(kind: int, name: Column, typ: Column, cols: Column, arrays: bool) -> list[Column]:
        return [
            F.lit(kind).alias("kind"),
            "table",
            name.cast("string").alias("name"),
            typ.cast("string").alias("type"),
            cols.cast("array<string>").alias("cols"),
            "operation",
            "commit_time",
            *_WHERE,
            *[F.col(c) if arrays else empty[c].alias(c) for c in _ARRAYS],
        ]

    none = F.lit(None)
    per_table = base.select(*shaped(_TABLE, none, none, none, True))
    # Per column and type, only its first and last event count. The events' column lists are few (one per
    # shape of event a table's schema gives), so the events are grouped by them first, and only each
    # list's first and last event become a row per column: the explode is over the lists, not the events.
    lists = base.groupBy("table", names.alias("n"), types.alias("t")).agg(
        F.min(F.struct(*_WHERE)).alias("first"), F.max(F.struct("commit_lsn", "position")).alias("last")
    )
    last = F.struct(
        *[F.col(f"{'last' if w in ('commit_lsn', 'position') else 'first'}.{w}").alias(w) for w in _WHERE]
    )
    per_column = (
        lists.select("table", "n", "t", F.explode(F.array("first", last)).alias("at"))
        .select("table", "at", F.explode(F.arrays_zip("n", "t")).alias("c"))
        .filter(F.col("c.t").isNotNull())  # no types in the stream (include-types=0): nothing to compare
        .select(
            "table",
            "c",
            F.lit(None).cast(base.schema["operation"].dataType).alias("operation"),
            F.lit(None).cast(base.schema["commit_time"].dataType).alias("commit_time"),
            *[F.col(f"at.{w}").alias(w) for w in _WHERE],
        )
        .select(*shaped(_COLUMN, F.col("c.n"), F.col("c.t"), none, False))
    )
    inserts = base.filter((F.col("operation") == "insert") & F.col("commit_lsn").isNotNull())
    per_insert_set = inserts.select(*shaped(_INSERTS, none, none, F.array_sort("column_names"), False))
    facts = per_table.unionByName(per_column).unionByName(per_insert_set)
    return facts.groupBy("kind", "table", "name", "type", "cols").agg(*_aggregates()).collect()


def _aggregates() -> list[Column]:
    op = F.col("operation")
    mine = F.col("kind") == _TABLE
    return [
        F.count(F.when(F.col("commit_lsn").isNotNull(), 1)).alias("events"),
        F.count(F.when(F.col("commit_lsn").isNull(), 1)).alias("skipped"),
        F.count(F.when(op == "truncate", 1)).alias("truncates"),
        F.count(F.when(op.isin("update", "delete"), 1)).alias("changes"),
        F.min("commit_lsn").alias("lo"),
        F.max("commit_lsn").alias("hi"),
        F.max(F.when(op == "insert", F.struct("commit_lsn", "position"))).alias("last_insert"),
        F.min(F.struct(*_WHERE)).alias("first_event"),
        F.max(F.struct("commit_lsn", "position")).alias("last"),
        F.min(F.struct("commit_lsn", "position", F.unix_micros("commit_time").alias("t"))).alias(
            "first_insert"
        ),
        F.collect_set(F.when(mine, _name_type_pairs("column_names", "column_types"))).alias("columns"),
        F.collect_set(F.when(mine, _name_type_pairs("old_key_names", "old_key_types"))).alias("old_keys"),
        F.collect_set(F.when(mine & op.isin("update", "delete"), F.col("old_key_names"))).alias("identities"),
        F.collect_set(F.when(mine, F.col("primary_key"))).alias("pks"),
    ]


def _name_type_pairs(names: str, types: str) -> Column:
    """(name, type) pairs of an event's columns; the type NULL when the stream sends no types (wal2json's
    ``include-types=0``, Debezium without the schema envelope). ``arrays_zip`` alone is NULL when either
    array is: a table whose events carry no types would have no columns at all."""
    untyped = F.array_repeat(F.lit(None).cast("string"), F.greatest(F.size(names), F.lit(0)))
    return F.arrays_zip(F.col(names), F.coalesce(F.col(types), untyped))


def _name_types(zipped_sets: list[Any]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for zipped in zipped_sets:
        for pair in zipped or []:
            out.setdefault(pair[0], pair[1])
    return out


def _column_types(
    typed: list[Any],
) -> tuple[dict[str, dict[str, list[Seen]]], dict[str, dict[str, Point]], dict[str, dict[str, Point]]]:
    """Per table and column: each type it came with (first seen first), and its first and last event."""
    seen: dict[str, dict[str, list[Seen]]] = {}
    first_at: dict[str, dict[str, Point]] = {}
    last: dict[str, dict[str, Point]] = {}
    for r in sorted(
        typed, key=lambda r: (r["first_event"]["commit_lsn"] is None, r["first_event"]["commit_lsn"] or 0)
    ):
        first = r["first_event"]
        entry = Seen(r["type"], first["commit_lsn"], first["source_file"], first["source_line"])
        seen.setdefault(r["table"], {}).setdefault(r["name"], []).append(entry)
        if first["commit_lsn"] is not None:  # (commit LSN, position) of the first and last event carrying it
            at = (first["commit_lsn"], first["position"])
            mine = first_at.setdefault(r["table"], {})
            mine[r["name"]] = min(mine.get(r["name"], at), at)
            end = (r["last"]["commit_lsn"], r["last"]["position"])
            mine = last.setdefault(r["table"], {})
            mine[r["name"]] = max(mine.get(r["name"], end), end)
    return seen, first_at, last


def _insert_sets(rows: list[Any]) -> dict[str, list[InsertSet]]:
    """Per table, the column sets of its inserts (a handful: one per schema the batch spans)."""
    out: dict[str, list[InsertSet]] = {}
    for r in rows:
        point = (r["first_insert"]["commit_lsn"], r["first_insert"]["position"], r["first_insert"]["t"])
        out.setdefault(r["table"], []).append(InsertSet(frozenset(r["cols"] or []), point))
    return out
