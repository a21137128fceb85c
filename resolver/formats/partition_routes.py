"""A partitioned table's changes under its root's name (docs/capture.md, "Partitioned tables").

wal2json names the leaf partition a row lives in (``public.events_2025_01``), never the partitioned table
the application reads and writes (``public.events``). The readers hand each change of a partition to its
root through ``PartitionRoutes`` (``resolver.formats.routed_items``), made of two sources:

- **routes** a capture recorded in its landing folder, ``_capture/<slot>.partitions.json`` (the format
  below): a relation's changes committed at ``from`` or later, and before ``until`` when it has one, belong
  to ``root``. A partition created while the capture runs gets a route from its first change; a table
  attached as a partition gets one from the point the capture saw it attached; a partition detached or
  dropped has its route ended there. The file also lists the tables to copy again (``copy_again``):
  attaching, detaching and dropping a partition, and truncating one, move rows without a change event
  for each, so the capture says which root's copy must be taken again (``resolver capture --resnapshot``).
- **patterns** a pipeline file gives for landing files no capture wrote (``partitions:``, shell patterns on
  ``schema.table`` -> the table their changes belong to), at every commit.

A TRUNCATE of a root lists the root first and then each of its partitions (one statement: the same change
LSN): the root's truncate is applied and the partitions' are dropped as part of it. A partition truncated
alone cannot be told apart from the root's other rows: it is quarantined with the reason naming the table
to copy again, never applied as a truncate of the whole root.

The routes file (``format`` 1)::

    {"format": 1, "slot": "shop",
     "routes": [{"relation": "public.events_2025", "root": "public.events", "from": "0/0"},
                {"relation": "public.old", "root": "public.events", "from": "0/0", "until": "0/1A2B3C4"}],
     "copy_again": [{"table": "public.events", "at": "0/1A2B3C4",
                     "why": "partition public.old was detached or dropped"}],
     "seen": {"16384": "public.events_2025"}}

Names are ``resolver.formats.names.qualified`` (as the readers name tables); ``seen`` is the capture's own
record of every table's OID at its last look (how it tells a table attached from one created). No Spark.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from resolver.lsn import format_lsn, parse_lsn

__all__ = [
    "NO_ROUTES",
    "ROUTES_SUFFIX",
    "CopyAgain",
    "PartitionRoutes",
    "Route",
    "RoutesFile",
]

#: the name every routes file ends with, in a landing folder's ``_capture/``
ROUTES_SUFFIX = ".partitions.json"
_FORMAT = 1


@dataclass(frozen=True)
class Route:
    """A relation's changes committed in ``[start, end)`` (``end`` None: from ``start`` on) belong to
    ``root``."""

    relation: str
    root: str
    start: int = 0
    end: int | None = None

    def holds(self, commit_lsn: int | None) -> bool:
        lsn = commit_lsn if commit_lsn is not None else 0
        return self.start <= lsn and (self.end is None or lsn < self.end)


@dataclass(frozen=True)
class CopyAgain:
    """A table whose copy must be taken again: rows moved at ``at`` without change events (``why``)."""

    table: str
    at: int
    why: str

    def line(self) -> str:
        return (
            f"table {self.table}: {self.why} at {format_lsn(self.at)}, and its rows moved without change "
            f"events: copy it again (resolver capture --resnapshot '{self.table}')"
        )


@dataclass
class RoutesFile:
    """A capture's routes file, as read or to be written (see the module docstring)."""

    slot: str
    routes: list[Route] = field(default_factory=list)
    copy_again: list[CopyAgain] = field(default_factory=list)
    seen: dict[int, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> RoutesFile:
        record = json.loads(text)
        if record.get("format") != _FORMAT:
            raise ValueError(f"a routes file of format {record.get('format')!r}: expected {_FORMAT}")
        routes = [
            Route(
                r["relation"],
                r["root"],
                parse_lsn(r["from"]),
                parse_lsn(r["until"]) if "until" in r else None,
            )
            for r in record.get("routes", [])
        ]
        again = [CopyAgain(c["table"], parse_lsn(c["at"]), c["why"]) for c in record.get("copy_again", [])]
        seen = {int(oid): name for oid, name in record.get("seen", {}).items()}
        return cls(str(record.get("slot", "")), routes, again, seen)

    def text(self) -> str:
        routes = []
        for r in self.routes:
            entry = {"relation": r.relation, "root": r.root, "from": format_lsn(r.start)}
            if r.end is not None:
                entry["until"] = format_lsn(r.end)
            routes.append(entry)
        record = {
            "format": _FORMAT,
            "slot": self.slot,
            "routes": routes,
            "copy_again": [{"table": c.table, "at": format_lsn(c.at), "why": c.why} for c in self.copy_again],
            "seen": {str(oid): name for oid, name in sorted(self.seen.items())},
        }
        return json.dumps(record, ensure_ascii=False, indent=1)

    def open_routes(self) -> dict[str, Route]:
        """The routes without an end, by relation."""
        return {r.relation: r for r in self.routes if r.end is None}


@dataclass(frozen=True)
class PartitionRoutes:
    """Which table each partition's changes belong to: the routes capture recorded and a pipeline's
    patterns (see the module docstring). Small and picklable: the readers' Spark tasks get a copy."""

    routes: tuple[Route, ...] = ()
    patterns: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(
        cls, files: Iterable[RoutesFile] = (), patterns: Mapping[str, str] | None = None
    ) -> PartitionRoutes:
        return cls(tuple(r for f in files for r in f.routes), tuple((patterns or {}).items()))

    def __bool__(self) -> bool:
        return bool(self.routes or self.patterns)

    def root_of(self, table: str, commit_lsn: int | None) -> str | None:
        """The table a change of ``table`` committed at ``commit_lsn`` belongs to, when it is a partition."""
        for route in self._by_relation().get(table, ()):
            if route.holds(commit_lsn):
                return route.root
        for pattern, root in self.patterns:
            if root != table and fnmatch.fnmatchcase(table, pattern):
                return root
        return None

    def _by_relation(self) -> dict[str, list[Route]]:
        by = self.__dict__.get("_by")
        if by is None:
            by = {}
            for route in self.routes:
                by.setdefault(route.relation, []).append(route)
            object.__setattr__(self, "_by", by)
        return by


#: no partition routed anywhere
NO_ROUTES = PartitionRoutes()
