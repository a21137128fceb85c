"""When a table's silver tables write deletion vectors: only from the change-store size a user sets.

A MERGE into a table with deletion vectors marks the rows it replaces in a small file instead of rewriting
every file they are in. That saves rewriting unchanged rows, but on this project's machine it never saved
time: it runs a fixed extra phase of Spark jobs per MERGE (a 4-row MERGE into a 100-row table: 17 jobs and
2.8 s against 10 jobs and 1.4 s), and on tables shaped like ``pgbench_accounts`` with about 58,000 updated
rows per batch spread over every file (``python -m bench.merge_cost``, 2026-12-03) the history MERGE took
longer with them at 1, 4 and 10 million rows alike (10 million: 14.4 s against 10.3 s copying 10 million
rows), while writing a fraction of the bytes. So silver tables use them only when
``spark.resolver.deletionVectors.fromBytes`` is set and the table's change store has grown past it (0: from
the table's second batch), once and for good — for a lake where rewritten bytes cost more than time, such as
an object store billed by the byte. Without the setting they are created without the deletion-vector table
feature at all: with the feature merely supported, Delta 4.4 runs two more Spark jobs for every filtered read
of the table (a 2-stage job and the snapshot's state; a MERGE into it ran as many jobs either way), and a
batch reads the affected keys' current rows from the snapshot (``resolver.table.affected.seeded_changes``).
With the setting, they are created with the feature supported, so that readers see the same protocol before
and after the switch; a table created without it gets the feature when it turns them on. Tables created with
deletion vectors on (before this policy) keep them.
"""

from __future__ import annotations

import logging

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from resolver.errors import ConfigError
from resolver.lake.delta import set_properties
from resolver.tablelayout import TableLayout

log = logging.getLogger(__name__)

#: the Spark setting that says from which change-store size (bytes) the silver tables use deletion vectors;
#: not set: never (they are created without them in use)
FROM_BYTES_SETTING = "spark.resolver.deletionVectors.fromBytes"

#: what a new silver table is created with: not in use (and, when they may be turned on, the feature in its
#: protocol already: ``created_with``)
OFF = {"delta.enableDeletionVectors": "false"}
SUPPORTED = {"delta.feature.deletionVectors": "supported"}
ON = {"delta.enableDeletionVectors": "true"}


def from_bytes(spark: SparkSession) -> int | None:
    """The change-store size from which silver tables use deletion vectors (None: not set, never);
    ``ConfigError`` (one line) for a setting that is not a whole number of bytes (``plan_changes`` asks
    first, before anything is written)."""
    text = spark.conf.get(FROM_BYTES_SETTING, None)
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigError(f"{FROM_BYTES_SETTING} is {text!r}; expected a whole number of bytes, 0 or more")
    return value


def created_with(spark: SparkSession) -> dict[str, str]:
    """The deletion-vector properties a new silver table is created with: off, and the feature supported
    only when ``spark.resolver.deletionVectors.fromBytes`` is set (the table may turn them on later)."""
    return {**OFF, **SUPPORTED} if from_bytes(spark) is not None else dict(OFF)


def turn_on(spark: SparkSession, layout: TableLayout, silver: list[tuple[str, DeltaTable | None]]) -> bool:
    """Turn deletion vectors on for the table's kept silver tables (``(path, table)``; None: not kept) when
    a size is set for them, its change store has reached it and the store does not say they are on yet.
    Returns whether they were turned on now (the batch's marker commit then records it on the store)."""
    if layout.state.deletion_vectors:
        return False
    threshold = from_bytes(spark)
    size = layout.state.store_bytes
    if threshold is None or size < threshold or layout.state.is_new:
        return False
    for path, table in silver:
        if table is not None:
            set_properties(spark, path, ON)
    log.info("%s: change store holds %d bytes; silver tables now use deletion vectors", layout.table, size)
    return True


__all__ = ["FROM_BYTES_SETTING", "OFF", "ON", "SUPPORTED", "created_with", "from_bytes", "turn_on"]
