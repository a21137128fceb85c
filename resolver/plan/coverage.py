"""Every table that received events in a batch is applied, held or reported: never silently left out.
 A table's events can be accepted (bronze holds them) and still not fit its silver tables: nothing tells
its columns, or its updates and deletes cannot find their rows because nothing names a key. ``unapplied``
says why, in one line that names what was found, what is expected and which file to write; the batch
leaves such a table alone (its events stay in bronze; ingesting the files again after the fix applies
them once) and its summary carries the reason as its ``error``. ``check_covered`` runs on every batch's
summaries: a table with events that was neither applied nor reported is a bug, and stops the batch loudly.
No Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from resolver.errors import ResolverError
from resolver.lake.folders import folder as table_folder
from resolver.models import TableSummary
from resolver.plan.tablemeta import TableMeta

if TYPE_CHECKING:
    from resolver.tablelayout import TableLayout

__all__ = ["HELD_NOTE", "check_covered", "unapplied"]

HELD_NOTE = "truncate(s) held until the table's first rows arrive (nothing tells its columns yet)"
"""The note of a table whose batch holds only truncates and whose columns nothing knows yet."""


def unapplied(meta: TableMeta, layout: TableLayout | None) -> str | None:
    """Why the batch cannot apply this table's events, or None when it can (or holds only truncates)."""
    file = f"{table_folder(meta.table)}.yaml"
    rows = meta.events - meta.truncates
    if layout is None:
        if rows <= 0:
            return None  # only truncates: held (resolver.table.truncates) until the table's first rows
        return (
            f"{rows} event(s) but no column names in them or in the lake; expected events that carry "
            f"columns (or old-key columns), or the columns listed in its schema file {file}"
        )
    if layout.key_source == "all_columns" and meta.changes:
        return (
            f"{meta.changes} update(s)/delete(s) but no key to find their rows: the stream reports no "
            f"primary key and they carry no old key; expected primary_key in its schema file {file} "
            "(or REPLICA IDENTITY FULL on the source table)"
        )
    return None


def check_covered(
    meta: Mapping[str, TableMeta],
    layouts: Mapping[str, TableLayout | None],
    summaries: Sequence[TableSummary],
) -> None:
    """Each table that received events has one summary, and it was applied, held (truncates only, with
    ``HELD_NOTE``) or reported (``error``). Raises ``ResolverError`` naming the tables otherwise."""
    by_table = {s.table: s for s in summaries}
    problems = [f"{t}: no summary" for t in sorted(set(meta) - set(by_table))]
    for table, m in sorted(meta.items()):
        s = by_table.get(table)
        if s is None or s.error or layouts.get(table) is not None:
            continue
        if m.events > m.truncates or (m.truncates and HELD_NOTE not in s.notes):
            problems.append(f"{table}: {m.events} event(s) neither applied nor reported")
    if problems:
        raise ResolverError(
            "internal: tables of the batch left out of silver without a reason (a bug; the events are in "
            "bronze): " + "; ".join(problems)
        )
