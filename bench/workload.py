"""A seeded synthetic CDC workload for one table, written as wal2json format-version-2 files.

The table is ``public.bench (id bigint primary key, val bigint, name text)``. A workload is

* a *target*: keys ``0 .. target_rows-1`` that exist before the batches, each with ``versions`` versions
  (one insert, then ``versions-1`` updates of every key). The target is never generated event by event in
  Python: its values are a formula (``base_val``, ``base_name``) that ``bench.lake`` also writes with Spark;
  ``target_wal2json`` writes the same rows as wal2json for small checks;
* ``batches`` batches of ``batch_events`` distinct change events each, in commit order, drawn from a mix of
  inserts (new keys above every key so far), updates and deletes of live keys. Keys come from the newest
  ``key_range`` fraction of the key space (``key_range=0.01``: recent entities) or from all of it (1.0),
  or from the newest ``key_window`` keys;
  ``one_per_key`` keeps every key to at most one event per batch;
* ``chain_length > 0`` makes a batch of primary-key-change chains instead: a live row moved
  ``chain_length`` times to fresh keys, the moves of different rows interleaved;
* delivery faults, per batch: ``duplicate_fraction`` (whole transactions sent twice, as a slot resends
  them), ``out_of_order_fraction`` (transactions written at a random other place of the file) and
  ``late_fraction`` (transactions of the previous batch held back and delivered in this one; only
  transactions all of whose keys the previous batch changes again later are held, so every held event is
  older than a change the lake already has for its key: *late* in the resolver's sense).

Everything is a function of the spec (``random.Random(seed)``).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field

__all__ = [
    "BASE_LSN",
    "KEY",
    "LSN_STEP",
    "TABLE",
    "TXN_ROWS",
    "Batch",
    "Change",
    "Spec",
    "Txn",
    "Workload",
    "base_lsn",
    "base_name",
    "base_time_us",
    "base_xid",
    "base_val",
    "generate",
    "target_wal2json",
    "write_wal2json",
]

TABLE = "public.bench"
KEY = "id"
TXN_ROWS = 1000
"""Rows per transaction of the target (key ``k`` of any version is at position ``k % 1000``)."""
BASE_LSN = 1 << 32
LSN_STEP = 1 << 12
T0_US = 1_790_000_000_000_000  # 2026-09-21 UTC, commit time of the first target transaction
_COMMIT_TAIL = 0x30


def base_val(key: int, version: int) -> int:
    return (key * 7919 + version * 104729) % 1_000_003


def base_name(key: int, version: int) -> str:
    return f"row {key} v{version}"


def _target_txns(target_rows: int) -> int:
    return (target_rows + TXN_ROWS - 1) // TXN_ROWS


def base_lsn(target_rows: int, key: int, version: int) -> int:
    """Commit LSN of the target transaction that wrote version ``version`` of ``key``."""
    return BASE_LSN + (version * _target_txns(target_rows) + key // TXN_ROWS) * LSN_STEP


def base_xid(target_rows: int, key: int, version: int) -> int:
    return 1000 + version * _target_txns(target_rows) + key // TXN_ROWS


def base_time_us(target_rows: int, key: int, version: int) -> int:
    return T0_US + (version * _target_txns(target_rows) + key // TXN_ROWS) * 1000


@dataclass(frozen=True)
class Spec:
    target_rows: int = 0
    versions: int = 1
    batch_events: int = 1000
    batches: int = 1
    insert: float = 0.2
    update: float = 0.7
    delete: float = 0.1
    key_range: float = 1.0
    key_window: int = 0  # > 0: keys from the newest ``key_window`` keys instead (overrides key_range)
    one_per_key: bool = False
    chain_length: int = 0
    duplicate_fraction: float = 0.0
    out_of_order_fraction: float = 0.0
    late_fraction: float = 0.0
    txn_max: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        if abs(self.insert + self.update + self.delete - 1.0) > 1e-9:
            raise ValueError(
                f"insert+update+delete must be 1, found {self.insert + self.update + self.delete}"
            )
        if self.versions < 1 or self.batch_events < 1 or self.batches < 1 or self.txn_max < 1:
            raise ValueError("versions, batch_events, batches and txn_max must be at least 1")
        if not 0 < self.key_range <= 1:
            raise ValueError(f"key_range must be in (0, 1], found {self.key_range}")


@dataclass(frozen=True)
class Change:
    op: str  # "I", "U" or "D"
    key: int  # the row's key after the change (I, U); the deleted key (D)
    old_key: int | None  # the identity sent (U, D)
    val: int | None
    name: str | None


@dataclass(frozen=True)
class Txn:
    lsn: int  # commit LSN (wal2json's nextlsn of B and C)
    xid: int
    time_us: int
    changes: tuple[Change, ...]


@dataclass
class Batch:
    txns: list[Txn]  # in delivery (file) order, duplicates included
    events: int = 0  # distinct events
    duplicates: int = 0  # extra copies delivered
    late: int = 0  # events older than a change an earlier batch delivered for the same key
    out_of_order: int = 0  # transactions moved away from their commit-order place in the file


@dataclass
class Workload:
    spec: Spec
    batches: list[Batch] = field(default_factory=list)
    chains: list[list[int]] = field(default_factory=list)  # keys each moved row went through, in order


class _Source:
    """The source table as far as the batches changed it; target keys not in ``rows`` hold base values."""

    def __init__(self, spec: Spec, rng: random.Random) -> None:
        self.spec, self.rng = spec, rng
        self.rows: dict[int, tuple[int, str] | None] = {}  # None: deleted
        self.next_key = spec.target_rows
        self.lsn = base_lsn(spec.target_rows, 0, spec.versions) + LSN_STEP
        self.xid = 10_000_000
        self.time_us = base_time_us(spec.target_rows, 0, spec.versions) + 1_000_000

    def live(self, key: int) -> bool:
        if key in self.rows:
            return self.rows[key] is not None
        return key < self.spec.target_rows

    def pick(self, avoid: set[int]) -> int | None:
        """A live key from the newest ``key_range`` of the key space, not in ``avoid``."""
        hi = self.next_key
        lo = hi - (self.spec.key_window or max(1, int(hi * self.spec.key_range)))
        for _ in range(200):
            k = self.rng.randrange(max(lo, 0), hi) if hi > 0 else -1
            if k >= 0 and k not in avoid and self.live(k):
                return k
        return None

    def txn(self, changes: list[Change]) -> Txn:
        self.lsn += LSN_STEP
        self.xid += 1
        self.time_us += self.rng.randrange(50, 5000)
        return Txn(self.lsn, self.xid, self.time_us, tuple(changes))

    def value(self) -> tuple[int, str]:
        v = self.rng.randrange(1_000_000)
        return v, f"name {v}"


def _mixed_batch(src: _Source, n: int) -> list[Txn]:
    spec, rng = src.spec, src.rng
    txns: list[Txn] = []
    seen: set[int] = set()
    left = n
    while left > 0:
        changes: list[Change] = []
        for _ in range(min(rng.randint(1, spec.txn_max), left)):
            r = rng.random()
            key = None if r < spec.insert else src.pick(seen if spec.one_per_key else set())
            if key is None:  # an insert (also when no live key is left to change)
                key = src.next_key
                src.next_key += 1
                val, name = src.value()
                src.rows[key] = (val, name)
                changes.append(Change("I", key, None, val, name))
            elif r < spec.insert + spec.update:
                val, name = src.value()
                src.rows[key] = (val, name)
                changes.append(Change("U", key, key, val, name))
            else:
                src.rows[key] = None
                changes.append(Change("D", key, key, None, None))
            seen.add(key)
        left -= len(changes)
        txns.append(src.txn(changes))
    return txns


def _chain_batch(src: _Source, n: int, chains: list[list[int]]) -> list[Txn]:
    """``n`` key changes: rows moved ``chain_length`` times each, moves of different rows interleaved."""
    spec, rng = src.spec, src.rng
    count = max(1, n // spec.chain_length)
    paths: list[list[int]] = []
    taken: set[int] = set()
    for _ in range(count):
        k = src.pick(taken)
        if k is None:
            raise ValueError("not enough live keys for the chains; raise target_rows")
        taken.add(k)
        paths.append([k])
    order = [i for i in range(count) for _ in range(spec.chain_length)]
    rng.shuffle(order)  # each row's moves stay in order; rows interleave
    txns = []
    for i in order:
        old = paths[i][-1]
        new = src.next_key
        src.next_key += 1
        val, name = src.value()
        src.rows[old] = None
        src.rows[new] = (val, name)
        paths[i].append(new)
        txns.append(src.txn([Change("U", new, old, val, name)]))
    chains.extend(paths)
    return txns


def _keys(t: Txn) -> set[int]:
    return {k for c in t.changes for k in (c.key, c.old_key) if k is not None}


def _hold_back(prev: list[Txn], want: int, rng: random.Random) -> list[Txn]:
    """Transactions of ``prev`` (about ``want`` events) all of whose keys ``prev`` changes again later (in a
    transaction that is never held: the last one of each key)."""
    last: dict[int, int] = {}
    for i, t in enumerate(prev):
        for k in _keys(t):
            last[k] = i
    candidates = [i for i, t in enumerate(prev) if all(last[k] > i for k in _keys(t))]
    rng.shuffle(candidates)
    held: list[int] = []
    events = 0
    for i in candidates:
        if events >= want:
            break
        held.append(i)
        events += len(prev[i].changes)
    return [prev[i] for i in sorted(held)]


def generate(spec: Spec) -> Workload:
    rng = random.Random(spec.seed)
    src = _Source(spec, rng)
    work = Workload(spec)
    held: list[Txn] = []  # the previous batch's transactions delivered late, in this batch
    for b in range(spec.batches):
        n = spec.batch_events - sum(len(t.changes) for t in held)
        own = _chain_batch(src, n, work.chains) if spec.chain_length else _mixed_batch(src, n)
        later: list[Txn] = []
        if spec.late_fraction and b + 1 < spec.batches:
            later = _hold_back(own, int(spec.late_fraction * spec.batch_events), rng)
            kept = set(map(id, later))
            own = [t for t in own if id(t) not in kept]
        txns = held + own
        batch = Batch(txns, events=sum(len(t.changes) for t in txns), late=sum(len(t.changes) for t in held))
        held = later
        moved = int(spec.out_of_order_fraction * len(txns))
        for i in rng.sample(range(len(txns)), moved):
            txns.insert(rng.randrange(len(txns)), txns.pop(i))
        batch.out_of_order = moved
        want = int(spec.duplicate_fraction * batch.events)
        while batch.duplicates < want:
            t = txns[rng.randrange(len(txns))]
            txns.insert(rng.randrange(len(txns) + 1), t)
            batch.duplicates += len(t.changes)
        work.batches.append(batch)
    return work


# --- wal2json ---------------------------------------------------------------------------------------------
def _lsn_text(v: int) -> str:
    return f"{v >> 32:X}/{v & 0xFFFFFFFF:X}"


def _ts(us: int) -> str:
    import datetime as dt

    t = dt.datetime.fromtimestamp(us // 1_000_000, dt.UTC)
    frac = f".{us % 1_000_000:06d}".rstrip("0") if us % 1_000_000 else ""
    return f"{t:%Y-%m-%d %H:%M:%S}{frac}+00"


_PK = '"pk":[{"name":"id","type":"bigint"}]}'


def _lines(t: Txn) -> list[str]:
    frame = (
        f'"xid":{t.xid},"timestamp":"{_ts(t.time_us)}","lsn":"{_lsn_text(t.lsn - _COMMIT_TAIL)}",'
        f'"nextlsn":"{_lsn_text(t.lsn)}"}}'
    )
    head = f'"xid":{t.xid},"timestamp":"{_ts(t.time_us)}",'
    out = [f'{{"action":"B",{frame}']
    for i, c in enumerate(t.changes):
        where = f'"lsn":"{_lsn_text(t.lsn - _COMMIT_TAIL - 0x100 * (len(t.changes) - i))}",'
        where += '"schema":"public","table":"bench",'
        ident = f'"identity":[{{"name":"id","type":"bigint","value":{c.old_key}}}],'
        if c.op == "D":
            out.append(f'{{"action":"D",{head}{where}{ident}{_PK}')
            continue
        cols = (
            f'"columns":[{{"name":"id","type":"bigint","value":{c.key}}},'
            f'{{"name":"val","type":"bigint","value":{c.val}}},'
            f'{{"name":"name","type":"text","value":{json.dumps(c.name)}}}],'
        )
        out.append(f'{{"action":"{c.op}",{head}{where}{cols}{ident if c.op == "U" else ""}{_PK}')
    out.append(f'{{"action":"C",{frame}')
    return out


def write_wal2json(txns: list[Txn], path: str) -> str:
    """Write transactions in the given order as one wal2json format-version-2 file; returns the path."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for t in txns:
            fh.write("\n".join(_lines(t)))
            fh.write("\n")
    return path


def target_wal2json(spec: Spec, path: str) -> str:
    """The target as wal2json (one insert per key, then ``versions-1`` updates), in ``TXN_ROWS``-row
    transactions: for checks on small targets (``bench.lake`` writes large targets with Spark)."""
    txns = []
    n = spec.target_rows
    for version in range(spec.versions):
        for start in range(0, n, TXN_ROWS):
            keys = range(start, min(start + TXN_ROWS, n))
            op = "I" if version == 0 else "U"
            changes = tuple(
                Change(op, k, None if op == "I" else k, base_val(k, version), base_name(k, version))
                for k in keys
            )
            lsn, xid, us = (
                base_lsn(n, start, version),
                base_xid(n, start, version),
                base_time_us(n, start, version),
            )
            txns.append(Txn(lsn, xid, us, changes))
    return write_wal2json(txns, path)
