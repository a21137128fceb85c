"""What the plan hands one table's batch (``TablePlan``): the batch's facts of the table, its layout and where
it lives in the lake, so the table's steps (``resolver.table.apply.apply_table``) need nothing else from the
plan or the lake's root."""

from __future__ import annotations

from dataclasses import dataclass

from resolver.lake.folders import TablePaths
from resolver.plan.tablemeta import TableMeta
from resolver.tablelayout import TableLayout

__all__ = ["TablePlan"]


@dataclass(frozen=True)
class TablePlan:
    """One table's part of a planned batch (``resolver.plan.batch_plan.BatchPlan.table``): the batch's
    metadata of the table, its layout (None while its columns are not known yet) and its paths."""

    meta: TableMeta
    layout: TableLayout | None
    paths: TablePaths
