"""wal2json format-version 2: one record per line, transactions framed by B … C records and buffered until
their C; a transaction cut by file boundaries becomes fragments (its tail, the middles of files without B
or C, its head) for ``resolver.batch.stitch`` to join. See
``resolver.formats.wal2json``. No Spark."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from resolver.formats.wal2json_items import (
    DATA_ACTIONS,
    Count,
    Event,
    Fragment,
    Quarantined,
    base_row,
    not_utf8,
    table_of_record,
)
from resolver.formats.wal2json_record import (
    BadRecord,
    parse_commit_time,
    unexpected_failure,
)
from resolver.formats.wal2json_typed import Columns, parse_v2
from resolver.lsn import parse_lsn

__all__ = ["read_v2"]


def _v2_event(
    rec: dict[str, Any], line: int, source_file: str, commit_lsn: int | None, pos: int
) -> dict[str, Any]:
    row = base_row(source_file, line, table_of_record(rec), DATA_ACTIONS[rec["action"]])
    row.update(
        commit_lsn=commit_lsn,
        position=pos,
        change_lsn=parse_lsn(rec["lsn"]) if rec.get("lsn") else None,
        xid=rec.get("xid"),
        commit_time=parse_commit_time(rec.get("timestamp")),
    )
    if "columns" in rec:
        cols: Columns = rec["columns"]
        row["column_names"], row["column_types"], row["column_values"] = cols
    if "identity" in rec:
        ids: Columns = rec["identity"]
        row["old_key_names"], row["old_key_types"], row["old_key_values"] = ids
    if "pk" in rec:
        row["primary_key"] = rec["pk"]
    return row


def _v2_change(
    line: _Line, rec: dict[str, Any], source_file: str, commit_lsn: int | None, pos: int
) -> Event | Quarantined:
    try:
        return Event(_v2_event(rec, line.n, source_file, commit_lsn, pos))
    except BadRecord as e:
        return Quarantined(line.n, str(e), line.raw)
    except Exception as e:  # a record the rules did not foresee: it alone is quarantined
        return Quarantined(line.n, unexpected_failure(e), line.raw)


class _Line(NamedTuple):
    """One v2 line while its transaction is buffered: the record, or the problem that stops it being read."""

    n: int
    raw: str
    rec: dict[str, Any] | None
    problem: Quarantined | None


def _changes(
    lines: list[_Line], source_file: str, commit_lsn: int | None
) -> Iterator[tuple[_Line, Event | Quarantined | Count | None]]:
    """What each line of a transaction becomes: its event (positions counted over changes, unreadable lines
    included, so a bad line keeps its slot), its quarantine record, a message count, or None (B, C)."""
    pos = 0
    for line in lines:
        rec = line.rec
        if line.problem is not None:
            yield line, line.problem
        elif rec is not None and rec["action"] in DATA_ACTIONS:
            yield line, _v2_change(line, rec, source_file, commit_lsn, pos)
        else:
            message = rec is not None and rec["action"] == "M"
            yield line, Count("messages", 1, line.n, line.n) if message else None
            continue
        pos += 1


def read_v2(numbered: Iterator[tuple[int, str, bytes | None]], source_file: str) -> Iterator[Any]:
    """Buffer each B … C transaction; emit its events at C. Lines before the first B that end in a C are the
    head of a transaction begun in an earlier file; a B still open at the end is a tail."""
    txn: list[_Line] | None = None
    head: list[_Line] = []  # lines outside any transaction (before the first B, or between C and B)
    framed = False  # seen any B or C in this file

    for n, text, raw_bytes in numbered:
        rec: dict[str, Any] | None = None
        problem: Quarantined | None = None
        if raw_bytes is not None:
            problem = Quarantined(n, not_utf8(raw_bytes), text, raw_bytes)
        else:
            try:
                rec = parse_v2(text)
            except BadRecord as e:
                problem = Quarantined(n, str(e), text)
        line = _Line(n, text, rec, problem)
        action = rec["action"] if rec is not None else None
        if action == "B":
            if txn is not None:
                yield from _incomplete(
                    txn, f"begun at line {txn[0].n} has no commit before the next begin at line {n}"
                )
            yield from _outside(head, framed)
            head, framed, txn = [], True, [line]
        elif action == "C":
            if txn is not None:
                yield Count("transactions", 1, txn[0].n, n)
                commit = _commit_lsn(txn[0], line)
                yield from (item for _, item in _changes(txn[1:], source_file, commit) if item is not None)
                txn = None
            elif not framed:  # the end of a transaction begun in an earlier file
                yield from _fragment("head", [*head, line], _commit_lsn(line), source_file)
                head = []
            else:
                yield from _incomplete([*head, line], f"commit at line {n} has no begin")
                head = []
            framed = True
        elif txn is not None:
            txn.append(line)
        elif action == "M" and rec is not None and not rec["transactional"]:
            yield Count("messages", 1, n, n)  # non-transactional messages stand outside B … C
        else:
            head.append(line)
    if txn is not None:
        yield from _fragment("tail", txn, _commit_lsn(txn[0]), source_file)
    if framed:
        yield from _outside(head, framed)
    else:  # no B/C in the whole file: the inside of a transaction, or a stream without framing (stitch.py)
        yield from _fragment("middle", head, None, source_file)


def _commit_lsn(*frame: _Line) -> int | None:
    """The commit position from a transaction's B or C record (their nextlsn is the same)."""
    for line in frame:
        if line.rec is not None and line.rec.get("nextlsn"):
            return parse_lsn(line.rec["nextlsn"])
    return None


def _outside(lines: list[_Line], framed: bool) -> Iterator[Quarantined]:
    """Lines between transactions. Unreadable lines keep their own reason; readable changes there were cut
    from their transaction."""
    if not lines:
        return
    if all(line.problem is not None for line in lines):
        yield from (line.problem for line in lines if line.problem is not None)
    elif framed:
        yield from _incomplete(lines, "stands outside any begin … commit")
    else:
        yield from _incomplete(lines, "has no begin in this file and no commit before the next begin")


def _incomplete(lines: list[_Line], why: str) -> Iterator[Quarantined]:
    for line in lines:
        reason = f"incomplete transaction: {why}; it is not applied (rule: framing)"
        if line.problem is not None:
            reason = f"{line.problem.reason}; and {reason}"
        yield Quarantined(
            line.n, reason, line.raw, line.problem.raw_bytes if line.problem is not None else None
        )


def _fragment(role: str, lines: list[_Line], commit_lsn: int | None, source_file: str) -> Iterator[Any]:
    """A transaction cut by the file boundary: each line becomes a Fragment (unreadable ones are quarantined
    at once), for ``resolver.batch.stitch`` to join with the other parts."""
    changes = list(_changes(lines, source_file, commit_lsn))
    slots = sum(1 for line, item in changes if item is not None and not isinstance(item, Count))
    for line, item in changes:
        if isinstance(item, Quarantined):
            yield item
        else:
            row = item.row if isinstance(item, Event) else None
            yield Fragment(role, line.n, line.raw, commit_lsn, row, slots)
