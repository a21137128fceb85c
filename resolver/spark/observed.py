"""Metrics a Spark job measures on its way (Spark's observed metrics): what a write or a checkpoint reads is
counted or aggregated by that same job, so knowing it costs no job of its own. Read an ``Observation`` only
after the job that reads the rows ran (``Observation.get`` waits for it)."""

from __future__ import annotations

import uuid

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

__all__ = ["counting", "observing"]


def observing(rows: DataFrame, label: str, *metrics: Column) -> tuple[DataFrame, Observation]:
    """``rows`` with the aggregates ``metrics`` (each with an alias) measured by whichever job reads them
    next, and the ``Observation`` that gives them. ``label`` names it in Spark (made unique here: two
    running queries may not observe under one name)."""
    observed = Observation(f"{label} {uuid.uuid4().hex}")
    return rows.observe(observed, *metrics), observed


def counting(rows: DataFrame, label: str, condition: Column) -> tuple[DataFrame, Observation]:
    """``observing`` the number of rows that meet ``condition``, as ``n``."""
    return observing(rows, label, F.count(F.when(condition, 1)).alias("n"))
