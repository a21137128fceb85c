"""A batch resolved from its own rows alone (docs/silver.md, "A batch that continues what the table held"):
when every event of it is newer than all the table held, no key changes and no truncate are held or sent,
and every update carries every column (``batch_alone_suffices``), each key's versions from the batch on
follow from the batch's own rows, and what the table held only needs its open version *continued*: closed
at the key's first transaction in the batch, or, when that transaction left the row as it was (an update
that changed nothing), extended to where the batch's first version ends, as the resolution of all the
key's changes collapses two equal states in a row. Nothing held is read first: one MERGE into the history
(``merge_continuing``) and one into the snapshot (``continued_rows``) find the held rows themselves.

Against reading the keys' current rows from the snapshot first (``resolver.table.affected.seeded_changes``)
this saves a Delta scan and its materialization per table and batch; the results are the same rows."""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from resolver.spark import sql
from resolver.table.key_ranges import KeyRange, range_sql
from resolver.table.merge import merge_rows, merge_snapshot_rows
from resolver.table.resolve import MAX_LSN
from resolver.table.table_steps import Affected, BatchTables, Exploded
from resolver.tablelayout import TableLayout

__all__ = [
    "batch_alone_suffices",
    "batch_rows",
    "continued_rows",
    "first_touches",
    "merge_continued_snapshot",
    "merge_continuing",
]


def batch_alone_suffices(
    affected: Affected, layout: TableLayout, exploded: Exploded, tables: BatchTables
) -> bool:
    """Whether the batch resolves from its own rows alone (see the module docstring): every event newer
    than all the table held, no key change or truncate held or sent, no drop point, no column whose
    history is not tracked (``layout.track``: a version then absorbs later ones), and no update lacking a
    column (its value would be carried from the held row). The table keeps a history or a snapshot."""
    return (
        affected.after_held
        and affected.nodes is not None
        and not affected.has_moves
        and not affected.has_truncates
        and not exploded.moves
        and not exploded.partial
        and not layout.drops
        and not layout.rescan
        and not layout.track
        and (tables.history is not None or tables.snapshot is not None)
    )


def batch_rows(rows: DataFrame, layout: TableLayout) -> DataFrame:
    """The batch's change rows (``rows``, exploded) as the resolution and the MERGEs read them, materialized
    apart from the explode's cached rows (a MERGE refuses a source whose cached parts change while it runs,
    and the explode's cache is let go of as other tables finish)."""
    kept = ["__lsn", "__pos", "__op", "__time", "__key", "__old_key", "__present"]
    return rows.select(*kept, *[sql.col(c) for c in layout.names]).localCheckpoint(eager=True)


def first_touches(rows: DataFrame, key: list[str]) -> DataFrame:
    """Per key the batch's rows name (no key changes among them: an event names one key), its first
    transaction's commit LSN and time (``__first_lsn``, ``__first_time``)."""
    named = F.coalesce(F.col("__key"), F.col("__old_key"))
    first = F.min_by(F.struct("__lsn", "__time"), F.struct("__lsn", "__pos"))
    grouped = rows.groupBy(*[named.getField(k).alias(k) for k in key]).agg(first.alias("__f"))
    return grouped.select(
        *[sql.col(k) for k in key],
        F.col("__f.__lsn").alias("__first_lsn"),
        F.col("__f.__time").alias("__first_time"),
    )


def _on_key(left: str, right: str, key: list[str]) -> list[Column]:
    """The key columns of the aliases ``left`` and ``right`` equal, NULL equal to NULL (a key of a table
    keyed by its whole row may hold NULLs)."""
    return [sql.col(left, k).eqNullSafe(sql.col(right, k)) for k in key]


def merge_continuing(
    target: DeltaTable, versions: DataFrame, firsts: DataFrame, layout: TableLayout, ranges: list[KeyRange]
) -> dict[str, int]:
    """One MERGE making the history ``target`` hold the batch's ``versions`` (resolved from its own rows)
    after what it held: the batch's versions are inserted, and each key's open version is closed at the
    key's first transaction in the batch (``firsts``, ``first_touches``), or extended by the batch's first
    version when the two are equal (that version is then not inserted). Returns what it inserted and
    updated."""
    key, cols = list(layout.key), target.toDF().columns
    values = [c for c in layout.names if c not in key]
    # each key's version that starts at its first transaction (none: that transaction left it gone)
    at = firsts.alias("f").join(
        versions.alias("v"),
        [*_on_key("f", "v", key), F.col("f.__first_lsn") == F.col("v.__start_lsn")],
        "left",
    )
    first = F.col("v.__start_lsn").isNotNull()
    kind = F.when(F.col("v.__start_lsn") == F.col("f.__first_lsn"), "first").otherwise("next")
    new = versions.alias("v").join(firsts.alias("f"), _on_key("v", "f", key), "left")
    new = new.select(*[sql.col("v", c).alias(c) for c in cols], kind.alias("__kind"))
    closing = at.select(
        *[sql.col("f", c).alias(c) if c in key else sql.col("v", c).alias(c) for c in layout.names],
        F.col("f.__first_lsn").alias("__end_lsn"),
        F.col("f.__first_time").alias("__end_time"),
        F.lit(False).alias("__is_current"),
        (~first).alias("__is_deleted"),
        F.lit("close").alias("__kind"),
    )
    source = new.unionByName(closing, allowMissingColumns=True)
    same = " AND ".join(f"t.{sql.ident(c)} <=> s.{sql.ident(c)}" for c in values) or "TRUE"
    on = " AND ".join(
        [
            *range_sql(ranges, "t."),
            f"t.__end_lsn = {MAX_LSN}",
            *[f"t.{sql.ident(k)} <=> s.{sql.ident(k)}" for k in key],
            f"((s.__kind = 'first' AND {same}) OR (s.__kind = 'close' AND (s.__is_deleted OR NOT ({same}))))",
        ]
    )
    ends = ("__end_lsn", "__end_time", "__is_current", "__is_deleted")
    return merge_rows(target, source, on, update=list(ends), insert="s.__kind <> 'close'", cols=cols)


def continued_rows(versions: DataFrame, firsts: DataFrame, key: list[str], cols: list[str]) -> DataFrame:
    """What ``merge_continued_snapshot`` makes the snapshot hold for a batch resolved from its own rows:
    each key's newest version in the batch (gone unless it is current; ``__first``: the version starts at
    the key's first transaction in the batch, so it may continue the row held), and each key the batch only
    deleted, gone."""
    kept = [c for c in cols if c not in key]
    last = F.struct(*[sql.col(c) for c in kept], (~F.col("__is_current")).alias("__gone"))
    newest = versions.groupBy(*[sql.col(k) for k in key]).agg(F.max_by(last, "__start_lsn").alias("__n"))
    newest = newest.alias("n").join(firsts.alias("f"), _on_key("n", "f", key), "left")
    newest = newest.select(
        *[sql.col("n", c).alias(c) if c in key else sql.col("__n", c).alias(c) for c in cols],
        F.col("__n.__gone"),
        (F.col("__n.__start_lsn") == F.col("f.__first_lsn")).alias("__first"),
    )
    types = dict(versions.select(*[sql.col(c) for c in cols]).dtypes)
    gone = firsts.alias("f").join(versions.alias("v"), _on_key("f", "v", key), "left_anti")
    gone = gone.select(
        *[sql.col(c) if c in key else F.lit(None).cast(types[c]).alias(c) for c in cols],
        F.lit(True).alias("__gone"),
        F.lit(False).alias("__first"),
    )
    return newest.unionByName(gone)


def merge_continued_snapshot(
    target: DeltaTable, rows: DataFrame, layout: TableLayout, ranges: list[KeyRange]
) -> dict[str, int]:
    """One MERGE making the snapshot ``target`` hold ``rows`` (``continued_rows``): a gone row deletes the
    key's row; a row whose version starts at the key's first transaction in the batch with the values the
    held row has leaves it as it is (the held version goes on, its start with it); any other updates the
    key's row where it differs, or is inserted. Returns what it inserted, updated and deleted."""
    key, cols = list(layout.key), target.toDF().columns
    same_values = " AND ".join(f"t.{sql.ident(c)} <=> s.{sql.ident(c)}" for c in layout.value_names) or "TRUE"
    same = " AND ".join(f"t.{sql.ident(c)} <=> s.{sql.ident(c)}" for c in cols)
    on = " AND ".join([*range_sql(ranges, "t."), *[f"t.{sql.ident(k)} <=> s.{sql.ident(k)}" for k in key]])
    update = f"NOT s.__gone AND NOT ({same_values} AND (s.__first OR {same}))"
    return merge_snapshot_rows(target, rows, on, update=update, cols=cols)
