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
from resolver.table.resolve import MAX_LSN, Holds, resolve_versions
from resolver.table.table_steps import Affected, BatchTables, Exploded, silver_untouched
from resolver.tablelayout import TableLayout

__all__ = [
    "batch_alone_suffices",
    "continued_rows",
    "continued_versions",
    "merge_continued_snapshot",
    "merge_continuing",
]


def batch_alone_suffices(
    affected: Affected, layout: TableLayout, exploded: Exploded, tables: BatchTables
) -> bool:
    """Whether the batch resolves from its own rows alone (see the module docstring): every event newer
    than all the table held, no key change or truncate held or sent, no drop point, no column whose
    history is not tracked (``layout.track``: a version then absorbs later ones), and no update lacking a
    column (its value would be carried from the held row). The table keeps a history or a snapshot, and
    nothing was written to it since the marker (``silver_untouched``): a batch cut short after its silver
    writes, applied again, finds them holding its versions already, which only the general way diffs."""
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
        and silver_untouched(tables, layout.state.marker)
    )


def continued_versions(changes: DataFrame, layout: TableLayout, affected: Affected) -> DataFrame:
    """The batch's versions resolved from its own rows (``changes``), each with its ``__kind`` (``first``:
    it starts at its key's first transaction in the batch, so it may continue the version held; ``next``),
    and per key a ``close`` row: the end its open version takes at that transaction (``__end_lsn``,
    ``__end_time``, ``__is_deleted`` when the transaction left the key gone) with the first version's
    values to compare with. Materialized: both MERGEs read it, and nothing else is computed for them."""
    key = list(layout.key)
    holds = Holds(moves=False, truncates=False, longest=0, updates=affected.has_updates)
    versions, _ = resolve_versions(changes, layout, holds)
    cols = versions.columns
    named = F.coalesce(F.col("__key"), F.col("__old_key"))
    first = F.min_by(F.struct("__lsn", "__time"), F.struct("__lsn", "__pos"))
    firsts = changes.groupBy(*[named.getField(k).alias(k) for k in key]).agg(first.alias("__first"))
    at_first = [*_on_key("__v", "__f", key), F.col("__v.__start_lsn") == F.col("__f.__first.__lsn")]
    # each version, and each key with the version that starts at its first transaction (if any)
    joined = versions.alias("__v").join(firsts.hint("merge").alias("__f"), at_first, "full_outer")
    opens = F.col("__f.__first").isNotNull() & F.col("__v.__start_lsn").isNotNull()
    kept = joined.filter(F.col("__v.__start_lsn").isNotNull()).select(
        *[sql.col("__v", c).alias(c) for c in cols], F.when(opens, "first").otherwise("next").alias("__kind")
    )
    closing = joined.filter(F.col("__f.__first").isNotNull()).select(
        *[sql.col("__f", c).alias(c) if c in key else sql.col("__v", c).alias(c) for c in layout.names],
        F.col("__f.__first.__lsn").alias("__end_lsn"),
        F.col("__f.__first.__time").alias("__end_time"),
        F.lit(False).alias("__is_current"),
        F.col("__v.__start_lsn").isNull().alias("__is_deleted"),
        F.lit("close").alias("__kind"),
    )
    return kept.unionByName(closing, allowMissingColumns=True).localCheckpoint(eager=True)


def _on_key(left: str, right: str, key: list[str]) -> list[Column]:
    """The key columns of the aliases ``left`` and ``right`` equal, NULL equal to NULL (a key of a table
    keyed by its whole row may hold NULLs)."""
    return [sql.col(left, k).eqNullSafe(sql.col(right, k)) for k in key]


def merge_continuing(
    target: DeltaTable, source: DataFrame, layout: TableLayout, ranges: list[KeyRange]
) -> dict[str, int]:
    """One MERGE making the history ``target`` hold the batch's versions after what it held
    (``source``: ``continued_versions``): the batch's versions are inserted, and each key's open version is
    closed at the key's first transaction in the batch, or extended by the batch's first version when the
    two are equal (that version is then not inserted). Returns what it inserted and updated."""
    key, cols = list(layout.key), target.toDF().columns
    values = [c for c in layout.names if c not in key]
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


def continued_rows(source: DataFrame, key: list[str], cols: list[str]) -> DataFrame:
    """What ``merge_continued_snapshot`` makes the snapshot hold for a batch resolved from its own rows
    (``source``: ``continued_versions``): per key, its newest version in the batch (gone unless it is
    current; ``__first``: the version starts at the key's first transaction in the batch, so it may
    continue the row held), or gone when the batch left it no version. One grouping, run by the MERGE."""
    kept = [c for c in cols if c not in key]
    version = F.col("__kind") != "close"
    last = F.struct(
        *[sql.col(c) for c in kept],
        (~F.col("__is_current")).alias("__gone"),
        (F.col("__kind") == "first").alias("__first"),
    )
    newest = F.max_by(F.when(version, last), F.when(version, F.col("__start_lsn")))
    grouped = source.groupBy(*[sql.col(k) for k in key]).agg(newest.alias("__n"))
    return grouped.select(
        *[sql.col(c) if c in key else sql.col("__n", c).alias(c) for c in cols],
        F.coalesce(F.col("__n.__gone"), F.lit(True)).alias("__gone"),
        F.coalesce(F.col("__n.__first"), F.lit(False)).alias("__first"),
    )


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
