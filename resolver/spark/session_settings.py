"""Session settings changed for a while and given back (``set_settings``, ``restore_settings``): what a
session had, set or unset, is put back as it was. Used where a step needs Spark settings of its own on the
caller's session (``resolver.spark.expressions``, ``resolver.ops.maintenance``). ``shared_settings`` does it
for blocks that may overlap on one session (tables on threads, batches of streams): the first block sets,
the last one to end gives back."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

__all__ = ["LAKE_WRITES", "lake_writes", "restore_settings", "set_settings", "shared_settings"]

#: what every write of the lake needs of the session: timestamps written as microseconds (INT64
#: ``TIMESTAMP_MICROS``), never Spark's default INT96, which other readers misread: an open version's
#: ``__end_time`` (9999-12-31) overflows the nanoseconds INT96 decodes to (delta-rs fails, Polars returns
#: 2262-04-11 silently); and a MERGE into a partitioned table (a history, partitioned by ``__is_current``)
#: writes from the tasks that computed its rows, not after a shuffle by the partition column: Delta's
#: default sends each partition value to one task, so a history's whole open partition was written by one
#: core (G1 with local keys, ``bench/README.md``)
LAKE_WRITES = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.databricks.delta.merge.repartitionBeforeWrite.enabled": "false",
}

_lock = threading.Lock()
#: per session (its JVM object's id) and block name: how many blocks run, and the values to give back
_active: dict[tuple[str, str], tuple[int, dict[str, str | None]]] = {}


def set_settings(spark: SparkSession, settings: dict[str, str]) -> dict[str, str | None]:
    """Set ``settings`` on the session; returns what it had for those keys (None: unset)."""
    had = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    return had


def restore_settings(spark: SparkSession, had: dict[str, str | None]) -> None:
    """Put back what ``set_settings`` returned: each key set to its old value, or unset."""
    for key, value in had.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


@contextmanager
def shared_settings(spark: SparkSession, name: str, settings: dict[str, str]) -> Iterator[None]:
    """Run the block with ``settings`` on the session; blocks of the same ``name`` that overlap on one
    session share the change: the first sets, the last to end gives the values back."""
    session = (str(spark._jsparkSession.hashCode()), name)  # noqa: SLF001  # one entry per JVM session
    with _lock:
        count, saved = _active.get(session, (0, {}))
        if count == 0:
            saved = set_settings(spark, settings)
        _active[session] = (count + 1, saved)
    try:
        yield
    finally:
        with _lock:
            count, saved = _active.pop(session)
            if count > 1:
                _active[session] = (count - 1, saved)
            else:
                restore_settings(spark, saved)


@contextmanager
def lake_writes(spark: SparkSession) -> Iterator[None]:
    """Run the block with what every write of the lake needs of the session (``LAKE_WRITES``)."""
    with shared_settings(spark, "lake writes", LAKE_WRITES):
        yield
