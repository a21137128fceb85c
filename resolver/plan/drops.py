"""Drop points of columns: where a column stopped being sent (the first insert without it), kept as
table state so that rows held before and after a drop read right. No Spark."""

from __future__ import annotations

from typing import Any

from resolver.plan.tablemeta import TableMeta


def drop_points(
    known: dict[str, dict[str, Any]],
    meta: TableMeta,
    names: list[str],
    key: tuple[str, ...],
    renamed: dict[str, str],
) -> tuple[dict[str, dict[str, Any]], dict[str, list[tuple[int, ...]]], dict[str, tuple[Any, Any]]]:
    """Where columns stopped existing. An insert carries every column its table has, so an insert without a
    column that was sent before it is a point where the column did not exist (it was dropped); a value
    carried before such a point is not carried past it (``resolve_versions``).

    Per column the lake keeps the first event that carried it, its drop points, and the last event that
    carried it after a drop (a column added back). Returns that state, the points this batch's inserts add,
    and the columns whose first event moved earlier (new columns, late batches) with the range of the
    change store to search for inserts without them (``rescan_drops``). A point adds nothing when an
    earlier one covers it (the column was not sent in between), so the list stays short."""
    out = {
        c: {"first": d.get("first"), "points": [tuple(p) for p in d["points"]], "carried": d.get("carried")}
        for c, d in known.items()
    }
    first: dict[str, tuple[int, int]] = {}
    last: dict[str, tuple[int, int]] = {}
    for name, at in meta.first.items():
        lake_name = renamed.get(name, name)
        first[lake_name] = min(first.get(lake_name, at), at)
        end = meta.last[name]
        last[lake_name] = max(last.get(lake_name, end), end)
    rescan: dict[str, tuple[Any, Any]] = {}
    for c in names:
        if c in key or c not in first:
            continue
        d = out.setdefault(c, {"first": None, "points": [], "carried": None})
        was = tuple(d["first"]) if d["first"] else None
        if was is None or first[c] < was:
            rescan[c] = (first[c], was)
            d["first"] = first[c]
        if d["points"] and (d["carried"] is None or tuple(d["carried"]) < last[c]):
            d["carried"] = last[c]  # sent again after a drop (added back)
    added: dict[str, list[tuple[int, ...]]] = {}
    for inserts in sorted(meta.insert_sets, key=lambda s: s.first):
        point = inserts.first
        carried = {renamed.get(n, n) for n in inserts.columns}
        for c in names:
            state = out.get(c)
            if c in carried or c in rescan or not state or not state["first"]:
                continue
            if tuple(state["first"]) < point[:2] and add_point(state, point):
                added.setdefault(c, []).append(point)
    return out, added, rescan


def add_point(state: dict[str, Any], point: tuple[int, ...]) -> bool:
    """Add a drop point to a column's state unless an earlier point covers it."""
    carried = tuple(state["carried"]) if state["carried"] else None
    if any(q <= point and (carried is None or carried < q[:2]) for q in state["points"]):
        return False
    state["points"] = sorted([*state["points"], tuple(point)])
    return True
