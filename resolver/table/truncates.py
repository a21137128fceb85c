"""Truncates of tables whose columns are not known yet: kept until the table's first rows arrive."""

from __future__ import annotations

import threading

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from resolver.lake import delta
from resolver.spark import sql

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


def defer_truncates(spark: SparkSession, events: DataFrame, path: str, table: str) -> None:
    """Keep the truncates of a table whose columns are unknown until its first rows arrive (they may be
    older rows delivered late, which the truncate must end), in the lake's table of them at ``path``."""
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
            path,
            _PENDING_SCHEMA,
            {},
            "truncates of tables without columns yet",
        )
        delta.insert_new(target, rows, "t.table = s.table AND t.__lsn = s.__lsn AND t.__pos = s.__pos")


_PENDING_LOCK = threading.Lock()


def pending_truncates(spark: SparkSession, path: str, table: str, store: T.StructType) -> DataFrame | None:
    """The kept truncates of ``table`` (in the lake's table of them at ``path``) as change-store rows, or
    None."""
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
