"""Primary-key changes as a graph: the keys a row held across its key changes are one connected component
(``linked_keys``), found with Spark joins in O(log chain length) rounds by pointer jumping (``pointer_jump``)
and min-label propagation (``components``). ``resolver.table.affected`` uses it to close a batch's keys under
key changes; ``resolver.table.resolve`` to follow a row's segments to its lineage.

A small graph is solved on the driver instead: its rows are counted by the job that materializes them,
which the Spark way runs too; when there are at most ``spark.resolver.smallGraphRows``
(``resolver.spark.small_graphs``: 10,000 by default; 0, always in Spark jobs) they are collected from
that checkpoint and walked in Python, and the answer goes back as a DataFrame of its own. Each round of
the Spark way is a join, a checkpoint and often a broadcast: several jobs of a few hundred milliseconds,
for graphs that in most batches have a few dozen edges. The answers are the same
(``tests/spark/test_moves.py`` compares them)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

from pyspark.sql import DataFrame, Row, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from resolver.spark.observed import counting
from resolver.spark.small_graphs import small_graph_rows

__all__ = ["checkpoint_counting", "components", "linked_keys", "pointer_jump"]


def _materialized(rows: DataFrame) -> tuple[DataFrame, list[Row] | None]:
    """``rows`` as a local checkpoint (one Spark job, which counts them on its way) and, when there are at
    most ``small_graph_rows`` of them, the rows themselves (one more job, over the checkpoint)."""
    limit = small_graph_rows(rows.sparkSession)
    counted, observed = counting(rows, "graph rows", F.lit(True))
    done = counted.localCheckpoint(eager=True)
    small = 0 < limit and int(observed.get["n"] or 0) <= limit
    return done, (done.collect() if small else None)


def _frame(like: DataFrame, names: tuple[str, str], pairs: list[tuple[object, object]]) -> DataFrame:
    """``pairs`` as a DataFrame of two columns named ``names``, both of the type of ``like``'s first."""
    kind = like.schema.fields[0].dataType
    schema = StructType([StructField(names[0], kind), StructField(names[1], kind)])
    return like.sparkSession.createDataFrame(pairs, schema)


def _roots_here(pointers: Iterable[tuple[Hashable, Hashable | None]]) -> list[tuple[Hashable, Hashable]]:
    """``pointer_jump`` on the driver: each node and the end of its chain of pointers (a node whose pointer
    is NULL, or a pointer that is not a node)."""
    ptr = dict(pointers)
    root: dict[Hashable, Hashable] = {}
    for node in ptr:
        path, at = [], node
        while at not in root:
            nxt = ptr.get(at)
            if nxt is None:
                root[at] = at
                break
            path.append(at)
            if len(path) > len(ptr):
                raise ValueError(f"the pointers from {node!r} go round in a cycle")
            at = nxt
        for passed in path:
            root[passed] = root[at]
    return [(node, root[node]) for node in ptr]


def _components_here(edges: Iterable[tuple[Hashable, Hashable]]) -> list[tuple[Hashable, Hashable]]:
    """``components`` on the driver: each node of the edges and the smallest node of its component
    (union-find whose root is always its set's smallest node)."""
    up: dict = {}

    def find(x: Hashable) -> Hashable:
        up.setdefault(x, x)
        top = x
        while up[top] != top:
            top = up[top]
        while up[x] != top:  # every node on the way now points at the top
            up[x], x = top, up[x]
        return top

    for u, v in edges:
        a, b = find(u), find(v)
        if a != b:
            low, high = (a, b) if a < b else (b, a)  # type: ignore[operator]
            up[high] = low
    return [(node, find(node)) for node in list(up)]


def pointer_jump(
    parents: DataFrame, on_round: Callable[[int], None] | None = None, longest: int | None = None
) -> tuple[DataFrame, int]:
    """Roots of a forest given as ``(node, parent)`` rows (parent NULL for a root; every parent is also a
    node). Returns ``(node, root)`` rows and the number of rounds, which is ``ceil(log2(longest chain))``
    (0 for a small forest, solved on the driver): each round replaces every pointer by its pointer's
    pointer. One join and one local checkpoint per
    round, which also counts the pointers that moved (``checkpoint_counting``): one Spark job a round.
    ``longest``: a bound on the longest chain's links, when the caller knows one (the key changes among
    the rows): after ``2**rounds >= longest`` every pointer is at its root."""
    cur, small = _materialized(parents.select("node", F.col("parent").alias("ptr")))
    if small is not None:
        return _frame(cur, ("node", "root"), _roots_here((r["node"], r["ptr"]) for r in small)), 0
    rounds = 0
    while True:
        nxt = cur.alias("a").join(cur.alias("b"), F.col("a.ptr") == F.col("b.node"), "left")
        active = F.col("b.ptr").isNotNull()
        cur, moved = checkpoint_counting(
            nxt.select(
                F.col("a.node").alias("node"),
                F.when(active, F.col("b.ptr")).otherwise(F.col("a.ptr")).alias("ptr"),
                active.alias("moved"),
            ),
            "moved",
        )
        rounds += 1
        if on_round:
            on_round(rounds)
        if (longest is not None and 2**rounds >= longest) or not moved:
            break
    return cur.select("node", F.coalesce("ptr", "node").alias("root")), rounds


def checkpoint_counting(rows: DataFrame, flag: str) -> tuple[DataFrame, int]:
    """``rows`` without their boolean column ``flag``, materialized (a local checkpoint), and how many rows
    had it true, counted by the same Spark job as an observed metric: a loop that stops when nothing
    changed needs no second job per round (an emptiness check) to find out."""
    counted, observed = counting(rows, "checkpoint", F.col(flag))
    done = counted.drop(flag).localCheckpoint(eager=True)
    return done, int(observed.get["n"] or 0)


def components(edges: DataFrame, on_round: Callable[[int], None] | None = None) -> tuple[DataFrame, int]:
    """Connected components of an undirected graph given as ``(u, v)`` edges of orderable node ids.
    Returns ``(node, comp)`` rows, ``comp`` being the smallest node of the component, and the rounds run.

    Min-label propagation with pointer jumping: each round a node takes the smallest label among its
    neighbours, then the label of that label. Labels only decrease and stay inside the component, and a
    fixed point labels a component with its minimum; on a path the reach doubles every round, so a chain
    of n links takes about log2(n) rounds. A small graph: union-find on the driver, 0 rounds."""
    both = edges.select("u", "v").union(edges.select(F.col("v").alias("u"), F.col("u").alias("v")))
    both, small = _materialized(both.union(both.select("u", F.col("u").alias("v"))).distinct())
    if small is not None:
        return _frame(both, ("node", "comp"), _components_here((r["u"], r["v"]) for r in small)), 0
    labels = both.groupBy("u").agg(F.min("v").alias("label")).withColumnRenamed("u", "node")
    labels = labels.localCheckpoint(eager=True)
    rounds = 0
    while True:
        hop = (
            both.join(labels.withColumnRenamed("node", "v"), "v")
            .groupBy("u")
            .agg(F.min("label").alias("hop"))
            .withColumnRenamed("u", "node")
        )
        jumped = hop.alias("h").join(labels.alias("l"), F.col("h.hop") == F.col("l.node"), "left")
        new = jumped.select(
            F.col("h.node").alias("node"), F.least(F.col("h.hop"), F.col("l.label")).alias("label")
        )
        step = new.alias("n").join(labels.alias("o"), "node")
        labels, changed = checkpoint_counting(
            step.select(
                "node",
                F.col("n.label").alias("label"),
                (F.col("n.label") != F.col("o.label")).alias("changed"),
            ),
            "changed",
        )
        rounds += 1
        if on_round:
            on_round(rounds)
        if not changed:
            break
    return labels.withColumnRenamed("label", "comp"), rounds


def linked_keys(moves: DataFrame) -> tuple[DataFrame, int]:
    """Connected components of keys linked by key changes. ``moves`` has ``(__lsn, __pos, u, v)``: a move
    from key id ``u`` to key id ``v`` (long ids). Returns ``(node, comp)`` rows and the rounds run.

    A row moved many times is a chain of moves: each move's successor is the first move out of its new key
    after it. The chains are resolved to their last move by pointer jumping (``ceil(log2(length))``
    rounds), then keys are joined to their chains' roots and the components of that graph are found by
    label propagation, which needs only a few rounds because its diameter no longer grows with the chains
    (only with keys reused by different rows). A few moves: the components of the keys they link, found
    on the driver (0 rounds); the chain nodes are then left out, and no caller needs them."""
    seq = ["__lsn", "__pos"]
    # read once: the moves are a filter over the change store, and the steps below read them five times
    moves, small = _materialized(moves)
    if small is not None:
        pairs = _components_here((r["u"], r["v"]) for r in small)
        return _frame(moves.select("u"), ("node", "comp"), pairs), 0
    out_of = moves.select(F.col("u").alias("__k"), *seq, F.lit(True).alias("__out"))
    into = moves.select(F.col("v").alias("__k"), *seq, F.lit(False).alias("__out"))
    after = Window.partitionBy("__k").orderBy(*seq).rowsBetween(1, Window.unboundedFollowing)
    nxt = F.first(F.when(F.col("__out"), F.struct(*seq)), ignorenulls=True).over(after)
    successors = (
        out_of.unionByName(into)
        .withColumn("parent", nxt)
        .filter(~F.col("__out"))
        .select(F.struct(*seq).alias("node"), "parent")
    )
    roots, chain_rounds = pointer_jump(successors)
    chain_id = F.xxhash64(F.lit("chain"), F.col("root"))
    edges = (
        moves.select(F.struct(*seq).alias("node"), "u", "v")
        .join(roots, "node")
        .select("u", "v", chain_id.alias("c"))
    )
    graph = edges.select("u", F.col("c").alias("v")).union(
        edges.select(F.col("v").alias("u"), F.col("c").alias("v"))
    )
    comps, cc_rounds = components(graph)
    return comps, chain_rounds + cc_rounds
