"""What the resolver knows about one source table for a batch (``TableLayout``: its lake columns, key,
outputs and the schema changes the batch makes), built by ``resolver.plan.layout`` from the lake, the schema
file and the batch's events, and read by every step that touches the table. Shared by the planning, the
per-table steps and the lake's table helpers, so it lives with the shared types, above none of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import types as T

from resolver.models import SchemaChanges
from resolver.tablestate import TableState

__all__ = ["Column_", "SchemaChanges", "TableLayout"]


@dataclass(frozen=True)
class Column_:
    """A lake column: its name, Spark SQL type and the earlier names it had in the stream."""

    name: str
    type: str
    renamed_from: tuple[str, ...] = ()

    @property
    def stream_names(self) -> tuple[str, ...]:
        return (self.name, *self.renamed_from)


@dataclass(frozen=True)
class TableLayout:
    """What the resolver needs to know about one source table."""

    table: str
    columns: tuple[Column_, ...]
    key: tuple[str, ...]
    key_source: str = "primary_key"
    state: TableState = field(default_factory=TableState, compare=False)
    """What the lake held about the table before the batch (``resolver.tablestate``)."""
    changes: tuple[Any, ...] = field(default=(), compare=False)
    """Column type changes this batch makes (``resolver.plan.evolution.TypeChange``)."""
    renames: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    """Lake columns this batch renames, (old name, new name), from the schema file's hints."""
    notes: tuple[str, ...] = field(default=(), compare=False)
    """Schema changes and warnings for the batch summary."""
    drops: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict, compare=False)
    """Per column, (commit LSN, position) of inserts that did not carry it: it did not exist then (dropped),
    so a value carried before such a point is not carried past it."""
    drop_state: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)
    """Per column: first event that carried it, drop points, last event after a drop (``drop_points``)."""
    rescan: dict[str, tuple[Any, Any]] = field(default_factory=dict, compare=False)
    """Columns whose first event moved earlier: the change store range to search for inserts without them."""
    schema_log: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    """Rows for ``_resolver/schema_log``: the schema changes this batch makes (a new schema version)."""
    rejected: tuple[tuple[str, str | None, str], ...] = field(default=(), compare=False)
    """(stream column, PostgreSQL type, lake type) of unsafe type changes the table's policy quarantines."""
    snapshot: bool = field(default=True, compare=False)
    """Keep the snapshot table (``resolver.config.pipeline.TableSettings.outputs``)."""
    history: bool = field(default=True, compare=False)
    """Keep the history table."""
    track: tuple[str, ...] = field(default=(), compare=False)
    """Columns whose changes open a history version (empty: all)."""
    cluster: bool = field(default=False, compare=False)
    """Cluster the silver tables by the key (Delta liquid clustering)."""
    schema_changes: SchemaChanges = field(default=SchemaChanges.REWRITE, compare=False)
    """How a rename or type change reaches the snapshot and history (the change store: always metadata)."""

    def column(self, name: str) -> Column_:
        return next(c for c in self.columns if c.name == name)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def value_names(self) -> list[str]:
        """Columns that are not part of the key."""
        return [c.name for c in self.columns if c.name not in self.key]

    def key_struct_type(self) -> T.StructType:
        from resolver.spark.sql import parse_type

        return T.StructType([T.StructField(k, parse_type(self.column(k).type)) for k in self.key])
