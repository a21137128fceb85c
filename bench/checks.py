"""Before anything is timed: is the direct seed what the resolver writes, and does each baseline give our
result on a small input (as far as its semantics allow)? The harness refuses to time what fails here."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.baselines import delta_docs, flat_events, mack_scd2, seed000, seed002
from bench.lake import seed_lake, seed_table
from bench.workload import TABLE, Spec, Txn, generate, target_wal2json, write_wal2json

__all__ = ["Check", "check_baselines", "check_seed", "read_events"]


@dataclass
class Check:
    name: str
    ok: bool
    why: str = ""


def read_events(spark: SparkSession, txns: list[Txn], path: str) -> DataFrame:
    """The transactions as a wal2json file, read by ``read_wal2json`` and held (local checkpoint)."""
    from resolver import read_wal2json

    batch = read_wal2json(spark, [write_wal2json(txns, path)], "wal2json-v2")
    events = batch.events.localCheckpoint(eager=True)
    batch.unpersist()
    return events


def _diff(name: str, ours: DataFrame, theirs: DataFrame) -> Check:
    theirs = theirs.select(*ours.columns)
    extra, missing = ours.exceptAll(theirs).count(), theirs.exceptAll(ours).count()
    if extra or missing:
        sample = ours.exceptAll(theirs).limit(3).collect() + theirs.exceptAll(ours).limit(3).collect()
        return Check(name, False, f"{extra} rows only in ours, {missing} only in theirs, e.g. {sample}")
    return Check(name, True)


def check_seed(spark: SparkSession, lake: str, spec: Spec) -> Check:
    """Seed ``lake`` directly, then compare its three tables with what the resolver makes of the same target
    as wal2json: the change store with ``explode_events``, the history with ``resolve_versions`` of it."""
    from resolver import plan_changes, read_wal2json
    from resolver.lake.folders import changes_path, history_path, snapshot_path
    from resolver.table.explode import explode_events
    from resolver.table.resolve import Holds, resolve_versions

    seed_lake(spark, lake, spec)
    path = target_wal2json(spec, os.path.join(lake, "_seed", "target.json"))
    batch = read_wal2json(spark, [path], "wal2json-v2")
    layout = plan_changes(spark, batch.events, lake).layouts[TABLE]
    assert layout is not None
    store = explode_events(batch.events, layout).drop("__file", "__line").localCheckpoint(eager=True)
    batch.unpersist()
    versions, _ = resolve_versions(store, layout, Holds(moves=False, truncates=False))
    read = spark.read.format("delta").load
    for name, ours, expected in (
        ("seed: change store", read(changes_path(lake, TABLE)).drop("__file", "__line"), store),
        ("seed: history", read(history_path(lake, TABLE)), versions),
    ):
        got = _diff(name, expected, ours)
        if not got.ok:
            return got
    snap = read(snapshot_path(lake, TABLE))
    current = versions.filter("__is_current").select(*snap.columns)
    got = _diff("seed: snapshot", current, snap)
    return Check("direct seed == resolver", got.ok, got.why)


def _ours(spark: SparkSession, seeded: str, lake: str, events: DataFrame) -> tuple[DataFrame, DataFrame]:
    from resolver import apply_changes
    from resolver.lake.folders import history_path, snapshot_path

    shutil.copytree(seeded, lake)
    apply_changes(spark, events, lake)
    read = spark.read.format("delta").load
    return read(snapshot_path(lake, TABLE)), read(history_path(lake, TABLE))


def _versions(history: DataFrame, keys: DataFrame) -> DataFrame:
    return history.join(keys, "id", "left_semi").groupBy("id").count()


def check_baselines(spark: SparkSession, folder: str, target_rows: int = 2000) -> list[Check]:
    """Each baseline and ours on the same small batches over the same ``target_rows``-row target."""
    seeded = os.path.join(folder, "seeded")
    spec = Spec(target_rows=target_rows)
    out = [check_seed(spark, seeded, spec)]
    mixed = Spec(
        target_rows=target_rows, batch_events=400, one_per_key=True, duplicate_fraction=0.05,
        out_of_order_fraction=0.05, seed=11,
    )  # fmt: skip
    events = read_events(spark, generate(mixed).batches[0].txns, os.path.join(folder, "mixed.json"))
    snap, hist = _ours(spark, seeded, os.path.join(folder, "ours-mixed"), events)
    snap, hist = snap.select("id", "val", "name"), hist.localCheckpoint(eager=True)
    read = spark.read.format("delta").load

    def run(
        name: str, fn: Callable[[SparkSession, DataFrame, str], object], cols: dict[str, str] | None
    ) -> str:
        path = os.path.join(folder, name)
        seed_table(spark, path, spec, cols or {}, history=cols is not None)
        fn(spark, events, path)
        return path

    out.append(_diff("delta docs SCD1", snap, read(run("docs-scd1", delta_docs.scd1, None))))
    out.append(_diff("seed 002 loop", snap, read(run("seed002", seed002.resolve, None))))
    t = read(run("seed000", seed000.merge, seed000.COLUMNS))
    ours_h = hist.select(
        "id", "val", "name", F.col("__start_lsn").alias("__start_time"),
        F.when(F.col("__end_lsn") < 2**63 - 1, F.col("__end_lsn")).alias("__end_time"),
        "__is_current", "__is_deleted",
    )  # fmt: skip
    out.append(_diff("seed 000 two-step merge", ours_h, t))
    # SCD2 recipes take no deletes: compare the keys the batch does not delete
    deleted = flat_events(events).filter("op = 'DELETE'").select(F.col("old_id").alias("id"))
    kept = ours_h.select("id").distinct().join(deleted, "id", "left_anti")
    current = ours_h.filter("__is_current").join(kept, "id", "left_semi").select("id", "val", "name")
    for name, fn, cols in (
        ("delta docs SCD2", delta_docs.scd2, delta_docs.SCD2_COLUMNS),
        ("mack type_2_scd_upsert", mack_scd2.upsert, mack_scd2.COLUMNS),
    ):
        try:
            t = read(run(name.replace(" ", "-"), fn, cols))
        except ImportError as e:
            out.append(Check(name, False, f"not installed: {e} (pip install -e '.[bench]')"))
            continue
        except Exception as e:  # noqa: BLE001 (a baseline that fails on this stack is reported, not timed)
            out.append(Check(name, False, f"fails here: {type(e).__name__}: {str(e).splitlines()[0][:300]}"))
            continue
        theirs = t.filter(F.col(cols["current"])).join(kept, "id", "left_semi").select("id", "val", "name")
        got = _diff(f"{name}: current rows", current, theirs)
        if got.ok:
            got = _diff(f"{name}: versions per key", _versions(ours_h, kept), _versions(t, kept))
        out.append(Check(name, got.ok, got.why))
    # key-change chains: seed 002's loop as described agrees; as published it does not
    chains = Spec(target_rows=target_rows, batch_events=60, chain_length=3, seed=12)
    events = read_events(spark, generate(chains).batches[0].txns, os.path.join(folder, "chains.json"))
    snap, _ = _ours(spark, seeded, os.path.join(folder, "ours-chains"), events)
    snap = snap.select("id", "val", "name").localCheckpoint(eager=True)
    for name, published in (("seed 002 loop, chains", False), ("seed 002 loop as published, chains", True)):
        path = os.path.join(folder, name.replace(" ", "-").replace(",", ""))
        seed_table(spark, path, spec, {}, history=False)
        seed002.resolve(spark, events, path, published=published)
        out.append(_diff(name, snap, read(path)))
    return out
