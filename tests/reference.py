"""A pure-Python reference resolver: the oracle of the property tests (docs/silver.md, "Semantics").

A sequential state machine over dicts, written for obviousness, not speed. Values stay the text the events
carry; a key is the tuple of its columns' text. Readings of docs/silver.md where it leaves room:

* Versions are per key: a transaction opens a version of a key when it leaves the key with other values
  than it had before the transaction. The ended version has ``__is_deleted`` when the key holds no row
  afterwards (deleted, truncated or moved away, possibly re-inserted and deleted again inside the
  transaction); a delete and re-insert inside one transaction is an ordinary change.
* Key lineage is what other sessions could see: ``__moved_from`` is the key the row had when the
  transaction began (a chain 1 -> 2 -> 3 inside one transaction links 1 and 3; a row created in the
  transaction and then moved has none), ``__moved_to`` is the key the row has when it committed (also
  when another row took its key, as in a swap of two keys). An update of a key the lake does not hold
  tells that the row had that key when the transaction began (unless the transaction removed it), so
  moving it records that key in ``__moved_from``.
* An update finds its previous row by its old key only; a deleted or truncated row is gone, so an update of
  it afterwards creates a new row with absent columns NULL (or taken from a REPLICA IDENTITY FULL image).
* An insert's image is the whole row (columns it does not carry are NULL).
* Duplicates on ``(commit_lsn, position)`` are the same event: the first one given is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from resolver.models import ChangeEvent

__all__ = ["MAX_LSN", "MAX_TIME", "Resolved", "resolve"]

MAX_LSN = 2**63 - 1
"""``__end_lsn`` of an open version."""
MAX_TIME = datetime(9999, 12, 31, 23, 59, 59, 999999)
"""``__end_time`` of an open version (naive UTC, as Spark returns timestamps in a UTC session)."""

Row = dict[str, str | None]
Key = tuple[str | None, ...]


@dataclass
class Resolved:
    """One table's silver rows: ``snapshot`` sorted by key, ``history`` by (key, ``__start_lsn``)."""

    columns: list[str]
    snapshot: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)


def _naive_utc(t: datetime | None) -> datetime | None:
    if t is None or t.tzinfo is None:
        return t
    return t.astimezone(UTC).replace(tzinfo=None)


def _image(names: Sequence[str] | None, values: Sequence[str | None] | None) -> Row:
    return dict(zip(names or [], values or [], strict=True))


def resolve(
    events: Iterable[ChangeEvent | Mapping[str, Any]], keys: Mapping[str, Sequence[str]]
) -> dict[str, Resolved]:
    """Snapshot and history of every table the events touch; ``keys`` gives each table's key columns."""
    by_table: dict[str, dict[tuple[int, int], Mapping[str, Any]]] = {}
    for e in events:
        ev = e.model_dump() if isinstance(e, ChangeEvent) else e
        if ev["commit_lsn"] is None:
            continue  # not resolved (docs/silver.md, Order)
        by_table.setdefault(ev["table"], {}).setdefault((ev["commit_lsn"], ev["position"]), ev)
    return {t: _resolve_table([evs[p] for p in sorted(evs)], list(keys[t])) for t, evs in by_table.items()}


def _resolve_table(events: list[Mapping[str, Any]], key: list[str]) -> Resolved:
    columns: list[str] = []
    for ev in events:
        for c in [*(ev["column_names"] or []), *(ev["old_key_names"] or [])]:
            if c not in columns:
                columns.append(c)
    out = Resolved(columns)

    def key_of(row: Row) -> Key:
        return tuple(row.get(c) for c in key)

    def struct(k: Key | None) -> Row | None:
        return None if k is None else dict(zip(key, k, strict=True))

    def full(row: Row | None) -> Row | None:
        return None if row is None else {c: row.get(c) for c in columns}

    rows: dict[Key, Row] = {}  # the table's live rows
    open_versions: dict[Key, dict[str, Any]] = {}  # the open history row of each live key
    txns: dict[int, list[Mapping[str, Any]]] = {}
    for ev in events:
        txns.setdefault(ev["commit_lsn"], []).append(ev)
    for lsn, txn in txns.items():
        time = _naive_utc(txn[0]["commit_time"])
        before = dict(rows)
        origin: dict[Key, Key | None] = {k: k for k in rows}  # each row's key when the txn began (None: new)
        settled: set[Key] = set()  # keys this transaction wrote or removed
        wiped = False  # this transaction truncated the table
        for ev in txn:
            new = _image(ev["column_names"], ev["column_values"])
            old = _image(ev["old_key_names"], ev["old_key_values"])
            op = ev["operation"]
            if op == "truncate":
                rows.clear()
                origin.clear()
                wiped = True
            elif op == "delete":
                rows.pop(key_of(old), None)
                origin.pop(key_of(old), None)
                settled.add(key_of(old))
            elif op == "insert":
                rows[key_of(new)] = new
                origin[key_of(new)] = None
                settled.add(key_of(new))
            elif op == "update":
                old_key = key_of(old) if old else key_of(new)
                previous = rows.pop(old_key, None) or {}
                # a row the lake lacks had its old key when the txn began, unless this txn removed that row
                unseen = None if wiped or old_key in settled else old_key
                came_from = origin.pop(old_key, unseen)
                rows[key_of(new)] = {**previous, **old, **new}  # event > old image (FULL) > previous row
                origin[key_of(new)] = came_from
                settled |= {old_key, key_of(new)}
            else:
                raise ValueError(f"unknown operation {op!r}")
        moved_to = {o: k for k, o in origin.items() if o is not None and o != k}
        for k in sorted(set(before) | set(rows), key=_sort_key):
            was, now = full(before.get(k)), full(rows.get(k))
            if was == now:
                continue
            if was is not None:
                ended = open_versions.pop(k)
                ended.update(__end_lsn=lsn, __end_time=time, __is_current=False, __is_deleted=now is None)
                if k in moved_to:  # the row went to another key (which may hold another row now)
                    ended["__moved_to"] = struct(moved_to[k])
            if now is not None:
                version = {
                    **now,
                    "__start_lsn": lsn,
                    "__end_lsn": MAX_LSN,
                    "__start_time": time,
                    "__end_time": MAX_TIME,
                    "__is_current": True,
                    "__is_deleted": False,
                    "__moved_from": struct(origin[k]) if origin[k] != k else None,
                    "__moved_to": None,
                }
                open_versions[k] = version
                out.history.append(version)
    out.history.sort(key=lambda v: (_sort_key(key_of(v)), v["__start_lsn"]))
    for k in sorted(rows, key=_sort_key):
        version = open_versions[k]
        out.snapshot.append(
            {c: version[c] for c in columns}
            | {"__start_lsn": version["__start_lsn"], "__start_time": version["__start_time"]}
        )
    return out


def _sort_key(k: Key) -> tuple[tuple[bool, str], ...]:
    return tuple((v is not None, v or "") for v in k)
