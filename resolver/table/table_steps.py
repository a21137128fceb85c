"""The steps of one table's batch, as ``resolver.table.apply.apply_table`` calls them in order, and what the
first of them hands to the rest. Two kinds of batch carry them out: a table's first batch, whose Delta tables
were just created (``resolver.table.first_batch.FirstBatch``: what it holds is only its own rows, so finding
and reading the affected keys has nothing to do and the silver tables are appended to), and every later one
(``resolver.table.later_batch.LaterBatch``: the change store looked up, the history diffed and MERGEd).

What the steps hand to each other is defined here too (``BatchEvents``, ``BatchTables``, ``Exploded``,
``Stored``, ``Affected``), so each step's module imports the types and none imports another step for them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from delta.tables import DeltaTable
from pyspark.sql import DataFrame

from resolver.lake import delta
from resolver.lake.folders import TablePaths
from resolver.table.key_ranges import KeyRange
from resolver.tablelayout import TableLayout
from resolver.tablestate import Marker, Waiting

__all__ = ["Affected", "BatchEvents", "BatchTables", "Exploded", "Stored", "TableSteps", "silver_untouched"]


@dataclass(frozen=True)
class BatchEvents:
    """The events a batch applies (every table's: each table's steps take their own) and what bronze's write
    found out about them. ``unseen``: the lake held none of them before (bronze took every one as new), so
    no change store holds any of them and they are appended without looking for them first. ``exploded``:
    tables' rows exploded for them in the batch's one pass (``resolver.table.exploded.explode_tables``), by
    table name; a table not in it explodes its own."""

    rows: DataFrame
    unseen: bool = False
    exploded: Mapping[str, Exploded] = field(default_factory=dict)
    #: tables whose rows include their waiting events, read back from bronze (``resolver.batch.deferral``),
    #: with what waited
    read_back: Mapping[str, Waiting] = field(default_factory=dict)
    #: tables whose Delta tables the batch created beside bronze's write, this being their first batch
    #: (``resolver.table.batch_tables.open_first_tables``), by table name; a table not in it opens its own
    opened: Mapping[str, BatchTables] = field(default_factory=dict)

    def unseen_by(self, table: str, tables: BatchTables, marker: Marker) -> bool:
        """Whether none of the table's rows of the batch is held by its change store or its silver tables.
        Its own rows: when bronze took every event as new (``unseen``). Events read back from bronze (they
        waited): when nothing was written to the table's Delta tables since its marker (a batch that
        applied them and was cut short before the lake's markers took its commit wrote some), and the store's
        *behind* ranges, which a catch-up adds to it from bronze, do not meet theirs."""
        if not self.unseen:
            return False
        waited = self.read_back.get(table)
        if waited is None:
            return True
        if not marker.fresh(delta.version(tables.store)) or not silver_untouched(tables, marker):
            return False
        lo, hi = waited.lo, waited.hi
        return lo is None or hi is None or all(b < lo or a > hi for a, b in marker.behind)


def silver_untouched(tables: BatchTables, marker: Marker) -> bool:
    """Whether nothing was written to the table's silver tables since its marker (``Marker.silver``, their
    versions then; a marker of an earlier release recorded none): a batch cut short after its silver
    writes and before the lake's markers took its commit left them holding events the marker does not
    know of."""
    silver = tuple(-1 if t is None else delta.version(t) for t in (tables.history, tables.snapshot))
    return marker.silver == silver


@dataclass(frozen=True)
class Exploded:
    """The batch's rows for one table (materialized) and what the same pass measured."""

    rows: DataFrame
    moves: int  # rows that change their key (an event the batch holds twice counts twice)
    bad: int  # values that did not fit their column (one per line that carried it)
    updates: int  # rows that update a row (an event the batch holds twice counts twice)
    partial: int  # updates that lack a column of the layout (a value the row carries from before)
    ranges: list[KeyRange]  # each integral, string or date key column's range among the keys named
    # the rows' first insert lacking each column of ``layout.rescan`` (``resolver.table.store``'s
    # ``rescan_aggregates``, by their names)
    rescanned: dict[str, Any] = field(default_factory=dict)


@dataclass
class Stored:
    """What appending the batch to the change store found."""

    exploded: Exploded  # the batch exploded against the layout, materialized and measured
    held: DataFrame  # the changes the table's keys are looked up in: the store (a first batch: its own)
    version: int  # the store's version afterwards
    adopted: bool  # truncates kept from before the table's first rows came with it
    flags_hold: bool  # the marker's key-change and truncate flags still describe the store before it
    done: bool  # every event was held already and the silver tables hold all the store has
    moved: int | None = None  # the batch's key changes, each event once, when counted on their way in
    # the commit-LSN ranges of the table's events bronze holds and the store does not, after this step
    behind: tuple[tuple[int, int], ...] = ()


@dataclass
class Affected:
    """What the affected-keys step found: the keys' hashes (``node``; None = every key), their range as
    literals Delta skips files with, whether the store holds key changes or truncates, and the
    pointer-jumping rounds the key-change graph took."""

    nodes: DataFrame | None
    has_moves: bool
    has_truncates: bool
    ranges: list[KeyRange] = field(default_factory=list)
    rounds: int = 0
    late_possible: bool = True  # False: no event of the batch is older than the newest keyed one held before
    after_held: bool = False  # every event of the batch is newer than every keyed change held before it
    newest: int | None = None  # the newest commit LSN of a keyed change held after the batch (None: none)
    newest_known: bool = False  # whether ``newest`` is known (the marker records it)
    moves: int | None = None  # how many key changes the changes hold, when known (a first batch's own)
    has_updates: bool = True  # False: the changes hold no update (a first batch of inserts and deletes)
    # the versions come from the batch's own rows alone (``resolver.table.continuation``): the silver
    # tables' held rows are continued by the MERGEs, not read first
    alone: bool = False


@dataclass
class BatchTables:
    """A table's Delta tables for this batch (None: a silver table its settings do not keep), and where they
    are."""

    paths: TablePaths
    store: DeltaTable
    history: DeltaTable | None
    snapshot: DeltaTable | None
    rekeyed: bool
    deletion_vectors: bool  # deletion vectors were turned on for the silver tables now
    # a silver table was created now beside a change store that held rows: filled from all of them
    silver_added: bool = False
    # none of the table's Delta tables existed before this batch (its first batch: they were just created)
    first: bool = False

    @property
    def whole(self) -> bool:
        """Whether every key is affected by the tables themselves: the key columns changed, or a silver table
        is new beside the rows the store held."""
        return self.rekeyed or self.silver_added


class TableSteps(Protocol):
    """One table's batch, step by step (each returns at once where it has nothing to do). ``layout`` is the
    table's layout; ``apply_table`` replaces it when the store's rows show drops it did not know."""

    layout: TableLayout

    def store(self, events: BatchEvents, exploded: Exploded) -> Stored:
        """Add the batch's new rows (``exploded`` against the layout) to the change store."""
        ...

    def drops(self, stored: Stored) -> dict[str, list[tuple[int, ...]]]:
        """The drop points of the columns in ``layout.rescan`` among the changes held (``layout.drop_state``
        takes them), per column."""
        ...

    def affected(self, stored: Stored) -> Affected:
        """The keys the batch affects."""
        ...

    def changes(self, stored: Stored, affected: Affected) -> DataFrame:
        """Every held change of the affected keys, materialized."""
        ...

    def resolve(self, changes: DataFrame, affected: Affected) -> DataFrame:
        """The affected keys' versions from their changes, as both silver tables take them."""
        ...

    def write_history(self, versions: DataFrame, changes: DataFrame, affected: Affected) -> int:
        """Make the history hold ``versions`` for the affected keys; the rows written."""
        ...

    def write_snapshot(self, versions: DataFrame, changes: DataFrame, affected: Affected) -> dict[str, int]:
        """Make the snapshot hold the affected keys' current versions; the rows written, by action."""
        ...
