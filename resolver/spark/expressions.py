"""How a batch's Spark expressions run (``expressions_for``): with the setting
``spark.resolver.interpretBelowEvents`` at N (default 0: never), a batch of fewer than N events runs with
Spark's expressions interpreted instead of compiled.

Spark compiles every query's expressions into Java classes (whole-stage code generation), and the JVM then
compiles those classes again to machine code. A batch runs a few dozen queries per table, and those planned
with the batch's own literals (LSN bounds, key ranges) are compiled anew for every batch (the rest are kept
when the session keeps enough classes: ``spark.sql.codegen.cache.maxEntries``, ``resolver.spark.session``);
on a small batch into small tables compiling costs more than running would. Later batches on 2 cores, warm:
100 events on each of 4 tables, 28-30 s compiled against 21-23 s interpreted (one session per mode); side by
side in one session, 10,000 events on each of 2 tables, 17-19 s against 15-17 s, and 60,000 events on one
table, 19-21 s against 22-31 s (there compiling pays).
It is off by default because a small batch into a large table pays for it: a MERGE that rewrites a file
copies every row of it, and copying runs about three times slower interpreted (bench G2, 1,000 events into
a 1,000,000-row history: the batch 33.5 s interpreted against 18.2 s compiled, its history MERGE's
rewrite 21.5 s against 7.1 s). Turn it on where both the batches and the tables they write are small.
Interpreted is the mode Spark falls back to when compiling fails, and the mode its own test suites run in:
the same results, row for row.

The two settings (``spark.sql.codegen.wholeStage`` and ``spark.sql.codegen.factoryMode``) are set on the
session for the batch and given back their values after it; a caller's own queries that run on the same
session at the same time run interpreted too (only their speed changes). Overlapping batches on one session
share the change: the last one to end gives the values back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

from resolver.errors import whole_number_setting
from resolver.spark.session_settings import shared_settings

__all__ = ["INTERPRETED", "INTERPRET_BELOW_EVENTS", "INTERPRET_SETTING", "expressions_for", "interpret_below"]

INTERPRET_SETTING = "spark.resolver.interpretBelowEvents"
INTERPRET_BELOW_EVENTS = 0  # off: see the module's docstring
#: Spark's settings for interpreted expressions: no whole-stage code, no compiled projections or predicates
INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def interpret_below(spark: SparkSession) -> int:
    """The events below which a batch is interpreted; ``ConfigError`` (one line) for a setting that is not a
    whole number of 0 or more (``plan_batch`` asks first, before anything is written)."""
    expected = "a whole number of events, 0 or more (0: every batch's expressions compiled)"
    value = whole_number_setting(INTERPRET_SETTING, spark.conf.get(INTERPRET_SETTING, None), 0, expected)
    return INTERPRET_BELOW_EVENTS if value is None else value


@contextmanager
def expressions_for(spark: SparkSession, events: int) -> Iterator[bool]:
    """Run the block interpreted when ``events`` is below ``interpret_below``; yields whether it is."""
    if events >= interpret_below(spark):
        yield False
        return
    with shared_settings(spark, "interpreted", INTERPRETED):
        yield True
