"""Every change of a silver table since a point, readable across schema changes (``resolver changes``).

Two points, two questions:

- **since a Delta version** (``version=``): what the lake's commits changed, from that version on: the
  table's Delta Change Data Feed (``_change_type`` insert, update_preimage, update_postimage, delete;
  ``_commit_version``, ``_commit_timestamp``). Spark refuses to read a change feed across a rename or a
  type change (``DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_*``); here the versions are read in spans of one
  schema each (every commit that may change the schema starts a span: ``_SCHEMA_OPERATIONS``), each span
  with its own schema, and each span's columns are given the table's current names (the lake's schema log
  says which column was renamed from which) and types. A commit that rewrote the table for a schema
  change (``resolver.lake.tables.REWRITE_COMMIT``) changed no row and is left out. Each change is read
  once, with the current names.
- **since an LSN** (``lsn=``): what the source did after that LSN, from the history table: every version
  of a row that began after it (``__start_lsn > lsn``) or that ended after it. The answer does not depend
  on the order in which the events reached the lake, as the change feed's commit versions do.

The DataFrames are lazy; the spans' change feeds are read in one Spark job when the result is.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from resolver.errors import ConfigError
from resolver.lake import delta
from resolver.lake.folders import schema_log_path, snapshot_path
from resolver.lake.tables import REWRITE_COMMIT
from resolver.ops.timetravel import MAX_LSN, history_table, point
from resolver.spark import sql
from resolver.spark.session_settings import shared_settings

__all__ = ["CHANGE_COLUMNS", "changes", "changes_since_lsn", "changes_since_version"]

#: the columns a change feed adds to the table's own
CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")

#: Delta operations after which a table's schema may differ: a span of the change feed ends before each
_SCHEMA_OPERATIONS = frozenset(
    {
        "CREATE TABLE",
        "CREATE OR REPLACE TABLE",
        "REPLACE TABLE",
        "CREATE TABLE AS SELECT",
        "REPLACE TABLE AS SELECT",
        "CREATE OR REPLACE TABLE AS SELECT",
        "ADD COLUMNS",
        "CHANGE COLUMN",
        "CHANGE COLUMNS",
        "RENAME COLUMN",
        "DROP COLUMNS",
        "REPLACE COLUMNS",
        "SET TBLPROPERTIES",
        "UPGRADE PROTOCOL",
    }
)
#: a span's change feed read with the span's own schema (Delta's time travel option picks it)
_SPAN_READS = {"spark.databricks.delta.changeDataFeed.allowTimeTravelOptionsForSchema": "true"}


@dataclass(frozen=True)
class _Commit:
    version: int
    operation: str
    schema_may_change: bool
    rewrite: bool


def changes(
    spark: SparkSession,
    lake: str | None,
    table: str,
    *,
    version: int | None = None,
    lsn: int | str | None = None,
    history: bool = False,
) -> DataFrame:
    """Every change of ``table``'s snapshot (``history=True``: its history) since a Delta ``version`` (from
    that version on), or every version of its rows that began or ended after ``lsn`` (an int or
    PostgreSQL's ``'0/1932990'``; always the history table). Give exactly one of ``version`` and ``lsn``.
    With ``lake`` None, ``table`` is the name the lake's catalog registered (``resolver.lake.catalog``).

    Example::

        from resolver import local_session
        from resolver.ops.changes import changes
        spark = local_session()
        changes(spark, "lake", "public.customers", version=0).orderBy("_commit_version").show()
        changes(spark, "lake", "public.customers", lsn="0/1932990").show()
    """
    if (version is None) == (lsn is None):
        found = "both version and lsn" if version is not None else "neither version nor lsn"
        raise ConfigError(f"changes: found {found}, expected exactly one")
    if lake is None:
        from resolver.lake.catalog import locate

        lake, table = locate(spark, table)
    if lsn is not None:
        return changes_since_lsn(spark, lake, table, lsn)
    assert version is not None
    return changes_since_version(spark, lake, table, version, history=history)


def changes_since_lsn(spark: SparkSession, lake: str, table: str, lsn: int | str) -> DataFrame:
    """Every version of ``table``'s rows that began or ended after ``lsn``, from its history table: the
    history's columns, the versions still open with ``__end_lsn`` the largest LSN."""
    after = point(lsn=lsn).lsn
    assert after is not None
    rows = spark.read.format("delta").load(history_table(lake, table, spark))
    at = F.lit(after)
    return rows.filter(
        (F.col("__start_lsn") > at) | ((F.col("__end_lsn") > at) & (F.col("__end_lsn") < MAX_LSN))
    )


def changes_since_version(
    spark: SparkSession, lake: str, table: str, version: int, *, history: bool = False
) -> DataFrame:
    """The change feed of ``table``'s snapshot (or history) from Delta ``version`` on, across renames and
    type changes: the table's current columns (a column a span did not have is NULL there) and
    ``CHANGE_COLUMNS``; the commits that rewrote the table for a schema change left out."""
    path = history_table(lake, table, spark) if history else _snapshot(spark, lake, table)
    if version < 0:
        raise ConfigError(f"changes: found version {version}, expected 0 or more")
    target = DeltaTable.forPath(spark, path)
    latest = target.toDF().schema
    commits = _commits(target)
    last = max(c.version for c in commits)
    if version > last:
        raise ConfigError(f"changes: found version {version}, expected at most {last}, the table's newest")
    renames = _renames(spark, lake, table)
    parts = [_span(spark, path, start, end, latest, renames) for start, end in _spans(commits, version, last)]
    names = [f.name for f in latest.fields] + list(CHANGE_COLUMNS)
    if not parts:
        empty = T.StructType([*latest.fields, *_change_fields()])
        return spark.createDataFrame([], empty)
    rewrites = [c.version for c in commits if c.rewrite]
    out = reduce(DataFrame.unionByName, parts).select(*[sql.col(n) for n in names])
    return out.filter(~F.col("_commit_version").isin(rewrites)) if rewrites else out


def _snapshot(spark: SparkSession, lake: str, table: str) -> str:
    path = snapshot_path(lake, table)
    if delta.is_table(spark, path):
        return path
    history_table(lake, table, spark)  # its one-line error, with the lake's tables, when there is none
    raise ConfigError(
        f"table {table} has a history but no snapshot in lake {lake} (its outputs leave the snapshot "
        "out), expected --history"
    )


def _commits(table: DeltaTable) -> list[_Commit]:
    out = []
    for row in (
        table.history().select("version", "operation", "operationParameters", "userMetadata").collect()
    ):
        params = row["operationParameters"] or {}
        overwrites = str(params.get("canOverwriteSchema", "false")).lower() == "true"
        schema = row["operation"] in _SCHEMA_OPERATIONS or overwrites
        out.append(_Commit(row["version"], row["operation"], schema, row["userMetadata"] == REWRITE_COMMIT))
    return sorted(out, key=lambda c: c.version)


def _spans(commits: list[_Commit], first: int, last: int) -> list[tuple[int, int]]:
    """[start, end] version ranges from ``first`` to ``last``, each within one schema."""
    starts = [first] + [c.version for c in commits if c.schema_may_change and first < c.version <= last]
    ends = [s - 1 for s in starts[1:]] + [last]
    return list(zip(starts, ends, strict=True))


def _renames(spark: SparkSession, lake: str, table: str) -> dict[str, str]:
    """Every earlier name of a column of ``table`` -> its current name, from the lake's schema log."""
    path = schema_log_path(lake)
    if not delta.is_table(spark, path):
        return {}
    log = spark.read.format("delta").load(path)
    found = log.filter((F.col("table") == table) & (F.col("change") == "renamed"))
    out: dict[str, str] = {}
    for row in found.select("version", "old_name", "column").orderBy("version").collect():
        old, new = row["old_name"], row["column"]
        out = {k: (new if v == old else v) for k, v in out.items()}
        out[old] = new
    return out


def _span(
    spark: SparkSession, path: str, start: int, end: int, latest: T.StructType, renames: dict[str, str]
) -> DataFrame:
    """The change feed of versions ``start`` to ``end`` (one schema), read with that schema and given the
    current names and types."""
    with shared_settings(spark, "changes", _SPAN_READS):
        rows = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", start)
            .option("endingVersion", end)
            .option("versionAsOf", end)
            .load(path)
        )
    have = set(rows.columns)
    current: dict[str, str] = {}
    for name in rows.columns:
        new = renames.get(name, name)
        current[new if new not in have else name] = name
    columns: list[Column] = []
    for f in latest.fields:
        if f.name in current:
            columns.append(sql.col(current[f.name]).cast(f.dataType).alias(f.name))
        else:
            columns.append(F.lit(None).cast(f.dataType).alias(f.name))
    return rows.select(*columns, *[F.col(c) for c in CHANGE_COLUMNS])


def _change_fields() -> list[T.StructField]:
    return [
        T.StructField("_change_type", T.StringType()),
        T.StructField("_commit_version", T.LongType()),
        T.StructField("_commit_timestamp", T.TimestampType()),
    ]
