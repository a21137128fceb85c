"""One wal2json record, decoded and validated, in pure Python: numbers keep their exact text, nesting deeper
than ``MAX_JSON_DEPTH`` is refused before decoding, and the record is checked against the JSON Schemas in
``schemas/wal2json/`` (compiled once per process). Whatever goes wrong raises ``BadRecord``, whose message is
the quarantine reason with its rule; the readers (``resolver.formats.wal2json_v1``,
``resolver.formats.wal2json_v2``)
never let any other exception out."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache, lru_cache
from importlib import resources
from itertools import accumulate, repeat
from pathlib import Path
from typing import Any

import fastjsonschema

from resolver.models import Format

__all__ = [
    "MAX_JSON_DEPTH",
    "BadRecord",
    "check_lsns",
    "check_record",
    "decode_json",
    "parse_commit_time",
    "parse_record",
    "too_deep",
    "unexpected_failure",
    "validator",
    "value_text",
]


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


def too_deep(text: str) -> bool:
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


def value_text(v: Any) -> str | None:
    """The exact text of a scalar JSON value as wal2json printed it."""
    if v is None or isinstance(v, str):
        return v
    if v is True or v is False:
        return "true" if v else "false"
    text = getattr(v, "text", None)
    return text if text is not None else json.dumps(v)


# --- commit times -----------------------------------------------------------------------------------
@lru_cache(maxsize=4096)  # every record of a transaction repeats its commit time
def parse_commit_time(ts: str | None) -> datetime | None:
    if ts is None:
        return None
    try:
        return datetime.fromisoformat(ts).astimezone(UTC)
    except (ValueError, OverflowError):  # overflow: a time zone that moves it past year 1 or 9999
        raise BadRecord(
            f"data.timestamp: found {ts!r}, expected an ISO timestamp such as '2026-11-21 15:58:51.52+00' "
            "(set DateStyle=ISO on the decoding session) (rule: format)"
        ) from None


# --- validation -------------------------------------------------------------------------------------
@cache
def validator(fmt: Format) -> Callable[[Any], Any]:
    """The compiled JSON Schema of one wal2json format (compiled once per process)."""
    schema = json.loads(_schema_text(_SCHEMA_FILES[fmt]))
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


#: each format's JSON Schema: (folder under schemas/, file)
_SCHEMA_FILES = {
    Format.WAL2JSON_V1: ("wal2json", "v1.json"),
    Format.WAL2JSON_V2: ("wal2json", "v2.json"),
    Format.DEBEZIUM_JSON: ("debezium", "change.json"),
}


def _schema_text(where: tuple[str, str]) -> str:
    """A schema file: from the source tree's schemas/ (a checkout), else from the installed wheel."""
    folder, name = where
    checkout = Path(__file__).resolve().parents[2] / "schemas" / folder / name
    if checkout.is_file():
        return checkout.read_text("utf-8")
    return resources.files(f"resolver.{folder}_schemas").joinpath(name).read_text("utf-8")


class BadRecord(Exception):
    """A record that cannot be accepted; its message is the quarantine reason."""


def unexpected_failure(e: BaseException) -> str:
    """The quarantine reason for a failure the reader has no rule for (one line, the exception named)."""
    text = " ".join(str(e).split())
    text = text if len(text) <= 300 else text[:300] + "…"
    return f"the reader failed on this record: {type(e).__name__}: {text} (rule: reader-error)"


def check_lsns(obj: dict[str, Any]) -> None:
    """The record's own LSNs are ones PostgreSQL prints (``%X/%X``: at most 8 hex digits each side) and fit
    the lake's signed 64-bit integers. The framing reads them later: a bad one is this record's fault, so
    it is found here."""
    for key in ("lsn", "nextlsn"):
        value = obj.get(key)
        if value:
            cut = value.find("/")  # the schema's pattern made sure there is one, between hex digits
            if cut > 8 or len(value) - cut > 9 or (cut == 8 and value[0] >= "8"):
                raise BadRecord(
                    f"data.{key}: found {value!r}, expected at most 8 hex digits each side of '/' and a "
                    "value below 80000000/0 (rule: lsn-range)"
                )


def parse_record(text: str, fmt: Format) -> dict[str, Any]:
    """Decode and validate one record; ``BadRecord`` (its message the quarantine reason) for whatever is
    wrong."""
    return check_record(decode_json(text), fmt)


def decode_json(text: str) -> Any:
    """Decode one line (numbers keep their exact text); ``BadRecord`` when it is not JSON or too deep."""
    if too_deep(text):
        raise BadRecord(_DEPTH_REASON)
    try:
        return _decoder.decode(text)
    except json.JSONDecodeError as e:
        raise BadRecord(
            f"not JSON: {e.msg} (line {e.lineno}, column {e.colno}) (rule: json-syntax)"
        ) from None
    except RecursionError:
        raise BadRecord(_DEPTH_REASON) from None
    except Exception as e:  # e.g. an integer of more than 4,300 digits
        raise BadRecord(unexpected_failure(e)) from None


def check_record(obj: Any, fmt: Format) -> dict[str, Any]:
    """Validate a decoded record against its format's JSON Schema; ``BadRecord`` for whatever is wrong."""
    try:
        validator(fmt)(obj)
        check_lsns(obj)
    except fastjsonschema.JsonSchemaValueException as e:
        path = e.name or "data"
        raise BadRecord(f"{path}: {e.message.removeprefix(path + ' ')} (rule: {e.rule})") from None
    except RecursionError:
        raise BadRecord(_DEPTH_REASON) from None
    except BadRecord:
        raise
    except Exception as e:  # e.g. an integer of more than 4,300 digits
        raise BadRecord(unexpected_failure(e)) from None
    return obj  # type: ignore[no-any-return]
