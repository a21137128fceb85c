"""What a capture knows of the database's partitioned tables (``PartitionWatch``): which captured name each
table's changes belong to (a partition's root, by ``pg_partition_root``: multi-level partitioning and
DEFAULT partitions alike), recorded as routes in the landing folder's ``_capture/<slot>.partitions.json``
for the readers (``resolver.formats.partition_routes``, which documents the file), and the tables whose
rows moved without change events, to copy again.

The catalog is read again (``refresh``) when the capture starts reading the slot, when a table it has not
met yet appears in the stream (a partition created while the capture runs), and each time a running
capture lands a file. What a look finds beside the last one:

- a partition of a captured root it did not know: a route **from the beginning** when the table is new (it
  was created since the last look: every change it ever had belongs to the root, the inserts made into it
  before it was attached too), or **from the point of the look** when the capture knew the table before as
  a table of its own (attached: its earlier rows moved into the root without change events, so the root
  is to be copied again);
- a partition gone from its root (detached, or dropped): its route ends at the point of the look, and the
  root is to be copied again (its rows left it without change events);
- a partition that only changed its name: a route for the new name, nothing to copy.

A TRUNCATE of a partition alone (not as part of its root's) is a table to copy again as well. The point of
a look is the end of the last transaction the capture read (or the slot's confirmed position before the
first). Needs psycopg 3, no Spark.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from resolver.capture.landing import Landing
from resolver.capture.options import CaptureOptions
from resolver.capture.source import SYSTEM_SCHEMAS, connect
from resolver.formats.names import qualified
from resolver.formats.partition_routes import ROUTES_SUFFIX, CopyAgain, Route, RoutesFile
from resolver.lsn import format_lsn

if TYPE_CHECKING:
    import psycopg

__all__ = ["PartitionWatch", "routes_name"]

log = logging.getLogger("resolver.capture.snapshot")

_TABLES = (
    "SELECT c.oid::int8, n.nspname, c.relname, rn.nspname, r.relname FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "LEFT JOIN pg_class r ON c.relispartition AND r.oid = pg_partition_root(c.oid) "
    "LEFT JOIN pg_namespace rn ON rn.oid = r.relnamespace "
    "WHERE c.relkind IN ('r', 'p') AND c.relpersistence = 'p' AND n.nspname <> ALL(%s) "
    "AND n.nspname NOT LIKE 'pg\\_%%'"
)


def routes_name(slot: str) -> str:
    """Where a slot's routes file is in its landing folder."""
    return f"_capture/{slot}{ROUTES_SUFFIX}"


@dataclass(frozen=True)
class _Table:
    """A table of the catalog: its OID, (schema, name), and its root's (schema, name) when a partition."""

    oid: int
    name: tuple[str, str]
    root: tuple[str, str] | None


def _plain(name: tuple[str, str]) -> str:
    """``schema.table`` as a capture's patterns match it (``CaptureOptions.included``)."""
    return f"{name[0]}.{name[1]}"


def _quoted(name: tuple[str, str]) -> str:
    """``schema.table`` as the readers name tables (``resolver.formats.names.qualified``)."""
    return qualified(*name)


class PartitionWatch:
    """A capture's partitions: ``captured_as`` names the table a change belongs to, ``truncated`` notes a
    partition truncated alone, ``refresh`` reads the catalog again; the routes file is written whenever what
    it holds changed (before a landing file that needs it is published)."""

    def __init__(self, options: CaptureOptions, landing: Landing, upgrade: bool = False) -> None:
        self.options, self.landing = options, landing
        #: a capture whose snapshot was taken before partitions were routed (its partitions are tables of
        #: their own in the lake): its routes start at its first look, each root to be copied again
        self._upgrade = upgrade
        text = landing.read(routes_name(options.slot))
        self.file = RoutesFile.parse(text) if text is not None else RoutesFile(options.slot)
        self.position = 0  # the end of the last transaction read: the point of a look
        self._roots: dict[tuple[str, str], tuple[str, str]] = {}  # partition -> root, at the last look
        self.looks = 0  # how many times the catalog was read
        self._asked: set[tuple[str, str]] = set()  # names met in the stream that made it look
        self._conn: psycopg.Connection[Any] | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def captured_as(self, schema: str, table: str) -> str:
        """The name (``schema.table``, as the capture's patterns match it) the changes of ``schema.table``
        are captured under: its root's for a partition, its own otherwise. A table not met yet makes the
        capture look at the catalog again (a partition created since)."""
        name = (schema, table)
        if name not in self._roots and name not in self._asked and not self._met(name):
            self._asked.add(name)  # once: a table dropped since its changes were made is never found
            self.refresh()
        root = self._roots.get(name)
        return _plain(root) if root is not None else _plain(name)

    def truncated(self, schema: str, table: str, part_of: str | None) -> None:
        """A TRUNCATE of ``schema.table`` read in the stream; ``part_of``: the root whose own truncate the
        same statement began with, if any. A partition truncated alone is a root to copy again."""
        root = self._roots.get((schema, table))
        if root is not None and _plain(root) != part_of and self.options.included(_plain(root)):
            why = f"partition {_quoted((schema, table))} was truncated"
            self._copy_again(_quoted(root), why)
            self._write()

    def refresh(self, conn: psycopg.Connection[Any] | None = None) -> None:
        """Read the catalog again (on ``conn``, or a connection of the watch's own) and bring the routes up
        to date (see the module docstring)."""
        if conn is None:
            if self._conn is None:
                self._conn = connect(self.options.dsn)
            conn = self._conn
        found = [
            _Table(int(oid), (schema, name), (rs, rn) if rn is not None else None)
            for oid, schema, name, rs, rn in conn.execute(_TABLES, (list(SYSTEM_SCHEMAS),)).fetchall()
        ]
        changed = self._compare(found)
        self._roots = {t.name: t.root for t in found if t.root is not None}
        self.looks += 1
        self._upgrade = False
        seen = {t.oid: _quoted(t.name) for t in found}
        if changed or seen != self.file.seen:
            self.file.seen = seen
            self._write()

    def _met(self, name: tuple[str, str]) -> bool:
        """Whether the last look saw ``name`` (as a table of its own or a partition)."""
        return self.looks > 0 and _quoted(name) in self.file.seen.values()

    def _compare(self, found: list[_Table]) -> bool:
        """Routes for the partitions of captured roots the last look did not have, routes ended for the
        ones gone; whether anything changed."""
        at = self.position
        open_routes = self.file.open_routes()
        now = {
            _quoted(t.name): t for t in found if t.root is not None and self.options.included(_plain(t.root))
        }
        by_oid = {t.oid: t for t in now.values()}
        changed = False
        for relation, route in open_routes.items():
            table = now.get(relation)
            if table is not None and _quoted(table.root) == route.root:  # type: ignore[arg-type]
                continue
            self._end(route, at)
            oid = next((o for o, n in self.file.seen.items() if n == relation), None)
            moved = by_oid.get(oid) if oid is not None else None
            if moved is None or _quoted(moved.root) != route.root:  # type: ignore[arg-type]
                self._copy_again(route.root, f"partition {relation} was detached or dropped")
            changed = True
        open_routes = self.file.open_routes()
        for relation, table in now.items():
            if relation in open_routes:
                continue
            root = _quoted(table.root)  # type: ignore[arg-type]
            known = self.file.seen.get(table.oid)
            renamed = known is not None and any(
                r.relation == known and r.root == root and r.end == at for r in self.file.routes
            )
            if self._upgrade:
                self.file.routes.append(Route(relation, root, at))
                self._copy_again(root, f"partition {relation} was captured as a table of its own before")
            elif known is None or renamed:  # created since the last look, or only renamed: every change
                self.file.routes.append(Route(relation, root, 0))
            else:  # a table the capture knew, attached: its changes from now on
                self.file.routes.append(Route(relation, root, at))
                self._copy_again(root, f"table {relation} was attached as a partition")
            changed = True
        return changed

    def _end(self, route: Route, at: int) -> None:
        self.file.routes = [
            Route(r.relation, r.root, r.start, at) if r == route else r for r in self.file.routes
        ]

    def _copy_again(self, table: str, why: str) -> None:
        hint = CopyAgain(table, self.position, why)
        if hint not in self.file.copy_again:
            self.file.copy_again.append(hint)
            log.warning("%s", hint.line())

    def copied_again(self, tables: set[str], point: int) -> None:
        """``tables`` (quoted names) were copied again at ``point``: their hints up to it are settled."""
        kept = [c for c in self.file.copy_again if not (c.table in tables and c.at <= point)]
        if kept != self.file.copy_again:
            self.file.copy_again = kept
            self._write()

    def _write(self) -> None:
        self.landing.write(routes_name(self.options.slot), [self.file.text()])

    def describe(self) -> str:
        roots = sorted({r.root for r in self.file.routes if r.end is None})
        return f"{len(roots)} partitioned table(s) at {format_lsn(self.position)}"
