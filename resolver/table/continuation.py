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
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from resolver.spark import sql
from resolver.table.key_ranges import KeyRange, range_sql
from resolver.table.merge import merge_rows, merge_snapshot_rows
from resolver.table.resolve import MAX_LSN, Holds, first_states_and_versions, version_columns
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
    values to compare with. One pass over the rows (``first_states_and_versions``: the versions and each
    key's first state from the same window), materialized: both MERGEs read it, and nothing else is
    computed for them."""
    holds = Holds(moves=False, truncates=False, longest=0, updates=affected.has_updates)
    states = first_states_and_versions(changes, layout, holds)
    first = F.col("__first")
    version = F.struct(*version_columns(layout), F.when(first, "first").otherwise("next").alias("__kind"))
    key_t = layout.key_struct_type()
    close = F.struct(
        *[(F.col("__k") if c in layout.key else F.col("__img")).getField(c).alias(c) for c in layout.names],
        F.lit(None).cast("long").alias("__start_lsn"),
        F.col("__lsn").alias("__end_lsn"),
        F.lit(None).cast("timestamp").alias("__start_time"),
        F.col("__time").alias("__end_time"),
        F.lit(False).alias("__is_current"),
        F.col("__img").isNull().alias("__is_deleted"),
        F.lit(None).cast(key_t).alias("__moved_from"),
        F.lit(None).cast(key_t).alias("__moved_to"),
        F.lit("close").alias("__kind"),
    )
    opens = F.col("__img").isNotNull()  # a state that produces the key opens a version; a gone one does not
    rows = F.array(F.when(opens, version), F.when(first, close))
    return (
        states.select(F.explode(F.filter(rows, lambda r: r.isNotNull())).alias("__r"))
        .select("__r.*")
        .localCheckpoint(eager=True)
    )


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
