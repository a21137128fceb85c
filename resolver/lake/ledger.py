"""The ledger ``_resolver/ledger`` (``resolver.lake.folders.Lake.ledger``): one row per landed file a run
applied (path, size, modification time, run id, batch), so that ``resolver run`` applies each file exactly
once (``resolver.pipelines.run``). A file is recorded only after every table of its batch was applied."""

from __future__ import annotations

from datetime import UTC, datetime

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from resolver.lake import delta

__all__ = ["LEDGER_SCHEMA", "read_ledger", "record_files"]

LEDGER_SCHEMA = T.StructType(
    [
        T.StructField("path", T.StringType(), False),
        T.StructField("size", T.LongType(), False),
        T.StructField("modified_ns", T.LongType(), False),
        T.StructField("run_id", T.StringType(), False),
        T.StructField("batch", T.IntegerType(), False),
        T.StructField("applied_at", T.TimestampType(), False),
    ]
)


def read_ledger(spark: SparkSession, path: str) -> dict[str, tuple[int, int]]:
    """Each applied file's (size, modification time) as last recorded in the ledger at ``path`` (one row
    per file: a small table)."""
    if not DeltaTable.isDeltaTable(spark, path):
        return {}
    rows = spark.read.format("delta").load(path).select("path", "size", "modified_ns", "applied_at").collect()
    latest: dict[str, tuple[object, tuple[int, int]]] = {}
    for r in sorted(rows, key=lambda r: r["applied_at"]):
        latest[r["path"]] = (r["applied_at"], (int(r["size"]), int(r["modified_ns"])))
    return {p: v for p, (_, v) in latest.items()}


def record_files(
    spark: SparkSession,
    path: str,
    files: list[str],
    stats: dict[str, tuple[int, int]],
    run_id: str,
    batch: int,
) -> None:
    """Add a batch's files (``stats``: each one's size and modification time) to the ledger at ``path``, in
    one commit and one file (``delta.one_file``); a file already there with the same size and time is not
    added twice."""
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = [(f, stats[f][0], stats[f][1], run_id, batch, now) for f in files]
    table = delta.ensure_table(
        spark, path, LEDGER_SCHEMA, {"delta.appendOnly": "true"}, "files applied by resolver run"
    )
    condition = "t.path = s.path AND t.size = s.size AND t.modified_ns = s.modified_ns"
    delta.insert_new(table, delta.one_file(spark.createDataFrame(rows, LEDGER_SCHEMA)), condition)
