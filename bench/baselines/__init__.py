"""Baselines written from the seeds' descriptions and the Delta docs (``bench/README.md`` says where their
semantics differ from ours). Each takes the batch as ``resolver.read_wal2json(...).events`` and flattens
it itself (``flat_events``), so its timing includes the same work ours does."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

__all__ = ["flat_events"]


def flat_events(events: DataFrame) -> DataFrame:
    """``op`` (INSERT, UPDATE, DELETE), ``lsn``, ``pos``, ``id`` (the key after the change; NULL for a
    delete), ``old_id`` (the identity sent), ``val``, ``name`` of the ``public.bench`` events."""

    def value(names: str, values: str, name: str) -> F.Column:
        at = F.array_position(F.col(names), name).cast("int")
        return F.when(at > 0, F.element_at(F.col(values), F.when(at > 0, at).otherwise(F.lit(1))))

    return events.filter(F.col("table") == "public.bench").select(
        F.upper("operation").alias("op"),
        F.col("commit_lsn").alias("lsn"),
        F.col("position").cast("int").alias("pos"),
        value("column_names", "column_values", "id").cast("bigint").alias("id"),
        value("old_key_names", "old_key_values", "id").cast("bigint").alias("old_id"),
        value("column_names", "column_values", "val").cast("bigint").alias("val"),
        value("column_names", "column_values", "name").alias("name"),
    )
