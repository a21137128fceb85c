"""Tables an older release wrote, brought up to what this release writes, once each, by ``resolver optimize``
(``resolver.ops.maintenance``): INT96 timestamps rewritten as microseconds, a history partitioned by
``__is_current``. Each returns what it did for the optimize report's note (empty: nothing to do)."""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from resolver.lake import delta
from resolver.lake.tables import HISTORY_PARTITION, REWRITE_COMMIT
from resolver.spark.session_settings import lake_writes

__all__ = ["has_timestamps", "partition_history", "rewrite_timestamps"]


def rewrite_timestamps(spark: SparkSession, table: DeltaTable, path: str) -> str:
    """A table written before the lake wrote its timestamps as microseconds (``TIMESTAMPS_PROPERTY`` not
    set, and a timestamp column: Spark wrote them as INT96, which delta-rs refuses and Polars misreads):
    every file rewritten once, in one commit that changes no row (``dataChange`` false: no change-feed
    entry), timestamps as microseconds, and the property set. Returns what it did, for the report's note."""
    properties, _ = delta.properties_and_size(table)
    if properties.get(delta.TIMESTAMPS_PROPERTY) == delta.TIMESTAMPS_MICROS:
        return ""
    if has_timestamps(table.toDF().schema):
        with lake_writes(spark):
            current = spark.read.format("delta").load(path)
            current.write.format("delta").mode("overwrite").option("dataChange", "false").save(path)
        note = "rewritten once with its timestamps as microseconds (they were INT96)"
    else:
        note = ""
    delta.set_properties(spark, path, {delta.TIMESTAMPS_PROPERTY: delta.TIMESTAMPS_MICROS})
    return note


def partition_history(spark: SparkSession, table: DeltaTable, path: str) -> str:
    """A history created before histories were partitioned by ``__is_current``
    (``resolver.lake.tables.HISTORY_PARTITION``): rewritten once, partitioned, every row kept, in one
    commit marked ``REWRITE_COMMIT`` (its change feed, every row deleted and inserted again, is left out by
    ``resolver changes``). Returns what it did, for the report's note."""
    columns = set(table.toDF().columns)
    if not {"__is_current", "__end_lsn"} <= columns or delta.partition_columns(table):
        return ""
    with lake_writes(spark):
        (
            spark.read.format("delta")
            .load(path)
            .write.format("delta")
            .mode("overwrite")
            .option("overwriteSchema", "true")
            .option("userMetadata", REWRITE_COMMIT)
            .partitionBy(*HISTORY_PARTITION)
            .save(path)
        )
    by = ", ".join(HISTORY_PARTITION)
    return f"rewritten once, partitioned by {by} (open versions apart from closed ones)"


def has_timestamps(schema: T.DataType) -> bool:
    """Whether a schema holds a timestamp (with time zone, the type Spark writes as INT96), nested too."""
    if isinstance(schema, T.TimestampType):
        return True
    if isinstance(schema, T.StructType):
        return any(has_timestamps(f.dataType) for f in schema.fields)
    if isinstance(schema, T.ArrayType):
        return has_timestamps(schema.elementType)
    if isinstance(schema, T.MapType):
        return has_timestamps(schema.keyType) or has_timestamps(schema.valueType)
    return False
