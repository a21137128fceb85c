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

from resolver.spark.sql import ident, string
from resolver.tablelayout import TableLayout

__all__ = ["cast_sql", "explode_events", "is_move"]

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


def cast_sql(text: str, spark_type: str) -> str:
    """``text`` (Spark SQL text) cast to ``spark_type`` without failing: NULL when it does not fit."""
    if spark_type == "string":
        return text
    if spark_type == "binary":
        return f"try_to_binary({text}, 'hex')"
    cast = f"try_cast({text} AS {spark_type})"
    if spark_type in _TIMELIKE:  # Spark reads '0044-03-15 BC' as AD 44: refuse it
        return f"CASE WHEN endswith({text}, ' BC') THEN CAST(NULL AS {spark_type}) ELSE {cast} END"
    return cast


def _lookup(names: str, values: str, candidates: tuple[str, ...]) -> tuple[str, str]:
    """(present, text) of the first of ``candidates`` found in the parallel arrays ``names``/``values`` (SQL
    text): one scan of ``names`` per candidate (its position, 0 when absent)."""
    present = "false"
    text = "CAST(NULL AS string)"
    for name in reversed(candidates):
        idx = f"CAST(coalesce(array_position({names}, {string(name)}), 0) AS int)"
        found = f"element_at({values}, CASE WHEN {idx} > 0 THEN {idx} ELSE 1 END)"
        text = f"CASE WHEN {idx} > 0 THEN {found} ELSE {text} END"
        present = f"({present} OR {idx} > 0)"
    return present, text


def explode_events(events: DataFrame, layout: TableLayout) -> DataFrame:
    """Typed change rows (see the module doc) of the events of ``layout.table`` in ``events`` (a DataFrame
    with ``resolver.models.ChangeEvent`` columns). Events without a commit LSN are left out (the caller
    counts them). The projections are Spark SQL text (names and values quoted by ``resolver.spark.sql``):
    built with the Column API, a table of three columns took about a thousand calls into the JVM, 0.1 s
    of a batch's driver time per table; as text, a few."""
    ev = events.filter(f"`table` = {string(layout.table)} AND `commit_lsn` IS NOT NULL")
    # Three projections, each reading the one before: every column's text looked up in the event's arrays
    # (``__h``/``__n``: in the new image, ``__oh``/``__o``: in the old key), then cast (``__c`` carried,
    # ``__x`` text, ``__t``/``__ot`` typed), then the rows. Written as one, each lookup and cast stood in
    # several expressions and ran once for each (a 40-column table: about 4 times the time); Spark keeps
    # projections apart whose columns the next one reads more than once.
    kept = [ident(c) for c in _KEPT]
    looked_up = []
    for i, col in enumerate(layout.columns):
        new_has, new_text = _lookup("`column_names`", "`column_values`", col.stream_names)
        old_has, old_text = _lookup("`old_key_names`", "`old_key_values`", col.stream_names)
        looked_up += [f"{new_has} AS __h{i}", f"{new_text} AS __n{i}"]
        looked_up += [f"{old_has} AS __oh{i}", f"{old_text} AS __o{i}"]
    ev = ev.selectExpr(*kept, *looked_up)
    is_insert, is_update, is_delete = (f"`operation` = '{op}'" for op in ("insert", "update", "delete"))
    cast = []
    for i, col in enumerate(layout.columns):
        text = f"CASE WHEN __h{i} THEN __n{i} WHEN {is_update} AND __oh{i} THEN __o{i} END"
        cast += [f"(__h{i} OR ({is_update} AND __oh{i})) AS __c{i}", f"{text} AS __x{i}"]
        cast += [f"{cast_sql(text, col.type)} AS __t{i}", f"{cast_sql(f'__o{i}', col.type)} AS __ot{i}"]
        cast += [f"__oh{i}", f"__o{i}"]
    ev = ev.selectExpr(*kept, *cast)
    index = {col.name: i for i, col in enumerate(layout.columns)}
    bad: list[str] = []
    for i, col in enumerate(layout.columns):
        label = string(col.name + ": ")
        bad.append(f"CASE WHEN __x{i} IS NOT NULL AND __t{i} IS NULL THEN concat({label}, __x{i}) END")
        if col.name in layout.key:
            label = string(col.name + " (old key): ")
            bad.append(f"CASE WHEN __o{i} IS NOT NULL AND __ot{i} IS NULL THEN concat({label}, __o{i}) END")
    value = {c: f"CASE WHEN __c{index[c]} THEN __t{index[c]} END" for c in index}
    key = "struct(" + ", ".join(f"{value[k]} AS {ident(k)}" for k in layout.key) + ")"
    old_key = "struct(" + ", ".join(f"__ot{index[k]} AS {ident(k)}" for k in layout.key) + ")"
    # an identity that holds every key column (default, FULL); else the key is unchanged
    sent_old_key = " AND ".join(["true" if layout.key else "false", *[f"__oh{index[k]}" for k in layout.key]])
    if layout.key_source in ("all_columns", "identity_full"):
        # the whole old row identifies it; format 1 leaves NULL old values out, so absent means NULL
        sent_old_key = "coalesce(size(`old_key_names`) > 0, false)"
    present = ", ".join(f"CASE WHEN __c{index[c]} THEN {string(c)} END" for c in layout.names)
    return ev.selectExpr(
        "`commit_lsn` AS __lsn",
        "CAST(`position` AS int) AS __pos",
        "`operation` AS __op",
        "`commit_time` AS __time",
        "`xid` AS __xid",
        f"CASE WHEN {is_insert} OR {is_update} THEN {key} END AS __key",
        f"CASE WHEN {is_update} AND ({sent_old_key}) THEN {old_key} WHEN {is_update} THEN {key} "
        f"WHEN {is_delete} AND ({sent_old_key}) THEN {old_key} END AS __old_key",
        f"array_compact(array({present})) AS __present",
        *[f"{value[c]} AS {ident(c)}" for c in layout.names],
        f"array_compact(array({', '.join(bad)})) AS __bad",
        "`source_file` AS __file",
        "`source_line` AS __line",
    )
