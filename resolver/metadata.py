"""What one batch holds per table, from one small aggregate over its events: columns and types,
the keys the stream reports, commit-LSN ranges, first and last events per column, insert column sets."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from resolver.wal2json import format_lsn


def batch_metadata(events: DataFrame) -> dict[str, dict[str, Any]]:
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


def where_first(meta: dict[str, Any], column: str | None = None) -> str:
    """Where a table's (or one of its columns') first event of the batch is, for error messages."""
    first = min(meta["types"].get(column, []), key=lambda e: (e[1] is None, e[1] or 0), default=None)
    if column is None or first is None:
        first = meta["first_event"]
        return f"commit LSN {lsn_text(first['commit_lsn'])} ({first['source_file']}:{first['source_line']})"
    return f"commit LSN {lsn_text(first[1])} ({first[2]}:{first[3]})"


def lsn_text(lsn: int | None) -> str:
    return "unknown" if lsn is None else format_lsn(lsn)
