"""Resolve typed change rows of one table into history versions, with Spark expressions only.
 Input: rows of ``_resolver/changes/<schema>.<table>`` (see ``resolver.table.explode``) for a set of keys that
is closed under primary-key changes, plus the table's truncates. Output: every version of those keys (the
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

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

from resolver.spark import sql
from resolver.table.moves import pointer_jump
from resolver.table.touches import END, PRODUCE, touches, touches_in_place
from resolver.tablelayout import TableLayout

__all__ = [
    "MAX_LSN",
    "MAX_TIME_MICROS",
    "Holds",
    "collapse_untracked",
    "first_states_and_versions",
    "max_time",
    "resolve_versions",
    "version_columns",
]

MAX_LSN = 2**63 - 1
MAX_TIME_MICROS = 253402300799999999  # 9999-12-31 23:59:59.999999 UTC


def max_time() -> Column:
    """The end of an open version: the largest timestamp Spark holds, whatever the session time zone."""
    return F.timestamp_micros(F.lit(MAX_TIME_MICROS))


_SEQ = ["__lsn", "__pos"]


@dataclass(frozen=True)
class Holds:
    """What a set of change rows is known to hold, so that resolving them may take a shorter way. The
    default promises nothing. ``moves=False`` promises no key change among them: then a row's lineage is
    its segment within one key, and every pass is one window over the key (no pointer jumping, no
    checkpoint; ``_versions_in_place``); ``truncates=False`` promises no truncate either, and then each
    event is one touch of one key, read in one pass. ``longest``: a bound on the key changes among them,
    when known (``moves.pointer_jump``). ``updates=False`` (with ``moves=False``) promises no update: without
    drop points (whose refreshes carry a row's other columns) each image is then an insert's own row, and no
    column is carried from an earlier event (no window per column)."""

    moves: bool = True
    truncates: bool = True
    longest: int | None = None
    updates: bool = True


def resolve_versions(
    changes: DataFrame, layout: TableLayout, holds: Holds = Holds()
) -> tuple[DataFrame, int]:
    """History versions of the keys in ``changes`` (typed change rows of one table, closed under moves,
    plus the table's truncates), taking the shortest way ``holds`` allows. Returns the versions and the
    pointer-jumping rounds it took."""
    by_key = Window.partitionBy("__k").orderBy(*_SEQ, "__tie")
    if not holds.moves and not holds.truncates and not layout.drops:
        found = touches_in_place(changes, layout, by_key)
    else:
        found = touches(changes, layout)
    found = _segments(found, by_key)
    if not holds.moves:
        # a drop point's refresh carries the row's other columns (``touches``): it is not an insert
        own = not holds.updates and not layout.drops
        image = _own_image(layout) if own else _carried_image(layout, by_key)
        return _versions_in_place(found, layout, by_key, image), 0
    found = found.withColumn("__prev_lsn", F.lag("__lsn").over(by_key)).localCheckpoint(eager=True)
    live, steps, rounds = _lineages(found, holds.longest)
    states = _states(live, found, layout)
    versions = _state_changes(states, by_key, Window.partitionBy("__k").orderBy("__lsn")).drop("__pos")
    return _with_moves(versions, steps, layout), rounds


def _segments(found: DataFrame, by_key: WindowSpec) -> DataFrame:
    """Step 2: per key, in order, a produced image starts a segment unless it continues the image just
    before it; each touch gets its segment (``__seg``; for a move's end touch, the segment of the row that
    moved) and the kind of the touch before it (``__prev_kind``)."""
    upto = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    prev_kind = F.lag("__kind").over(by_key)
    start = (F.col("__kind") == PRODUCE) & (
        (F.col("__op") == "insert") | F.col("__move") | F.coalesce(prev_kind != PRODUCE, F.lit(True))
    )
    found = found.withColumn("__start", start)
    seg = F.last(F.when(F.col("__start"), F.struct(*_SEQ, "__from")), ignorenulls=True).over(upto)
    return found.withColumn("__seg", seg).withColumn("__prev_kind", prev_kind)


def _lineages(found: DataFrame, longest: int | None = None) -> tuple[DataFrame, DataFrame, int]:
    """Step 2, across keys: a segment opened by a move continues the segment the row moved from; the
    chains are resolved to their roots (a row's *lineage*) by pointer jumping. Returns the touches of each
    row's life with their ``__lineage`` (its images, and the end of a live image), per lineage and
    transaction where the row was before and after it (``__before``, ``__after``; NULL: gone), and the
    rounds it took."""
    seq = _SEQ
    seg_id = F.struct(F.col("__seg.__lsn").alias("__lsn"), F.col("__seg.__pos").alias("__pos"))
    is_prod = F.col("__kind") == PRODUCE
    move_ends = found.filter((F.col("__kind") == END) & F.col("__move")).select(
        *seq,
        F.when(F.col("__prev_kind") == PRODUCE, seg_id).alias("parent"),
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
        found.filter("__start")
        .join(move_ends, seq, "left")
        .select(F.struct(*seq).alias("node"), "parent", origin.alias("__origin"))
        .localCheckpoint(eager=True)
    )
    roots, rounds = pointer_jump(starts.select("node", "parent"), longest=longest)
    roots = roots.join(starts.select(F.col("node").alias("root"), "__origin"), "root").withColumnRenamed(
        "root", "__lineage"
    )
    # the touches of a row's life: its images, and the end (delete, move, truncate) of a live image
    live = found.filter(is_prod | (F.col("__prev_kind") == PRODUCE)).withColumn("node", seg_id)
    live = live.join(roots, "node").drop("node").localCheckpoint(eager=True)
    # per lineage and transaction: where the row is after it (NULL: gone) and where it was before it
    by_lineage = Window.partitionBy("__lineage").orderBy("__lsn")
    last = F.max_by(F.struct("__kind", "__k", "__pos"), F.struct("__pos", "__kind"))
    # the row is at its last key after the transaction only if nothing touched that key after it there (an
    # insert of the key later in the transaction is another row, which the key then holds)
    key_last = live.groupBy(F.col("__k").alias("__lk"), F.col("__lsn").alias("__ll")).agg(
        F.max("__pos").alias("__key_last")
    )
    owned = (F.col("__last.__kind") == PRODUCE) & (F.col("__last.__pos") == F.col("__key_last"))
    steps = (
        live.groupBy("__lineage", "__lsn")
        .agg(last.alias("__last"), F.first("__origin").alias("__origin"))
        .join(
            key_last,
            F.col("__last.__k").eqNullSafe(F.col("__lk")) & (F.col("__lsn") == F.col("__ll")),
            "left",
        )
        .withColumn("__after", F.when(owned, F.col("__last.__k")))
        .withColumn(
            "__before",
            F.when(F.lag("__lsn").over(by_lineage).isNull(), F.col("__origin")).otherwise(
                F.lag("__after").over(by_lineage)
            ),
        )
        .select("__lineage", "__lsn", "__before", "__after")
    )
    return live, steps, rounds


def _states(live: DataFrame, found: DataFrame, layout: TableLayout) -> DataFrame:
    """Step 3: each produced touch's image (a column absent from an event takes the last value its row's
    lineage carried), and each end as a gone state."""
    seq = _SEQ
    lineage = Window.partitionBy("__lineage").orderBy(*seq, "__tie").rowsBetween(Window.unboundedPreceding, 0)
    filled = [_fill(c, layout, lineage) for c in layout.value_names]
    image = [F.col("__k").getField(k).alias(k) for k in layout.key]
    prod = live.filter(F.col("__kind") == PRODUCE).select(
        "__k",
        "__kind",
        *seq,
        "__time",
        F.struct(*image, *filled).alias("__img"),
        "__lineage",
        "__tie",
    )
    gone = found.filter(F.col("__kind") == END).select(
        "__k",
        "__kind",
        *seq,
        "__time",
        F.lit(None).cast(prod.schema["__img"].dataType).alias("__img"),
        F.lit(None).cast(prod.schema["__lineage"].dataType).alias("__lineage"),
        "__tie",
    )
    return prod.unionByName(gone)


def _with_moves(versions: DataFrame, steps: DataFrame, layout: TableLayout) -> DataFrame:
    """The versions as history rows, with where the row was before the version's first transaction and
    after its last one (``__moved_from``, ``__moved_to``: NULL when that is the version's own key): the
    first state's lineage tells where it came from, the last state's (``__next.__prev_lineage``) where it
    went."""
    came = steps.select("__lineage", "__lsn", F.col("__before").alias("__moved_from"))
    went = steps.select(
        F.col("__lineage").alias("__l2"),
        F.col("__lsn").alias("__end"),
        F.col("__after").alias("__moved_to"),
    )
    versions = versions.join(came, ["__lineage", "__lsn"], "left").join(
        went,
        (F.col("__next.__prev_lineage") == F.col("__l2")) & (F.col("__next.__lsn") == F.col("__end")),
        "left",
    )
    other = {
        c: F.when(~F.col(c).eqNullSafe(F.col("__k")), F.col(c)).cast(layout.key_struct_type())
        for c in ("__moved_from", "__moved_to")
    }
    return versions.select(
        *[F.col("__img").getField(c).alias(c) for c in layout.names],
        F.col("__lsn").alias("__start_lsn"),
        F.coalesce(F.col("__next.__lsn"), F.lit(MAX_LSN)).alias("__end_lsn"),
        F.col("__time").alias("__start_time"),
        F.when(F.col("__next").isNull(), max_time()).otherwise(F.col("__next.__time")).alias("__end_time"),
        F.col("__next").isNull().alias("__is_current"),
        F.coalesce(F.col("__next.__kind") == END, F.lit(False)).alias("__is_deleted"),
        other["__moved_from"].alias("__moved_from"),
        other["__moved_to"].alias("__moved_to"),
    )


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
    change (``__next``: kind, LSN, time; with lineages, ``__prev_lineage``: the lineage of the version's
    last state, which differs from its first one's when an equal state of another lineage was collapsed
    into it, as when a truncate ends a row and a move brings the same row back in one transaction)."""
    kept = _kept_states(states, by_key, by_txn)
    return kept.filter(F.col("__kind") == PRODUCE).drop("__first")


def _kept_states(states: DataFrame, by_key: WindowSpec, by_txn: WindowSpec) -> DataFrame:
    """``_state_changes`` before it keeps the images alone: every state that changes the key's state, with
    its ``__next``, and each key's first state (``__first``) even when it is gone. Keeping a first state
    that is gone changes no other row's ``__next`` (no state comes before it)."""
    last_in_txn = F.lead("__lsn").over(by_key)
    states = states.withColumn("__last", last_in_txn.isNull() | (last_in_txn != F.col("__lsn")))
    states = states.filter("__last").drop("__last")
    ahead = ["__kind", "__lsn", "__time"]
    if "__lineage" in states.columns:  # the lineage of the state before each: a version's last one's, below
        states = states.withColumn("__prev_lineage", F.lag("__lineage").over(by_txn))
        ahead.append("__prev_lineage")
    was = F.lag(F.struct(F.col("__kind"), F.col("__img"))).over(by_txn)
    same = F.coalesce(was.getField("__kind"), F.lit(END)).eqNullSafe(F.col("__kind")) & was.getField(
        "__img"
    ).eqNullSafe(F.col("__img"))
    states = states.withColumn("__first", F.row_number().over(by_txn) == 1)
    kept = states.withColumn("__same", same & ~F.col("__first")).filter(~F.col("__same")).drop("__same")
    nxt = F.lead(F.struct(*ahead)).over(by_txn)
    return kept.withColumn("__next", nxt)


def first_states_and_versions(changes: DataFrame, layout: TableLayout, holds: Holds) -> DataFrame:
    """For changes without key changes, truncates or drops (``resolve_versions``' one-window way), what
    ``resolver.table.continuation`` continues a table's held rows with, from the same one pass: the states
    that open a version (``__kind`` PRODUCE; ``version_columns`` makes the version of one), and each key's
    first state (``__first``: the state its first transaction in the changes left, gone or not). Columns:
    ``__k``, ``__kind``, ``__lsn``, ``__time``, ``__img`` (NULL where gone), ``__next``, ``__first``."""
    by_key = Window.partitionBy("__k").orderBy(*_SEQ, "__tie")
    found = _segments(touches_in_place(changes, layout, by_key), by_key)
    own = not holds.updates and not layout.drops
    image = _own_image(layout) if own else _carried_image(layout, by_key)
    kept = _kept_states(_image_states(found, image), by_key, by_key)
    return kept.filter((F.col("__kind") == PRODUCE) | F.col("__first"))


def _versions_in_place(
    touches: DataFrame, layout: TableLayout, by_key: WindowSpec, image: Column
) -> DataFrame:
    """``resolve_versions`` for changes without key changes: a row's lineage is its segment, which lies
    inside one key, so every pass is a window over the key in the same order (one shuffle, one sort, no
    checkpoint). A produced touch's ``image``: ``_carried_image``, or ``_own_image`` when no touch is an
    update."""
    versions = _state_changes(_image_states(touches, image), by_key, by_key)  # one order: no second sort
    return versions.select(*version_columns(layout))


def _image_states(touches: DataFrame, image: Column) -> DataFrame:
    """Each touch of a key as a state: its ``image`` where it produces the key (``__img``), NULL where it
    ends it."""
    is_prod = F.col("__kind") == PRODUCE
    return touches.select("__k", "__kind", *_SEQ, "__time", "__tie", F.when(is_prod, image).alias("__img"))


def version_columns(layout: TableLayout) -> list[Column]:
    """The history columns of the version a state that opens one makes (``_state_changes``' rows, without
    lineages): its image's values, from its transaction to the next state change."""
    key_t = layout.key_struct_type()
    return [
        *[F.col("__img").getField(c).alias(c) for c in layout.names],
        F.col("__lsn").alias("__start_lsn"),
        F.coalesce(F.col("__next.__lsn"), F.lit(MAX_LSN)).alias("__end_lsn"),
        F.col("__time").alias("__start_time"),
        F.when(F.col("__next").isNull(), max_time()).otherwise(F.col("__next.__time")).alias("__end_time"),
        F.col("__next").isNull().alias("__is_current"),
        F.coalesce(F.col("__next.__kind") == END, F.lit(False)).alias("__is_deleted"),
        F.lit(None).cast(key_t).alias("__moved_from"),
        F.lit(None).cast(key_t).alias("__moved_to"),
    ]


def _carried_image(layout: TableLayout, by_key: WindowSpec) -> Column:
    """A produced row's image: each column's last value carried since its segment began (``_fill``)."""
    upto = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    since = F.struct(F.col("__seg.__lsn").alias("__lsn"), F.col("__seg.__pos").alias("__pos"))
    return F.struct(
        *[F.col("__k").getField(k).alias(k) for k in layout.key],
        *[_fill(c, layout, upto, since) for c in layout.value_names],
    )


def _own_image(layout: TableLayout) -> Column:
    """An insert's image: its own values (a column it lacks is NULL), what ``_carried_image`` gives when the
    segment is the insert alone (nothing before it is carried; no drop lies between it and itself)."""
    return F.struct(
        *[F.col("__k").getField(k).alias(k) for k in layout.key],
        *[F.when(F.array_contains("__present", c), sql.col(c)).alias(c) for c in layout.value_names],
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
