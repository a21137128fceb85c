"""The key-change graph's loops (``resolver.table.moves``): pointer jumping and label propagation stop when a
round changed nothing, which the round's own Spark job counts (``checkpoint_counting``), so each round
runs one job, and empty input stops at once instead of waiting for a count that never comes. A small graph
is solved on the driver instead (``spark.resolver.smallGraphRows``), with the same answers as the Spark
jobs give on random forests and graphs; a bad setting fails before anything is written, with one line."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from resolver.spark.small_graphs import SMALL_GRAPH_SETTING
from resolver.table.moves import checkpoint_counting, components, linked_keys, pointer_jump
from tests.settings import bad_setting_message, setting

pytestmark = pytest.mark.spark


@pytest.fixture
def in_spark(spark: SparkSession) -> Iterator[SparkSession]:
    """The session with every graph solved by Spark jobs, however small."""
    with setting(spark, SMALL_GRAPH_SETTING, "0"):
        yield spark


def test_a_checkpoint_counts_its_flagged_rows_and_drops_the_flag(spark: SparkSession) -> None:
    rows = spark.range(100).select("id", (F.col("id") % 7 == 0).alias("flag"))
    done, flagged = checkpoint_counting(rows, "flag")
    assert flagged == 15
    assert done.columns == ["id"]
    assert sorted(r.id for r in done.collect()) == list(range(100))
    none, zero = checkpoint_counting(spark.range(0).select("id", F.lit(True).alias("flag")), "flag")
    assert (zero, none.collect()) == (0, [])


def test_pointer_jumping_finds_the_root_of_a_long_chain_in_log_rounds(in_spark: SparkSession) -> None:
    spark = in_spark
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


def test_components_label_each_node_with_its_smallest_neighbour(in_spark: SparkSession) -> None:
    spark = in_spark
    edges = spark.createDataFrame([(5, 4), (4, 3), (3, 2), (2, 1), (9, 8)], "u long, v long")
    comps, rounds = components(edges)
    assert sorted((r.node, r.comp) for r in comps.collect()) == [
        (1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (8, 8), (9, 8)
    ]  # fmt: skip
    assert rounds >= 2  # the path needs a round that changes labels and one that finds none changed
    nothing, once = components(spark.createDataFrame([], "u long, v long"))
    assert (nothing.collect(), once) == ([], 1)


def _forest(rng: random.Random, n: int) -> list[tuple[int, int | None]]:
    """``n`` nodes, each pointing to a later one or to nothing (a forest of chains and trees), with a few
    pointers to ids that are not nodes (their chains end there)."""
    out: list[tuple[int, int | None]] = []
    for i in range(n):
        pick = rng.random()
        parent = None if pick < 0.2 or i == n - 1 else rng.randrange(i + 1, n)
        out.append((i * 3, 3 * n + i if pick > 0.95 else None if parent is None else parent * 3))
    rng.shuffle(out)
    return out


def _graph(rng: random.Random, n: int) -> list[tuple[int, int]]:
    """Random edges among ``n`` node ids spread over the longs (negative ones too), self loops included."""
    ids = [rng.randrange(-(2**62), 2**62) for _ in range(n)]
    return [(rng.choice(ids), rng.choice(ids)) for _ in range(n)]


def test_small_graphs_solved_on_the_driver_give_what_spark_jobs_give(spark: SparkSession) -> None:
    rng = random.Random(1)  # chains of up to 7 links, 10 ending outside the nodes, components of 30 and 23
    forest = spark.createDataFrame(_forest(rng, 60), "node long, parent long")
    graph = spark.createDataFrame(_graph(rng, 40), "u long, v long")
    # a row's segments as linked_keys and resolve give them: struct nodes
    chain = [((1, i), (1, i + 1) if i < 20 else None) for i in range(21)]
    structs = spark.createDataFrame(
        chain, "node struct<__lsn: long, __pos: int>, parent struct<__lsn: long, __pos: int>"
    )
    moves = spark.createDataFrame(
        [(lsn, 0, u, v) for lsn, (u, v) in enumerate(_graph(rng, 30))],
        "__lsn long, __pos int, u long, v long",
    )

    def solved() -> tuple[list[object], ...]:
        (roots, _), (comps, _), (struct_roots, _), (keys, _) = (
            pointer_jump(forest),
            components(graph),
            pointer_jump(structs),
            linked_keys(moves),
        )
        return (
            sorted(tuple(r) for r in roots.collect()),
            sorted(tuple(r) for r in comps.collect()),
            sorted((tuple(r.node), tuple(r.root)) for r in struct_roots.collect()),
            sorted(tuple(r) for r in keys.collect()),
        )

    here = solved()
    with setting(spark, SMALL_GRAPH_SETTING, "0"):
        in_jobs = solved()
    assert here[:3] == in_jobs[:3]
    # linked_keys in Spark jobs also labels each chain of moves (a node of its own, which may then be the
    # smallest of its component): the keys are compared by the groups they fall in
    key_ids = {k for u, v in moves.select("u", "v").collect() for k in (u, v)}
    assert _groups(here[3]) == _groups([kc for kc in in_jobs[3] if kc[0] in key_ids])
    assert {n for n, _ in here[3]} == key_ids
    assert [pointer_jump(forest)[1], components(graph)[1]] == [0, 0]  # no round: the driver's answer


def _groups(labels: list[tuple[object, ...]]) -> set[frozenset[object]]:
    by_label: dict[object, set[object]] = {}
    for node, label in labels:
        by_label.setdefault(label, set()).add(node)
    return {frozenset(nodes) for nodes in by_label.values()}


def test_a_cycle_of_pointers_solved_on_the_driver_is_an_error_not_a_hang(spark: SparkSession) -> None:
    ring = spark.createDataFrame([(1, 2), (2, 3), (3, 1)], "node long, parent long")
    with pytest.raises(ValueError, match="go round in a cycle"):
        pointer_jump(ring)


@pytest.mark.parametrize("value", ["-1", "many"])
def test_a_bad_small_graph_setting_fails_with_one_line_before_anything_is_written(
    spark: SparkSession, tmp_path: Path, value: str
) -> None:
    assert bad_setting_message(spark, tmp_path / "lake", SMALL_GRAPH_SETTING, value) == (
        f"{SMALL_GRAPH_SETTING} is {value!r}; expected a whole number of rows, 0 or more (0: every "
        "key-change graph in Spark jobs)"
    )
