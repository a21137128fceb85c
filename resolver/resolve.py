"""Resolve typed change rows of one table into history versions, with Spark expressions only.

Input: rows of ``_resolver/changes/<schema>.<table>`` (see ``resolver.explode``) for a set of keys that is
closed under primary-key changes, plus the table's truncates. Output: every version of those keys (the
rows of ``silver/<schema>.<table>__history``; semantics in ``docs/silver.md``).

How, in a fixed number of passes plus O(log chain length) rounds:

1. *Touches.* Each event touches keys: an insert or update *produces* its key; a delete, or an update
   that changes the key (a *move*), *ends* its old key; a truncate ends every key. Per key, in order, the
   touch before an update's read of its old key is its *parent* when that touch produced the key.
2. *Segments.* Per key, a run of produced images that continue each other is a segment; a segment that
   starts with a move has the moved row's segment as its parent. Parents form chains (a row moved many
   times), resolved to their root by pointer jumping: ``ceil(log2(chain length))`` rounds, each one join
   and one local checkpoint, stopping when no pointer moved.
3. *Images.* All segments of one root are one row's life (its *lineage*), totally ordered. A column absent
   from an event takes the last value the lineage carried (one window pass, ``last(..., ignorenulls)``).
4. *Versions.* Per key, the state after each transaction (the last touch of the transaction) is an image
   or *gone*; consecutive equal states collapse; each remaining image is a version that ends at the next
   state change.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

from resolver import sql
from resolver.explode import TableLayout

__all__ = [
    "MAX_LSN",
    "MAX_TIME_MICROS",
    "components",
    "linked_keys",
    "max_time",
    "pointer_jump",
    "resolve_versions",
]

MAX_LSN = 2**63 - 1
MAX_TIME_MICROS = 253402300799999999  # 9999-12-31 23:59:59.999999 UTC


def max_time() -> Column:
    """The end of an open version: the largest timestamp Spark holds, whatever the session time zone."""
    return F.timestamp_micros(F.lit(MAX_TIME_MICROS))


_PRODUCE, _END = 1, 0


def pointer_jump(parents: DataFrame, on_round: Callable[[int], None] | None = None) -> tuple[DataFrame, int]:
    """Roots of a forest given as ``(node, parent)`` rows (parent NULL for a root; every parent is also a
    node). Returns ``(node, root)`` rows and the number of rounds, which is ``ceil(log2(longest chain))``:
    each round replaces every pointer by its pointer's pointer. One join, one local checkpoint and one
    emptiness check per round; nothing else runs."""
    cur = parents.select("node", F.col("parent").alias("ptr")).localCheckpoint(eager=True)
    rounds = 0
    while True:
        nxt = cur.alias("a").join(cur.alias("b"), F.col("a.ptr") == F.col("b.node"), "left")
        active = F.col("b.ptr").isNotNull()
        cur = nxt.select(
            F.col("a.node").alias("node"),
            F.when(active, F.col("b.ptr")).otherwise(F.col("a.ptr")).alias("ptr"),
            active.alias("moved"),
        ).localCheckpoint(eager=True)
        rounds += 1
        if on_round:
            on_round(rounds)
        if cur.filter("moved").isEmpty():
            break
        cur = cur.drop("moved")
    return cur.select("node", F.coalesce("ptr", "node").alias("root")), rounds


def components(edges: DataFrame, on_round: Callable[[int], None] | None = None) -> tuple[DataFrame, int]:
    """Connected components of an undirected graph given as ``(u, v)`` edges of orderable node ids.
    Returns ``(node, comp)`` rows, ``comp`` being the smallest node of the component, and the rounds run.

    Min-label propagation with pointer jumping: each round a node takes the smallest label among its
    neighbours, then the label of that label. Labels only decrease and stay inside the component, and a
    fixed point labels a component with its minimum; on a path the reach doubles every round, so a chain
    of n links takes about log2(n) rounds."""
    both = edges.select("u", "v").union(edges.select(F.col("v").alias("u"), F.col("u").alias("v")))
    both = both.union(both.select("u", F.col("u").alias("v"))).distinct().localCheckpoint(eager=True)
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
        step = (
            new.alias("n")
            .join(labels.alias("o"), "node")
            .select(
                "node",
                F.col("n.label").alias("label"),
                (F.col("n.label") != F.col("o.label")).alias("changed"),
            )
        )
        step = step.localCheckpoint(eager=True)
        rounds += 1
        if on_round:
            on_round(rounds)
        labels = step.select("node", "label")
        if step.filter("changed").isEmpty():
            break
    return labels.withColumnRenamed("label", "comp"), rounds


def linked_keys(moves: DataFrame) -> tuple[DataFrame, int]:
    """Connected components of keys linked by key changes. ``moves`` has ``(__lsn, __pos, u, v)``: a move
    from key id ``u`` to key id ``v`` (long ids). Returns ``(node, comp)`` rows and the rounds run.

    A row moved many times is a chain of moves: each move's successor is the first move out of its new key
    after it. The chains are resolved to their last move by pointer jumping (``ceil(log2(length))``
    rounds), then keys are joined to their chains' roots and the components of that graph are found by
    label propagation, which needs only a few rounds because its diameter no longer grows with the chains
    (only with keys reused by different rows)."""
    seq = ["__lsn", "__pos"]
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


def resolve_versions(
    changes: DataFrame, layout: TableLayout, moves: bool = True, truncates: bool = True
) -> tuple[DataFrame, int]:
    """History versions of the keys in ``changes`` (typed change rows of one table, closed under moves,
    plus the table's truncates). ``moves=False`` promises there is no key change among them: then a row's
    lineage is its segment within one key, and every pass is one window over the key (no pointer jumping,
    no checkpoint; ``_versions_in_place``); ``truncates=False`` promises there is no truncate either, and
    then each event is one touch of one key, read in one pass. Returns the versions and the
    pointer-jumping rounds it took."""
    seq = ["__lsn", "__pos"]
    by_key = Window.partitionBy("__k").orderBy(*seq, "__tie")
    if not moves and not truncates and not layout.drops:
        touches = _touches_in_place(changes, layout, by_key)
    else:
        touches = _touches(changes, layout)
    # per key, in order: a produced image starts a segment unless it continues the image just before it
    upto = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    prev_kind = F.lag("__kind").over(by_key)
    start = (F.col("__kind") == _PRODUCE) & (
        (F.col("__op") == "insert") | F.col("__move") | F.coalesce(prev_kind != _PRODUCE, F.lit(True))
    )
    touches = touches.withColumn("__start", start)
    # the segment a touch belongs to; for a move's end touch, the segment of the row that moved
    seg = F.last(F.when(F.col("__start"), F.struct(*seq, "__from")), ignorenulls=True).over(upto)
    touches = touches.withColumn("__seg", seg).withColumn("__prev_kind", prev_kind)
    if not moves:
        return _versions_in_place(touches, layout, by_key), 0
    touches = touches.withColumn("__prev_lsn", F.lag("__lsn").over(by_key)).localCheckpoint(eager=True)
    seg_id = F.struct(F.col("__seg.__lsn").alias("__lsn"), F.col("__seg.__pos").alias("__pos"))
    is_prod = F.col("__kind") == _PRODUCE
    rounds = 0
    prod = touches.filter(is_prod)
    # a segment opened by a move continues the segment the row moved from: chains, resolved to roots
    move_ends = touches.filter((F.col("__kind") == _END) & F.col("__move")).select(
        *seq,
        F.when(F.col("__prev_kind") == _PRODUCE, seg_id).alias("parent"),
        F.coalesce(F.col("__prev_lsn") == F.col("__lsn"), F.lit(False)).alias("__settled"),
    )
    # where a lineage was when its first transaction began: an update of a row the changes do not hold
    # tells that the row had its old key then, unless the transaction touched that key before
    origin = (
        F.when(F.col("__op") == "insert", F.lit(None))
        .when(F.col("__move"), F.when(F.col("parent").isNull() & ~F.col("__settled"), F.col("__from")))
        .when(F.coalesce(F.col("__prev_lsn") != F.col("__lsn"), F.lit(True)), F.col("__k"))
    )
    starts = (
        touches.filter("__start")
        .join(move_ends, seq, "left")
        .select(F.struct(*seq).alias("node"), "parent", origin.alias("__origin"))
        .localCheckpoint(eager=True)
    )
    roots, rounds = pointer_jump(starts.select("node", "parent"))
    roots = roots.join(starts.select(F.col("node").alias("root"), "__origin"), "root").withColumnRenamed(
        "root", "__lineage"
    )
    # the touches of a row's life: its images, and the end (delete, move, truncate) of a live image
    live = touches.filter(is_prod | (F.col("__prev_kind") == _PRODUCE)).withColumn("node", seg_id)
    live = live.join(roots, "node").drop("node").localCheckpoint(eager=True)
    prod = live.filter(is_prod)
    # per lineage and transaction: where the row is after it (NULL: gone) and where it was before it
    by_lineage = Window.partitionBy("__lineage").orderBy("__lsn")
    last = F.max_by(F.struct("__kind", "__k"), F.struct("__pos", "__kind"))
    after = F.when(F.col("__last.__kind") == _PRODUCE, F.col("__last.__k"))
    steps = (
        live.groupBy("__lineage", "__lsn")
        .agg(last.alias("__last"), F.first("__origin").alias("__origin"))
        .withColumn("__after", after)
        .withColumn(
            "__before",
            F.when(F.lag("__lsn").over(by_lineage).isNull(), F.col("__origin")).otherwise(
                F.lag("__after").over(by_lineage)
            ),
        )
        .select("__lineage", "__lsn", "__before", "__after")
    )

    # images: a column absent from an event takes the last value its row's lineage carried
    lineage = Window.partitionBy("__lineage").orderBy(*seq, "__tie").rowsBetween(Window.unboundedPreceding, 0)

    filled = [_fill(c, layout, lineage) for c in layout.value_names]
    image = [F.col("__k").getField(k).alias(k) for k in layout.key]
    prod = prod.select(
        "__k",
        "__kind",
        *seq,
        "__time",
        F.struct(*image, *filled).alias("__img"),
        "__lineage",
        "__tie",
    )
    gone = touches.filter(F.col("__kind") == _END).select(
        "__k",
        "__kind",
        *seq,
        "__time",
        F.lit(None).cast(prod.schema["__img"].dataType).alias("__img"),
        F.lit(None).cast(prod.schema["__lineage"].dataType).alias("__lineage"),
        "__tie",
    )
    states = prod.unionByName(gone)
    by_key_txn = Window.partitionBy("__k").orderBy("__lsn")
    versions = _state_changes(states, by_key, by_key_txn).drop("__pos")
    # lineage: where the row was before the version's first transaction and after its last one
    came = steps.select("__lineage", "__lsn", F.col("__before").alias("__moved_from"))
    went = steps.select(
        F.col("__lineage").alias("__l2"),
        F.col("__lsn").alias("__end"),
        F.col("__after").alias("__moved_to"),
    )
    versions = versions.join(came, ["__lineage", "__lsn"], "left").join(
        went, (F.col("__lineage") == F.col("__l2")) & (F.col("__next.__lsn") == F.col("__end")), "left"
    )
    other = {
        c: F.when(~F.col(c).eqNullSafe(F.col("__k")), F.col(c)).cast(layout.key_struct_type())
        for c in ("__moved_from", "__moved_to")
    }
    versions = versions.select(
        *[F.col("__img").getField(c).alias(c) for c in layout.names],
        F.col("__lsn").alias("__start_lsn"),
        F.coalesce(F.col("__next.__lsn"), F.lit(MAX_LSN)).alias("__end_lsn"),
        F.col("__time").alias("__start_time"),
        F.when(F.col("__next").isNull(), max_time()).otherwise(F.col("__next.__time")).alias("__end_time"),
        F.col("__next").isNull().alias("__is_current"),
        F.coalesce(F.col("__next.__kind") == _END, F.lit(False)).alias("__is_deleted"),
        other["__moved_from"].alias("__moved_from"),
        other["__moved_to"].alias("__moved_to"),
    )
    return versions, rounds


def _touches(changes: DataFrame, layout: TableLayout) -> DataFrame:
    """Every touch of every key (step 1 of the module docstring): produced images, ends, the ends a
    truncate gives every key, and the refreshes of dropped columns."""
    values = layout.value_names
    key_t = layout.key_struct_type()
    seq = ["__lsn", "__pos"]
    ev = changes.dropDuplicates(seq)
    is_update = F.col("__op") == "update"
    ev = ev.withColumn("__move", is_update & ~F.col("__old_key").eqNullSafe(F.col("__key")))
    carried = [F.col("__present"), *[sql.col(c) for c in values]]
    no_values = [F.lit(None).cast("array<string>").alias("__present")] + [
        F.lit(None).cast(ev.schema[c].dataType).alias(c) for c in values
    ]
    produce = ev.filter(F.col("__op").isin("insert", "update") & F.col("__key").isNotNull()).select(
        F.col("__key").alias("__k"),
        F.lit(_PRODUCE).alias("__kind"),
        *seq,
        "__time",
        "__op",
        "__move",
        F.when(F.col("__move"), F.col("__old_key")).alias("__from"),
        *carried,
    )
    ends = ev.filter(((F.col("__op") == "delete") | F.col("__move")) & F.col("__old_key").isNotNull()).select(
        F.col("__old_key").alias("__k"),
        F.lit(_END).alias("__kind"),
        *seq,
        "__time",
        "__op",
        "__move",
        F.lit(None).cast(key_t).alias("__from"),
        *no_values,
    )
    keys = produce.select("__k").union(ends.select("__k")).distinct()
    truncates = ev.filter(F.col("__op") == "truncate").select(*seq, "__time")
    wiped = keys.crossJoin(F.broadcast(truncates)).select(
        "__k",
        F.lit(_END).alias("__kind"),
        *seq,
        "__time",
        F.lit("truncate").alias("__op"),
        F.lit(False).alias("__move"),
        F.lit(None).cast(key_t).alias("__from"),
        *no_values,
    )
    touches = produce.unionByName(ends).unionByName(wiped).withColumn("__tie", F.lit(1))
    points = sorted({p for ps in layout.drops.values() for p in ps})
    if points:
        # a column dropped at a point is gone from every row held then: each key's row gets a new image
        # there (a *refresh*, carrying no column), kept only where the key holds a row
        at = changes.sparkSession.createDataFrame(
            [tuple(p[:3]) for p in points], "__lsn bigint, __pos int, __t bigint"
        )
        refresh = keys.crossJoin(F.broadcast(at)).select(
            "__k",
            F.lit(_PRODUCE).alias("__kind"),
            *seq,
            F.timestamp_micros("__t").alias("__time"),
            F.lit("refresh").alias("__op"),
            F.lit(False).alias("__move"),
            F.lit(None).cast(key_t).alias("__from"),
            F.array().cast("array<string>").alias("__present"),
            *no_values[1:],
            F.lit(0).alias("__tie"),
        )
        before = Window.partitionBy("__k").orderBy(*seq, "__tie").rowsBetween(Window.unboundedPreceding, -1)
        held = F.last(F.when(F.col("__op") != "refresh", F.col("__kind")), ignorenulls=True).over(before)
        touches = touches.unionByName(refresh).withColumn("__held", held)
        touches = touches.filter((F.col("__op") != "refresh") | (F.col("__held") == _PRODUCE)).drop("__held")
    return touches


def _touches_in_place(changes: DataFrame, layout: TableLayout, by_key: WindowSpec) -> DataFrame:
    """``_touches`` for changes without key changes, truncates or dropped columns: an insert or update
    produces its key, a delete ends it, so each event is one touch; an event held twice is kept once."""
    seq = ["__lsn", "__pos"]
    produces = F.col("__op").isin("insert", "update")
    touches = changes.filter(F.col("__op") != "truncate").select(
        F.when(produces, F.col("__key")).otherwise(F.col("__old_key")).alias("__k"),
        F.when(produces, F.lit(_PRODUCE)).otherwise(F.lit(_END)).alias("__kind"),
        *seq,
        "__time",
        "__op",
        F.lit(False).alias("__move"),
        F.lit(None).cast(layout.key_struct_type()).alias("__from"),
        F.when(produces, F.col("__present")).alias("__present"),
        *[sql.col(c) for c in layout.value_names],
        F.lit(1).alias("__tie"),
    )
    again = F.coalesce(F.lag(F.struct(*seq)).over(by_key) == F.struct(*seq), F.lit(False))
    touches = touches.filter(F.col("__k").isNotNull()).withColumn("__again", again)
    return touches.filter(~F.col("__again")).drop("__again")


def _fill(c: str, layout: TableLayout, window: WindowSpec, since: Column | None = None) -> Column:
    """Column ``c`` of an image: the last value of it carried up to this event in ``window`` (since
    ``since``, a ``(__lsn, __pos)`` struct, when given); a drop of the column in between voids it."""
    seq = ["__lsn", "__pos"]
    held = F.struct(sql.col(c).alias("v"), F.struct(*seq).alias("at"))
    last = F.last(F.when(F.array_contains("__present", c), held), ignorenulls=True).over(window)
    now = F.struct(*seq)
    void = F.lit(False) if since is None else F.coalesce(last.getField("at") < since, F.lit(True))
    for lsn, pos, *_ in layout.drops.get(c, ()):
        point = F.struct(F.lit(lsn).cast("bigint").alias("__lsn"), F.lit(pos).cast("int").alias("__pos"))
        void = void | ((last.getField("at") < point) & (point <= now))
    return F.when(~void, last.getField("v")).alias(c)


def _state_changes(states: DataFrame, by_key: WindowSpec, by_txn: WindowSpec) -> DataFrame:
    """The versions among a key's states (step 4 of the module docstring): the state after each
    transaction (its last touch of the key, in ``by_key`` order), consecutive equal states collapsed (in
    ``by_txn``, any order of the key's transactions), and each image that remains with the next state
    change (``__next``: kind, LSN, time)."""
    last_in_txn = F.lead("__lsn").over(by_key)
    states = states.withColumn("__last", last_in_txn.isNull() | (last_in_txn != F.col("__lsn")))
    states = states.filter("__last").drop("__last")
    was = F.lag(F.struct(F.col("__kind"), F.col("__img"))).over(by_txn)
    same = F.coalesce(was.getField("__kind"), F.lit(_END)).eqNullSafe(F.col("__kind")) & was.getField(
        "__img"
    ).eqNullSafe(F.col("__img"))
    kept = states.withColumn("__same", same).filter(~F.col("__same")).drop("__same")
    nxt = F.lead(F.struct("__kind", "__lsn", "__time")).over(by_txn)
    return kept.withColumn("__next", nxt).filter(F.col("__kind") == _PRODUCE)


def _versions_in_place(touches: DataFrame, layout: TableLayout, by_key: WindowSpec) -> DataFrame:
    """``resolve_versions`` for changes without key changes: a row's lineage is its segment, which lies
    inside one key, so every pass is a window over the key in the same order (one shuffle, one sort, no
    checkpoint). Images take a column's last value carried since the segment began."""
    seq = ["__lsn", "__pos"]
    upto = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    is_prod = F.col("__kind") == _PRODUCE
    since = F.struct(F.col("__seg.__lsn").alias("__lsn"), F.col("__seg.__pos").alias("__pos"))
    image = F.struct(
        *[F.col("__k").getField(k).alias(k) for k in layout.key],
        *[_fill(c, layout, upto, since) for c in layout.value_names],
    )
    states = touches.select("__k", "__kind", *seq, "__time", "__tie", F.when(is_prod, image).alias("__img"))
    versions = _state_changes(states, by_key, by_key)  # one order: no second sort
    key_t = layout.key_struct_type()
    return versions.select(
        *[F.col("__img").getField(c).alias(c) for c in layout.names],
        F.col("__lsn").alias("__start_lsn"),
        F.coalesce(F.col("__next.__lsn"), F.lit(MAX_LSN)).alias("__end_lsn"),
        F.col("__time").alias("__start_time"),
        F.when(F.col("__next").isNull(), max_time()).otherwise(F.col("__next.__time")).alias("__end_time"),
        F.col("__next").isNull().alias("__is_current"),
        F.coalesce(F.col("__next.__kind") == _END, F.lit(False)).alias("__is_deleted"),
        F.lit(None).cast(key_t).alias("__moved_from"),
        F.lit(None).cast(key_t).alias("__moved_to"),
    )


def collapse_untracked(versions: DataFrame, layout: TableLayout) -> DataFrame:
    """Merge each key's consecutive versions that differ only in columns outside ``layout.track``: the
    later values update the earlier version in place (its start stays, its end and values are the last
    ones'), like APPLY CHANGES' track-history column lists. A version after a gap (the row was deleted or
    moved away in between) or opened by a key change always stays its own."""
    key = list(layout.key)
    by_key = Window.partitionBy(*[sql.col(k) for k in key]).orderBy("__start_lsn")
    tracked = F.struct(*[sql.col(c) for c in layout.track])
    prev = F.lag(F.struct(F.col("__end_lsn").alias("end"), tracked.alias("t"))).over(by_key)
    opens = (
        prev.isNull()
        | (prev.getField("end") != F.col("__start_lsn"))
        | F.col("__moved_from").isNotNull()
        | ~prev.getField("t").eqNullSafe(tracked)
    )
    whole = (
        Window.partitionBy(*[sql.col(k) for k in key])
        .orderBy("__start_lsn")
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    grouped = versions.withColumn("__grp", F.sum(opens.cast("int")).over(whole))
    first = ["__start_lsn", "__start_time", "__moved_from"]
    last = [c for c in versions.columns if c not in first]
    return (
        grouped.groupBy(*[sql.col(k).alias(f"__g_{k}") for k in key], "__grp")
        .agg(
            F.min_by(F.struct(*first), F.col("__start_lsn")).alias("__first"),
            F.max_by(F.struct(*last), F.col("__start_lsn")).alias("__last"),
        )
        .select(
            *[
                sql.col("__first", c).alias(c) if c in first else sql.col("__last", c).alias(c)
                for c in versions.columns
            ]
        )
    )
