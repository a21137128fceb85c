"""Explode generic change events against a table's layout: names -> typed columns, absent != NULL.

The output is one row per event of one table, the rows of ``_resolver/changes/<schema>.<table>``:

| column | meaning |
|---|---|
| ``__lsn``, ``__pos`` | commit LSN and position in the transaction: the order and the identity |
| ``__op`` | insert, update, delete or truncate |
| ``__time``, ``__xid`` | commit time and transaction id (data) |
| ``__key`` | the key the event gives a row (insert, update), as a struct of the key columns |
| ``__old_key`` | the key the event finds its row by (update, delete): the identity sent, or ``__key`` |
| ``__present`` | names of the columns the event carried (an insert carries every column the table had) |
| source columns | typed values; an absent column is NULL here and ``__present`` says it is absent |
| ``__bad`` | ``column: text`` for values that did not fit the column's type (they are NULL) |
| ``__file``, ``__line`` | provenance |

Columns are matched by name, through the schema file's ``renamed_from`` hints. A column absent from an
update but present in its old-key image (``REPLICA IDENTITY FULL``, or an unchanged identity column) is
unchanged, so it takes the old value and counts as present. Every cast is a ``try_cast``: a value that does
not fit (``infinity`` timestamps, BC dates, text in an int column) becomes NULL and is listed in ``__bad``,
which the caller sends to quarantine; the raw event stays in bronze.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from resolver.tablelayout import TableLayout

__all__ = ["cast_text", "explode_events", "is_move"]

_TIMELIKE = ("date", "timestamp", "timestamp_ntz")
#: the event's columns ``explode_events`` carries through its projections to the rows
_KEPT = (
    "commit_lsn",
    "position",
    "operation",
    "commit_time",
    "xid",
    "old_key_names",
    "source_file",
    "source_line",
)


def is_move() -> Column:
    """A change row that changes its row's key."""
    return (F.col("__op") == "update") & ~F.col("__old_key").eqNullSafe(F.col("__key"))


def cast_text(text: Column, spark_type: str) -> Column:
    """``text`` cast to ``spark_type`` without failing: NULL when it does not fit."""
    if spark_type == "string":
        return text
    if spark_type == "binary":
        return F.try_to_binary(text, F.lit("hex"))
    cast = text.try_cast(spark_type)
    if spark_type in _TIMELIKE:  # Spark reads '0044-03-15 BC' as AD 44: refuse it
        return F.when(text.endswith(" BC"), F.lit(None).cast(spark_type)).otherwise(cast)
    return cast


def _lookup(names: Column, values: Column, candidates: tuple[str, ...]) -> tuple[Column, Column]:
    """(present, text) of the first of ``candidates`` found in the parallel arrays ``names``/``values``: one
    scan of ``names`` per candidate (its position, 0 when absent)."""
    present = F.lit(False)
    text = F.lit(None).cast("string")
    for name in reversed(candidates):
        idx = F.coalesce(F.array_position(names, name), F.lit(0)).cast("int")
        has = idx > 0
        text = F.when(has, F.element_at(values, F.when(has, idx).otherwise(F.lit(1)))).otherwise(text)
        present = present | has
    return present, text


def explode_events(events: DataFrame, layout: TableLayout) -> DataFrame:
    """Typed change rows (see the module doc) of the events of ``layout.table`` in ``events`` (a DataFrame
    with ``resolver.models.ChangeEvent`` columns). Events without a commit LSN are left out (the caller
    counts them)."""
    ev = events.filter((F.col("table") == layout.table) & F.col("commit_lsn").isNotNull())
    # Three projections, each reading the one before: every column's text looked up in the event's arrays
    # (``__h``/``__n``: in the new image, ``__oh``/``__o``: in the old key), then cast (``__c`` carried,
    # ``__x`` text, ``__t``/``__ot`` typed), then the rows. Written as one, each lookup and cast stood in
    # several expressions and ran once for each (a 40-column table: about 4 times the time); Spark keeps
    # projections apart whose columns the next one reads more than once.
    looked_up = []
    for i, col in enumerate(layout.columns):
        new_has, new_text = _lookup(F.col("column_names"), F.col("column_values"), col.stream_names)
        old_has, old_text = _lookup(F.col("old_key_names"), F.col("old_key_values"), col.stream_names)
        looked_up += [new_has.alias(f"__h{i}"), new_text.alias(f"__n{i}")]
        looked_up += [old_has.alias(f"__oh{i}"), old_text.alias(f"__o{i}")]
    ev = ev.select(*_KEPT, *looked_up)
    op = F.col("operation")
    is_insert, is_update, is_delete = op == "insert", op == "update", op == "delete"
    cast = []
    for i, col in enumerate(layout.columns):
        new_has, old_has = F.col(f"__h{i}"), F.col(f"__oh{i}")
        text = F.when(new_has, F.col(f"__n{i}")).when(is_update & old_has, F.col(f"__o{i}"))
        cast += [(new_has | (is_update & old_has)).alias(f"__c{i}"), text.alias(f"__x{i}")]
        cast += [
            cast_text(text, col.type).alias(f"__t{i}"),
            cast_text(F.col(f"__o{i}"), col.type).alias(f"__ot{i}"),
        ]
        cast += [old_has, F.col(f"__o{i}")]
    ev = ev.select(*_KEPT, *cast)
    values: dict[str, Column] = {}
    old_values: dict[str, Column] = {}
    present: dict[str, Column] = {}
    has_old: dict[str, Column] = {}
    bad: list[Column] = []
    for i, col in enumerate(layout.columns):
        carried = F.col(f"__c{i}")  # an insert lacks a column only if it did not exist
        text, typed, old_text = F.col(f"__x{i}"), F.col(f"__t{i}"), F.col(f"__o{i}")
        values[col.name] = F.when(carried, typed)
        old_values[col.name] = F.col(f"__ot{i}")
        present[col.name] = carried
        has_old[col.name] = F.col(f"__oh{i}")
        bad.append(F.when(text.isNotNull() & typed.isNull(), F.concat(F.lit(col.name + ": "), text)))
        if col.name in layout.key:
            bad.append(
                F.when(
                    old_text.isNotNull() & old_values[col.name].isNull(),
                    F.concat(F.lit(col.name + " (old key): "), old_text),
                )
            )
    key = F.struct(*[values[k].alias(k) for k in layout.key])
    sent_old_key = F.lit(bool(layout.key))
    for k in layout.key:  # an identity that holds every key column (default, FULL); else the key is unchanged
        sent_old_key = sent_old_key & has_old[k]
    if layout.key_source in ("all_columns", "identity_full"):
        # the whole old row identifies it; format 1 leaves NULL old values out, so absent means NULL
        sent_old_key = F.coalesce(F.size("old_key_names") > 0, F.lit(False))
    old_key = F.struct(*[old_values[k].alias(k) for k in layout.key])
    return ev.select(
        F.col("commit_lsn").alias("__lsn"),
        F.col("position").cast("int").alias("__pos"),
        op.alias("__op"),
        F.col("commit_time").alias("__time"),
        F.col("xid").alias("__xid"),
        F.when(is_insert | is_update, key).alias("__key"),
        F.when(is_update & sent_old_key, old_key)
        .when(is_update, key)
        .when(is_delete & sent_old_key, old_key)
        .alias("__old_key"),
        F.array_compact(F.array(*[F.when(present[c], F.lit(c)) for c in layout.names])).alias("__present"),
        *[values[c].alias(c) for c in layout.names],
        F.array_compact(F.array(*bad)).alias("__bad"),
        F.col("source_file").alias("__file"),
        F.col("source_line").alias("__line"),
    )
