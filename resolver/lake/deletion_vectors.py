"""When a table's silver tables write deletion vectors: from the size its change store reaches on.
 A MERGE into a table with deletion vectors marks the rows it replaces in a small file instead of rewriting
every file they are in. That saves rewriting unchanged rows, which is what a large table needs, but costs a
fixed extra phase of about seven Spark jobs per MERGE (measured: 17 jobs and 2.8 s against 10 jobs and 1.4 s
for a 4-row MERGE into a 100-row table). Below a few tens of megabytes, rewriting the touched files costs
less than that phase, so silver tables are created with the deletion-vector table feature supported (readers
need the same protocol either way) but not in use, and turn it on, once and for good, when the table's
change store grows past ``spark.resolver.deletionVectors.fromBytes`` (default 32 MiB: about a million
rows, where rewriting costs about as much as the fixed phase). Tables created with deletion vectors on
(before this policy) keep them.
"""

from __future__ import annotations

import logging

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from resolver.errors import ConfigError
from resolver.lake.delta import set_properties
from resolver.tablelayout import TableLayout

log = logging.getLogger(__name__)

#: the Spark setting that says from which change-store size (bytes) the silver tables use deletion vectors
FROM_BYTES_SETTING = "spark.resolver.deletionVectors.fromBytes"
FROM_BYTES_DEFAULT = 32 * 1024 * 1024

#: what a new silver table is created with: the feature in its protocol, not in use
OFF = {"delta.feature.deletionVectors": "supported", "delta.enableDeletionVectors": "false"}
ON = {"delta.enableDeletionVectors": "true"}


def from_bytes(spark: SparkSession) -> int:
    """The change-store size from which silver tables use deletion vectors; ``ConfigError`` (one line) for a
    setting that is not a whole number of bytes (``plan_changes`` asks first, before anything is written)."""
    text = spark.conf.get(FROM_BYTES_SETTING, None) or str(FROM_BYTES_DEFAULT)
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigError(f"{FROM_BYTES_SETTING} is {text!r}; expected a whole number of bytes, 0 or more")
    return value


def turn_on(spark: SparkSession, layout: TableLayout, silver: list[tuple[str, DeltaTable | None]]) -> bool:
    """Turn deletion vectors on for the table's kept silver tables (``(path, table)``; None: not kept) when
    its change store has reached the size for them and the store does not say they are on yet. Returns
    whether they were turned on now (the batch's marker commit then records it on the store)."""
    if layout.extra.get("deletion_vectors") == "true":
        return False
    size = int(layout.extra.get("store_bytes") or 0)
    if size < from_bytes(spark) or not layout.extra.get("key"):
        return False
    for path, table in silver:
        if table is not None:
            set_properties(spark, path, ON)
    log.info("%s: change store holds %d bytes; silver tables now use deletion vectors", layout.table, size)
    return True


__all__ = ["FROM_BYTES_DEFAULT", "FROM_BYTES_SETTING", "OFF", "ON", "from_bytes", "turn_on"]
