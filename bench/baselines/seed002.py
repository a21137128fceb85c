"""Seed 002's iterative resolver, written by us from the seed: the lake's rows and the batch's events in
one DataFrame keyed by the *old* key, and a loop that keeps the latest event per old key until a round
changes nothing, with two ``count()`` actions per round and no checkpoint (the seed caches the input once).

As published, every round re-keys *every* update to its new key at once, so in a chain ``a -> b -> c`` the
update ``b -> c`` leaves key ``b`` before ``a -> b`` arrives there, and both ``b`` and ``c`` survive
(``published=True`` reproduces that; ``bench.checks`` shows it). What the seed describes, and what we time,
keeps an update *pending* until the row it changes has arrived at its old key: one round per link of a
chain, so a chain of N key changes costs N rounds.

Semantics: snapshot only; keys are not reused after a move; deletes and inserts as in the seed. The result
overwrites the snapshot table (the seed persists the resolved DataFrame "in any format").
"""

from __future__ import annotations

import time

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from bench.baselines import flat_events

__all__ = ["Deadline", "resolve"]


class Deadline(Exception):
    """The loop ran past its time budget; ``rounds`` rounds were done."""

    def __init__(self, rounds: int, seconds: float) -> None:
        super().__init__(f"stopped after {rounds} rounds ({seconds:.1f} s)")
        self.rounds, self.seconds = rounds, seconds


def resolve(
    spark: SparkSession,
    events: DataFrame,
    path: str,
    *,
    published: bool = False,
    budget_s: float | None = None,
) -> int:
    """Resolve the batch against the snapshot at ``path`` and overwrite it; returns the rounds run.
    Raises ``Deadline`` when ``budget_s`` seconds pass before the loop ends (checked between rounds)."""
    start = time.perf_counter()
    lake = (
        spark.read.format("delta")
        .load(path)
        .select(
            F.lit(None).cast("string").alias("type"),
            F.col("id").alias("old_id"),
            "id",
            "val",
            "name",
            F.lit(0).cast("bigint").alias("ts"),
            F.lit(0).alias("pos"),
            F.lit(True).alias("settled"),
        )
    )
    flat = flat_events(events).dropDuplicates(["lsn", "pos"])
    batch = flat.select(
        F.col("op").alias("type"),
        F.coalesce("old_id", "id").alias("old_id"),
        "id",
        "val",
        "name",
        F.col("lsn").alias("ts"),
        "pos",
        (F.col("op") == "INSERT").alias("settled"),
    )
    df = lake.unionByName(batch).cache()
    by_old = Window.partitionBy("old_id")
    latest = by_old.orderBy(F.desc("ts"), F.desc("pos"))
    rounds = 0
    while True:
        if published:
            before = (
                df
                if rounds == 0
                else df.withColumn(
                    "old_id", F.when(F.col("type") == "UPDATE", F.col("id")).otherwise(F.col("old_id"))
                )
            )
            after = before.withColumn("rank", F.row_number().over(latest)).filter("rank = 1").drop("rank")
        else:
            before = df
            row_at = F.min(F.when(F.col("settled"), F.struct("ts", "pos"))).over(by_old)
            ranked = before.withColumn("rank", F.row_number().over(latest)).withColumn("row_at", row_at)
            winners = ranked.filter("rank = 1")
            applies = ~F.col("settled") & F.coalesce(F.col("row_at") < F.struct("ts", "pos"), F.lit(False))
            after = winners.filter(~(applies & (F.col("type") == "DELETE"))).select(
                "type",
                F.when(applies, F.col("id")).otherwise(F.col("old_id")).alias("old_id"),
                "id",
                "val",
                "name",
                "ts",
                "pos",
                (F.col("settled") | applies).alias("settled"),
            )
        rounds += 1
        done = after.count() == before.count()
        df = after
        if done:
            break
        if budget_s is not None and time.perf_counter() - start > budget_s:
            raise Deadline(rounds, time.perf_counter() - start)
    live = df.filter(F.coalesce(F.col("type") != "DELETE", F.lit(True)))
    live.select("id", "val", "name").distinct().write.format("delta").mode("overwrite").save(path)
    return rounds
