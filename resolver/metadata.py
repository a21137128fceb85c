"""What one batch holds per table (``resolver.tablemeta.TableMeta``), from small aggregates over its events:
columns and types, the keys the stream reports, commit-LSN ranges, first and last events per column, insert
column sets."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from resolver.tablemeta import FirstEvent, InsertSet, Point, Seen, TableMeta

_WHERE = ["table", "commit_lsn", "position", "source_file", "source_line"]


def batch_metadata(events: DataFrame) -> dict[str, TableMeta]:
    """Per table: its columns and types, the keys the stream reports, the commit-LSN range and counts."""
    types, first, last = _column_types(events)
    insert_sets = _insert_sets(events)
    out = {}
    for r in _table_rows(events):
        table = r["table"]
        first_event = r["first_event"]
        out[table] = TableMeta(
            table=table,
            events=r["events"],
            skipped=r["skipped"],
            truncates=r["truncates"],
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


def _table_rows(events: DataFrame) -> list[Any]:
    """One row per table: counts, LSN range, column sets and the keys reported."""
    op = F.col("operation")
    return (
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
    )


def _name_types(zipped_sets: list[Any]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for zipped in zipped_sets:
        for pair in zipped or []:
            out.setdefault(pair[0], pair[1])
    return out


def _column_types(
    events: DataFrame,
) -> tuple[dict[str, dict[str, list[Seen]]], dict[str, dict[str, Point]], dict[str, dict[str, Point]]]:
    """Per table and column: each type it came with (first seen first), and its first and last event."""
    names = F.concat(F.coalesce("column_names", F.array()), F.coalesce("old_key_names", F.array()))
    types = F.concat(F.coalesce("column_types", F.array()), F.coalesce("old_key_types", F.array()))
    typed = (
        events.select(*_WHERE, names.alias("n"), types.alias("t"))
        .select(*_WHERE, F.explode(F.arrays_zip("n", "t")).alias("c"))
        .filter(F.col("c.t").isNotNull())  # no types in the stream (include-types=0): nothing to compare
        .groupBy("table", F.col("c.n").alias("name"), F.col("c.t").alias("type"))
        .agg(
            F.min(F.struct("commit_lsn", "position", "source_file", "source_line")).alias("first"),
            F.max(F.struct("commit_lsn", "position")).alias("last"),
        )
        .collect()
    )  # one row per table, column and type
    seen: dict[str, dict[str, list[Seen]]] = {}
    first_at: dict[str, dict[str, Point]] = {}
    last: dict[str, dict[str, Point]] = {}
    for r in sorted(typed, key=lambda r: (r["first"]["commit_lsn"] is None, r["first"]["commit_lsn"] or 0)):
        first = r["first"]
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


def _insert_sets(events: DataFrame) -> dict[str, list[InsertSet]]:
    """Per table, the column sets of its inserts (a handful: one per schema the batch spans)."""
    inserts = (
        events.filter((F.col("operation") == "insert") & F.col("commit_lsn").isNotNull())
        .groupBy("table", F.array_sort("column_names").alias("cols"))
        .agg(
            F.min(F.struct("commit_lsn", "position", F.unix_micros("commit_time").alias("t"))).alias("first")
        )
        .collect()
    )
    out: dict[str, list[InsertSet]] = {}
    for r in inserts:
        point = (r["first"]["commit_lsn"], r["first"]["position"], r["first"]["t"])
        out.setdefault(r["table"], []).append(InsertSet(frozenset(r["cols"] or []), point))
    return out
