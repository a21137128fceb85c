"""The MERGEs that bring a silver table up to date, bounded by key-range literals Delta can skip files with:
a diff of resolved versions applied to the history, the current versions straight into the snapshot; and
the batch's late events."""

from __future__ import annotations

from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver.spark import sql
from resolver.spark.session_settings import lake_writes
from resolver.table.key_ranges import KeyRange, key_bounds, range_sql


def diff_rows(
    new: DataFrame, old: DataFrame, cols: list[str], join_on: list[str], key: list[str]
) -> DataFrame:
    """Rows to insert, update or delete so that ``old`` becomes ``new`` (``__action`` says which);
    identical rows are left out. Rows match on ``join_on`` plus null-safe equality of ``key``."""
    n, o = (
        new.select(*[sql.col(c) for c in join_on], *[sql.col(c) for c in cols if c not in join_on]),
        old.select(*[sql.col(c) for c in join_on], *[sql.col(c) for c in cols if c not in join_on]),
    )
    cond = [n[c] == o[c] for c in join_on] + [n[c].eqNullSafe(o[c]) for c in key if c not in join_on]
    joined = n.alias("n").join(o.alias("o"), cond, "full_outer")
    has_n = F.col("n.__start_lsn").isNotNull()
    has_o = F.col("o.__start_lsn").isNotNull()
    same = F.lit(True)
    for c in cols:
        same = same & sql.col("n", c).eqNullSafe(sql.col("o", c))
    action = F.when(has_n & ~has_o, "insert").when(~has_n & has_o, "delete").when(~same, "update")
    picked = [F.when(has_n, sql.col("n", c)).otherwise(sql.col("o", c)).alias(c) for c in cols]
    return joined.select(*picked, action.alias("__action")).filter(F.col("__action").isNotNull())


def late_events(rows: DataFrame, changes: DataFrame) -> int:
    """The batch's late events: older than an event the store held already for a key they touch (one
    aggregate over the affected keys' changes)."""
    in_batch = rows.select(*["__lsn", "__pos"]).distinct().withColumn("__in", F.lit(True))
    touches = (
        changes.select("__lsn", "__pos", F.col("__key").alias("__k"))
        .union(changes.select("__lsn", "__pos", F.col("__old_key").alias("__k")))
        .filter(F.col("__k").isNotNull())
        .join(in_batch, ["__lsn", "__pos"], "left")
    )
    newest_held = touches.filter(F.col("__in").isNull()).groupBy("__k").agg(F.max("__lsn").alias("__held"))
    late = (
        touches.filter(F.col("__in"))
        .join(newest_held, "__k")
        .filter(F.col("__lsn") < F.col("__held"))
        .select("__lsn", "__pos")
        .distinct()
    )
    got = late.agg(F.count("*").alias("n")).first()
    return int(got["n"]) if got else 0


def snapshot_rows(current: DataFrame, keys: DataFrame, key: list[str], cols: list[str]) -> DataFrame:
    """What ``merge_snapshot`` makes the snapshot hold, for any batch: each affected key (``keys``, the key
    columns, each key once) with its current version (``current``), or gone (``__gone``) when it has none;
    materialized (the MERGE reads it twice)."""
    on_key = [sql.col("c", k).eqNullSafe(sql.col("k", k)) for k in key]
    joined = keys.alias("k").join(current.withColumn("__has", F.lit(True)).alias("c"), on_key, "left")
    return joined.select(
        *[sql.col("k" if c in key else "c", c).alias(c) for c in cols],
        F.col("c.__has").isNull().alias("__gone"),
    ).localCheckpoint(eager=True)


def newest_rows(versions: DataFrame, key: list[str], cols: list[str]) -> DataFrame:
    """What ``merge_snapshot`` makes the snapshot hold when every affected key with a snapshot row
    has a version among ``versions`` (every version of the affected keys, materialized): each key's newest
    version (its largest ``__start_lsn``), gone (``__gone``) unless it is current. A grouping the MERGE's
    own jobs run, instead of a join with the keys materialized first (two Spark jobs). It holds for a batch
    whose every event is newer than all the table held (``Affected.after_held``): a key's row came from a
    transaction before the batch, whose state stays a version whatever the batch adds. A later part of a
    transaction held already can take every version from a key (a row inserted, then moved away, in one
    transaction split across batches): ``snapshot_rows`` then."""
    kept = [c for c in cols if c not in key]
    last = F.struct(*[sql.col(c) for c in kept], (~F.col("__is_current")).alias("__gone"))
    grouped = versions.groupBy(*[sql.col(k) for k in key]).agg(F.max_by(last, "__start_lsn").alias("__n"))
    return grouped.select(
        *[sql.col(c) if c in key else sql.col("__n", c).alias(c) for c in cols], F.col("__n.__gone")
    )


def merge_snapshot(
    target: DeltaTable, rows: DataFrame, key: list[str], cols: list[str], ranges: list[KeyRange]
) -> dict[str, int]:
    """One MERGE making the snapshot hold ``rows`` (``snapshot_rows`` or ``newest_rows``: one per affected
    key, with ``__gone``), without reading the snapshot first: a row updates the key's row when a column
    differs or is inserted, and a gone one deletes it. The condition bounds the target by ``ranges``.
    Returns the rows inserted, updated and deleted, as ``merge_changes``."""
    same = " AND ".join(f"t.{sql.ident(c)} <=> s.{sql.ident(c)}" for c in cols)
    return merge_snapshot_rows(
        target, rows, _on(ranges, key), update=f"NOT s.__gone AND NOT ({same})", cols=cols
    )


def merge_snapshot_rows(
    target: DeltaTable, rows: DataFrame, on: str, *, update: str, cols: list[str]
) -> dict[str, int]:
    """``merge_snapshot`` on the condition ``on`` with the update condition ``update``: a gone row
    (``__gone``) deletes the key's row, a matched one is updated on ``update``, any other is inserted."""
    return _merge(
        target.alias("t").merge(rows.alias("s"), on),
        delete="s.__gone",
        update=update,
        insert="NOT s.__gone",
        cols=cols,
    )


def replace_snapshot(
    target: DeltaTable, current: DataFrame, key: list[str], cols: list[str]
) -> dict[str, int]:
    """One MERGE making the whole snapshot equal ``current`` (every key is affected: a truncate, a new
    key): rows that differ are updated, new ones inserted, and rows without a current version deleted."""
    same = " AND ".join(f"t.{sql.ident(c)} <=> s.{sql.ident(c)}" for c in cols)
    builder = target.alias("t").merge(current.alias("s"), _on([], key)).whenNotMatchedBySourceDelete()
    return _merge(builder, delete=None, update=f"NOT ({same})", insert=None, cols=cols)


def merge_changes(
    target: DeltaTable, changes: DataFrame, key: list[str], cols: list[str], ranges: list[KeyRange]
) -> dict[str, int]:
    """One MERGE applying ``changes`` (with ``__action``) to ``target``, matching on ``key`` null-safely;
    returns the rows it inserted, updated and deleted (``insert``, ``update``, ``delete``: the MERGE's own
    result, read without a Spark job). The condition also bounds the target's key columns by ``ranges``
    (the affected keys' range) or, when there are none, by the changes' own key range (``key_bounds``),
    as literals Delta can skip files with (a join condition alone prunes nothing)."""
    bounds = range_sql(ranges, "t.") if ranges else key_bounds(changes, key)
    on = " AND ".join([*bounds, *[f"t.{sql.ident(k)} <=> s.{sql.ident(k)}" for k in key]])
    return _merge(
        target.alias("t").merge(changes.alias("s"), on),
        delete="s.__action = 'delete'",
        update="s.__action = 'update'",
        insert="s.__action = 'insert'",
        cols=cols,
    )


def merge_versions(
    target: DeltaTable,
    versions: DataFrame,
    key: list[str],
    cols: list[str],
    ranges: list[KeyRange],
    since: int,
) -> dict[str, int]:
    """One MERGE making the history hold ``versions`` (of the affected keys) when every event of the batch
    is newer than every keyed change held before it (``since``: the batch's lowest commit LSN), read
    straight from the versions, without a diff: such a batch only closes versions that were open and opens
    new ones, so no version is removed, and only versions that end at or after ``since`` can differ from
    the history's (the rest are left out of the source, and the condition bounds the target to them).
    Returns what it inserted and updated, as ``merge_changes``."""
    source = versions.filter(F.col("__end_lsn") >= F.lit(since)).select(*[sql.col(c) for c in cols])
    on = " AND ".join(
        [
            *range_sql(ranges, "t."),
            f"t.__end_lsn >= {int(since)}",
            "t.__start_lsn = s.__start_lsn",
            *[f"t.{sql.ident(k)} <=> s.{sql.ident(k)}" for k in key],
        ]
    )
    same = " AND ".join(f"t.{sql.ident(c)} <=> s.{sql.ident(c)}" for c in cols)
    builder = target.alias("t").merge(source.alias("s"), on)
    return _merge(builder, delete=None, update=f"NOT ({same})", insert=None, cols=cols)


def merge_rows(
    target: DeltaTable, source: DataFrame, on: str, *, update: list[str], insert: str, cols: list[str]
) -> dict[str, int]:
    """One MERGE of ``source`` (alias ``s``) into ``target`` (alias ``t``) on ``on``: a matched row takes the
    source's ``update`` columns, an unmatched source row whose ``insert`` condition holds is inserted with
    ``cols``. Returns what it inserted and updated, as ``merge_changes``."""
    setting: dict[str, str | Column] = {sql.ident(c): f"s.{sql.ident(c)}" for c in update}
    values: dict[str, str | Column] = {sql.ident(c): f"s.{sql.ident(c)}" for c in cols}
    builder = target.alias("t").merge(source.alias("s"), on).whenMatchedUpdate(set=setting)
    return _run(builder.whenNotMatchedInsert(insert, values))


def _on(ranges: list[KeyRange], key: list[str]) -> str:
    """A MERGE condition: the key columns equal null-safely, the target bounded by ``ranges``."""
    return " AND ".join([*range_sql(ranges, "t."), *[f"t.{sql.ident(k)} <=> s.{sql.ident(k)}" for k in key]])


def _merge(
    builder: Any, *, delete: str | None, update: str, insert: str | None, cols: list[str]
) -> dict[str, int]:
    """Run a MERGE: matched rows deleted on ``delete`` and updated on ``update``, unmatched source rows
    inserted on ``insert`` (None: always); returns what it inserted, updated and deleted."""
    values: dict[str, str | Column] = {sql.ident(c): f"s.{sql.ident(c)}" for c in cols}
    if delete is not None:
        builder = builder.whenMatchedDelete(delete)
    return _run(builder.whenMatchedUpdate(update, values).whenNotMatchedInsert(insert, values))


def _run(builder: Any) -> dict[str, int]:
    """Execute a MERGE ``builder``; returns what it inserted, updated and deleted."""
    with lake_writes(_session(builder)):
        result = builder.execute().first()
    got = result.asDict() if result is not None else {}
    return {action: int(got.get(column) or 0) for action, column in _RESULT_COLUMNS.items()}


def _session(builder: Any) -> SparkSession:
    """The session a MERGE builder's table belongs to (delta-spark's builder keeps it)."""
    spark = getattr(builder, "_spark", None)
    return spark if isinstance(spark, SparkSession) else SparkSession.builder.getOrCreate()


#: the columns of a MERGE's result (Delta's ``execute()``) that say what it did
_RESULT_COLUMNS = {"insert": "num_inserted_rows", "update": "num_updated_rows", "delete": "num_deleted_rows"}
