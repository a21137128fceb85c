"""What a run cost besides seconds: the Spark jobs it ran (all threads) and the Delta commits it made."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

__all__ = ["MERGE_KEYS", "Run", "drain", "job_ids", "measure", "table_state"]

MERGE_KEYS = (
    "numTargetFilesRemoved",
    "numTargetFilesAdded",
    "numTargetRowsCopied",
    "numTargetRowsUpdated",
    "numTargetRowsInserted",
    "numTargetRowsDeleted",
    "scanTimeMs",
    "rewriteTimeMs",
)
"""The MERGE metrics reported (Delta 4.0 has no files-before/after-skipping metric: the files a MERGE
scanned are bounded by the table's file count before it, recorded as ``files_before``)."""


def drain(spark: SparkSession) -> None:
    """Wait until Spark's listener bus has delivered every event (job starts included) to the status store."""
    sc = spark.sparkContext
    try:
        sc._jsc.sc().listenerBus().waitUntilEmpty()  # noqa: SLF001
    except Exception:  # noqa: BLE001 (an internal API: fall back to waiting)
        time.sleep(0.5)


def job_ids(spark: SparkSession) -> set[int]:
    """Ids of the jobs Spark's status store holds that ran outside any job group: every job, from any
    thread, since nothing here sets a group (``spark.ui.retainedJobs`` must exceed the jobs of a run)."""
    drain(spark)
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def table_state(spark: SparkSession, path: str) -> tuple[int, int]:
    """The table's version and number of data files (-1, 0 when there is no table)."""
    if not DeltaTable.isDeltaTable(spark, path):
        return -1, 0
    table = DeltaTable.forPath(spark, path)
    version = int(table.history(1).first()["version"])  # type: ignore[index]
    return version, int(table.detail().first()["numFiles"])  # type: ignore[index]


@dataclass
class Run:
    seconds: float
    jobs: int
    commits: list[dict[str, Any]] = field(default_factory=list)  # operation, table and metrics per commit

    def merges(self) -> list[dict[str, Any]]:
        return [c for c in self.commits if c["operation"] == "MERGE"]


def measure(spark: SparkSession, fn: Callable[[], object], tables: dict[str, str]) -> Run:
    """Time ``fn()``, count the Spark jobs it ran, and read the commits it made to ``tables`` (name: path)."""
    before = {name: table_state(spark, path) for name, path in tables.items()}
    ids = job_ids(spark)
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    jobs = len(job_ids(spark) - ids)
    commits = []
    for name, path in tables.items():
        if not DeltaTable.isDeltaTable(spark, path):
            continue
        version, files = before[name]
        rows = DeltaTable.forPath(spark, path).history().filter(f"version > {version}").collect()
        for r in sorted(rows, key=lambda r: r["version"]):
            metrics = {k: int(v) for k, v in (r["operationMetrics"] or {}).items() if v and v.isdigit()}
            commits.append(
                {"table": name, "operation": r["operation"], "metrics": metrics, "files_before": files}
            )
    return Run(seconds, jobs, commits)
