"""What the lake holds about one source table before a batch (``TableState``), read once from its change
store's properties and the lake's markers by ``resolver.plan.layout`` and written back once, after the
batch's last write (``resolver.table.batch_tables.mark_applied``, ``resolver.lake.markers``:
``Marker.holds_text``, ``Marker.lake_text``). Every step reads these typed values; none parses a property
again. No Spark."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import date
from typing import Any

__all__ = ["KeyHigh", "Marker", "TableState", "Waiting"]

#: the most commit-LSN ranges a marker lists as behind (``Marker.falling_behind``)
_MOST_BEHIND = 32


@dataclass(frozen=True)
class KeyHigh:
    """The largest value of the table's first key column among every key its change store ever held
    (under a new or an old key): a batch whose keys all lie above it inserts keys the table never held."""

    column: str
    value: int | str

    def below(self, low: Any) -> bool:
        """Whether ``low`` (a batch's smallest value of the column) lies above every key held."""
        low = _markable(low)
        return low is not None and type(low) is type(self.value) and low > self.value  # type: ignore[operator]

    def raised(self, high: Any) -> KeyHigh | None:
        """This mark after a batch whose largest value of the column is ``high`` (None: not known then)."""
        high = _markable(high)
        if high is None or type(high) is not type(self.value):
            return None
        return KeyHigh(self.column, max(self.value, high))  # type: ignore[type-var]

    @classmethod
    def of(cls, column: str, value: Any) -> KeyHigh | None:
        """A mark of ``value`` when it is one a mark holds (a whole number, a string, a date), else None."""
        markable = _markable(value)
        return cls(column, markable) if markable is not None else None


def _markable(value: Any) -> int | str | None:
    """A key value as a mark holds it: a whole number or a string as it is, a date as its ISO text (which
    sorts as the dates do for years 1 to 9999); anything else has no mark."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | str):
        return value
    if isinstance(value, date):
        return value.isoformat()
    return None


@dataclass(frozen=True)
class Marker:
    """The change store's marker: the store version the silver tables were last brought up to
    (``applied``; None: never), and what the store held then: a key change, a truncate (None: not
    recorded), its newest keyed commit LSN (``lsn``, when ``lsn_known``; None: no keyed change), and the
    first key column's high-water mark (``high``; None: not known), and the commit-LSN ranges of the table's
    events that bronze holds and the store does not yet (``behind``: appended to the silver tables only,
    ``resolver.table.append_batch``; the next batch that reads the store catches it up first)."""

    applied: int | None = None
    moves: bool | None = None
    truncates: bool | None = None
    lsn: int | None = None
    lsn_known: bool = False
    high: KeyHigh | None = None
    behind: tuple[tuple[int, int], ...] = ()
    #: where the marker was written: a commit of the store's own properties, right after the version it
    #: names (True), or the lake's markers, which take no commit of the store (False:
    #: ``resolver.lake.markers``)
    on_store: bool = True
    #: the history's and the snapshot's Delta versions the batch left (-1: the table keeps none; None: not
    #: recorded, a marker of an earlier release): silver took no write since when they still are
    #: (``resolver.batch.deferral``: events waiting in bronze are then new to every table of the lake's)
    silver: tuple[int, int] | None = None

    @classmethod
    def parse(cls, applied: str, holds: str) -> Marker:
        """The marker from its two properties' texts (empty: not set)."""
        found = json.loads(holds) if holds else {}
        high = found.get("high")
        return cls(
            int(applied) if applied.isdigit() else None,
            bool(found["moves"]) if "moves" in found else None,
            bool(found["truncates"]) if "truncates" in found else None,
            int(found["lsn"]) if found.get("lsn") is not None else None,
            "lsn" in found,
            KeyHigh(str(high["column"]), high["value"]) if high else None,
            tuple((int(lo), int(hi)) for lo, hi in found.get("behind", [])),
            silver=(int(found["silver"][0]), int(found["silver"][1])) if found.get("silver") else None,
        )

    @classmethod
    def parse_lake(cls, text: str) -> Marker:
        """The marker from its entry in the lake's markers (``lake_text``; empty: none)."""
        if not text:
            return cls(on_store=False)
        found = json.loads(text)
        marker = cls.parse(str(found["applied"]), json.dumps(found["holds"]))
        return dataclasses.replace(marker, on_store=False)

    def lake_text(self) -> str:
        """The marker's entry in the lake's markers: the store version and the ``holds_text``."""
        return json.dumps({"applied": self.applied, "holds": json.loads(self.holds_text())})

    def newer_than(self, other: Marker) -> bool:
        """Whether this marker was written after ``other`` (a store's and a lake's marker of one table):
        a marker in the lake's markers names the store's version when its batch ended, and a marker on
        the store is a commit after the version it names, so the lake's is the newer only when it names a
        later version than the store's."""
        if self.applied is None:
            return False
        return other.applied is None or self.applied > other.applied

    def holds_text(self) -> str:
        """The ``resolver.holds`` property's text."""
        holds: dict[str, object] = {"moves": bool(self.moves), "truncates": bool(self.truncates)}
        if self.lsn_known:
            holds["lsn"] = self.lsn
        if self.high is not None:
            holds["high"] = {"column": self.high.column, "value": self.high.value}
        if self.behind:
            holds["behind"] = [list(r) for r in self.behind]
        if self.silver is not None:
            holds["silver"] = list(self.silver)
        return json.dumps(holds)

    def falling_behind(self, lo: int, hi: int) -> tuple[tuple[int, int], ...]:
        """``behind`` with the range ``[lo, hi]`` added: ranges that meet or touch are joined, and past
        ``_MOST_BEHIND`` ranges the oldest two are joined (a wider range only reads more of bronze: the
        events the store holds are skipped)."""
        ranges = sorted([*self.behind, (lo, hi)])
        joined: list[tuple[int, int]] = []
        for a, b in ranges:
            if joined and a <= joined[-1][1] + 1:
                joined[-1] = (joined[-1][0], max(joined[-1][1], b))
            else:
                joined.append((a, b))
        while len(joined) > _MOST_BEHIND:
            joined[0:2] = [(joined[0][0], joined[1][1])]
        return tuple(joined)

    @property
    def flags_known(self) -> bool:
        """Whether the key-change and truncate flags and the newest keyed LSN were recorded."""
        return self.moves is not None and self.truncates is not None and self.lsn_known

    def fresh(self, store_version: int) -> bool:
        """Whether the marker describes the store at ``store_version``: nothing was committed to the store
        since the version it names, or since the marker's own commit, which follows it (``on_store``)."""
        return self.applied is not None and self.applied + (1 if self.on_store else 0) == store_version


@dataclass(frozen=True)
class Waiting:
    """A table's events that wait in bronze for its silver tables (``resolver.batch.deferral``: a batch
    under a freshness bound left them there): the bronze versions (commits) that added them, how many
    events those batches brought for the table, their commit-LSN range (``lo``, ``hi``; None: no event
    had one), and since when they wait (``since``, seconds since the epoch, UTC: the first such batch's
    start). The table's silver tables hold every event delivered for it but these."""

    versions: tuple[int, ...]
    events: int
    lo: int | None
    hi: int | None
    since: float

    def due(self, bound: float, now: float) -> bool:
        """Whether the events have waited ``bound`` seconds or more at ``now``."""
        return now - self.since >= bound

    def joined(self, version: int | None, events: int, lo: int | None, hi: int | None) -> Waiting:
        """These events and a later batch's (``version``: its bronze commit; None: it added nothing new)."""
        bounds = [b for b in (self.lo, lo) if b is not None], [b for b in (self.hi, hi) if b is not None]
        return Waiting(
            tuple(sorted({*self.versions, *([version] if version is not None else [])})),
            self.events + events,
            min(bounds[0]) if bounds[0] else None,
            max(bounds[1]) if bounds[1] else None,
            self.since,
        )

    def text(self) -> str:
        """The entry's text in the lake's markers (``resolver.lake.markers``)."""
        return json.dumps(
            {"versions": list(self.versions), "events": self.events, "lo": self.lo, "hi": self.hi,
             "since": self.since}
        )  # fmt: skip

    @classmethod
    def parse(cls, text: str) -> Waiting | None:
        """The entry from its text (empty: nothing waits)."""
        if not text:
            return None
        found = json.loads(text)
        return cls(
            tuple(int(v) for v in found["versions"]),
            int(found["events"]),
            None if found.get("lo") is None else int(found["lo"]),
            None if found.get("hi") is None else int(found["hi"]),
            float(found["since"]),
        )


@dataclass(frozen=True)
class TableState:
    """What the lake holds about a table before the batch: its key as recorded (``key``, the JSON text of
    the key columns; empty for a table new to the lake) and where it came from, the schema version the
    batch leaves it at, the change store's marker and size, whether its silver tables write deletion
    vectors, and the drop points as recorded (their JSON text, to tell whether the batch changed them)."""

    key: str = ""
    key_source: str = ""
    schema_version: int = 0
    marker: Marker = field(default_factory=Marker)
    store_bytes: int = 0
    deletion_vectors: bool = False
    drops_was: str = ""

    @property
    def is_new(self) -> bool:
        """Whether the lake holds nothing of the table yet (no change store)."""
        return not self.key
