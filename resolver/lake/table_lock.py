"""One writer per lake where a file cannot be created atomically (a lake named by a URI: S3, ADLS, GCS, and
``file:/`` too): the lock is a Delta table of one row, ``<lake>/_resolver/lock``, and taking it is a
compare-and-swap commit. The owner lock of a pipeline whose checkpoint is named by a URI is a table of the
same kind beside the checkpoint, ``<checkpoint>.lock`` (``resolver.lake.lock.pipeline_lock``).
 The table is created with its one row (``holder`` NULL) in its first commit. Taking the lock is
``UPDATE … SET holder = <me> WHERE holder IS NULL``; taking over a dead holder's lock is ``… WHERE holder =
<what was read>``; releasing it is ``… SET holder = NULL WHERE holder = <me>``. Each UPDATE reads and
rewrites the table's one file, so of two runs that try at once Delta lets one commit and refuses the other
(a concurrent-modification error, read here as "someone else got it"); the number of rows the UPDATE
changed says whether this run holds the lock. The guarantee is Delta's own: the one its log store gives
every table of the lake (on S3 with more than one writer that means Delta's DynamoDB log store, as Delta's
documentation says; a single scheduler job per lake needs nothing).

Who holds it, waiting, ``LakeBusy`` and taking over from a process that is gone (same host, neither it nor
its Spark driver alive) work as for the lock file of a local lake (``resolver.lake.lock``).
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from resolver.lake import delta
from resolver.spark import sql
from resolver.spark.session_settings import lake_writes

__all__ = ["TableLock"]

_SCHEMA = T.StructType([T.StructField("slot", T.IntegerType()), T.StructField("holder", T.StringType())])


class TableLock:
    """The lock table at ``path`` (a lake's: ``resolver.lake.folders.Lake.lock``; the owner lock of a pipeline
    is another one, ``resolver.lake.lock.pipeline_lock``): ``take``, ``take_over`` and ``release`` are single
    commits that succeed for one run only; ``holder`` reads who has it."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self.spark, self.path = spark, path
        self.clear_hint = f"clear it with UPDATE {sql.delta_path(self.path)} SET holder = NULL"
        self._create()

    def _create(self) -> None:
        """The table with its one row, in one commit; a run that loses the race to create it finds it."""
        if delta.is_table(self.spark, self.path):
            return
        row = self.spark.createDataFrame([(0, None)], _SCHEMA)
        try:
            with lake_writes(row.sparkSession):
                row.write.format("delta").mode("errorifexists").save(self.path)
        except Exception:  # noqa: BLE001  # created by another run meanwhile (any error otherwise is raised below)
            if not delta.is_table(self.spark, self.path):
                raise

    def holder(self) -> dict[str, Any] | None:
        row = self.spark.read.format("delta").load(self.path).select("holder").first()
        return json.loads(row[0]) if row is not None and row[0] is not None else None

    def take(self, me: dict[str, Any]) -> bool:
        return self._swap("holder IS NULL", me)

    def take_over(self, was: dict[str, Any], me: dict[str, Any]) -> bool:
        return self._swap(f"holder = {sql.string(_text(was))}", me)

    def release(self, me: dict[str, Any]) -> None:
        self._swap(f"holder = {sql.string(_text(me))}", None)

    def _swap(self, condition: str, new: dict[str, Any] | None) -> bool:
        value = "NULL" if new is None else sql.string(_text(new))
        statement = f"UPDATE {sql.delta_path(self.path)} SET holder = {value} WHERE {condition}"
        try:
            row = self.spark.sql(statement).first()
        except Exception as e:  # noqa: BLE001
            if _conflict(e):
                return False  # another run committed first
            raise
        return bool(row is not None and row[0])


def _text(holder: dict[str, Any]) -> str:
    return json.dumps(holder, sort_keys=True)


def _conflict(error: Exception) -> bool:
    """Whether ``error`` is Delta refusing a commit because another one came first."""
    if isinstance(error, AnalysisException):
        return False
    text = f"{type(error).__name__} {error}"
    return "Concurrent" in text or "ConcurrentModificationException" in text
