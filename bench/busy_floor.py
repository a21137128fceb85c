"""G10's floor: what one batch's writes alone cost on this machine, with nothing of the resolver around them.

``bench.busy`` copies the lake before its one batch, applies the batch with ``ingest``, and then hands both
lakes to ``writes_of_batch``: for each of the lake's Delta tables it takes what the batch changed there
(untimed: the rows the batch added to bronze and to each change store, the history rows it opened or closed,
the snapshot rows it inserted or changed and the keys it deleted) and writes it to parquet. ``write_floor``
then makes the same changes to the copy, timed, with plain Delta operations on the same pool of threads:
bronze appended to, then per table the change store appended to and one MERGE into the history beside one
into the snapshot (their key columns matched null-safely; no range bounds, no diff, no resolution). Its
sources are given, not computed: no resolver that keeps these four tables in Delta under the lake's
contracts (DESIGN.md) writes a batch in less time here, so events over the floor's seconds bound G10's
events per second from above.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver.lake.folders import HISTORY, KEY_PROPERTY, Lake

__all__ = ["FloorWrites", "TableWrites", "write_floor", "writes_of_batch"]


@dataclass(frozen=True)
class TableWrites:
    """One source table's writes of the batch, as parquet folders (None: the batch wrote nothing there)."""

    folder: str  # the table's folder name in the lake
    key: list[str]  # its key columns (the change store's ``resolver.key``)
    store: str | None  # rows appended to the change store
    history: str | None  # history rows opened or changed (matched on the key and ``__start_lsn``)
    snapshot: str | None  # snapshot rows inserted or changed
    gone: str | None  # keys whose snapshot row the batch deleted


@dataclass(frozen=True)
class FloorWrites:
    """Every write of one batch, its sources on disk: bronze's new events and each table's writes."""

    bronze: str | None
    tables: list[TableWrites] = field(default_factory=list)


def _delta(spark: SparkSession, path: str) -> DataFrame:
    return spark.read.format("delta").load(path)


def _saved(rows: DataFrame, path: str) -> str | None:
    """``rows`` written to parquet at ``path``; None when there are none."""
    rows.write.mode("overwrite").parquet(path)
    return path if rows.sparkSession.read.parquet(path).limit(1).count() else None


def writes_of_batch(spark: SparkSession, before: str, after: str, work: str) -> FloorWrites:
    """What the batch changed between the lake ``before`` it and the lake ``after`` it, as parquet under
    ``work`` (untimed). Append-only tables (bronze, the change stores): the rows added; the history and the
    snapshot: the rows new or changed, and the snapshot's keys deleted."""
    was, now = Lake.at(before), Lake.at(after)
    bronze = _saved(_delta(spark, now.bronze).exceptAll(_delta(spark, was.bronze)), f"{work}/bronze")
    tables = []
    for name in sorted(os.listdir(os.path.join(now.root, "_resolver", "changes"))):
        new, old = _paths(now, name), _paths(was, name)
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{new['store']}`").first()
        key = json.loads(detail["properties"][KEY_PROPERTY])
        if not os.path.isdir(old["store"]):  # the table's first batch: every row is new
            tables.append(
                TableWrites(
                    name, key, *[_saved(_delta(spark, new[k]), f"{work}/{name}/{k}") for k in new], None
                )
            )
            continue
        snap_now, snap_was = _delta(spark, new["snapshot"]), _delta(spark, old["snapshot"])
        cond = [snap_was[k].eqNullSafe(snap_now[k]) for k in key]
        added = {kind: _delta(spark, new[kind]).exceptAll(_delta(spark, old[kind])) for kind in new}
        tables.append(
            TableWrites(
                name,
                key,
                _saved(added["store"], f"{work}/{name}/store"),
                _saved(added["history"], f"{work}/{name}/history"),
                _saved(added["snapshot"], f"{work}/{name}/snapshot"),
                _saved(snap_was.join(snap_now, cond, "left_anti").select(*key), f"{work}/{name}/gone"),
            )
        )
    return FloorWrites(bronze, tables)


def write_floor(spark: SparkSession, lake: str, writes: FloorWrites, pool: int) -> float:
    """Make ``writes`` to the lake at ``lake`` (the copy before the batch) with plain Delta operations, the
    way ``ingest`` orders its own: bronze first, then the tables on a pool of ``pool`` threads, each table's
    change store appended to and then its history and snapshot MERGEs at once. Returns the seconds."""
    from delta.tables import DeltaTable

    root = Lake.at(lake)
    handles = {}  # opened before the clock starts, as the resolver's session has them from earlier batches
    for t in writes.tables:
        for kind, path in _paths(root, t.folder).items():
            if not os.path.isdir(path):  # a table's first batch: appended to (created by the append)
                continue
            handles[(t.folder, kind)] = DeltaTable.forPath(spark, path)
            handles[(t.folder, kind)].toDF().schema  # noqa: B018  (the table's state loaded)
    DeltaTable.forPath(spark, root.bronze).toDF().schema  # noqa: B018

    def one(t: TableWrites) -> None:
        paths = _paths(root, t.folder)
        if t.store:
            spark.read.parquet(t.store).write.format("delta").mode("append").save(paths["store"])
        if (t.folder, "history") not in handles:  # its first batch: the silver tables appended to
            for kind in ("history", "snapshot"):
                if getattr(t, kind):
                    spark.read.parquet(getattr(t, kind)).write.format("delta").mode("append").save(
                        paths[kind]
                    )
            return
        with ThreadPoolExecutor(max_workers=1) as side:
            history = side.submit(_merge_history, spark, handles[(t.folder, "history")], t)
            try:
                _merge_snapshot(spark, handles[(t.folder, "snapshot")], t)
            finally:
                history.result()

    began = time.perf_counter()
    if writes.bronze:
        spark.read.parquet(writes.bronze).write.format("delta").mode("append").save(root.bronze)
    with ThreadPoolExecutor(max_workers=max(1, min(pool, len(writes.tables)))) as tables:
        list(tables.map(one, writes.tables))
    return time.perf_counter() - began


def _paths(lake: Lake, name: str) -> dict[str, str]:
    silver = lake.under("silver", name)
    return {
        "store": lake.under("_resolver", "changes", name),
        "history": silver + HISTORY,
        "snapshot": silver,
    }


def _on(key: list[str]) -> str:
    return " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in key)


def _merge_history(spark: SparkSession, target, t: TableWrites) -> None:  # type: ignore[no-untyped-def]
    """The history rows the batch opened or closed, MERGEd on the key and ``__start_lsn``."""
    if t.history:
        source = spark.read.parquet(t.history)
        on = _on(t.key) + " AND t.__start_lsn = s.__start_lsn"
        target.alias("t").merge(
            source.alias("s"), on
        ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()


def _merge_snapshot(spark: SparkSession, target, t: TableWrites) -> None:  # type: ignore[no-untyped-def]
    """The snapshot rows the batch inserted or changed, and its deleted keys, in one MERGE."""
    parts = []
    if t.snapshot:
        parts.append(spark.read.parquet(t.snapshot).withColumn("__gone", F.lit(False)))
    if t.gone:
        parts.append(spark.read.parquet(t.gone).withColumn("__gone", F.lit(True)))
    if not parts:
        return
    source = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1], allowMissingColumns=True)
    columns = target.toDF().columns
    values = {f"`{c}`": f"s.`{c}`" for c in columns}
    merge = target.alias("t").merge(source.alias("s"), _on(t.key)).whenMatchedDelete("s.__gone")
    merge.whenMatchedUpdate("NOT s.__gone", values).whenNotMatchedInsert("NOT s.__gone", values).execute()
