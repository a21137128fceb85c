"""The only module that writes to the lake: table creation and the merges.

Lake layout under the lake folder (``../shared/DESIGN.md``): ``bronze/change_events``, ``quarantine``,
``silver/<schema>.<table>``, ``silver/<schema>.<table>__history``, and ``_resolver/`` for our own state.
"""

from __future__ import annotations

import os
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

__all__ = ["BRONZE", "QUARANTINE", "ensure_table", "insert_new", "table_path"]

BRONZE = "bronze/change_events"
QUARANTINE = "quarantine"


def table_path(lake: str, name: str) -> str:
    return os.path.join(os.path.abspath(lake), name)


def ensure_table(
    spark: SparkSession,
    path: str,
    schema: T.StructType,
    properties: dict[str, str],
    comment: str = "",
    cluster_by: tuple[str, ...] = (),
) -> DeltaTable:
    """Create the Delta table at ``path`` with these columns and properties unless it exists; a new table
    with ``cluster_by`` columns uses Delta liquid clustering on them."""
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    if cluster_by:
        builder = builder.clusterBy(*cluster_by)
    for key, value in properties.items():
        builder = builder.property(key, value)
    if comment:
        builder = builder.comment(comment)
    return builder.execute()


def insert_new(table: DeltaTable, source: DataFrame, condition: str) -> tuple[dict[str, int], int]:
    """Append the source rows that match no target row on ``condition`` (an insert-only MERGE, allowed on
    append-only tables). ``condition`` should carry literal bounds on target columns so Delta can skip
    files. Returns the MERGE's operation metrics (rows inserted, files scanned, ...; empty when the MERGE
    committed nothing) and the table's version afterwards."""
    before = _latest(table)["version"]
    table.alias("t").merge(source.alias("s"), condition).whenNotMatchedInsertAll().execute()
    latest = _latest(table)
    version = int(latest["version"])
    if version == before:  # nothing was committed
        return {}, version
    metrics = latest["operationMetrics"] or {}
    return {k: int(v) for k, v in metrics.items() if v is not None and v.isdigit()}, version


def _latest(table: DeltaTable) -> Any:
    """The latest commit's version and metrics, read from the Delta log (no data is scanned)."""
    return table.history(1).select("version", "operationMetrics").first()
