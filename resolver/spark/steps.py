"""The steps of a batch, named where Spark shows its jobs: each job a step runs carries the description
``<table>: <step>`` (``ingest: <step>`` for the batch-wide ones), in the Spark UI and its status store, and
the step's time is logged at DEBUG. ``python -m bench.steps`` counts the jobs of each step."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

__all__ = ["DESCRIPTION", "step"]

log = logging.getLogger(__name__)

DESCRIPTION = "spark.job.description"
"""The Spark local property (per thread) a job takes its description from."""


@contextmanager
def step(spark: SparkSession, table: str, name: str) -> Iterator[None]:
    """Run the block as step ``name`` of ``table``: its Spark jobs are described ``<table>: <name>``; the
    description the thread had before is put back afterwards."""
    sc = spark.sparkContext
    before = sc.getLocalProperty(DESCRIPTION)
    sc.setLocalProperty(DESCRIPTION, f"{table}: {name}")
    start = time.perf_counter()
    try:
        yield
    finally:
        sc.setLocalProperty(DESCRIPTION, before)  # type: ignore[arg-type]  # None clears it
        log.debug("%s: %s took %.2f s", table, name, time.perf_counter() - start)
