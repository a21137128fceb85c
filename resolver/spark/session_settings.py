"""Session settings changed for a while and given back (``set_settings``, ``restore_settings``): what a
session had, set or unset, is put back as it was. Used where a step needs Spark settings of its own on the
caller's session (``resolver.spark.expressions``, ``resolver.ops.maintenance``)."""

from __future__ import annotations

from pyspark.sql import SparkSession

__all__ = ["restore_settings", "set_settings"]


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
