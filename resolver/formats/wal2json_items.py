"""What the wal2json readers yield, one item per record or line: ``Event``, ``Quarantined``, ``Fragment``,
``Count`` (see ``resolver.formats.wal2json`` for how they account for every line), and the parts of an
event's row both formats share. No Spark."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from resolver.formats.names import qualified

__all__ = [
    "DATA_ACTIONS",
    "Count",
    "Event",
    "Fragment",
    "Quarantined",
    "base_row",
    "not_utf8",
    "table_of_record",
]

DATA_ACTIONS = {"I": "insert", "U": "update", "D": "delete", "T": "truncate"}


@dataclass(slots=True)
class Event:
    """A ChangeEvent as a plain dict (field names of ``resolver.models.ChangeEvent``)."""

    row: dict[str, Any]


@dataclass(slots=True)
class Quarantined:
    """A record that is not applied: its lines ``line`` … ``last`` (``last`` 0: just ``line``), why, and its
    text (the exact bytes too when they are not UTF-8)."""

    line: int
    reason: str
    raw: str
    raw_bytes: bytes | None = None
    last: int = 0


@dataclass(slots=True)
class Fragment:
    """One line of a format-2 transaction cut by a file boundary.

    ``role`` is ``"tail"`` (from a B to the end of the file), ``"head"`` (from the start of the file to a
    C) or ``"middle"`` (a whole file without B or C: the inside of a transaction that began in an earlier
    file and commits in a later one, or a stream written without B/C framing). ``row`` is the change's
    event (None for B, C and message lines) with ``position`` local to the fragment; ``commit_lsn`` comes
    from the fragment's B or C (None for a middle); ``slots`` is the number of change positions the whole
    fragment takes (its changes, unreadable lines included), what the next fragment's positions start
    after.
    """

    role: str
    line: int
    raw: str
    commit_lsn: int | None
    row: dict[str, Any] | None
    slots: int = 0


@dataclass(slots=True)
class Count:
    """A counter increment for the summary: ``transactions`` read, ``messages`` (not changes) skipped.

    ``line`` … ``last`` are the lines it stands for (0: none): a transaction's (v1 its object, v2 its
    B … C, the lines of its changes included) or a v2 message's own line. A v1 transaction's count of
    messages has none: they are inside its object."""

    name: str
    value: int
    line: int = 0
    last: int = 0


def not_utf8(raw: bytes) -> str:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8: byte 0x{raw[e.start]:02x} at offset {e.start} (rule: utf-8)"
    return "not UTF-8 (rule: utf-8)"


def base_row(source_file: str, line: int, table: str | None, op: str) -> dict[str, Any]:
    return {"table": table, "operation": op, "source_file": source_file, "source_line": line}


def table_of_record(rec: dict[str, Any]) -> str:
    return qualified(rec.get("schema", "public"), rec["table"])
