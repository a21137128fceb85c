"""A batch that only adds rows the table never held (``resolver.table.table_steps``; docs/silver.md, "A table
that only gains rows"): its events for the table are all inserts, every one new to the lake, newer than
everything the table held, of keys above every key it ever held. Logs, events and audit tables, most of many
databases' write volume, are such tables.

Then nothing held can change: no key the batch names was ever live, so no version closes and no snapshot row
changes. The batch's rows are appended to the history (each insert one open version) and the snapshot (each
insert one row): two appends, one Spark job each, and no MERGE, no read of anything held, no resolution.
Nothing is written to the change store: bronze holds the events, and the store's marker lists their
commit-LSN range as *behind* (``resolver.tablestate.Marker.behind``); the next batch of the table that
reads its store (``resolver.table.later_batch``: a late event, an update, a delete) first adds them to it
from bronze. A table that only ever gains rows never writes its store again. ``appends_only`` says whether a
batch is one, from what the plan, bronze's write, the explode's pass and the store's marker already know: no
job of its own.

Why each condition: an insert of a key the table holds live would need that row's version closed (a delete
of it that has not arrived yet: a late event); ``resolver.tablestate.KeyHigh`` rules that out without a
read, for keys that grow (serial and time-ordered keys: a UUID key takes the general way). An event the
lake held already (a file delivered again) must not be appended twice: bronze took every one as new
(``BatchEvents.unseen``). An event older than one the table held could be late: newer than the marker's
newest. A schema change, a re-key, a drop point or a table the lake saw before only through truncates
takes the general way (``resolver.table.later_batch``), which holds every case.

A table's first batch of inserts takes the route too (``first_appends_only``): its tables were just created,
so nothing is held and no key needs a mark to be new. An initial load (a snapshot file: every row one
insert) then writes its history and snapshot and leaves the change store empty, its range behind, where the
first-batch route (``resolver.table.first_batch``) appended every row to the store and resolved them. The
keys must be unique within the batch without a look: a primary key or a replica identity index
(PostgreSQL holds them unique and never NULL), or a key column with an order and no NULL (a key a schema
file names is trusted as ``appends_only`` trusts it). Truncates kept for the table before its first rows
take the first-batch route, which adopts them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from resolver.lake import delta
from resolver.plan.tablemeta import TableMeta
from resolver.spark import sql
from resolver.spark.steps import step
from resolver.table.key_ranges import KeyRange
from resolver.table.resolve import MAX_LSN, MAX_TIME_MICROS
from resolver.table.store import drops_found
from resolver.table.table_steps import Affected, BatchEvents, BatchTables, Exploded, Stored
from resolver.tablelayout import TableLayout

__all__ = ["AppendBatch", "appends_only", "first_appends_only"]

#: key sources whose keys PostgreSQL holds unique and never NULL (``resolver.plan.keys``)
_UNIQUE_KEYS = ("primary_key", "identity")


def appends_only(
    meta: TableMeta, layout: TableLayout, tables: BatchTables, events: BatchEvents, exploded: Exploded
) -> bool:
    """Whether the table's batch only adds rows the table never held (see the module docstring)."""
    state, marker = layout.state, layout.state.marker
    if state.is_new or meta.lo is None or not events.unseen_by(layout.table, tables, marker):
        return False
    if not _inserts_only(meta, exploded) or layout.schema_log or layout.rescan or _reshaped(layout, tables):
        return False
    if not marker.flags_known or not marker.fresh(delta.version(tables.store)):
        return False
    if marker.lsn is not None and meta.lo <= marker.lsn:
        return False
    low = _first_key_range(layout, exploded)
    high = marker.high
    return (
        low is not None and not low[3] and high is not None and high.column == low[0] and high.below(low[1])
    )


def first_appends_only(
    spark: SparkSession,
    meta: TableMeta,
    layout: TableLayout,
    tables: BatchTables,
    events: BatchEvents,
    exploded: Exploded,
) -> bool:
    """Whether a table's first batch (``tables.first``) only inserts rows, each key once (see the module
    docstring). Its schema log only adds the table's columns, which the appends write as they are; the
    explode's pass tells that no insert lacks a column an earlier one had (a drop point: the first-batch
    route records it)."""
    if not tables.first or meta.lo is None or not events.unseen or layout.table in events.read_back:
        return False
    if not _inserts_only(meta, exploded) or _reshaped(layout, tables) or not layout.key:
        return False
    if drops_found(layout, exploded.rescanned):  # an insert lacks a column an earlier one had
        return False
    if layout.key_source not in _UNIQUE_KEYS:
        low = _first_key_range(layout, exploded)
        if low is None or low[3]:
            return False
    return not delta.is_table(spark, tables.paths.pending_truncates)


def _inserts_only(meta: TableMeta, exploded: Exploded) -> bool:
    """Whether every event of the table's batch is an insert (with a commit LSN) that keeps its key."""
    return not (meta.changes or meta.truncates or meta.skipped or exploded.moves or exploded.updates)


def _reshaped(layout: TableLayout, tables: BatchTables) -> bool:
    """Whether the batch widens, renames or drops columns, or every key is affected by the tables."""
    return bool(layout.changes or layout.renames or layout.drops or tables.whole)


def _first_key_range(layout: TableLayout, exploded: Exploded) -> KeyRange | None:
    """The batch's range of the table's first key column (None: not measured, no order to measure)."""
    return next((r for r in exploded.ranges if layout.key and r[0] == layout.key[0]), None)


@dataclass
class AppendBatch:
    """The steps of a batch that only adds rows the table never held (``appends_only``, and a first batch:
    ``first_appends_only``)."""

    spark: SparkSession
    meta: TableMeta
    layout: TableLayout
    tables: BatchTables

    def store(self, events: BatchEvents, exploded: Exploded) -> Stored:
        """Nothing written to the change store: bronze holds the batch's events, and the store's marker lists
        their commit-LSN range as behind (``Marker.falling_behind``); the next batch that reads the store
        adds them to it first (``resolver.table.later_batch``). Until then nothing needs them: every later
        batch of this route appends again."""
        assert self.meta.lo is not None and self.meta.hi is not None  # appends_only
        version = delta.version(self.tables.store)
        behind = self.layout.state.marker.falling_behind(int(self.meta.lo), int(self.meta.hi))
        return Stored(exploded, exploded.rows, version, False, True, False, moved=0, behind=behind)

    def drops(self, stored: Stored) -> dict[str, list[tuple[int, ...]]]:
        return {}  # appends_only rescans nothing; first_appends_only found no drop point among the inserts

    def affected(self, stored: Stored) -> Affected:
        """Only the batch's own keys, none of them held: what the store holds afterwards is what it held
        (the marker's flags) and the batch's inserts, up to its newest commit LSN."""
        marker = self.layout.state.marker
        newest = max([x for x in (marker.lsn, self.meta.hi) if x is not None], default=None)
        return Affected(
            None,
            has_moves=bool(marker.moves),
            has_truncates=bool(marker.truncates),
            ranges=list(stored.exploded.ranges),
            late_possible=False,
            after_held=True,
            newest=newest,
            newest_known=True,
            moves=0,
            has_updates=False,
        )

    def changes(self, stored: Stored, affected: Affected) -> DataFrame:
        return stored.exploded.rows

    def resolve(self, changes: DataFrame, affected: Affected) -> DataFrame:
        """Each insert as its row's one open version: its own values (a column it lacks is NULL), from its
        commit on. A projection of the explode's rows, kept in Spark's cache: no job of its own."""
        key_t = sql.type_sql(self.layout.key_struct_type())
        present = "array_contains(__present, {})"
        return changes.selectExpr(  # Spark SQL text: a few calls into the JVM, not one per column and part
            *[f"__key.{sql.ident(k)} AS {sql.ident(k)}" for k in self.layout.key],
            *[
                f"CASE WHEN {present.format(sql.string(c))} THEN {sql.ident(c)} END AS {sql.ident(c)}"
                for c in self.layout.value_names
            ],
            "__lsn AS __start_lsn",
            f"CAST({MAX_LSN} AS bigint) AS __end_lsn",
            "__time AS __start_time",
            f"timestamp_micros({MAX_TIME_MICROS}) AS __end_time",
            "true AS __is_current",
            "false AS __is_deleted",
            f"CAST(NULL AS {key_t}) AS __moved_from",
            f"CAST(NULL AS {key_t}) AS __moved_to",
        )

    def write_history(self, versions: DataFrame, changes: DataFrame, affected: Affected) -> int:
        """Append the versions to the history; the rows are counted on their way in."""
        assert self.tables.history is not None  # apply_table writes only the silver tables the table keeps
        with step(self.spark, self.layout.table, "history append"):
            written, _ = delta.append_counted(self.tables.history, self.tables.paths.history, versions)
        return written.get("numTargetRowsInserted", 0)

    def write_snapshot(self, versions: DataFrame, changes: DataFrame, affected: Affected) -> dict[str, int]:
        """Append the versions' rows to the snapshot."""
        assert self.tables.snapshot is not None  # apply_table writes only the silver tables the table keeps
        with step(self.spark, self.layout.table, "snapshot append"):
            written, _ = delta.append_counted(self.tables.snapshot, self.tables.paths.snapshot, versions)
        return {"insert": written.get("numTargetRowsInserted", 0)}
