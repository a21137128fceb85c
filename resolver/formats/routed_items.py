"""A reader's items with each partition's changes under its root's name (``route_items``), by the
``PartitionRoutes`` of ``resolver.formats.partition_routes`` (which says where they come from): a root's
TRUNCATE kept and its partitions' truncates of the same statement dropped as part of it, a partition
truncated alone quarantined with the table to copy again, never applied as a truncate of the whole root.
A truncate that a piece boundary of a large file cuts from its root's (a TRUNCATE's records are
consecutive lines with one change LSN) is quarantined too. No Spark."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import date, datetime
from typing import Any

from resolver.formats.partition_routes import PartitionRoutes
from resolver.formats.wal2json_items import Count, Event, Fragment, Quarantined
from resolver.lsn import format_lsn

__all__ = ["route_items"]


def route_items(
    items: Iterable[Event | Quarantined | Fragment | Count], routes: PartitionRoutes
) -> Iterator[Event | Quarantined | Fragment | Count]:
    """A reader's items with each partition's changes named for its root (``routes``), a root's truncate
    kept and its partitions' truncates of the same statement dropped (counted as ``partition_truncates``), a
    partition truncated alone quarantined with the table to copy again."""
    if not routes:
        yield from items
        return
    truncates: list[tuple[Event | Fragment, dict[str, Any], str | None]] = []
    for item in items:
        row = item.row if isinstance(item, Event | Fragment) else None
        if row is not None and row.get("operation") == "truncate" and isinstance(item, Event | Fragment):
            if truncates and truncates[0][1].get("change_lsn") != row.get("change_lsn"):
                yield from _truncates(truncates)
                truncates = []
            truncates.append((item, row, routes.root_of(row["table"], row.get("commit_lsn"))))
            continue
        if truncates:
            yield from _truncates(truncates)
            truncates = []
        if row is not None:
            root = routes.root_of(row["table"], row.get("commit_lsn"))
            if root is not None:
                row["table"] = root
        yield item
    yield from _truncates(truncates)


def _truncates(
    group: Sequence[tuple[Event | Fragment, dict[str, Any], str | None]],
) -> Iterator[Event | Quarantined | Fragment | Count]:
    """The truncates of one statement (one change LSN): each root's own truncate as it is; a partition's
    dropped when its root's is among them, quarantined otherwise."""
    roots = {row["table"] for _, row, root in group if root is None}
    for item, row, root in group:
        if root is None:
            yield item
        elif root in roots:  # part of its root's truncate
            yield _dropped(item)
        else:
            yield from _refused(item, row, root)


def _dropped(item: Event | Fragment) -> Event | Quarantined | Fragment | Count:
    if isinstance(item, Fragment):  # its line stays the fragment's, as a line that is no change
        return Fragment(item.role, item.line, item.raw, item.commit_lsn, None, item.slots)
    return Count("partition_truncates", 1, item.row["source_line"])


def _refused(item: Event | Fragment, row: dict[str, Any], root: str) -> Iterator[Quarantined | Fragment]:
    where = format_lsn(row["commit_lsn"]) if row.get("commit_lsn") is not None else "an unknown commit"
    reason = (
        f"a TRUNCATE of {row['table']}, a partition of {root}, at {where}: the lake cannot tell that "
        f"partition's rows from {root}'s others; copy {root} again (resolver capture --resnapshot "
        f"'{root}') (rule: partition-truncate)"
    )
    if isinstance(item, Fragment):
        yield Fragment(item.role, item.line, item.raw, item.commit_lsn, None, item.slots)
        yield Quarantined(item.line, reason, item.raw)
    else:
        yield Quarantined(row["source_line"], reason, json.dumps(row, default=_text, ensure_ascii=False))


def _text(value: Any) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)
