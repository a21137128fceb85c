"""The steps of one table's batch, as ``resolver.table.apply.apply_table`` calls them in order, and what the
first of them hands to the rest. Two kinds of batch carry them out: a table's first batch, whose Delta tables
were just created (``resolver.table.first_batch.FirstBatch``: what it holds is only its own rows, so finding
and reading the affected keys has nothing to do and the silver tables are appended to), and every later one
(``resolver.table.later_batch.LaterBatch``: the change store looked up, the history diffed and MERGEd)."""

from __future__ import annotations

from typing import Protocol

from pyspark.sql import DataFrame

from resolver.table.affected import Affected
from resolver.table.exploded import Stored
from resolver.tablelayout import TableLayout

__all__ = ["Stored", "TableSteps"]  # Stored is resolver.table.exploded's


class TableSteps(Protocol):
    """One table's batch, step by step (each returns at once where it has nothing to do). ``layout`` is the
    table's layout; ``apply_table`` replaces it when the store's rows show drops it did not know."""

    layout: TableLayout

    def store(self, events: DataFrame) -> Stored:
        """Explode the batch against the layout and add its new rows to the change store."""
        ...

    def affected(self, stored: Stored, found_drops: bool) -> Affected:
        """The keys the batch affects (``found_drops``: drops were found among the held rows just now, so
        the marker's flags no longer describe the store)."""
        ...

    def changes(self, stored: Stored, affected: Affected) -> DataFrame:
        """Every held change of the affected keys, materialized."""
        ...

    def write_history(self, versions: DataFrame, affected: Affected) -> int:
        """Make the history hold ``versions`` for the affected keys; the rows written."""
        ...

    def write_snapshot(self, versions: DataFrame, changes: DataFrame, affected: Affected) -> dict[str, int]:
        """Make the snapshot hold the affected keys' current versions; the rows written, by action."""
        ...
