"""What one batch holds per table (``resolver.plan.tablemeta.TableMeta``), from one small aggregate over its
events: columns and types, the keys the stream reports, commit-LSN ranges, first and last events per column,
insert column sets.

The events are grouped by their *shape* (table, operation, column and key lists, with or without a commit
LSN): one shuffle, and one collect of a handful of rows however many events (one per kind of event a
table's schema gives). The facts per table, per column and type, and per insert column set are then read
from those rows on the driver."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import zip_longest
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from resolver.plan.tablemeta import FirstEvent, InsertSet, Point, Seen, TableMeta

_WHERE = ["commit_lsn", "position", "source_file", "source_line"]
_ARRAYS = ["column_names", "column_types", "old_key_names", "old_key_types", "primary_key"]


def batch_metadata(events: DataFrame) -> dict[str, TableMeta]:
    """Per table: its columns and types, the keys the stream reports, the commit-LSN range and counts."""
    by_table: dict[str, list[Row]] = {}
    for shape in sorted(_shapes(events), key=lambda r: _order(r["first_event"])):
        by_table.setdefault(shape["table"], []).append(shape)
    return {table: _table_meta(table, shapes) for table, shapes in by_table.items()}


def _shapes(events: DataFrame) -> list[Row]:
    """One row per shape of event: how many events (``weight``), their commit-LSN range, their first event
    (``_WHERE``), their last (commit LSN, position) and their first (commit LSN, position, commit time in
    microseconds)."""
    return (
        events.groupBy("table", "operation", *_ARRAYS, F.col("commit_lsn").isNull().alias("unordered"))
        .agg(
            F.count("*").alias("weight"),
            F.min("commit_lsn").alias("lo"),
            F.max("commit_lsn").alias("hi"),
            F.min(F.struct(*_WHERE)).alias("first_event"),
            F.max(F.struct("commit_lsn", "position")).alias("last"),
            F.min(F.struct("commit_lsn", "position", F.unix_micros("commit_time").alias("t"))).alias(
                "first_insert"
            ),
        )
        .collect()
    )


def _table_meta(table: str, shapes: list[Row]) -> TableMeta:
    """A table's facts from its shapes (first event first)."""

    def weight(*operations: str, unordered: bool | None = None) -> int:
        return sum(
            s["weight"]
            for s in shapes
            if (not operations or s["operation"] in operations) and unordered in (None, s["unordered"])
        )

    first = _least(s["first_event"] for s in shapes)
    last_insert = _most(s["last"] for s in shapes if s["operation"] == "insert")
    types, first_at, last_at = _column_types(shapes)
    return TableMeta(
        table=table,
        events=weight(unordered=False),
        skipped=weight(unordered=True),
        truncates=weight("truncate"),
        changes=weight("update", "delete"),
        lo=min((s["lo"] for s in shapes if s["lo"] is not None), default=None),
        hi=max((s["hi"] for s in shapes if s["hi"] is not None), default=None),
        columns=_name_types(_pairs(s["column_names"], s["column_types"]) for s in shapes),
        old_keys=_name_types(_pairs(s["old_key_names"], s["old_key_types"]) for s in shapes),
        identities=_distinct(s["old_key_names"] for s in shapes if s["operation"] in ("update", "delete")),
        pks=_distinct(s["primary_key"] for s in shapes),
        types=types,
        first=first_at,
        last=last_at,
        insert_sets=_insert_sets(shapes),
        last_insert=(last_insert["commit_lsn"], last_insert["position"]) if last_insert is not None else None,
        first_event=FirstEvent(
            first["commit_lsn"], first["position"], first["source_file"], first["source_line"]
        ),
    )


def _order(point: Sequence[Any]) -> tuple[tuple[bool, Any], ...]:
    """Spark's order of structs: field by field, NULL first."""
    return tuple((v is not None, v) for v in point)


def _least(points: Iterable[Any]) -> Any:
    """The smallest non-NULL struct, as Spark's ``min`` gives it (None: there is none)."""
    return min((p for p in points if p is not None), key=_order, default=None)


def _most(points: Iterable[Any]) -> Any:
    """The largest non-NULL struct, as Spark's ``max`` gives it (None: there is none)."""
    return max((p for p in points if p is not None), key=_order, default=None)


def _pairs(names: list[str] | None, types: list[str] | None) -> list[tuple[str, str | None]] | None:
    """(name, type) pairs of an event's columns; the type None when the stream sends no types (wal2json's
    ``include-types=0``, Debezium without the schema envelope); None without columns."""
    if names is None:
        return None
    return list(zip_longest(names, types or [], fillvalue=None))  # type: ignore[arg-type]


def _distinct(lists: Iterable[list[str] | None]) -> list[list[str]]:
    """The different non-empty lists, first seen first."""
    out: list[list[str]] = []
    for x in lists:
        if x and list(x) not in out:
            out.append(list(x))
    return out


def _name_types(zipped_sets: Iterable[Any]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for zipped in zipped_sets:
        for pair in zipped or []:
            out.setdefault(pair[0], pair[1])
    return out


def _column_types(
    shapes: list[Row],
) -> tuple[dict[str, list[Seen]], dict[str, Point], dict[str, Point]]:
    """Per column: each type it came with (first seen first), and its first and last event. A column's
    first and last event with a type are those of the first and last event of any shape that carries it
    with that type (as a column or in the old key)."""
    found: dict[tuple[str, str], tuple[Any, Any]] = {}  # (name, type) -> (first event, last point)
    for s in shapes:
        names = list(s["column_names"] or []) + list(s["old_key_names"] or [])
        types = list(s["column_types"] or []) + list(s["old_key_types"] or [])
        for name, typ in zip_longest(names, types, fillvalue=None):
            if typ is None:  # no types in the stream (include-types=0): nothing to compare
                continue
            was = found.get((name, typ))
            if was is None:
                found[(name, typ)] = (s["first_event"], s["last"])
            else:
                found[(name, typ)] = (_least([was[0], s["first_event"]]), _most([was[1], s["last"]]))
    seen: dict[str, list[Seen]] = {}
    first_at: dict[str, Point] = {}
    last: dict[str, Point] = {}
    for (name, typ), (first, end) in sorted(
        found.items(), key=lambda kv: (kv[1][0]["commit_lsn"] is None, kv[1][0]["commit_lsn"] or 0)
    ):
        seen.setdefault(name, []).append(
            Seen(typ, first["commit_lsn"], first["source_file"], first["source_line"])
        )
        if first["commit_lsn"] is not None:  # (commit LSN, position) of the first and last event carrying it
            at = (first["commit_lsn"], first["position"])
            first_at[name] = min(first_at.get(name, at), at)
            point = (end["commit_lsn"], end["position"])
            last[name] = max(last.get(name, point), point)
    return seen, first_at, last


def _insert_sets(shapes: list[Row]) -> list[InsertSet]:
    """The column sets of a table's inserts (a handful: one per schema the batch spans), each with its first
    insert."""
    firsts: dict[frozenset[str], Any] = {}
    for s in shapes:
        if s["operation"] == "insert" and not s["unordered"]:
            cols = frozenset(s["column_names"] or [])
            firsts[cols] = _least([firsts.get(cols), s["first_insert"]])
    return [InsertSet(cols, (p["commit_lsn"], p["position"], p["t"])) for cols, p in firsts.items()]
