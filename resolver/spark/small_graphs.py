"""How large a key-change graph the driver solves by itself (``small_graph_rows``): the setting
``spark.resolver.smallGraphRows``, 10,000 rows (pointers, edges or key changes) by default, 0 for every graph
in Spark jobs. ``resolver.table.moves`` counts a graph's rows in the job that materializes them and, at or
below this, collects and walks them in Python instead of running a round of Spark jobs per step."""

from __future__ import annotations

from pyspark.sql import SparkSession

from resolver.errors import whole_number_setting

__all__ = ["SMALL_GRAPH_ROWS", "SMALL_GRAPH_SETTING", "small_graph_rows"]

SMALL_GRAPH_SETTING = "spark.resolver.smallGraphRows"
SMALL_GRAPH_ROWS = 10_000


def small_graph_rows(spark: SparkSession) -> int:
    """The most rows of a graph solved on the driver; ``ConfigError`` (one line) for a setting that is not a
    whole number of 0 or more (``plan_changes`` asks first, before anything is written)."""
    expected = "a whole number of rows, 0 or more (0: every key-change graph in Spark jobs)"
    value = whole_number_setting(SMALL_GRAPH_SETTING, spark.conf.get(SMALL_GRAPH_SETTING, None), 0, expected)
    return SMALL_GRAPH_ROWS if value is None else value
