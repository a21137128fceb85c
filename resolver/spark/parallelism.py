"""How many tables of a batch are planned and applied at once (``parallel_tables``): the setting
``spark.resolver.parallelTables``, or by default the session's cores (Spark's default parallelism) kept
between 4 and 32. A table's steps are many small Spark jobs, so more tables in flight keep a cluster's
cores busy; on a small driver the jobs queue behind each other whatever the pool."""

from __future__ import annotations

from pyspark.sql import SparkSession

from resolver.errors import whole_number_setting

PARALLEL_TABLES_SETTING = "spark.resolver.parallelTables"
LEAST, MOST = 4, 32


def parallel_tables(spark: SparkSession) -> int:
    """The size of the pool of table threads; ``ConfigError`` (one line) for a setting that is not a whole
    number of at least 1 (``plan_changes`` asks first, before anything is written)."""
    text = spark.conf.get(PARALLEL_TABLES_SETTING, None)
    value = whole_number_setting(PARALLEL_TABLES_SETTING, text, 1, "a whole number of tables, 1 or more")
    return min(MOST, max(LEAST, spark.sparkContext.defaultParallelism)) if value is None else value
