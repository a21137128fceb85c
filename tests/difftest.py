"""Differential testing against real PostgreSQL: helpers for tests/e2e/test_differential.py.
 A seeded random workload runs on a real PostgreSQL 15, one transaction at a time; after each commit the
state of every table is recorded. wal2json decodes the workload (format 1 and 2); the stream is split into
batch files on transaction boundaries and ingested in several orders; the lake's silver tables must then
equal what PostgreSQL held: the snapshot its final state, the history its state as of every commit.
 Values are compared as Python values normalized by the documented mapping (``resolver.pgtypes``): columns
that map to ``string`` are read from PostgreSQL as their type prints them; timestamptz is an instant (UTC
datetime); NaN and ±Infinity floats and numerics are NULL (wal2json prints them as ``null``).

Every table has a column ``rid`` that the workload never changes: the row's identity across primary-key
changes, from which the expected ``__moved_from`` / ``__moved_to`` follow.
"""

from __future__ import annotations

import copy
import json
import math
import random
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from resolver.formats.wal2json import Event, format_lsn, parse_lsn, read_lines
from resolver.models import Format
from resolver.pgtypes import spark_type
from tests.harness.postgres import SESSION_SETTINGS, PgDatabase, write_lines

MAX_LSN = 2**63 - 1
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_TIME = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
TECHNICAL = ("__start_lsn", "__start_time", "__end_lsn", "__end_time", "__is_current", "__is_deleted")

Key = tuple[Any, ...]
Row = dict[str, Any]
State = dict[str, dict[Key, Row]]  # table -> key -> row (normalized values)


# --- the tables -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Table:
    """A source table: columns as (name, type as wal2json prints it), its primary key, and its options."""

    name: str
    columns: tuple[tuple[str, str], ...]
    primary_key: tuple[str, ...] = ()
    toast: tuple[str, ...] = ()  # STORAGE EXTERNAL: large values stay out of updates that keep them
    v2_only: bool = False  # truncated by the workload (format 1 cannot show truncates)

    @property
    def qualified(self) -> str:
        return f"public.{self.name}"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.columns)

    @property
    def key(self) -> tuple[str, ...]:
        """The lake's key: the primary key, or every column (REPLICA IDENTITY FULL, no primary key)."""
        return self.primary_key or self.names

    @property
    def data(self) -> tuple[str, ...]:
        """Columns the workload sets freely: neither key nor ``rid``."""
        return tuple(c for c in self.names if c not in self.primary_key and c != "rid")

    def types(self) -> dict[str, str]:
        """Column -> Spark type by the documented mapping."""
        return {c: spark_type(t) for c, t in self.columns}

    def ddl(self) -> str:
        cols = [f"{c} {t}" + (" NOT NULL" if c == "rid" else "") for c, t in self.columns]
        if self.primary_key:
            cols.append(f"PRIMARY KEY ({', '.join(self.primary_key)})")
        out = [f"CREATE TABLE {self.name} ({', '.join(cols)});"]
        out += [f"ALTER TABLE {self.name} ALTER COLUMN {c} SET STORAGE EXTERNAL;" for c in self.toast]
        if not self.primary_key:
            out.append(f"ALTER TABLE {self.name} REPLICA IDENTITY FULL;")
        return "\n".join(out)


TABLES: tuple[Table, ...] = (
    Table(
        "accounts",
        (
            ("region", "text"),
            ("id", "integer"),
            ("rid", "integer"),
            ("name", "text"),
            ("balance", "numeric(12,2)"),
            ("amount", "numeric"),
            ("score", "double precision"),
            ("big", "bigint"),
            ("active", "boolean"),
            ("born", "date"),
            ("seen", "timestamp without time zone"),
            ("at", "timestamp with time zone"),
            ("tags", "text[]"),
            ("nums", "integer[]"),
            ("doc", "jsonb"),
            ("note", "text"),
        ),
        primary_key=("region", "id"),
        toast=("note",),
    ),
    Table(
        "items",
        (
            ("id", "bigint"),
            ("rid", "integer"),
            ("qty", "integer"),
            ("price", "numeric(12,2)"),
            ("u", "uuid"),
            ("dur", "interval"),
            ("raw", "bytea"),
            ("payload", "text"),
            ("memo", "text"),
        ),
        primary_key=("id",),
        toast=("payload", "memo"),
    ),
    Table("links", (("a", "integer"), ("b", "integer"), ("rid", "integer"), ("v", "text")), ("a", "b")),
    Table(
        "logs",
        (("rid", "integer"), ("msg", "text"), ("amt", "numeric(12,2)"), ("body", "text")),
        toast=("body",),
    ),
    Table("scratch", (("id", "integer"), ("rid", "integer"), ("v", "text")), ("id",), v2_only=True),
)
BY_NAME = {t.name: t for t in TABLES}
SCHEMA_SQL = "\n".join(t.ddl() for t in TABLES)

REGIONS = ("eu", "us", "ápac", "")
KEY_DOMAINS: dict[str, list[Key]] = {
    "accounts": [(r, i) for r in REGIONS for i in range(1, 10)],
    "items": [(i,) for i in range(1, 31)] + [(-7,), (2**40,), (9007199254740993,), (2**63 - 1,)],
    "links": [(a, b) for a in range(1, 5) for b in range(1, 5)],
    "scratch": [(i,) for i in range(1, 16)],
}


# --- SQL values -------------------------------------------------------------------------------------
def lit(value: Any) -> str:
    """A SQL literal for a Python key value (str or int)."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_TEXTS = ("", "plain", "ünï ☃ 🚀", 'it\'s "quoted" \\ back', "tab\tnew\nline", "NULL", " spaced ", "ß" * 300)


def _text(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.15:
        return "NULL"
    if r < 0.5:
        return _q(rng.choice(_TEXTS))
    return _q(f"w{rng.randrange(10_000)}")


def _toast(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return "NULL"
    if r < 0.3:
        return _q(rng.choice(("", "short", "ünï")))
    chunk = rng.choice(("ab", "é☃", "xyz", "🚀q")) + str(rng.randrange(1000))
    return f"repeat({_q(chunk)}, {rng.randrange(1700, 2600)})"  # > 8 kB: stored out of line


def _numeric_fixed(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return "NULL"
    if r < 0.15:
        return "'NaN'"
    if r < 0.25:
        return _q(rng.choice(("0", "0.5", "-0.01", "9999999999.99", "-9999999999.99")))
    sign = rng.choice(("", "-"))
    return _q(f"{sign}{rng.randrange(10 ** rng.randint(1, 10))}.{rng.randrange(100):02d}")


_NUMERICS = (
    "3.540",
    "0.000001",
    "-0",
    "1e20",
    "123456789012345678901234567890.123456789012345678901234567890",
    "NaN",
    "Infinity",
    "-Infinity",
    "-0.000000000000000000000000000000000000000001",
)


def _numeric(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return "NULL"
    if r < 0.5:
        return _q(rng.choice(_NUMERICS))
    return _q(f"{rng.randrange(-(10**6), 10**6)}.{rng.randrange(10**6):06d}{'0' * rng.randrange(3)}")


_FLOATS = ("1e300", "5e-324", "-0", "0.1", "0.30000000000000004", "NaN", "Infinity", "-Infinity", "1e-300")


def _float(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return "NULL"
    if r < 0.45:
        return _q(rng.choice(_FLOATS))
    return _q(repr(rng.uniform(-1e6, 1e6)))


def _bigint(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return "NULL"
    if r < 0.4:
        return rng.choice(("9223372036854775807", "-9223372036854775808", "9007199254740993", "0"))
    return str(rng.randrange(-(2**62), 2**62))


def _int(rng: random.Random) -> str:
    return "NULL" if rng.random() < 0.1 else str(rng.randrange(-(2**31), 2**31))


def _bool(rng: random.Random) -> str:
    return rng.choice(("true", "false", "NULL"))


def _date(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return "NULL"
    if r < 0.2:
        return _q(rng.choice(("2024-02-29", "1970-01-01", "1900-01-01", "2099-12-31")))
    return _q(str(date(1900, 1, 1) + timedelta(days=rng.randrange(73_000))))


def _timestamp_value(rng: random.Random) -> datetime:
    return datetime(1900, 1, 1) + timedelta(
        seconds=rng.randrange(6_300_000_000), microseconds=rng.randrange(10**6)
    )


def _timestamp(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return "NULL"
    if r < 0.2:
        return _q(
            rng.choice(("2000-01-01 00:00:00", "2024-02-29 23:59:59.999999", "1970-01-01 00:00:00.000001"))
        )
    return _q(_timestamp_value(rng).isoformat(" "))


def _timestamptz(rng: random.Random) -> str:
    if rng.random() < 0.1:
        return "NULL"
    offset = rng.choice(("+00", "+05:30", "-08:00", "+14", "-00:30"))
    return _q(_timestamp_value(rng).isoformat(" ") + offset)


def _text_array(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return "NULL"
    if r < 0.25:
        return "'{}'::text[]"
    items = [
        rng.choice(("NULL", *(_q(t) for t in _TEXTS[:7]), _q(f"e{rng.randrange(100)}"))) for _ in range(3)
    ]
    return f"ARRAY[{', '.join(items)}]::text[]"


def _int_array(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return "NULL"
    if r < 0.35:
        return _q(rng.choice(("{}", "{1,NULL,3}", "{{1,2},{3,4}}", "{-2147483648,2147483647}")))
    return _q("{" + ",".join(str(rng.randrange(-100, 100)) for _ in range(rng.randrange(1, 5))) + "}")


_JSONS = (
    '{"a": [1, 2.50, "x"], "ü": null}',
    "null",
    '"str"',
    "[]",
    "{}",
    "123.450",
    '{"n": 1e3, "q": "\\"x\\""}',
)


def _jsonb(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return "NULL"
    if r < 0.5:
        return _q(rng.choice(_JSONS))
    return _q(json.dumps({f"k{rng.randrange(5)}": rng.randrange(1000), "t": rng.choice(_TEXTS[:4])}))


def _uuid(rng: random.Random) -> str:
    return "NULL" if rng.random() < 0.1 else _q(str(uuid.UUID(int=rng.getrandbits(128))))


def _interval(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return "NULL"
    if r < 0.3:
        return _q(rng.choice(("-1 mon", "3 years 2 mons", "00:00:00.000001", "-1 days +02:00:00")))
    hms = f"{rng.randrange(24)}:{rng.randrange(60):02d}:{rng.randrange(60):02d}.{rng.randrange(10**6)}"
    return _q(f"{rng.randrange(400)} days {hms}")


def _bytea(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return "NULL"
    if r < 0.2:
        return "'\\x'"
    return "'\\x" + rng.randbytes(rng.randrange(1, 12)).hex() + "'"


GENERATORS: dict[str, Callable[[random.Random], str]] = {
    "text": _text,
    "integer": _int,
    "bigint": _bigint,
    "numeric(12,2)": _numeric_fixed,
    "numeric": _numeric,
    "double precision": _float,
    "boolean": _bool,
    "date": _date,
    "timestamp without time zone": _timestamp,
    "timestamp with time zone": _timestamptz,
    "text[]": _text_array,
    "integer[]": _int_array,
    "jsonb": _jsonb,
    "uuid": _uuid,
    "interval": _interval,
    "bytea": _bytea,
}


# --- the workload -----------------------------------------------------------------------------------
@dataclass
class Transaction:
    """One workload transaction: its statements, and whether it ends in ROLLBACK."""

    statements: list[str]
    rollback: bool = False

    def sql(self) -> str:
        end = "ROLLBACK" if self.rollback else "COMMIT"
        return "\n".join(["BEGIN;", *(s + ";" for s in self.statements), end + ";"])


class Workload:
    """Generates transactions from a seed, tracking each table's live keys (key -> rid) as it goes."""

    TABLE_WEIGHTS = {"accounts": 4, "items": 4, "links": 2, "logs": 2, "scratch": 1}

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.live: dict[str, dict[Key, int]] = {t.name: {} for t in TABLES}
        self.freed: dict[str, list[Key]] = {t.name: [] for t in TABLES}
        self.next_rid = 1
        self.out: list[str] = []

    def transactions(self, count: int) -> list[Transaction]:
        """``count`` transactions; the first ones mostly insert so later ones have rows to work on."""
        txns = []
        for i in range(count):
            self.out = []
            saved = copy.deepcopy((self.live, self.freed))
            r = self.rng.random()
            if i >= 3 and r < 0.03:
                self.out.append("UPDATE links SET v = 'never' WHERE false")  # changes no row: no events
            elif i < 3:
                for name in ("accounts", "items", "links", "logs", "scratch"):
                    self.insert(BY_NAME[name], self.rng.randint(2, 4))
            else:
                for _ in range(self.rng.choice((1, 1, 2, 2, 3, 4, 6))):
                    self.step()
            rollback = i >= 3 and r > 0.96
            if rollback:
                self.live, self.freed = saved
            txns.append(Transaction(self.out, rollback))
        return txns

    # one random step -----------------------------------------------------------------------------
    def step(self) -> None:
        rng = self.rng
        if rng.random() < 0.06:  # a subtransaction, rolled back or released
            saved = copy.deepcopy((self.live, self.freed))
            self.out.append("SAVEPOINT sp")
            for _ in range(rng.randint(1, 2)):
                self.step_on(self._pick_table())
            if rng.random() < 0.7:
                self.out.append("ROLLBACK TO SAVEPOINT sp")
                self.live, self.freed = saved
            else:
                self.out.append("RELEASE SAVEPOINT sp")
            return
        self.step_on(self._pick_table())

    def _pick_table(self) -> Table:
        names = list(self.TABLE_WEIGHTS)
        return BY_NAME[self.rng.choices(names, [self.TABLE_WEIGHTS[n] for n in names])[0]]

    def step_on(self, t: Table) -> None:
        rng = self.rng
        live = self.live[t.name]
        if not t.primary_key:
            self._step_nokey(t)
            return
        if t.v2_only and rng.random() < 0.2:
            self.out.append(f"TRUNCATE {t.name}")
            for k in live:
                self.freed[t.name].append(k)
            live.clear()
            if rng.random() < 0.5:
                self.insert(t, rng.randint(1, 2))
            return
        if len(live) < 3:
            self.insert(t, rng.randint(1, 3))
            return
        if len(KEY_DOMAINS[t.name]) - len(live) < 5:  # nearly full: make room
            self.delete(t)
            return
        ops: list[tuple[Callable[[Table], None], float]] = [
            (lambda t: self.insert(t, rng.randint(1, 3)), 2),
            (self.update, 5),
            (self.noop_update, 0.7),
            (self.move, 2.5),
            (self.move_chain, 1.2),
            (self.move_back, 0.4),
            (self.delete, 1.5),
            (self.delete_reinsert, 1),
            (self.insert_delete, 0.6),
            (self.insert_update, 0.8),
            (self.swap, 0.8),
            (self.multi_update, 0.8),
            (self.multi_move, 0.6 if t.name == "items" else 0),
            (self.update_twice, 1),
        ]
        op = rng.choices([o for o, _ in ops], [w for _, w in ops])[0]
        op(t)

    # keys ----------------------------------------------------------------------------------------
    def fresh_key(self, t: Table, avoid: Iterable[Key] = ()) -> Key:
        """A key not live now: often one freed earlier (re-used keys are the interesting ones)."""
        taken = set(self.live[t.name]) | set(avoid)
        freed = [k for k in self.freed[t.name] if k not in taken]
        if freed and self.rng.random() < 0.4:
            return self.rng.choice(freed)
        free = [k for k in KEY_DOMAINS[t.name] if k not in taken]
        if not free:
            raise RuntimeError(f"no free key in {t.name}")
        return self.rng.choice(free)

    def live_key(self, t: Table) -> Key:
        return self.rng.choice(sorted(self.live[t.name], key=repr))

    def where(self, t: Table, key: Key) -> str:
        return " AND ".join(f"{c} = {lit(v)}" for c, v in zip(t.primary_key, key, strict=True))

    def _gone(self, t: Table, key: Key) -> int:
        self.freed[t.name].append(key)
        return self.live[t.name].pop(key)

    def _values(self, t: Table) -> dict[str, str]:
        return {c: GENERATORS[ty](self.rng) if c not in t.toast else _toast(self.rng) for c, ty in t.columns}

    # operations ----------------------------------------------------------------------------------
    def insert(self, t: Table, n: int, keys: Sequence[Key] = ()) -> list[Key]:
        """Insert n rows (at ``keys`` when given, else at fresh keys); returns their keys."""
        rows = []
        keys = list(keys)
        for i in range(n):
            values = self._values(t)
            values["rid"] = str(self.next_rid)
            if t.primary_key:
                if i >= len(keys):
                    keys.append(self.fresh_key(t, keys))
                key = keys[i]
                values.update({c: lit(v) for c, v in zip(t.primary_key, key, strict=True)})
                self.live[t.name][key] = self.next_rid
            else:
                self.live[t.name][(self.next_rid,)] = self.next_rid
            self.next_rid += 1
            rows.append("(" + ", ".join(values[c] for c in t.names) + ")")
        self.out.append(f"INSERT INTO {t.name} ({', '.join(t.names)}) VALUES {', '.join(rows)}")
        return keys

    def _sets(self, t: Table) -> list[str]:
        """SET items for 1..3 data columns; toasted columns are left out more often than not."""
        rng = self.rng
        plain = [c for c in t.data if c not in t.toast]
        cols = rng.sample(plain, min(len(plain), rng.randint(1, 3)))
        if t.toast and rng.random() < 0.3:
            cols.append(rng.choice(t.toast))
        types = dict(t.columns)
        return [f"{c} = {_toast(rng) if c in t.toast else GENERATORS[types[c]](rng)}" for c in cols]

    def update(self, t: Table) -> None:
        key = self.live_key(t)
        self.out.append(f"UPDATE {t.name} SET {', '.join(self._sets(t))} WHERE {self.where(t, key)}")

    def noop_update(self, t: Table) -> None:
        key = self.live_key(t)
        c = self.rng.choice(t.data)
        self.out.append(f"UPDATE {t.name} SET {c} = {c} WHERE {self.where(t, key)}")

    def update_twice(self, t: Table) -> None:
        key = self.live_key(t)
        for _ in range(self.rng.randint(2, 3)):
            self.out.append(f"UPDATE {t.name} SET {', '.join(self._sets(t))} WHERE {self.where(t, key)}")

    def _move(self, t: Table, old: Key, new: Key, with_values: bool) -> None:
        sets = [f"{c} = {lit(v)}" for c, v in zip(t.primary_key, new, strict=True)]
        if with_values:
            sets += self._sets(t)
        self.out.append(f"UPDATE {t.name} SET {', '.join(sets)} WHERE {self.where(t, old)}")
        self.live[t.name][new] = self._gone(t, old)

    def move(self, t: Table) -> None:
        old = self.live_key(t)
        self._move(t, old, self.fresh_key(t), self.rng.random() < 0.4)

    def move_chain(self, t: Table) -> None:
        key = self.live_key(t)
        for _ in range(self.rng.randint(2, 3)):
            new = self.fresh_key(t)
            self._move(t, key, new, self.rng.random() < 0.3)
            key = new

    def move_back(self, t: Table) -> None:
        old = self.live_key(t)
        new = self.fresh_key(t)
        self._move(t, old, new, self.rng.random() < 0.5)
        self._move(t, new, old, False)

    def delete(self, t: Table) -> None:
        key = self.live_key(t)
        self.out.append(f"DELETE FROM {t.name} WHERE {self.where(t, key)}")
        self._gone(t, key)

    def delete_reinsert(self, t: Table) -> None:
        key = self.live_key(t)
        self.out.append(f"DELETE FROM {t.name} WHERE {self.where(t, key)}")
        self._gone(t, key)
        self.insert(t, 1, [key])

    def insert_delete(self, t: Table) -> None:
        (key,) = self.insert(t, 1)
        self.out.append(f"DELETE FROM {t.name} WHERE {self.where(t, key)}")
        self._gone(t, key)

    def insert_update(self, t: Table) -> None:
        (key,) = self.insert(t, 1)
        self.out.append(f"UPDATE {t.name} SET {', '.join(self._sets(t))} WHERE {self.where(t, key)}")

    def swap(self, t: Table) -> None:
        k1, k2 = self.rng.sample(sorted(self.live[t.name], key=repr), 2)
        tmp = self.fresh_key(t)
        self._move(t, k1, tmp, False)
        self._move(t, k2, k1, self.rng.random() < 0.3)
        self._move(t, tmp, k2, False)

    def multi_update(self, t: Table) -> None:
        keys = self.rng.sample(sorted(self.live[t.name], key=repr), min(3, len(self.live[t.name])))
        where = " OR ".join(f"({self.where(t, k)})" for k in keys)
        self.out.append(f"UPDATE {t.name} SET {', '.join(self._sets(t))} WHERE {where}")

    def multi_move(self, t: Table) -> None:
        """items only: ``SET id = id + 1000`` for rows whose new key is free (no transient conflicts)."""
        live = self.live[t.name]
        movable = [k for k in sorted(live, key=repr) if k[0] + 1000 < 2**63 and (k[0] + 1000,) not in live]
        keys = self.rng.sample(movable, min(3, len(movable)))
        if not keys:
            return
        ids = ", ".join(str(k[0]) for k in keys)
        self.out.append(f"UPDATE {t.name} SET id = id + 1000 WHERE id IN ({ids})")
        for k in keys:
            live[(k[0] + 1000,)] = self._gone(t, k)

    def _step_nokey(self, t: Table) -> None:
        """logs (REPLICA IDENTITY FULL, no primary key): rows are told apart by rid, which never changes."""
        rng = self.rng
        live = self.live[t.name]
        r = rng.random()
        if len(live) < 3 or r < 0.3:
            self.insert(t, rng.randint(1, 2))
            return
        (rid,) = self.live_key(t)
        if r < 0.75:
            sets = [
                f"{c} = {_toast(rng) if c in t.toast else GENERATORS[dict(t.columns)[c]](rng)}"
                for c in rng.sample(t.data, rng.randint(1, 2))
            ]
            self.out.append(f"UPDATE {t.name} SET {', '.join(sets)} WHERE rid = {rid}")
        elif r < 0.82:
            self.out.append(f"UPDATE {t.name} SET msg = msg WHERE rid = {rid}")
        else:
            self.out.append(f"DELETE FROM {t.name} WHERE rid = {rid}")
            live.pop((rid,))


# --- normalized values ------------------------------------------------------------------------------
_NOT_FINITE = {"NaN", "Infinity", "-Infinity"}
_interned: dict[str, str] = {}


def from_pg(pg_type: str, value: Any) -> Any:
    """A value as PostgreSQL returned it (``::text`` for string-mapped columns) -> the normalized value the
    lake must hold by the documented mapping. NaN and ±Infinity become NULL: wal2json prints them as null."""
    if value is None:
        return None
    st = spark_type(pg_type)
    if st in ("double", "float"):
        return None if math.isnan(value) or math.isinf(value) else float(value)
    if st.startswith("decimal"):
        return value if value.is_finite() else None
    if st == "string":
        if pg_type.startswith("numeric") and value in _NOT_FINITE:
            return None
        return _interned.setdefault(value, value) if len(value) > 200 else value
    if st == "timestamp":
        return value.astimezone(UTC)
    if st == "binary":
        return bytes(value)
    return value


def from_spark(st: str, value: Any) -> Any:
    """A collected Spark value (timestamps as ``unix_micros``) -> the normalized value. A NaN or infinite
    double becomes the string 'NaN'/'inf' so that it differs from NULL and from every number."""
    if value is None:
        return None
    if st == "timestamp":
        return EPOCH + timedelta(microseconds=value)
    if st in ("double", "float") and (math.isnan(value) or math.isinf(value)):
        return repr(value)
    if st == "binary":
        return bytes(value)
    if isinstance(value, str) and len(value) > 200:
        return _interned.setdefault(value, value)
    return value


def show(value: Any) -> str:
    """A short readable repr (long strings: length, head and a digest)."""
    if isinstance(value, str) and len(value) > 60:
        return f"<str len={len(value)} {value[:24]!r}... #{hash(value) & 0xFFFFFF:06x}>"
    if isinstance(value, datetime):
        return value.isoformat(" ")
    return repr(value)


def show_key(t: Table, key: Key) -> str:
    return "(" + ", ".join(f"{c}={show(v)}" for c, v in zip(t.key, key, strict=True)) + ")"


# --- running the workload ---------------------------------------------------------------------------
@dataclass
class Commit:
    """A committed workload transaction: its xid, every table's state right after it, and (once the stream
    is read) its commit LSN and commit time. ``index`` is its position in the workload."""

    index: int
    xid: int
    state: State
    lsn: int = -1
    time: datetime = EPOCH

    def label(self) -> str:
        return (
            f"commit #{self.index} (xid {self.xid}, LSN {format_lsn(self.lsn)}, {self.time.isoformat(' ')})"
        )


def pg_select(t: Table) -> str:
    """The query that reads a table in the documented mapping's terms: string-mapped columns as the text
    their type's output function prints (``format('%s', c)``, as wal2json prints them: a cast to text is not
    that for every type; ``character(n)`` loses its padding, ``inet`` gains a host's ``/32``), NULL as NULL
    (``num_nonnulls`` looks at the value, not into a composite's fields as ``IS NULL`` does)."""
    types = t.types()
    text = "CASE WHEN num_nonnulls({c}) = 1 THEN format('%s', {c}) END"
    columns = (text.format(c=c) if types[c] == "string" else c for c, _ in t.columns)
    return f"SELECT {', '.join(columns)} FROM {t.name}"


def read_state(conn: Any, tables: Sequence[Table] = TABLES) -> State:
    """Every table of ``tables`` as key -> normalized row."""
    state: State = {}
    for t in tables:
        rows: dict[Key, Row] = {}
        for values in conn.execute(pg_select(t).encode()).fetchall():
            row = {c: from_pg(ty, v) for (c, ty), v in zip(t.columns, values, strict=True)}
            key = tuple(row[c] for c in t.key)
            assert key not in rows, f"{t.name}: two rows with key {key}"
            rows[key] = row
        assert len({r["rid"] for r in rows.values()}) == len(rows), f"{t.name}: rid not unique"
        state[t.name] = rows
    return state


def run_workload(
    db: PgDatabase, txns: Sequence[Transaction], tables: Sequence[Table] = TABLES
) -> list[Commit]:
    """Run each transaction on one connection; record the xid and the state of ``tables`` after each
    commit."""
    import psycopg

    commits: list[Commit] = []
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        for name, value in SESSION_SETTINGS.items():
            conn.execute(f"SET {name} = '{value}'".encode())
        for i, txn in enumerate(txns):
            conn.execute(b"BEGIN")
            row = conn.execute(b"SELECT txid_current() % 4294967296").fetchone()
            assert row is not None
            try:
                for statement in txn.statements:
                    conn.execute(statement.encode())
            except psycopg.Error as exc:
                conn.execute(b"ROLLBACK")
                raise RuntimeError(f"workload transaction #{i} failed: {exc}\n{txn.sql()}") from exc
            conn.execute(b"ROLLBACK" if txn.rollback else b"COMMIT")
            if not txn.rollback:
                commits.append(Commit(i, int(row[0]), read_state(conn, tables)))
    return commits


# --- the decoded stream -----------------------------------------------------------------------------
@dataclass
class Frame:
    """One decoded transaction: xid, commit LSN (``nextlsn``), commit time, and its lines in the capture."""

    xid: int
    lsn: int
    time: datetime
    lines: list[str]


def commit_time(ts: str) -> datetime:
    return datetime.fromisoformat(ts).astimezone(UTC)


def read_frames(lines: Sequence[str], fmt: int) -> list[Frame]:
    """Group a capture into transactions: a v1 line is one; v2 lines B … C are one."""
    frames: list[Frame] = []
    if fmt == 1:
        for line in lines:
            obj = json.loads(line)
            frames.append(Frame(obj["xid"], parse_lsn(obj["nextlsn"]), commit_time(obj["timestamp"]), [line]))
        return frames
    open_: list[str] | None = None
    for line in lines:
        rec = json.loads(line)
        if rec["action"] == "B":
            assert open_ is None, "B inside a transaction"
            open_ = [line]
        else:
            assert open_ is not None, f"{rec['action']} outside a transaction"
            open_.append(line)
            if rec["action"] == "C":
                frames.append(
                    Frame(rec["xid"], parse_lsn(rec["nextlsn"]), commit_time(rec["timestamp"]), open_)
                )
                open_ = None
    assert open_ is None, "capture ends inside a transaction"
    return frames


def reader_events(lines: Sequence[str], fmt: int) -> list[dict[str, Any]]:
    """The events ``resolver.formats.wal2json.read_lines`` makes of a capture (everything must be an
    event)."""
    events = []
    fmt_name = Format.WAL2JSON_V1 if fmt == 1 else Format.WAL2JSON_V2
    for item in read_lines((line.encode() for line in lines), "capture", fmt_name):
        if isinstance(item, Event):
            events.append(item.row)
        else:
            assert type(item).__name__ == "Count", f"the reader did not accept the capture: {item}"
    return events


def tables_for(fmt: int) -> tuple[Table, ...]:
    """The tables a format can show completely (format 1 cannot show truncates)."""
    return tuple(t for t in TABLES if fmt == 2 or not t.v2_only)


def map_commits(commits: Sequence[Commit], frames: Sequence[Frame], tables: Sequence[Table]) -> list[Commit]:
    """The commits seen in the stream, with LSN and time from their frame. A commit absent from the stream
    must have changed none of ``tables``; every frame must be a recorded commit; LSNs must increase."""
    by_xid = {f.xid: f for f in frames}
    assert len(by_xid) == len(frames), "an xid twice in the stream"
    seen: list[Commit] = []
    previous: State = {t.name: {} for t in tables}
    for c in commits:
        frame = by_xid.pop(c.xid, None)
        if frame is None:
            for t in tables:
                assert c.state[t.name] == previous[t.name], (
                    f"commit #{c.index} changed {t.name} but is not in the stream"
                )
        else:
            assert c.lsn in (-1, frame.lsn) and c.time in (EPOCH, frame.time), (
                "v1 and v2 disagree on a commit"
            )
            c.lsn, c.time = frame.lsn, frame.time
            seen.append(c)
        previous = c.state
    assert not by_xid, (
        f"transactions in the stream that the workload did not commit: {sorted(by_xid)} "
        f"(their lines: {[by_xid[x].lines for x in sorted(by_xid)][:3]})"
    )
    assert all(a.lsn < b.lsn for a, b in zip(seen, seen[1:], strict=False)), "commit LSNs out of commit order"
    return seen


# --- batches and scenarios --------------------------------------------------------------------------
def cut_into_files(lines: Sequence[str], count: int, rng: random.Random) -> list[list[str]]:
    """A format-2 capture cut into ``count`` files at random lines (inside transactions too, a file may lie
    wholly inside one), as a rotating shipper would land it."""
    cuts = sorted(rng.sample(range(1, len(lines)), count - 1))
    bounds = list(zip([0, *cuts], [*cuts, len(lines)], strict=True))
    return [list(lines[a:b]) for a, b in bounds]


def settled_files(files: Sequence[Sequence[str]], landed: int) -> int:
    """How many of the first ``landed`` files ``resolver run`` records in its ledger: all of them, or those
    before the file where a transaction still open at the end of the last one began (held back until its
    commit lands)."""
    open_in = None
    for i, lines in enumerate(files[:landed]):
        for line in lines:
            action = json.loads(line)["action"]
            if action == "B":
                open_in = i
            elif action == "C":
                open_in = None
    return landed if open_in is None else open_in


def write_batches(
    frames: Sequence[Frame], count: int, rng: random.Random, out: Path, name: str
) -> list[list[str]]:
    """Split the stream on transaction boundaries into ``count`` batches; a batch is sometimes written as
    two files cut at any line (inside a transaction in format 2: the reader stitches it back)."""
    count = min(count, len(frames))
    cuts = sorted(rng.sample(range(1, len(frames)), count - 1))
    batches: list[list[str]] = []
    for i, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(frames)], strict=True)):
        lines = [line for f in frames[a:b] for line in f.lines]
        parts = [lines]
        if len(lines) > 2 and rng.random() < 0.5:
            at = rng.randrange(1, len(lines))
            parts = [lines[:at], lines[at:]]
        paths = []
        for j, part in enumerate(parts):
            path = out / f"{name}-batch{i}-{j}.json"
            write_lines(path, part)
            paths.append(str(path))
        batches.append(paths)
    return batches


SCENARIOS = ("whole", "in-order", "shuffled", "replayed")


def batch_order(scenario: str, count: int, rng: random.Random) -> list[list[int]]:
    """Which batches each ingest call delivers: ``whole`` (all in one call); ``in-order``; ``shuffled`` (never
    the identity); ``replayed``: shuffled, with an already delivered batch delivered again in between and
    another one at the end."""
    if scenario == "whole":
        return [list(range(count))]
    order = list(range(count))
    if scenario in ("shuffled", "replayed") and count > 1:
        while order == sorted(order):
            rng.shuffle(order)
    if scenario == "replayed":
        at = rng.randrange(1, count)  # after the first `at` deliveries
        order.insert(at, order[rng.randrange(at)])
        order.append(rng.choice(order))
    return [[i] for i in order]


# --- the lake ---------------------------------------------------------------------------------------
@dataclass
class Silver:
    """A lake's silver tables collected to Python (normalized values), with their Spark column types."""

    snapshot: dict[str, list[Row]] = field(default_factory=dict)
    history: dict[str, list[Row]] = field(default_factory=dict)
    snapshot_types: dict[str, dict[str, str]] = field(default_factory=dict)
    history_types: dict[str, dict[str, str]] = field(default_factory=dict)


def _collect(df: Any, t: Table) -> tuple[list[Row], dict[str, str]]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    exprs = [
        F.unix_micros(F.col(f"`{f.name}`")).alias(f.name)
        if isinstance(f.dataType, TimestampType)
        else F.col(f"`{f.name}`")
        for f in df.schema.fields
    ]
    key_types = t.types()
    rows = []
    for r in df.select(*exprs).collect():
        row = {}
        for name, value in r.asDict().items():
            if name in ("__moved_from", "__moved_to"):
                row[name] = (
                    None if value is None else tuple(from_spark(key_types[c], value[c]) for c in t.key)
                )
            else:
                row[name] = from_spark(types[name], value)
        rows.append(row)
    return rows, types


def collect_silver(spark: Any, lake: Path, tables: Sequence[Table]) -> Silver:
    silver = Silver()
    for t in tables:
        base = lake / "silver" / t.qualified
        df = spark.read.format("delta").load(str(base))
        silver.snapshot[t.name], silver.snapshot_types[t.name] = _collect(df, t)
        df = spark.read.format("delta").load(f"{base}__history")
        silver.history[t.name], silver.history_types[t.name] = _collect(df, t)
    return silver


def collect_silver_typed(spark: Any, lake: Path, tables: Sequence[Table]) -> Silver:
    """``collect_silver`` of a lake whose source columns hold text (a stream without types and no schema file
    to pin them), each value first typed by the documented mapping the way the resolver types a value
    (``resolver.table.explode.cast_sql``), the key structs of ``__moved_from``/``__moved_to`` too."""
    from pyspark.sql import functions as F

    from resolver.spark.sql import ident
    from resolver.table.explode import cast_sql

    silver = Silver()
    for t in tables:
        types = t.types()
        base = lake / "silver" / t.qualified

        def typed(df: Any, t: Table = t, types: dict[str, str] = types) -> Any:
            cols = []
            for name in df.columns:
                if name in types:
                    cols.append(F.expr(cast_sql(ident(name), types[name])).alias(name))
                elif name in ("__moved_from", "__moved_to"):
                    key = F.struct(
                        *[F.expr(cast_sql(f"{ident(name)}.{ident(k)}", types[k])).alias(k) for k in t.key]
                    )
                    cols.append(F.when(F.col(name).isNotNull(), key).alias(name))
                else:
                    cols.append(F.col(f"`{name}`"))
            return df.select(*cols)

        silver.snapshot[t.name], silver.snapshot_types[t.name] = _collect(
            typed(spark.read.format("delta").load(str(base))), t
        )
        silver.history[t.name], silver.history_types[t.name] = _collect(
            typed(spark.read.format("delta").load(f"{base}__history")), t
        )
    return silver


def write_schema_files(out: Path, tables: Sequence[Table]) -> Path:
    """A schema file per table pinning every column's type by the documented mapping (and its key)."""
    out.mkdir(parents=True, exist_ok=True)
    for t in tables:
        key = f"primary_key: [{', '.join(t.primary_key)}]\n" if t.primary_key else ""
        cols = "".join(f"  - {{name: {c}, type: '{typ}'}}\n" for c, typ in t.types().items())
        (out / f"{t.qualified}.yaml").write_text(
            f"table: {t.qualified}\n{key}columns:\n{cols}", encoding="utf-8"
        )
    return out


# --- comparing --------------------------------------------------------------------------------------
def diff_table(t: Table, expected: dict[Key, Row], got: Iterable[Row], where: str) -> list[str]:
    """Differences between the expected rows (key -> row) and the lake's rows (source columns compared,
    technical ones ignored): one line per missing, extra, duplicated key or differing column."""
    problems: list[str] = []
    rows: dict[Key, Row] = {}
    for row in got:
        key = tuple(row.get(c) for c in t.key)
        if key in rows:
            problems.append(
                f"{t.qualified} {where}: key {show_key(t, key)} twice: "
                f"{_row(t, rows[key])} and {_row(t, row)}"
            )
        rows[key] = row
    for key in sorted(expected.keys() | rows.keys(), key=repr):
        want, have = expected.get(key), rows.get(key)
        if have is None:
            problems.append(
                f"{t.qualified} {where}: key {show_key(t, key)} missing; expected {_row(t, want)}"
            )
        elif want is None:
            problems.append(
                f"{t.qualified} {where}: key {show_key(t, key)} should not exist; got {_row(t, have)}"
            )
        else:
            for c in t.names:
                if c not in have:
                    problems.append(f"{t.qualified} {where}: column {c} missing from the lake")
                elif not _same(want[c], have[c]):
                    problems.append(
                        f"{t.qualified} {where}: key {show_key(t, key)} column {c}: "
                        f"expected {show(want[c])}, got {show(have[c])}"
                    )
    return problems


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b or (isinstance(a, Decimal) and isinstance(b, Decimal) and a == b)


def _row(t: Table, row: Row | None) -> str:
    if row is None:
        return "None"
    return "{" + ", ".join(f"{c}: {show(row.get(c))}" for c in t.names) + "}"


def as_of_lsn(history: Iterable[Row], lsn: int) -> list[Row]:
    return [h for h in history if h["__start_lsn"] <= lsn < h["__end_lsn"]]


def as_of_time(history: Iterable[Row], at: datetime) -> list[Row]:
    return [h for h in history if h["__start_time"] is not None and h["__start_time"] <= at < h["__end_time"]]


def unique_times(timeline: Sequence[Commit]) -> list[Commit]:
    """Commits whose time is strictly after every earlier commit's and before every later one's."""
    out = []
    for i, c in enumerate(timeline):
        if all(p.time < c.time for p in timeline[:i]) and all(c.time < n.time for n in timeline[i + 1 :]):
            out.append(c)
    return out


def check_lake(silver: Silver, timeline: Sequence[Commit], tables: Sequence[Table]) -> list[str]:
    """Everything the contract says about the silver tables, against the states PostgreSQL committed."""
    problems: list[str] = []
    final = timeline[-1].state
    first = timeline[0]
    timed = unique_times(timeline)
    for t in tables:
        problems += check_types(t, silver)
        hist = silver.history[t.name]
        problems += diff_table(
            t, final[t.name], silver.snapshot[t.name], "snapshot vs PostgreSQL's final state"
        )
        problems += diff_table(t, {}, as_of_lsn(hist, first.lsn - 1), "history before the first commit")
        for c in timeline:
            problems += diff_table(
                t, c.state[t.name], as_of_lsn(hist, c.lsn), f"history as of LSN of {c.label()}"
            )
        for c in timed:
            problems += diff_table(
                t, c.state[t.name], as_of_time(hist, c.time), f"history as of time of {c.label()}"
            )
        problems += check_versions(t, silver, timeline)
    return problems


def check_types(t: Table, silver: Silver) -> list[str]:
    """Source columns have the documented Spark types, technical columns theirs."""
    problems = []
    want = t.types()
    for kind, types in (
        ("snapshot", silver.snapshot_types[t.name]),
        ("history", silver.history_types[t.name]),
    ):
        for c in t.names:
            if types.get(c) != want[c]:
                problems.append(
                    f"{t.qualified} {kind}: column {c} ({dict(t.columns)[c]}) is {types.get(c)}, "
                    f"documented {want[c]}"
                )
        tech = {"__start_lsn": "bigint", "__start_time": "timestamp"}
        if kind == "history":
            tech |= {
                "__end_lsn": "bigint",
                "__end_time": "timestamp",
                "__is_current": "boolean",
                "__is_deleted": "boolean",
            }
        for c, ty in tech.items():
            if types.get(c) != ty:
                problems.append(
                    f"{t.qualified} {kind}: technical column {c} is {types.get(c)}, documented {ty}"
                )
    return problems


def check_versions(t: Table, silver: Silver, timeline: Sequence[Commit]) -> list[str]:
    """The history's own rules: intervals on commit boundaries, times matching LSNs, current = open, no
    version that changes nothing, a version whose key is gone after its end flagged deleted, and the
    snapshot equal to the open versions."""
    problems: list[str] = []
    at = {c.lsn: i for i, c in enumerate(timeline)}
    name = t.qualified + " history"
    by_key: dict[Key, list[Row]] = {}
    for h in silver.history[t.name]:
        key = tuple(h.get(c) for c in t.key)
        by_key.setdefault(key, []).append(h)
        what = f"{name}: version of {show_key(t, key)} [{_lsn(h['__start_lsn'])}, {_lsn(h['__end_lsn'])})"
        start, end = h["__start_lsn"], h["__end_lsn"]
        if start not in at:
            problems.append(f"{what}: starts at an LSN that is no commit")
            continue
        if end != MAX_LSN and end not in at:
            problems.append(f"{what}: ends at an LSN that is no commit")
            continue
        if not start < end:
            problems.append(f"{what}: empty interval")
        if h["__start_time"] != timeline[at[start]].time:
            problems.append(
                f"{what}: __start_time {show(h['__start_time'])} is not its commit's "
                f"{show(timeline[at[start]].time)}"
            )
        open_ = end == MAX_LSN
        want_end = MAX_TIME if open_ else timeline[at[end]].time
        if h["__end_time"] != want_end:
            problems.append(f"{what}: __end_time {show(h['__end_time'])}, expected {show(want_end)}")
        if h["__is_current"] != open_:
            problems.append(f"{what}: __is_current is {h['__is_current']} but __end_lsn is {end}")
        if open_ and h["__is_deleted"]:
            problems.append(f"{what}: open and deleted")
        if not open_ and key not in timeline[at[end]].state[t.name] and not h["__is_deleted"]:
            problems.append(
                f"{what}: the key is gone after the commit that ended it but __is_deleted is false"
            )
    for key, versions in by_key.items():
        versions.sort(key=lambda h: h["__start_lsn"])
        for a, b in zip(versions, versions[1:], strict=False):
            if a["__end_lsn"] > b["__start_lsn"]:
                problems.append(f"{name}: versions of {show_key(t, key)} overlap at {_lsn(b['__start_lsn'])}")
            elif a["__end_lsn"] == b["__start_lsn"] and all(_same(a[c], b[c]) for c in t.names):
                problems.append(
                    f"{name}: {show_key(t, key)} has a new version at {_lsn(b['__start_lsn'])} "
                    "that changes nothing"
                )
    current = [
        {c: h[c] for c in (*t.names, "__start_lsn", "__start_time")}
        for h in silver.history[t.name]
        if h["__is_current"]
    ]
    snap = [{c: s.get(c) for c in (*t.names, "__start_lsn", "__start_time")} for s in silver.snapshot[t.name]]
    if sorted(map(repr, current)) != sorted(map(repr, snap)):
        extra = sorted(set(map(repr, snap)) ^ set(map(repr, current)))[:3]
        problems.append(f"{t.qualified}: snapshot differs from the history's open versions, e.g. {extra}")
    return problems


def _lsn(value: int) -> str:
    return "max" if value == MAX_LSN else format_lsn(value)


def _rid_keys(t: Table, state: State) -> dict[int, Key]:
    return {row["rid"]: key for key, row in state[t.name].items()}


def check_lineage(silver: Silver, timeline: Sequence[Commit], tables: Sequence[Table]) -> list[str]:
    """``__moved_from``/``__moved_to`` of every version of the tables with a primary key, against where each
    row (its ``rid``) was in the committed states: a version opened at commit i holding a row that was at
    another key after commit i-1 moved from that key; a version ended at commit j whose row is at another
    key after commit j moved to it. Keys seen only inside a transaction are never visible, so never named."""
    problems: list[str] = []
    at = {c.lsn: i for i, c in enumerate(timeline)}
    for t in tables:
        if not t.primary_key:
            continue
        for h in silver.history[t.name]:
            if h["__start_lsn"] in at and h["__end_lsn"] in (*at, MAX_LSN):  # else check_versions reports it
                key = tuple(h.get(c) for c in t.key)
                what = f"{t.qualified} history: version of {show_key(t, key)} "
                what += f"[{_lsn(h['__start_lsn'])}, {_lsn(h['__end_lsn'])})"
                problems += _check_lineage(t, h, key, what, timeline, at)
    return problems


def _check_lineage(
    t: Table, h: Row, key: Key, what: str, timeline: Sequence[Commit], at: dict[int, int]
) -> list[str]:
    problems = []
    i = at[h["__start_lsn"]]
    before = _rid_keys(t, timeline[i - 1].state) if i > 0 else {}
    came = before.get(h["rid"])
    want_from = came if came is not None and came != key else None
    if h.get("__moved_from") != want_from:
        problems.append(f"{what}: __moved_from is {h.get('__moved_from')}, expected {want_from}")
    if h["__end_lsn"] != MAX_LSN:
        went = _rid_keys(t, timeline[at[h["__end_lsn"]]].state).get(h["rid"])
        want_to = went if went is not None and went != key else None
        if h.get("__moved_to") != want_to:
            problems.append(f"{what}: __moved_to is {h.get('__moved_to')}, expected {want_to}")
    elif h.get("__moved_to") is not None:
        problems.append(f"{what}: open version with __moved_to {h.get('__moved_to')}")
    return problems


def silver_rows(silver: Silver, tables: Sequence[Table]) -> dict[str, tuple[list[str], list[str]]]:
    """Every row of every silver table (all columns, technical ones included) as sorted reprs."""
    return {
        t.name: (
            sorted(repr(sorted(r.items())) for r in silver.snapshot[t.name]),
            sorted(repr(sorted(r.items())) for r in silver.history[t.name]),
        )
        for t in tables
    }


def diff_silver(a: Silver, b: Silver, tables: Sequence[Table], label: str) -> list[str]:
    """Rows in one lake and not the other (all columns), per table."""
    problems = []
    ra, rb = silver_rows(a, tables), silver_rows(b, tables)
    for t in tables:
        for kind, x, y in (
            ("snapshot", ra[t.name][0], rb[t.name][0]),
            ("history", ra[t.name][1], rb[t.name][1]),
        ):
            if x != y:
                only_a = sorted(set(x) - set(y))
                only_b = sorted(set(y) - set(x))
                problems.append(
                    f"{t.qualified} {kind} ({label}): {len(x)} vs {len(y)} rows; only in the first: "
                    f"{[_short(r) for r in only_a[:3]]}; "
                    f"only in the second: {[_short(r) for r in only_b[:3]]}"
                )
    return problems


def _short(text: str) -> str:
    return text if len(text) < 400 else text[:400] + "..."


# --- one capture, end to end ------------------------------------------------------------------------
@dataclass
class Capture:
    """A workload run on PostgreSQL and its wal2json captures."""

    seed: int
    transactions: list[Transaction]
    commits: list[Commit]
    lines: dict[int, list[str]]
    frames: dict[int, list[Frame]]
    timeline: dict[int, list[Commit]]
    events: dict[int, list[dict[str, Any]]]
    untyped: dict[int, list[str]] = field(default_factory=dict)  # the same slot decoded with include-types=0

    def sql(self) -> str:
        """The workload as a script, each transaction labelled with its commit (for reproductions)."""
        by_index = {c.index: c for c in self.commits}
        out = [SCHEMA_SQL]
        for i, txn in enumerate(self.transactions):
            c = by_index.get(i)
            label = "rolled back" if txn.rollback else (c.label() if c and c.lsn >= 0 else "no row changes")
            out.append(f"-- #{i}: {label}\n{txn.sql()}")
        return "\n".join(out) + "\n"


def capture_workload(db: PgDatabase, seed: int, count: int) -> Capture:
    """Create the tables and a slot, run ``count`` transactions of the seed's workload, decode them."""
    slot = "s_" + "".join(ch if ch.isalnum() else "_" for ch in db.name.lower())
    db.execute(SCHEMA_SQL)
    db.create_slot(slot)
    txns = Workload(seed).transactions(count)
    commits = run_workload(db, txns)
    lines = {fmt: db.capture(slot, fmt) for fmt in (2, 1)}
    untyped = {fmt: db.capture(slot, fmt, include_types=False) for fmt in (2, 1)}
    frames = {fmt: read_frames(lines[fmt], fmt) for fmt in (2, 1)}
    timeline = {fmt: map_commits(commits, frames[fmt], tables_for(fmt)) for fmt in (2, 1)}
    events = {fmt: reader_events(lines[fmt], fmt) for fmt in (2, 1)}
    for fmt in (2, 1):
        by_lsn = {c.lsn: c for c in timeline[fmt]}
        for e in events[fmt]:
            c = by_lsn.get(e["commit_lsn"])
            assert c is not None and e["xid"] == c.xid and e["commit_time"] == c.time, f"reader event {e}"
    for fmt in (2, 1):  # the same changes, without a type anywhere
        assert len(untyped[fmt]) == len(lines[fmt]) and not any('"type"' in x for x in untyped[fmt])
    return Capture(seed, txns, commits, lines, frames, timeline, events, untyped)


#: The workload the run, crash, stream and S3 tests replay: one capture per session (the ``captures``
#: fixture of tests/harness/fixtures.py), each test cutting it into files of its own.
REPLAY_SEED, REPLAY_TRANSACTIONS = 23, 36
#: The tables the tests that kill or stop child ``resolver`` processes keep (their pipelines' ``include``):
#: a composite key changed in chains, with a TOASTed column left out of updates (accounts), and truncates
#: (scratch). Every type and table shape is the differential test's; these tests are about runs cut short,
#: and each table costs a batch in a cold child JVM its own ~24 Spark jobs. ``replay_cases`` guards that the
#: replayed workload still holds these cases for them.
KILL_TABLES: tuple[Table, ...] = (BY_NAME["accounts"], BY_NAME["scratch"])


def landed_files(cap: Capture, count: int) -> list[list[str]]:
    """The capture's format-2 lines cut into ``count`` files as a shipper would land them
    (``cut_into_files``, inside transactions too)."""
    return cut_into_files(cap.lines[2], count, random.Random(cap.seed))


def only_tables(lines: Sequence[str], tables: Sequence[Table]) -> list[str]:
    """Format-2 lines without the changes of other tables (every ``B`` and ``C`` kept: a transaction that
    changed only those is then empty, as wal2json prints one whose changes it filters out)."""
    names = {("public", t.name) for t in tables}
    kept = []
    for line in lines:
        record = json.loads(line)
        if "table" not in record or (record["schema"], record["table"]) in names:
            kept.append(line)
    return kept


def moves_key(e: dict[str, Any]) -> bool:
    """Is the reader event an update that changes its row's primary key?"""
    if e["operation"] != "update" or not e.get("primary_key") or not e.get("old_key_names"):
        return False
    old = dict(zip(e["old_key_names"], e["old_key_values"], strict=True))
    new = dict(zip(e["column_names"], e["column_values"], strict=True))
    return any(old[c] != new[c] for c in e["primary_key"])


def replay_cases(cap: Capture, tables: Sequence[Table]) -> dict[str, int]:
    """How many primary-key changes, updates leaving a TOASTed column out, and truncates the capture's
    format-2 events hold for ``tables``."""
    names = {t.qualified: t for t in tables}
    events = [e for e in cap.events[2] if e["table"] in names]
    return {
        "primary-key changes": sum(moves_key(e) for e in events),
        "updates leaving a TOASTed column out": sum(
            e["operation"] == "update" and bool(set(names[e["table"]].toast) - set(e["column_names"]))
            for e in events
        ),
        "truncates": sum(e["operation"] == "truncate" for e in events),
    }
