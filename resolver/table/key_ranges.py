"""A table's key ranges: the smallest and largest value of each integral, string or date key column among a
set of changes (``KeyRange``), and the conditions that bound a MERGE or a change-store scan with them as
literals, so Delta skips the files outside them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from resolver.spark import sql

__all__ = ["BOUNDED", "KeyRange", "key_bounds", "key_ranges", "keys_of", "range_sql"]

KeyRange = tuple[str, Any, Any, bool]
"""A key column's name, its smallest and largest value, and whether it is ever NULL."""

BOUNDED = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.StringType, T.DateType)


def key_bounds(changes: DataFrame, key: list[str]) -> list[str]:
    """``t.k BETWEEN lo AND hi`` (or ``IS NULL``) for each integral, string or date key column of
    ``changes`` (the batch's diff, already materialized), from one small aggregate."""
    return range_sql(key_ranges(changes, key), "t.")


def key_ranges(df: DataFrame, key: Sequence[str]) -> list[KeyRange]:
    """The range of each integral, string or date key column of ``df``, from one aggregate; none when
    ``df`` is empty or no key column has such a type."""
    types = {f.name: f.dataType for f in df.schema.fields}
    bounded = [k for k in key if isinstance(types.get(k), BOUNDED)]
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


def range_sql(ranges: list[KeyRange], prefix: str) -> list[str]:
    """One condition per range, on the column ``prefix`` + its name (``t.``, ``__key.``)."""
    out = []
    for k, lo, hi, nulls in ranges:
        name = prefix + sql.ident(k)
        parts = [f"{name} BETWEEN {sql.literal(lo)} AND {sql.literal(hi)}"] if lo is not None else []
        if nulls:
            parts.append(f"{name} IS NULL")
        out.append("(" + " OR ".join(parts) + ")")
    return out


def keys_of(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """Every key ``changes`` name, under ``__key`` or ``__old_key``, as the key columns."""
    new, old = (
        changes.filter(F.col(s).isNotNull()).select(*[F.col(s)[k].alias(k) for k in key])
        for s in ("__key", "__old_key")
    )
    return new.union(old)
