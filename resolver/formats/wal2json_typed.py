"""The common format-2 records (``B``, ``C``, ``I``, ``U``, ``D``: nearly every line of a stream, every line
of a snapshot's copy) decoded straight into typed structs by msgspec, in one pass of C, instead of Python's
JSON decoder followed by the JSON Schema's checks (``resolver.formats.wal2json_record``), which took about
60-65% of the reader's time (a line of 6 columns: about 40% decoding, 20-25% the schema's checks).

The structs say what ``schemas/wal2json/v2.json`` says of these five records (the same fields, required ones
and types, closed objects, the LSN pattern, the xid's range, scalar values), and msgspec is at least as
strict as Python's decoder (control characters, lone surrogates, ``NaN``, trailing data: refused). So a line
they accept is one the schema accepts, read to the same record; a line they refuse, or a ``T`` or ``M``, is
read again the full way, which gives it its exact quarantine reason (``parse_v2``). Duplicate keys keep the
last value, as Python's decoder does.

A column value keeps its exact JSON text (``msgspec.Raw``): the record holds it as the text the reader
stores (``value_text``), a number's own digits, ``true``/``false``, a string's content, or None.
No Spark.
"""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

import msgspec
from msgspec import UNSET, Meta, Raw, UnsetType

from resolver.formats.wal2json_record import check_lsns, parse_record, value_text
from resolver.models import Format

__all__ = ["Columns", "parse_v2", "typed_record"]

_Lsn = Annotated[str, Meta(pattern=r"\A[0-9A-F]+/[0-9A-F]+\Z")]  # \Z: no line end after it, as the schema
_Xid = Annotated[int, Meta(ge=0, le=4294967295)]
_Origin = Annotated[int, Meta(ge=0)]


class _Column(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str
    value: Raw
    type: str | UnsetType = UNSET
    typeoid: int | UnsetType = UNSET
    optional: bool | UnsetType = UNSET
    position: Annotated[int, Meta(ge=1)] | UnsetType = UNSET
    default: str | None | UnsetType = UNSET


class _IdentityColumn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str
    value: Raw
    type: str | UnsetType = UNSET
    typeoid: int | UnsetType = UNSET


class _PkColumn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str
    type: str | UnsetType = UNSET
    typeoid: int | UnsetType = UNSET


class _Frame(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, tag_field="action"):
    xid: _Xid | UnsetType = UNSET
    timestamp: str | UnsetType = UNSET
    origin: _Origin | UnsetType = UNSET
    lsn: _Lsn | UnsetType = UNSET


class _Begin(_Frame, tag="B"):
    nextlsn: _Lsn | UnsetType = UNSET


class _Commit(_Frame, tag="C"):
    nextlsn: _Lsn | UnsetType = UNSET


class _Change(_Frame, kw_only=True):
    table: str
    schema: str | UnsetType = UNSET
    pk: list[_PkColumn] | UnsetType = UNSET


class _Insert(_Change, kw_only=True, tag="I"):
    columns: list[_Column]


class _Update(_Change, kw_only=True, tag="U"):
    columns: list[_Column]
    identity: list[_IdentityColumn]


class _Delete(_Change, kw_only=True, tag="D"):
    identity: list[_IdentityColumn]


_decoder = msgspec.json.Decoder(_Begin | _Commit | _Insert | _Update | _Delete)
_FIELDS = ("xid", "timestamp", "origin", "lsn", "nextlsn", "schema", "table")
_ACTION = {_Begin: "B", _Commit: "C", _Insert: "I", _Update: "U", _Delete: "D"}
_LITERALS = {b"null": None, b"true": "true", b"false": "false"}


class Columns(NamedTuple):
    """A record's ``columns`` or ``identity`` as the reader stores them: the names, the types (None unless
    every column has one) and the values' text (``value_text``)."""

    names: list[str]
    types: list[str] | None
    values: list[str | None]


class _NotScalar(Exception):
    """A column value that is an array or an object: the schema refuses it, with its own reason."""


def parse_v2(text: str) -> dict[str, Any]:
    """One format-2 line decoded and validated, or ``BadRecord`` whose message is the quarantine reason,
    exactly as ``parse_record`` gives it. The record's fields are the line's, except ``columns`` and
    ``identity``, which are ``Columns``, and ``pk``, which is the key's column names."""
    rec = typed_record(text)
    if rec is None:  # the full way gives the exact reason (or accepts what the structs are too strict for)
        return _from_dict(parse_record(text, Format.WAL2JSON_V2))
    check_lsns(rec)
    return rec


def typed_record(text: str) -> dict[str, Any] | None:
    """The line's record read by the structs (its LSNs' range not checked yet), or None when they refuse
    it. No depth check first (``too_deep``, 14% of a 100-column line's read): a record the structs accept
    nests 3 levels, and deeper input fails in msgspec (``RecursionError`` past its limit, a type error or an
    unknown field before), to be read the full way, whose depth check refuses it as before."""
    try:
        return _as_record(_decoder.decode(text))
    except (msgspec.MsgspecError, RecursionError, _NotScalar):
        return None


def _as_record(typed: _Frame) -> dict[str, Any]:
    rec: dict[str, Any] = {"action": _ACTION[type(typed)]}
    for name in _FIELDS:
        value = getattr(typed, name, UNSET)
        if value is not UNSET:
            rec[name] = value
    columns = getattr(typed, "columns", UNSET)
    if columns is not UNSET:
        rec["columns"] = _columns(columns)
    identity = getattr(typed, "identity", UNSET)
    if identity is not UNSET:
        rec["identity"] = _columns(identity)
    pk = getattr(typed, "pk", UNSET)
    if pk is not UNSET:
        rec["pk"] = [c.name for c in pk]
    return rec


def _columns(cols: list[_Column] | list[_IdentityColumn]) -> Columns:
    types = [c.type for c in cols]
    return Columns(
        [c.name for c in cols],
        None if UNSET in types else types,  # type: ignore[arg-type]
        [_value_text(bytes(c.value)) for c in cols],
    )


def _value_text(raw: bytes) -> str | None:
    """A scalar's text as the reader stores it (``resolver.formats.wal2json_record.value_text``): a
    string's content, a number's literal digits, ``true``/``false``, or None."""
    first = raw[0]
    if first == 0x22:  # '"'
        return msgspec.json.decode(raw, type=str)
    if first == 0x5B or first == 0x7B:  # '[' or '{'
        raise _NotScalar
    if first in (0x6E, 0x74, 0x66):  # n, t, f: null, true, false
        return _LITERALS[raw]
    return raw.decode("ascii")  # a number


def _from_dict(rec: dict[str, Any]) -> dict[str, Any]:
    """A record read the full way (``parse_record``) in the same shape."""
    for key in ("columns", "identity"):
        if key in rec:
            cols = rec[key]
            rec[key] = Columns(
                [c["name"] for c in cols],
                [c["type"] for c in cols] if all("type" in c for c in cols) else None,
                [value_text(c["value"]) for c in cols],
            )
    if "pk" in rec:
        rec["pk"] = [c["name"] for c in rec["pk"]]
    return rec
