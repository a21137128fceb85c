"""Step 1 of resolving (``resolver.table.resolve``): every event of a table's changes as *touches* of keys. An
insert or update *produces* its key (``PRODUCE``); a delete, or an update that changes the key (a *move*),
*ends* its old key (``END``); a truncate ends every key; a column dropped at a point gives every held row a
*refresh* there."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

from resolver.spark import sql
from resolver.tablelayout import TableLayout

PRODUCE, END = 1, 0


def touches(changes: DataFrame, layout: TableLayout) -> DataFrame:
    """Every touch of every key (step 1 of ``resolver.table.resolve``'s docstring): produced images, ends, the
    ends a truncate gives every key, and the refreshes of dropped columns."""
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
        F.lit(PRODUCE).alias("__kind"),
        *seq,
        "__time",
        "__op",
        "__move",
        F.when(F.col("__move"), F.col("__old_key")).alias("__from"),
        *carried,
    )
    ends = ev.filter(((F.col("__op") == "delete") | F.col("__move")) & F.col("__old_key").isNotNull()).select(
        F.col("__old_key").alias("__k"),
        F.lit(END).alias("__kind"),
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
        F.lit(END).alias("__kind"),
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
            F.lit(PRODUCE).alias("__kind"),
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
        touches = touches.filter((F.col("__op") != "refresh") | (F.col("__held") == PRODUCE)).drop("__held")
    return touches


def touches_in_place(changes: DataFrame, layout: TableLayout, by_key: WindowSpec) -> DataFrame:
    """``touches`` for changes without key changes, truncates or dropped columns: an insert or update
    produces its key, a delete ends it, so each event is one touch; an event held twice is kept once."""
    seq = ["__lsn", "__pos"]
    produces = F.col("__op").isin("insert", "update")
    touches = changes.filter(F.col("__op") != "truncate").select(
        F.when(produces, F.col("__key")).otherwise(F.col("__old_key")).alias("__k"),
        F.when(produces, F.lit(PRODUCE)).otherwise(F.lit(END)).alias("__kind"),
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
