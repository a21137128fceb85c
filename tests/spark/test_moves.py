"""The key-change graph's loops (``resolver.table.moves``): pointer jumping and label propagation stop when a
round changed nothing, which the round's own Spark job counts (``checkpoint_counting``), so each round
runs one job, and empty input stops at once instead of waiting for a count that never comes."""

from __future__ import annotations

import math

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from resolver.table.moves import checkpoint_counting, components, pointer_jump

pytestmark = pytest.mark.spark


def test_a_checkpoint_counts_its_flagged_rows_and_drops_the_flag(spark: SparkSession) -> None:
    rows = spark.range(100).select("id", (F.col("id") % 7 == 0).alias("flag"))
    done, flagged = checkpoint_counting(rows, "flag")
    assert flagged == 15
    assert done.columns == ["id"]
    assert sorted(r.id for r in done.collect()) == list(range(100))
    none, zero = checkpoint_counting(spark.range(0).select("id", F.lit(True).alias("flag")), "flag")
    assert (zero, none.collect()) == (0, [])


def test_pointer_jumping_finds_the_root_of_a_long_chain_in_log_rounds(spark: SparkSession) -> None:
    n = 100  # node i points to i + 1; the last node is the root
    parent = F.when(F.col("id") < n - 1, F.col("id") + 1)
    chain = spark.range(n).select(F.col("id").alias("node"), parent.alias("parent"))
    roots, rounds = pointer_jump(chain)
    assert {r.root for r in roots.collect()} == {n - 1}
    # ceil(log2(99 links)) rounds move a pointer; one more finds that none moved
    assert rounds == math.ceil(math.log2(n - 1)) + 1
    _, bounded = pointer_jump(chain, longest=n - 1)  # a known bound needs no round to find nothing moved
    assert bounded == math.ceil(math.log2(n - 1))
    empty = spark.createDataFrame([], "node long, parent long")
    nothing, once = pointer_jump(empty)
    assert (nothing.collect(), once) == ([], 1)


def test_components_label_each_node_with_its_smallest_neighbour(spark: SparkSession) -> None:
    edges = spark.createDataFrame([(5, 4), (4, 3), (3, 2), (2, 1), (9, 8)], "u long, v long")
    comps, rounds = components(edges)
    assert sorted((r.node, r.comp) for r in comps.collect()) == [
        (1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (8, 8), (9, 8)
    ]  # fmt: skip
    assert rounds >= 2  # the path needs a round that changes labels and one that finds none changed
    nothing, once = components(spark.createDataFrame([], "u long, v long"))
    assert (nothing.collect(), once) == ([], 1)
