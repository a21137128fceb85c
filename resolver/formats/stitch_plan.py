"""Which fragments of a batch make one transaction (``plan_stitching``): the decision
``resolver.batch.stitch``
carries out in Spark, made from one row per file and role. Pure Python, no Spark.

A tail (B … end of file k), the middles of the files after it (no B or C) and a head (start of file m … C)
with the tail's commit LSN in the file right after them are one transaction: its rows get the commit LSN and
their positions continue across the cuts (``offset``: the change slots of the fragments before). A fragment
whose transaction goes on beyond the batch of a stream read in pieces (``ReadWindow``) is left
for a later batch (``Stitching.open_from`` names the file where the transaction left open at the end began);
any other fragment without partners is cut off (quarantined with rule ``framing``). A batch without any
framed file is a stream written without B/C (wal2json ``include-transaction=0``): its middles are events
without a commit LSN, each its own unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "CLOSED",
    "CUT_OFF",
    "LATER",
    "MATCHED",
    "UNFRAMED",
    "Part",
    "ReadWindow",
    "Stitching",
    "plan_stitching",
]

MATCHED, UNFRAMED, LATER, CUT_OFF = "matched", "unframed", "later", "cut-off"


@dataclass(frozen=True)
class ReadWindow:
    """Which ends of a batch's files lie inside a stream that goes on (``resolver run`` reads a format-2
    batch with its neighbouring files): with ``open_end`` a transaction begun in the last file and not
    committed there is left for the next batch instead of being quarantined; with ``open_start`` the first
    file was the previous batch's last, so the head of a transaction that batch completed is not
    quarantined either (``resolver.batch.read.read_wal2json``, ``plan_stitching``)."""

    open_start: bool = False
    open_end: bool = False


CLOSED = ReadWindow()
"""A batch that is the whole stream: a transaction left open at either end is cut off."""


@dataclass(frozen=True)
class Part:
    """One file's fragment of one role, from the aggregate: its commit LSN (tail, head), change events,
    lines and change slots."""

    file_index: int
    role: str
    lsn: int | None
    events: int
    lines: int
    slots: int


@dataclass
class Stitching:
    """What becomes of each fragment (``status`` per file and role: matched, unframed, later, cut-off),
    with the position offset and commit LSN of the matched ones, and what it adds to the batch's counts."""

    status: dict[tuple[int, str], tuple[str, int, int | None]] = field(default_factory=dict)
    events: int = 0  # events of stitched transactions and of unframed files
    quarantined: int = 0  # lines of fragments that found no partner
    transactions: int = 0  # transactions stitched together
    messages: int = 0  # message lines inside stitched transactions and unframed files
    open_from: int | None = None  # the file where a transaction left open at the batch's end began


def plan_stitching(parts: list[Part], files: int, window: ReadWindow = CLOSED) -> Stitching:
    """Chain each tail through the middles after it to a head with its commit LSN (pure Python, no Spark).
    ``parts`` also hold a ``whole`` part per file that has complete transactions (only its presence
    counts) and a ``bad`` part per file with quarantined lines (``lines``: how many): the stream is framed
    when any file has a tail, head or whole part; otherwise its middles are a stream without framing. A
    file with no tail, head or whole part and no middle (only unreadable lines, or nothing) lies inside a
    transaction that goes past it; each of its unreadable lines takes a change slot there."""
    by = {(p.file_index, p.role): p for p in parts}
    plan = Stitching()
    if all(p.role in ("middle", "bad") for p in parts):  # no framing anywhere: each record its own unit
        for p in (p for p in parts if p.role == "middle"):
            plan.status[(p.file_index, p.role)] = (UNFRAMED, 0, None)
            plan.events += p.events
            plan.messages += p.lines - p.events
        return plan
    inside = _Inside(by, files)
    for tail in sorted((p for p in parts if p.role == "tail"), key=lambda p: p.file_index):
        chain, f = [tail], tail.file_index + 1
        while inside(f):  # a middle, or a file of unreadable lines only (each a change slot)
            chain.append(
                by[(f, "middle")]
                if (f, "middle") in by
                else by.get((f, "bad"), Part(f, "bad", None, 0, 0, 0))
            )
            f += 1
        head = by.get((f, "head"))
        if head is not None and head.lsn == tail.lsn:  # (None for both: a stream without LSNs)
            chain.append(head)
            offset = 0
            for p in chain:
                if p.role == "bad":  # its lines are quarantined already; each one keeps its slot
                    offset += p.lines
                    continue
                plan.status[(p.file_index, p.role)] = (MATCHED, offset, tail.lsn)
                offset += p.slots
                plan.events += p.events
                plan.messages += p.lines - p.events - (p.role != "middle")  # less its B or C
            plan.transactions += 1
        elif f == files and window.open_end:  # the transaction goes on in files that have not landed yet
            for p in chain:
                if p.role != "bad":
                    plan.status[(p.file_index, p.role)] = (LATER, 0, None)
            plan.open_from = tail.file_index if plan.open_from is None else plan.open_from
    for p in sorted(parts, key=lambda p: p.file_index):
        if (p.file_index, p.role) in plan.status or p.role in ("whole", "bad"):
            continue
        if (window.open_start and _reaches_start(p, inside)) or (
            window.open_end and _reaches_end(p, inside, files)
        ):
            plan.status[(p.file_index, p.role)] = (LATER, 0, None)  # its begin is in an earlier batch
        else:
            plan.status[(p.file_index, p.role)] = (CUT_OFF, 0, None)
            plan.quarantined += p.lines
    return plan


class _Inside:
    """Whether file ``f`` can lie wholly inside a transaction: it has a middle, or no tail, head or
    complete transaction (unreadable lines only, or nothing)."""

    def __init__(self, by: dict[tuple[int, str], Part], files: int) -> None:
        self.with_parts = {f for f, role in by if role != "bad"}
        self.middles = {f for f, role in by if role == "middle"}
        self.files = files

    def __call__(self, f: int) -> bool:
        return 0 <= f < self.files and (f in self.middles or f not in self.with_parts)


def _reaches_start(p: Part, inside: _Inside) -> bool:
    """A head or middle whose transaction began before the batch's first file (only middles before it)."""
    if p.role == "tail":
        return False
    f = p.file_index - 1
    while inside(f):
        f -= 1
    return f < 0


def _reaches_end(p: Part, inside: _Inside, files: int) -> bool:
    """A tail or middle whose transaction goes on past the batch's last file (only middles after it)."""
    if p.role == "head":
        return False
    f = p.file_index + 1
    while inside(f):
        f += 1
    return f >= files
