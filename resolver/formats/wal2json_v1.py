"""wal2json format-version 1: one transaction object per line, pretty-printed over lines, or written in
chunks; each transaction is read whole (its events, or its quarantine). See ``resolver.formats.wal2json``. No
Spark."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from resolver.formats.wal2json_items import Count, Event, Quarantined, base_row, not_utf8, table_of_record
from resolver.formats.wal2json_record import (
    BadRecord,
    parse_commit_time,
    parse_record,
    unexpected_failure,
    value_text,
)
from resolver.lsn import parse_lsn
from resolver.models import Format

__all__ = ["read_v1"]


def read_v1(numbered: Iterator[tuple[int, str, bytes | None]], source_file: str) -> Iterator[Any]:
    """One transaction object per line, or spread over several lines: pretty-print (a ``{`` line … a ``}``
    line) and write-in-chunks (a header ending in ``"change":[`` … a ``]}`` line)."""
    spread: _Spread | None = None
    for n, text, raw in numbered:
        if spread is not None and _begins_transaction(text):  # the previous one is still open
            yield spread.quarantined(_unclosed(f"the next transaction begins at line {n}"))
            spread = None
        if spread is not None:
            spread.add(n, text, raw)
            if text in ("}", "]}"):  # the closing line of a pretty-printed or chunked transaction
                yield from spread.close(source_file)
                spread = None
        elif raw is not None:
            yield Quarantined(n, not_utf8(raw), text, raw)
        elif text == "{" or text.endswith('"change":['):
            spread = _Spread(n, n, [text], [None])
        else:
            yield from _v1_transaction(text, n, n, source_file)
    if spread is not None:
        yield spread.quarantined(_unclosed("the file ends first"))


def _begins_transaction(text: str) -> bool:
    return (
        text == "{"
        or text.endswith('"change":[')
        or (text.startswith('{"') and '"change":[' in text and text.endswith("]}"))
    )


def _unclosed(why: str) -> str:
    return (
        f"incomplete transaction: the object that starts here has no closing line ({why}); it is not applied "
        "(rule: framing)"
    )


@dataclass(slots=True)
class _Spread:
    """A v1 transaction spread over lines ``start`` … ``last`` while it is read. A line of it that is not
    UTF-8 makes the whole object quarantined (read without that line, it could lose a change)."""

    start: int
    last: int
    texts: list[str]
    raws: list[bytes | None]
    bad: str | None = None  # why the first non-UTF-8 line is one

    def add(self, n: int, text: str, raw: bytes | None) -> None:
        self.last = n
        self.texts.append(text)
        self.raws.append(raw)
        if raw is not None and self.bad is None:
            self.bad = f"line {n}: {not_utf8(raw)}"

    def close(self, source_file: str) -> Iterator[Any]:
        if self.bad is not None:
            yield self.quarantined(None)
        else:
            yield from _v1_transaction("\n".join(self.texts), self.start, self.last, source_file)

    def quarantined(self, reason: str | None) -> Quarantined:
        raw_bytes = None
        if self.bad is not None:
            reason = f"{self.bad}; and {reason}" if reason else self.bad
            raw_bytes = b"\n".join(
                r if r is not None else t.encode() for t, r in zip(self.texts, self.raws, strict=True)
            )
        return Quarantined(self.start, reason or "", "\n".join(self.texts), raw_bytes, self.last)


def _v1_transaction(text: str, line: int, last: int, source_file: str) -> Iterator[Any]:
    """The transaction object on lines ``line`` … ``last``: its counts and events, or its quarantine."""
    try:
        obj = parse_record(text, Format.WAL2JSON_V1)
        events = _v1_events(obj, line, source_file)
    except BadRecord as e:
        yield Quarantined(line, str(e), text, None, last)
        return
    except Exception as e:  # a record the rules above did not foresee: it alone is quarantined
        yield Quarantined(line, unexpected_failure(e), text, None, last)
        return
    yield Count("transactions", 1, line, last)
    yield Count("messages", len(obj["change"]) - len(events))
    yield from events


def _v1_events(obj: dict[str, Any], line: int, source_file: str) -> list[Event]:
    commit_lsn = parse_lsn(obj["nextlsn"]) if "nextlsn" in obj else None
    commit_time = parse_commit_time(obj.get("timestamp"))
    xid = obj.get("xid")
    events = []
    for i, ch in enumerate(obj["change"]):
        kind = ch["kind"]
        if kind == "message":
            continue
        row = base_row(source_file, line, table_of_record(ch), kind)
        row.update(commit_lsn=commit_lsn, position=len(events), xid=xid, commit_time=commit_time)
        if "columnnames" in ch:
            _same_lengths(ch, f"data.change[{i}]", "columnnames", "columntypes", "columnvalues")
            row["column_names"] = ch["columnnames"]
            row["column_types"] = ch.get("columntypes")
            row["column_values"] = [value_text(v) for v in ch["columnvalues"]]
        if "oldkeys" in ch:
            ok = ch["oldkeys"]
            _same_lengths(ok, f"data.change[{i}].oldkeys", "keynames", "keytypes", "keyvalues")
            row["old_key_names"] = ok["keynames"]
            row["old_key_types"] = ok.get("keytypes")
            row["old_key_values"] = [value_text(v) for v in ok["keyvalues"]]
        if "pk" in ch:
            row["primary_key"] = ch["pk"]["pknames"]
        events.append(Event(row))
    return events


def _same_lengths(obj: dict[str, Any], path: str, names: str, *parallel: str) -> None:
    """Format 1 gives a change's names, types and values as parallel arrays: they must be as long."""
    for key in parallel:
        if key in obj and len(obj[key]) != len(obj[names]):
            raise BadRecord(
                f"{path}.{key}: found {len(obj[key])} items, expected {len(obj[names])} like {names} "
                "(rule: array-lengths)"
            )
