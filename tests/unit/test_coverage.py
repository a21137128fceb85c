"""``resolver.plan.coverage``: why a table's events cannot be applied, and the check every batch's summaries
pass (each table that received events applied, held or reported). No Spark."""

from __future__ import annotations

from typing import Any

import pytest

from resolver.errors import ResolverError
from resolver.models import TableSummary
from resolver.plan.coverage import HELD_NOTE, check_covered, unapplied
from resolver.plan.tablemeta import TableMeta


class _Layout:
    """What ``unapplied`` reads of a ``TableLayout``: where its key came from."""

    def __init__(self, key_source: str) -> None:
        self.key_source = key_source


def test_why_a_table_cannot_be_applied() -> None:
    rows = TableMeta("public.t", events=3, truncates=1, changes=1)
    assert unapplied(rows, None) == (
        "2 event(s) but no column names in them or in the lake; expected events that carry columns (or "
        "old-key columns), or the columns listed in its schema file public.t.yaml"
    )
    assert unapplied(TableMeta("public.t", events=2, truncates=2), None) is None  # held, not refused
    layout: Any = _Layout("all_columns")
    assert unapplied(rows, layout) is not None and "primary_key in its schema file public.t.yaml" in str(
        unapplied(rows, layout)
    )
    assert unapplied(TableMeta("public.t", events=3), layout) is None  # inserts only: every column is the key
    for source in ("primary_key", "schema_file", "identity", "identity_full"):
        assert unapplied(rows, _Layout(source)) is None  # type: ignore[arg-type]
    # a name that needs quoting names the file the lake's folder encoding gives it
    assert "public.we~20ird.yaml" in str(unapplied(TableMeta('public."we ird"', events=1), None))


def test_every_table_with_events_is_applied_held_or_reported() -> None:
    meta = {
        "public.a": TableMeta("public.a", events=2),
        "public.b": TableMeta("public.b", events=1, truncates=1),
        "public.c": TableMeta("public.c", events=4),
    }
    layouts: dict[str, Any] = {"public.a": _Layout("primary_key"), "public.b": None, "public.c": None}
    good = [
        TableSummary(table="public.a", events=2, inserted=2),
        TableSummary(table="public.b", events=1, notes=[HELD_NOTE]),
        TableSummary(table="public.c", events=4, error="why"),
    ]
    check_covered(meta, layouts, good)
    with pytest.raises(ResolverError, match=r"public\.c: 4 event\(s\) neither applied nor reported"):
        check_covered(meta, layouts, [*good[:2], TableSummary(table="public.c", events=4)])
    with pytest.raises(ResolverError, match=r"public\.b: 1 event\(s\) neither applied nor reported"):
        check_covered(meta, layouts, [good[0], TableSummary(table="public.b", events=1), good[2]])
    with pytest.raises(ResolverError, match=r"public\.a: no summary"):
        check_covered(meta, layouts, good[1:])
