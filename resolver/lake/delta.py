"""Delta tables as the resolver uses them: creation, appends, insert-only MERGEs, versions and properties,
each without a Spark job of its own where Delta allows (the MERGEs that bring a table's silver tables up to
date are ``resolver.table.merge``'s; where each table lives, ``resolver.lake.folders``).

Lake layout under the lake folder (``../shared/DESIGN.md``): ``bronze/change_events``, ``quarantine``,
``silver/<table folder>``, ``silver/<table folder>__history``, and ``_resolver/`` for our own state (the
folder of a source table: ``resolver.lake.folders``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from resolver.paths import join_inside
from resolver.spark import sql
from resolver.spark.observed import counting
from resolver.spark.session_settings import lake_writes

__all__ = [
    "open_table",
    "COLUMN_MAPPING",
    "NO_CHANGE_FEED",
    "TIMESTAMPS_MICROS",
    "TIMESTAMPS_PROPERTY",
    "append",
    "append_counted",
    "ensure_table",
    "FileLayout",
    "insert_new",
    "is_table",
    "one_file",
    "version",
    "partition_columns",
    "properties_and_size",
    "properties_for_names",
    "set_properties",
    "table_path",
]


#: on every table the lake creates: its timestamps are written as microseconds (``lake_writes``); a table
#: without it may hold INT96 ones, which ``resolver optimize`` rewrites once (``resolver.ops.maintenance``)
TIMESTAMPS_PROPERTY, TIMESTAMPS_MICROS = "resolver.timestamps", "micros"


#: Delta column mapping by name: what a table needs to hold columns whose names Delta refuses otherwise.
COLUMN_MAPPING = {
    "delta.columnMapping.mode": "name",
    "delta.minReaderVersion": "2",
    "delta.minWriterVersion": "5",
}
_NEEDS_MAPPING = frozenset(" ,;{}()\n\t=")


#: Change Data Feed off: Delta 4.0's MERGE writes its change data through column names quoted without
#: doubling a backtick inside (``INVALID_ATTRIBUTE_NAME_SYNTAX``), so a table with such a column keeps none.
NO_CHANGE_FEED = {"delta.enableChangeDataFeed": "false"}


def properties_for_names(names: Iterable[str]) -> dict[str, str]:
    """What a table needs to hold these column names: ``COLUMN_MAPPING`` when one has a character Delta
    takes only with column mapping (a space, ``,;{}()=``, a tab or a line end: ordinary in PostgreSQL),
    ``NO_CHANGE_FEED`` when one has a backtick; nothing for ordinary names (ordinary tables stay as they
    are)."""
    names = list(names)
    out = dict(COLUMN_MAPPING) if any(_NEEDS_MAPPING.intersection(n) for n in names) else {}
    if any("`" in n for n in names):
        out.update(NO_CHANGE_FEED)
    return out


def table_path(lake: str, name: str) -> str:
    """A table of the lake by its path relative to the lake (``bronze/change_events``): an absolute path,
    or a URI for a lake named by one."""
    return join_inside(lake, *name.split("/"))


def open_table(spark: SparkSession, path: str) -> DeltaTable | None:
    """The Delta table at ``path``, None when there is none: one look at its log. (``is_table`` then
    ``DeltaTable.forPath`` looked twice, about 10 and 25 ms a table of a batch on 2 cores.)"""
    try:
        return DeltaTable.forPath(spark, path)
    except AnalysisException:
        if DeltaTable.isDeltaTable(spark, path):  # a table that failed to open for another reason
            raise
        return None


@dataclass(frozen=True)
class FileLayout:
    """How a new table lays its files out: clustered by ``cluster_by`` (Delta liquid clustering) or
    partitioned by ``partition_by`` (never both); neither: files as they are written."""

    cluster_by: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.cluster_by and self.partition_by:
            raise ValueError("a Delta table is clustered or partitioned, not both")


def ensure_table(
    spark: SparkSession,
    path: str,
    schema: T.StructType,
    properties: dict[str, str],
    comment: str = "",
    files: FileLayout = FileLayout(),
) -> DeltaTable:
    """Create the Delta table at ``path`` with these columns and properties unless it exists, its files laid
    out as ``files`` says."""
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    if files.cluster_by:
        builder = builder.clusterBy(*files.cluster_by)
    if files.partition_by:
        builder = builder.partitionedBy(*files.partition_by)
    for key, value in {**properties, TIMESTAMPS_PROPERTY: TIMESTAMPS_MICROS}.items():
        builder = builder.property(key, value)
    if comment:
        builder = builder.comment(comment)
    return builder.execute()


def partition_columns(table: DeltaTable) -> list[str]:
    """The columns ``table`` is partitioned by (none: not partitioned), from its log's metadata (no Spark
    job)."""
    metadata = json.loads(_latest(table).metadata().json())["metaData"]
    return [str(c) for c in metadata.get("partitionColumns", [])]


def _latest(table: DeltaTable) -> Any:
    """The table's latest snapshot in its log (the JVM's ``Snapshot``), brought up to date."""
    none = table._spark._jvm.scala.Option.empty()  # noqa: SLF001
    return table._jdt.deltaLog().update(False, none, none)  # noqa: SLF001


def insert_new(table: DeltaTable, source: DataFrame, condition: str) -> tuple[dict[str, int], int]:
    """Append the source rows that match no target row on ``condition`` (``t.`` the table's columns, ``s.``
    the source's): the source left-anti-joined with the table, then appended, in one Spark job. An
    insert-only MERGE did the same in four (its join, its write, a count and Delta's snapshot state after
    the commit: ``bench.steps``) and twice the time; its conflict check adds nothing the lake's writers
    need, since they take the lake's lock (a blind append under it, like the change store's). ``condition``
    should carry literal bounds on target columns: Spark pushes them into the table's scan, so Delta skips
    the files outside them. Returns ``{"numTargetRowsInserted": n}`` (empty when nothing was inserted, and
    then nothing was committed: Delta records no commit of no files) and the table's version afterwards."""
    unseen = source.alias("s").join(table.toDF().alias("t"), F.expr(condition), "left_anti")
    path = str(table._jdt.deltaLog().dataPath().toString())  # noqa: SLF001  (the log's own, no Spark job)
    return append_counted(table, path, unseen)


def one_file(rows: DataFrame) -> DataFrame:
    """A handful of rows the driver made (``createDataFrame``: split over the session's default parallelism,
    a file per part when written) as one part: the lake's own small tables (the schema log, the run's
    ledger) then take one file per commit, not one per core (11 schema-log rows: 4 files before)."""
    return rows.coalesce(1)


def append(table: DeltaTable, path: str, rows: DataFrame) -> int:
    """Append ``rows`` to ``table`` (at ``path``): its columns by name, each cast to the table's type, other
    columns left out. Returns the table's version afterwards."""
    fields = table.toDF().schema.fields
    selected = rows.selectExpr(
        *[f"CAST({sql.ident(f.name)} AS {sql.type_sql(f.dataType)}) AS {sql.ident(f.name)}" for f in fields]
    )
    with lake_writes(rows.sparkSession):
        selected.write.format("delta").mode("append").save(path)
    return version(table)


def append_counted(table: DeltaTable, path: str, rows: DataFrame) -> tuple[dict[str, int], int]:
    """``append``, returning what ``insert_new`` returns (``{"numTargetRowsInserted": n}``, empty when
    nothing was written, and the version): the rows are counted on their way in (an observed metric of the
    write itself, no Spark job of its own)."""
    counted, observed = counting(rows, "append", F.lit(True))
    version = append(table, path, counted)
    written = int(observed.get["n"])
    return ({"numTargetRowsInserted": written} if written else {}), version


def is_table(spark: SparkSession, path: str) -> bool:
    """Whether a Delta table is at ``path`` (a path or a URI)."""
    return bool(DeltaTable.isDeltaTable(spark, path))


def version(table: DeltaTable) -> int:
    """The table's version as this process knows it, without a Spark job (reading the table's history
    runs one): right after a write through it, the version of that write's commit, because Delta moves
    its log's snapshot on when it commits, and a MERGE first brings the snapshot up to the latest commit.
    A commit by another process after that is not seen; the markers that use the version only go stale."""
    return int(table._jdt.deltaLog().unsafeVolatileSnapshot().version())  # noqa: SLF001


def properties_and_size(table: DeltaTable) -> tuple[dict[str, str], int]:
    """The table's properties and its size in bytes at its latest version, read from its log without a
    Spark job (``DeltaTable.detail()`` runs three to compute the size): the properties from the table's
    metadata, the size from the version's checksum file, which Delta writes with every commit (computed
    from the log, with Spark jobs, when the version has none: a table another writer committed to)."""
    snapshot = _latest(table)
    # the metadata action's JSON (one call), not its map read entry by entry (several calls an entry)
    conf = json.loads(snapshot.metadata().json())["metaData"].get("configuration", {})
    checksum = snapshot.checksumOpt()
    size = checksum.get().tableSizeBytes() if checksum.isDefined() else snapshot.sizeInBytes()
    return {str(k): str(v) for k, v in conf.items()}, int(size)


def set_properties(spark: SparkSession, path: str, props: dict[str, str]) -> None:
    """Set table properties of the Delta table at ``path`` (one commit)."""
    spec = ", ".join(f"{sql.string(k)} = {sql.string(v)}" for k, v in props.items())
    spark.sql(f"ALTER TABLE {sql.delta_path(path)} SET TBLPROPERTIES ({spec})")
