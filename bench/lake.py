"""Large targets written straight with Spark ``range()``, for our lake and for the baselines' tables.
 Feeding 50M rows through wal2json would take hours here (the parser reads ~20k events/s, see
``PARSE_RESULTS.md``), so ``seed_lake`` writes the target (``bench.workload``: keys ``0..N-1``, ``versions``
versions each) directly into the three tables the resolver keeps for a table (``resolver/batch/silver.py``):

1. the first target transaction goes through the resolver for real (``read_wal2json`` + ``apply_changes``):
   that creates the change store, history and snapshot with the resolver's own schemas and properties
   (key, key source, schema version, column state);
2. the rest of the change store is appended (one typed change row per key and version, as
   ``resolver.table.explode`` writes them), and the history and snapshot are overwritten with every version
   and every live row, computed with the same formulas as ``bench.workload``;
3. the store gets the marker a batch leaves (``resolver.appliedVersion``, ``resolver.holds``), as a lake
   the resolver kept up to date would have it.

Rows are written in key order (history, snapshot) and commit order (change store), ``ROWS_PER_FILE`` rows
per file. ``check_seed`` compares a lake seeded this way with one fed the same target through the
resolver (history and snapshot equal; change store equal but for provenance columns).

The baselines' tables (``seed_table``) hold the same rows in their own layouts.
"""

from __future__ import annotations

import dataclasses
import math
import os

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.workload import BASE_LSN, LSN_STEP, T0_US, TABLE, TXN_ROWS, Spec, target_wal2json

__all__ = ["ROWS_PER_FILE", "base_rows", "check_seed", "seed_lake", "seed_table"]

ROWS_PER_FILE = 500_000
MAX_LSN = 2**63 - 1
MAX_TIME_US = 253402300799999999


def _files(rows: int) -> int:
    return max(1, math.ceil(rows / ROWS_PER_FILE))


def _txn_no(spec: Spec, k: Column, j: Column) -> Column:
    return j * F.lit((spec.target_rows + TXN_ROWS - 1) // TXN_ROWS) + F.floor(k / TXN_ROWS)


def base_rows(spark: SparkSession, spec: Spec, key_major: bool = True) -> DataFrame:
    """Every version of every target key: ``id, val, name, version, lsn, pos, xid, time, next_lsn,
    next_time`` (``next_*`` NULL for the last version); key-major (``id, version``) or commit order."""
    n, v = spec.target_rows, spec.versions
    if key_major:
        grid = spark.range(n, numPartitions=_files(n * v)).select(
            F.col("id"), F.explode(F.sequence(F.lit(0), F.lit(v - 1))).alias("version")
        )
    else:
        grid = spark.range(n * v, numPartitions=_files(n * v)).select(
            (F.col("id") % n).alias("id"), F.floor(F.col("id") / n).cast("int").alias("version")
        )
    k, j = F.col("id"), F.col("version")

    def lsn(ver: Column) -> Column:
        return F.lit(BASE_LSN) + _txn_no(spec, k, ver) * LSN_STEP

    def time(ver: Column) -> Column:
        return F.timestamp_micros(F.lit(T0_US) + _txn_no(spec, k, ver) * 1000)

    last = j == v - 1
    return grid.select(
        k.alias("id"),
        ((k * 7919 + j * 104729) % 1_000_003).alias("val"),
        F.concat(F.lit("row "), k.cast("string"), F.lit(" v"), j.cast("string")).alias("name"),
        j.alias("version"),
        lsn(j).cast("bigint").alias("lsn"),
        (k % TXN_ROWS).cast("int").alias("pos"),
        (F.lit(1000) + _txn_no(spec, k, j)).cast("bigint").alias("xid"),
        time(j).alias("time"),
        F.when(~last, lsn(j + 1)).cast("bigint").alias("next_lsn"),
        F.when(~last, time(j + 1)).alias("next_time"),
    )


def seed_lake(spark: SparkSession, lake: str, spec: Spec) -> None:
    """Write the target of ``spec`` into a new lake (see the module doc)."""
    from resolver import apply_changes, read_wal2json
    from resolver.lake.folders import changes_path, history_path, snapshot_path

    first = Spec(target_rows=min(TXN_ROWS, spec.target_rows))
    path = target_wal2json(first, os.path.join(lake, "_seed", "first.json"))
    batch = read_wal2json(spark, [path], "wal2json-v2")
    try:
        apply_changes(spark, batch.events, lake)
    finally:
        batch.unpersist()
    key = F.struct(F.col("id").alias("id"))
    store = base_rows(spark, spec, key_major=False).filter((F.col("version") > 0) | (F.col("id") >= TXN_ROWS))
    store = store.select(
        F.col("lsn").alias("__lsn"),
        F.col("pos").alias("__pos"),
        F.when(F.col("version") == 0, "insert").otherwise("update").alias("__op"),
        F.col("time").alias("__time"),
        F.col("xid").alias("__xid"),
        key.alias("__key"),
        F.when(F.col("version") > 0, key).alias("__old_key"),
        F.array(F.lit("id"), F.lit("val"), F.lit("name")).alias("__present"),
        "id",
        "val",
        "name",
        F.array().cast("array<string>").alias("__bad"),
        F.lit("bench://target").alias("__file"),
        F.lit(0).cast("bigint").alias("__line"),
    )
    _write(store, changes_path(lake, TABLE), "append")
    hist = base_rows(spark, spec).select(
        "id",
        "val",
        "name",
        F.col("lsn").alias("__start_lsn"),
        F.coalesce("next_lsn", F.lit(MAX_LSN)).alias("__end_lsn"),
        F.col("time").alias("__start_time"),
        F.coalesce("next_time", F.timestamp_micros(F.lit(MAX_TIME_US))).alias("__end_time"),
        F.col("next_lsn").isNull().alias("__is_current"),
        F.lit(False).alias("__is_deleted"),
        F.lit(None).cast("struct<id:bigint>").alias("__moved_from"),
        F.lit(None).cast("struct<id:bigint>").alias("__moved_to"),
    )
    _write(hist, history_path(lake, TABLE), "overwrite")
    snap = base_rows(spark, spec)
    snap = snap.filter(F.col("next_lsn").isNull()).select(
        "id", "val", "name", F.col("lsn").alias("__start_lsn"), F.col("time").alias("__start_time")
    )
    _write(snap, snapshot_path(lake, TABLE), "overwrite")
    _mark_applied(spark, changes_path(lake, TABLE), history_path(lake, TABLE), snapshot_path(lake, TABLE))


def _mark_applied(spark: SparkSession, store: str, history: str, snapshot: str) -> None:
    """The marker a resolver batch leaves on the change store (``resolver.tablestate.Marker``): the silver
    tables hold the store's current version, which holds no key change or truncate, its newest commit LSN
    and its largest key, with the silver tables' versions (what a batch of this release records); a lake
    in steady state has it, so the goals do not time a first batch's pass over the store, nor the path of a
    lake an older release marked."""
    from delta.tables import DeltaTable

    from resolver.lake.delta import set_properties
    from resolver.lake.folders import APPLIED_PROPERTY, HOLDS_PROPERTY
    from resolver.tablestate import KeyHigh, Marker

    version = DeltaTable.forPath(spark, store).history(1).first()["version"]  # type: ignore[index]
    held = spark.read.format("delta").load(store).agg(F.max("__lsn"), F.max("__key.id")).first()
    assert held is not None
    silver = [DeltaTable.forPath(spark, p).history(1).first() for p in (history, snapshot)]
    marker = Marker(version, False, False, int(held[0]), True, KeyHigh.of("id", int(held[1])), ())
    marker = dataclasses.replace(marker, silver=(int(silver[0]["version"]), int(silver[1]["version"])))  # type: ignore[index]
    set_properties(spark, store, {APPLIED_PROPERTY: str(version), HOLDS_PROPERTY: marker.holds_text()})


def _write(df: DataFrame, path: str, mode: str) -> None:
    from delta.tables import DeltaTable

    columns = DeltaTable.forPath(df.sparkSession, path).toDF().columns
    df.select(*columns).write.format("delta").mode(mode).save(path)


def seed_table(spark: SparkSession, path: str, spec: Spec, columns: dict[str, str], history: bool) -> None:
    """A baseline's target: the current rows (``history=False``: ``id, val, name``) or every version
    (``id, val, name`` plus the SCD2 columns named by ``columns``: ``start``, ``end``, ``current`` and
    optionally ``deleted``; ``start``/``end`` hold commit LSNs, ``end`` NULL while current)."""
    rows = base_rows(spark, spec)
    if not history:
        rows.filter(F.col("next_lsn").isNull()).select("id", "val", "name").write.format("delta").save(path)
        return
    cols: list[Column | str] = [
        "id",
        "val",
        "name",
        F.col("lsn").alias(columns["start"]),
        F.col("next_lsn").alias(columns["end"]),
        F.col("next_lsn").isNull().alias(columns["current"]),
    ]
    if "deleted" in columns:
        cols.append(F.lit(False).alias(columns["deleted"]))
    rows.select(*cols).write.format("delta").save(path)


def check_seed(spark: SparkSession, folder: str, spec: Spec) -> list[str]:
    """Seed a lake directly and another through the resolver with the same (small) target; returns the
    differences found (empty: the direct seed is what the resolver would have written)."""
    from resolver import apply_changes, read_wal2json
    from resolver.lake.folders import changes_path, history_path, snapshot_path

    direct, fed = os.path.join(folder, "direct"), os.path.join(folder, "fed")
    seed_lake(spark, direct, spec)
    path = target_wal2json(spec, os.path.join(folder, "target.json"))
    batch = read_wal2json(spark, [path], "wal2json-v2")
    try:
        apply_changes(spark, batch.events, fed)
    finally:
        batch.unpersist()
    problems = []
    for what, where, drop in (
        ("change store", changes_path, ["__file", "__line"]),
        ("history", history_path, []),
        ("snapshot", snapshot_path, []),
    ):
        a = spark.read.format("delta").load(where(direct, TABLE)).drop(*drop)
        b = spark.read.format("delta").load(where(fed, TABLE)).drop(*drop).select(*a.columns)
        extra, missing = a.exceptAll(b).count(), b.exceptAll(a).count()
        if extra or missing:
            problems.append(f"{what}: {extra} rows only in the direct seed, {missing} only in the fed lake")
    return problems
