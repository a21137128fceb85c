"""Read wal2json output (format-version 1 and 2) into change events, in pure Python.

One call reads one file as a stream of lines and yields, in file order, what each record became:
an ``Event`` (a ChangeEvent as a dict), a ``Quarantined`` record (raw text + reason), a ``Fragment`` line
(part of a format-2 transaction that starts or ends in another file of the batch, see ``resolver.read``),
or a ``Count`` (transactions read, messages skipped). It never raises on bad input (a line nested deeper than
``MAX_JSON_DEPTH`` is quarantined before it is decoded; any other failure on one record quarantines that
record with rule ``reader-error``) and never holds more than one transaction in memory. Every record is
validated against the JSON Schemas in ``schemas/wal2json/``, compiled once per process.

Every non-blank input line ends in exactly one place, and the items say which lines they stand for:
a ``Quarantined`` record lines ``line`` … ``last``; a ``Fragment`` its ``line``; a ``Count`` with a ``line``
lines ``line`` … ``last`` (a transaction read: v1 its object, v2 its B … C; or a message outside any
transaction). An ``Event``'s ``source_line`` is its change's own line in v2 and its transaction's first
line in v1. The ranges of quarantined records, fragments, counted transactions and messages outside them,
and v2 events read without B/C framing, never overlap and cover every non-blank line; inside a v2
transaction's range, each line other than its B and C is exactly one event, quarantined change or message.

``detect_format`` tells the two formats apart from the first recognisable record of a file's head
(``file_head`` reads it), for ``resolver.read.resolve_format``.

Ordering (``../shared/reference/wal2json_spec.md`` section 7): a transaction's commit position is the end
of its commit record: v1 ``nextlsn``, v2 ``nextlsn`` of B and C (the same value in both formats, so the
two formats give the same events in the same order). ``position`` counts the transaction's changes
(insert/update/delete/truncate; messages are not changes). A change's own v2 ``lsn`` is kept as data only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache, lru_cache
from importlib import resources
from itertools import accumulate, chain, repeat
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import fastjsonschema

from resolver.models import Format
from resolver.names import qualified

__all__ = [
    "DETECT_LINES",
    "MAX_JSON_DEPTH",
    "Count",
    "Event",
    "FileHead",
    "Fragment",
    "Quarantined",
    "detect_format",
    "file_head",
    "format_lsn",
    "parse_lsn",
    "read_lines",
    "validator",
]

_DATA_ACTIONS = {"I": "insert", "U": "update", "D": "delete", "T": "truncate"}


# --- exact number text ------------------------------------------------------------------------------
class _Int(int):
    """A JSON integer that remembers its literal text (validates as an integer)."""

    text: str


class _Float(float):
    """A JSON number with a fraction or exponent that remembers its literal text (never used as a float)."""

    text: str


def _int(s: str) -> _Int | _Float:
    try:
        v = _Int(s)
    except ValueError:  # more digits than Python converts (4,300): a numeric value may have 131,072
        return _float(s)  # its text is what counts; as a float it is not an integer where one is required
    v.text = s
    return v


def _float(s: str) -> _Float:
    v = _Float(s)
    v.text = s
    return v


_decoder = json.JSONDecoder(parse_int=_int, parse_float=_float)


# --- nesting depth ----------------------------------------------------------------------------------
MAX_JSON_DEPTH = 64
"""The deepest nesting of arrays and objects a record may have. wal2json's own output nests at most 4 levels
(v1: transaction, change array, change, oldkeys/pk, their arrays; v2: record, columns array, column). Python's
JSON decoder recurses once per level and raises ``RecursionError`` near 1,000, so a line of thousands of
``[`` would otherwise stop the whole Spark task; deeper lines are quarantined (rule ``json-depth``) before
they are decoded."""

_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
_AS_BRACKETS = bytes.maketrans(b"{}", b"[]")
_DEPTH_STEP = bytes.maketrans(b"[]", b"\x02\x00")  # minus one below: +1 and -1


def _too_deep(text: str) -> bool:
    """Whether ``text`` nests arrays/objects deeper than ``MAX_JSON_DEPTH`` outside its strings.

    Cheap for every wal2json line: a line with at most that many ``[`` and ``{`` cannot be deeper (one
    count in C). Otherwise its structure is reduced, in C, to brackets: escapes dropped, everything but
    brackets and quotes dropped, string contents dropped; then innermost ``[]`` pairs are removed until
    none are left, one level per pass (a few passes for wal2json's 4 levels). Text that is not well nested
    (it will fail to decode anyway) is counted out bracket by bracket."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return False
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    data = data.translate(_AS_BRACKETS, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in data:
        data = b"".join(data.split(b'"')[::2])  # even pieces are outside strings
    peeled, levels = data, 0
    while peeled and levels <= MAX_JSON_DEPTH:
        shorter = peeled.replace(b"[]", b"")
        if len(shorter) == len(peeled):
            break
        peeled, levels = shorter, levels + 1
    if not peeled:
        return levels > MAX_JSON_DEPTH
    steps = data.translate(_DEPTH_STEP)
    return max(accumulate(map(int.__sub__, steps, repeat(1)))) > MAX_JSON_DEPTH


_DEPTH_REASON = f"JSON nested deeper than {MAX_JSON_DEPTH} levels (rule: json-depth)"


def _text(v: Any) -> str | None:
    """The exact text of a scalar JSON value as wal2json printed it."""
    if v is None or isinstance(v, str):
        return v
    if v is True or v is False:
        return "true" if v else "false"
    text = getattr(v, "text", None)
    return text if text is not None else json.dumps(v)


# --- positions and times ----------------------------------------------------------------------------
def parse_lsn(lsn: str) -> int:
    """``'16/B374D848'`` -> 64-bit integer."""
    hi, _, lo = lsn.partition("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def format_lsn(value: int) -> str:
    """64-bit integer -> ``'16/B374D848'``."""
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


@lru_cache(maxsize=4096)  # every record of a transaction repeats its commit time
def _commit_time(ts: str | None) -> datetime | None:
    if ts is None:
        return None
    try:
        return datetime.fromisoformat(ts).astimezone(UTC)
    except (ValueError, OverflowError):  # overflow: a time zone that moves it past year 1 or 9999
        raise _Bad(
            f"data.timestamp: found {ts!r}, expected an ISO timestamp such as '2026-11-21 15:58:51.52+00' "
            "(set DateStyle=ISO on the decoding session) (rule: format)"
        ) from None


# --- validation -------------------------------------------------------------------------------------
@cache
def validator(fmt: Format) -> Callable[[Any], Any]:
    """The compiled JSON Schema of one wal2json format (compiled once per process)."""
    name = "v1.json" if fmt is Format.WAL2JSON_V1 else "v2.json"
    schema = json.loads(_schema_text(name))
    definitions = schema.pop("definitions", {})
    full = fastjsonschema.compile(_inline(schema, definitions))
    # The v2 schema dispatches on "action" with if/then branches, which fastjsonschema evaluates by raising
    # and catching an exception per branch. Validating a known action against its own branch directly is the
    # same check, about 3x faster; anything else goes through the full schema for its exact error.
    branches = {
        rule["if"]["properties"]["action"]["const"]: fastjsonschema.compile(
            _inline(rule["then"], definitions)
        )
        for rule in schema.get("allOf", [])
        if "action" in rule.get("if", {}).get("properties", {})
    }
    if not branches:
        return full  # type: ignore[no-any-return]

    def validate(obj: Any) -> Any:
        action = obj.get("action") if isinstance(obj, dict) else None
        branch = branches.get(action) if isinstance(action, str) else None
        return (branch or full)(obj)

    return validate


def _inline(node: Any, definitions: dict[str, Any]) -> Any:
    """The schema with every ``{"$ref": "#/definitions/x"}`` replaced by its definition (ours are not
    recursive). fastjsonschema compiles a $ref to a function call per value; inlined, the same checks
    run about 2x faster. Error paths and rules are unchanged: they follow the data, not the schema."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/definitions/"):
            target = _inline(definitions[ref.removeprefix("#/definitions/")], definitions)
            rest = {k: _inline(v, definitions) for k, v in node.items() if k != "$ref"}
            return {**target, **rest} if rest else target
        return {k: _inline(v, definitions) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, definitions) for v in node]
    return node


def _schema_text(name: str) -> str:
    """A schema file: from the source tree's schemas/wal2json/ (a checkout), else from the installed wheel."""
    checkout = Path(__file__).resolve().parents[1] / "schemas" / "wal2json" / name
    if checkout.is_file():
        return checkout.read_text("utf-8")
    return resources.files("resolver.wal2json_schemas").joinpath(name).read_text("utf-8")


class _Bad(Exception):
    """A record that cannot be accepted; its message is the quarantine reason."""


def _unexpected(e: BaseException) -> str:
    """The quarantine reason for a failure the reader has no rule for (one line, the exception named)."""
    text = " ".join(str(e).split())
    text = text if len(text) <= 300 else text[:300] + "…"
    return f"the reader failed on this record: {type(e).__name__}: {text} (rule: reader-error)"


def _check_lsns(obj: dict[str, Any]) -> None:
    """The record's own LSNs are ones PostgreSQL prints (``%X/%X``: at most 8 hex digits each side) and fit
    the lake's signed 64-bit integers. The framing reads them later: a bad one is this record's fault, so
    it is found here."""
    for key in ("lsn", "nextlsn"):
        value = obj.get(key)
        if value:
            cut = value.find("/")  # the schema's pattern made sure there is one, between hex digits
            if cut > 8 or len(value) - cut > 9 or (cut == 8 and value[0] >= "8"):
                raise _Bad(
                    f"data.{key}: found {value!r}, expected at most 8 hex digits each side of '/' and a "
                    "value below 80000000/0 (rule: lsn-range)"
                )


def _parse(text: str, fmt: Format) -> dict[str, Any]:
    """Decode and validate one record; ``_Bad`` (its message the quarantine reason) whatever goes wrong."""
    if _too_deep(text):
        raise _Bad(_DEPTH_REASON)
    try:
        obj = _decoder.decode(text)
        validator(fmt)(obj)
        _check_lsns(obj)
    except json.JSONDecodeError as e:
        raise _Bad(f"not JSON: {e.msg} (line {e.lineno}, column {e.colno}) (rule: json-syntax)") from None
    except fastjsonschema.JsonSchemaValueException as e:
        path = e.name or "data"
        raise _Bad(f"{path}: {e.message.removeprefix(path + ' ')} (rule: {e.rule})") from None
    except RecursionError:
        raise _Bad(_DEPTH_REASON) from None
    except _Bad:
        raise
    except Exception as e:  # e.g. an integer of more than 4,300 digits
        raise _Bad(_unexpected(e)) from None
    return obj  # type: ignore[no-any-return]


# --- output records ---------------------------------------------------------------------------------
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

    ``role`` is ``"tail"`` (from a B to the end of the file) or ``"head"`` (from the start of the file to a
    C). ``row`` is the change's event (None for B, C and message lines) with ``position`` local to the
    fragment; ``commit_lsn`` comes from the fragment's B or C.
    """

    role: str
    line: int
    raw: str
    commit_lsn: int | None
    row: dict[str, Any] | None


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


# --- which format -----------------------------------------------------------------------------------
DETECT_LINES = 20
"""How many non-blank lines of a file's head ``detect_format`` looks through for a recognisable record (so a
corrupt first line, or the body of a transaction begun in an earlier file, does not decide)."""
_HEAD_BYTES = 64 * 1024  # of one line: a v1 transaction on one line can be huge, its start tells
_HEAD_LIMIT = 1 << 20  # read at most this much of a file's head
_V2_START = re.compile(rb'\{\s*"action"\s*:')  # wal2json prints "action" first
_V1_START = re.compile(  # the keys wal2json prints before "change", in its order
    rb'\{\s*(?:"(?:xid|nextlsn|timestamp|origin)"\s*:\s*(?:-?\d+|"[^"\\]*")\s*,\s*)*"change"\s*:\s*\['
)


def detect_format(lines: Iterable[bytes]) -> Format | None:
    """The wal2json format of the first recognisable record among ``lines`` (a file's lines, or the first
    bytes of each), looking through ``DETECT_LINES`` non-blank lines at most; None when none is recognisable.

    Format 2: an object with an ``"action"`` key. Format 1: a transaction object with a ``"change"`` array on
    one line, a line ``{`` (pretty-printed), or a header ending in ``"change":[`` (write-in-chunks). Other
    lines (garbage, a cut record, a write-in-chunks change) are passed over. Never raises on bad input."""
    looked = 0
    for line in lines:
        text = line.strip()
        if not text:
            continue
        fmt = _line_format(text)
        looked += 1
        if fmt is not None or looked >= DETECT_LINES:
            return fmt
    return None


def _line_format(text: bytes) -> Format | None:
    if text == b"{" or _V1_START.match(text):
        return Format.WAL2JSON_V1
    if _V2_START.match(text):
        return Format.WAL2JSON_V2
    decoded = text.decode("utf-8", "replace")
    try:  # other key orders: a whole line that is an object
        obj = None if _too_deep(decoded) else json.loads(decoded)
    except (ValueError, RecursionError):
        return None
    if isinstance(obj, dict) and "action" in obj:
        return Format.WAL2JSON_V2
    if isinstance(obj, dict) and isinstance(obj.get("change"), list):
        return Format.WAL2JSON_V1
    return None


class FileHead(NamedTuple):
    """What the head of one file shows: the format of its first recognisable record (None: none in its first
    ``DETECT_LINES`` non-blank lines), and its first non-blank line, cut short (None: the file has none)."""

    format: Format | None
    first: bytes | None


def file_head(path: str) -> FileHead:
    """Read the head of a file, only as far as its first recognisable record (see ``detect_format``)."""
    with open(path, "rb") as fh:
        heads = _line_heads(fh)
        first = next((h for h in heads if h.strip()), None)
        if first is None:
            return FileHead(None, None)
        return FileHead(detect_format(chain([first], heads)), first.strip()[:200])


def _line_heads(fh: BinaryIO) -> Iterator[bytes]:
    """The lines of ``fh``, each cut to its first ``_HEAD_BYTES`` (the rest skipped only if the next line is
    wanted), until ``_HEAD_LIMIT`` bytes were read."""
    read = 0
    while read < _HEAD_LIMIT:
        line = fh.readline(_HEAD_BYTES)
        if not line:
            return
        read += len(line)
        yield line
        while not line.endswith(b"\n") and read < _HEAD_LIMIT:
            line = fh.readline(_HEAD_BYTES)
            if not line:
                return
            read += len(line)


# --- readers ----------------------------------------------------------------------------------------
def read_lines(
    lines: Iterable[bytes], source_file: str, fmt: Format
) -> Iterator[Event | Quarantined | Fragment | Count]:
    """Read one file's lines (bytes, with or without line ends) as one wal2json stream."""
    numbered = _decode(lines)
    if fmt is Format.WAL2JSON_V1:
        yield from _read_v1(numbered, source_file)
    else:
        yield from _read_v2(numbered, source_file)


def _decode(lines: Iterable[bytes]) -> Iterator[tuple[int, str, bytes | None]]:
    """(line number, text, raw bytes when not UTF-8) for each non-blank line."""
    for n, b in enumerate(lines, 1):
        b = b.rstrip(b"\r\n")
        if not b.strip():
            continue
        try:
            yield n, b.decode("utf-8"), None
        except UnicodeDecodeError:
            yield n, b.decode("utf-8", "replace"), b


def _not_utf8(raw: bytes) -> str:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8: byte 0x{raw[e.start]:02x} at offset {e.start} (rule: utf-8)"
    return "not UTF-8 (rule: utf-8)"


def _base(source_file: str, line: int, table: str | None, op: str) -> dict[str, Any]:
    return {"table": table, "operation": op, "source_file": source_file, "source_line": line}


def _qualified(rec: dict[str, Any]) -> str:
    return qualified(rec.get("schema", "public"), rec["table"])


# format-version 1 ------------------------------------------------------------------------------------
def _read_v1(numbered: Iterator[tuple[int, str, bytes | None]], source_file: str) -> Iterator[Any]:
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
            yield Quarantined(n, _not_utf8(raw), text, raw)
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
            self.bad = f"line {n}: {_not_utf8(raw)}"

    def close(self, source_file: str) -> Iterator[Any]:
        if self.bad is not None:
            yield self.quarantined(None)
        else:
            yield from _v1_transaction("\n".join(self.texts), self.start, self.last, source_file)

    def quarantined(self, reason: str | None) -> Quarantined:
        raw_bytes = None
        if self.bad is not None:
            reason = f"{self.bad}; and {reason}" if reason else self.bad
            raw_bytes = b"\n".join(r if r is not None else t.encode() for t, r in zip(self.texts, self.raws))
        return Quarantined(self.start, reason or "", "\n".join(self.texts), raw_bytes, self.last)


def _v1_transaction(text: str, line: int, last: int, source_file: str) -> Iterator[Any]:
    """The transaction object on lines ``line`` … ``last``: its counts and events, or its quarantine."""
    try:
        obj = _parse(text, Format.WAL2JSON_V1)
        events = _v1_events(obj, line, source_file)
    except _Bad as e:
        yield Quarantined(line, str(e), text, None, last)
        return
    except Exception as e:  # a record the rules above did not foresee: it alone is quarantined
        yield Quarantined(line, _unexpected(e), text, None, last)
        return
    yield Count("transactions", 1, line, last)
    yield Count("messages", len(obj["change"]) - len(events))
    yield from events


def _v1_events(obj: dict[str, Any], line: int, source_file: str) -> list[Event]:
    commit_lsn = parse_lsn(obj["nextlsn"]) if "nextlsn" in obj else None
    commit_time = _commit_time(obj.get("timestamp"))
    xid = obj.get("xid")
    events = []
    for i, ch in enumerate(obj["change"]):
        kind = ch["kind"]
        if kind == "message":
            continue
        row = _base(source_file, line, _qualified(ch), kind)
        row.update(commit_lsn=commit_lsn, position=len(events), xid=xid, commit_time=commit_time)
        if "columnnames" in ch:
            _same_lengths(ch, f"data.change[{i}]", "columnnames", "columntypes", "columnvalues")
            row["column_names"] = ch["columnnames"]
            row["column_types"] = ch.get("columntypes")
            row["column_values"] = [_text(v) for v in ch["columnvalues"]]
        if "oldkeys" in ch:
            ok = ch["oldkeys"]
            _same_lengths(ok, f"data.change[{i}].oldkeys", "keynames", "keytypes", "keyvalues")
            row["old_key_names"] = ok["keynames"]
            row["old_key_types"] = ok.get("keytypes")
            row["old_key_values"] = [_text(v) for v in ok["keyvalues"]]
        if "pk" in ch:
            row["primary_key"] = ch["pk"]["pknames"]
        events.append(Event(row))
    return events


def _same_lengths(obj: dict[str, Any], path: str, names: str, *parallel: str) -> None:
    """Format 1 gives a change's names, types and values as parallel arrays: they must be as long."""
    for key in parallel:
        if key in obj and len(obj[key]) != len(obj[names]):
            raise _Bad(
                f"{path}.{key}: found {len(obj[key])} items, expected {len(obj[names])} like {names} "
                "(rule: array-lengths)"
            )


# format-version 2 ------------------------------------------------------------------------------------
def _v2_event(
    rec: dict[str, Any], line: int, source_file: str, commit_lsn: int | None, pos: int
) -> dict[str, Any]:
    row = _base(source_file, line, _qualified(rec), _DATA_ACTIONS[rec["action"]])
    row.update(
        commit_lsn=commit_lsn,
        position=pos,
        change_lsn=parse_lsn(rec["lsn"]) if rec.get("lsn") else None,
        xid=rec.get("xid"),
        commit_time=_commit_time(rec.get("timestamp")),
    )
    if "columns" in rec:
        cols = rec["columns"]
        row["column_names"] = [c["name"] for c in cols]
        row["column_types"] = [c["type"] for c in cols] if all("type" in c for c in cols) else None
        row["column_values"] = [_text(c["value"]) for c in cols]
    if "identity" in rec:
        ids = rec["identity"]
        row["old_key_names"] = [c["name"] for c in ids]
        row["old_key_types"] = [c["type"] for c in ids] if all("type" in c for c in ids) else None
        row["old_key_values"] = [_text(c["value"]) for c in ids]
    if "pk" in rec:
        row["primary_key"] = [c["name"] for c in rec["pk"]]
    return row


def _v2_change(
    line: _Line, rec: dict[str, Any], source_file: str, commit_lsn: int | None, pos: int
) -> Event | Quarantined:
    try:
        return Event(_v2_event(rec, line.n, source_file, commit_lsn, pos))
    except _Bad as e:
        return Quarantined(line.n, str(e), line.raw)
    except Exception as e:  # a record the rules did not foresee: it alone is quarantined
        return Quarantined(line.n, _unexpected(e), line.raw)


class _Line(NamedTuple):
    """One v2 line while its transaction is buffered: the record, or the problem that stops it being read."""

    n: int
    raw: str
    rec: dict[str, Any] | None
    problem: Quarantined | None


def _changes(
    lines: list[_Line], source_file: str, commit_lsn: int | None, numbered: bool = True
) -> Iterator[tuple[_Line, Event | Quarantined | Count | None]]:
    """What each line of a transaction becomes: its event (positions counted over changes, unreadable lines
    included, so a bad line keeps its slot), its quarantine record, a message count, or None (B, C)."""
    pos = 0
    for line in lines:
        rec = line.rec
        if line.problem is not None:
            yield line, line.problem
        elif rec is not None and rec["action"] in _DATA_ACTIONS:
            yield line, _v2_change(line, rec, source_file, commit_lsn, pos)
        else:
            message = rec is not None and rec["action"] == "M"
            yield line, Count("messages", 1, line.n, line.n) if message else None
            continue
        pos += numbered


def _read_v2(numbered: Iterator[tuple[int, str, bytes | None]], source_file: str) -> Iterator[Any]:
    """Buffer each B … C transaction; emit its events at C. Lines before the first B that end in a C are the
    head of a transaction begun in an earlier file; a B still open at the end is a tail."""
    txn: list[_Line] | None = None
    head: list[_Line] = []  # lines outside any transaction (before the first B, or between C and B)
    framed = False  # seen any B or C in this file

    for n, text, raw_bytes in numbered:
        rec: dict[str, Any] | None = None
        problem: Quarantined | None = None
        if raw_bytes is not None:
            problem = Quarantined(n, _not_utf8(raw_bytes), text, raw_bytes)
        else:
            try:
                rec = _parse(text, Format.WAL2JSON_V2)
            except _Bad as e:
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
    else:  # no B/C in the whole file (include-transaction=0): each record is its own unit
        yield from (item for _, item in _changes(head, source_file, None, numbered=False) if item is not None)


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
    at once), for ``resolver.read`` to join with the other part."""
    for line, item in _changes(lines, source_file, commit_lsn):
        if isinstance(item, Quarantined):
            yield item
        else:
            yield Fragment(role, line.n, line.raw, commit_lsn, item.row if isinstance(item, Event) else None)
