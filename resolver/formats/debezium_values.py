"""Debezium column values as the text PostgreSQL prints, with their PostgreSQL type, from the Kafka Connect
schema of the envelope (``schemas.enable=true``). No Spark.

A change event's values are text typed later by the table's schema (``resolver.pgtypes``), exactly as for
wal2json; this module turns Debezium's encodings back into that text:

| Connect schema: name (type) | PostgreSQL type | Debezium's value -> text |
|---|---|---|
| int16, int32, int64 | smallint, integer, bigint | the number |
| float, double | real, double precision | the number; NaN, ±Infinity -> NULL |
| boolean | boolean | ``true`` / ``false`` |
| string | text | the string |
| ``…connect.data.Decimal`` (bytes) | numeric(p,s) | base64 unscaled -> digits |
| ``…data.VariableScaleDecimal`` (struct) | numeric | the same, own scale |
| ``…time.Date`` (int32 days) | date | ``YYYY-MM-DD`` |
| ``…time.MicroTimestamp``, ``Timestamp``, ``NanoTimestamp`` | timestamp | ``YYYY-MM-DD HH:MM:SS.ffffff`` |
| ``…time.ZonedTimestamp`` (string) | timestamp with time zone | the ISO string |
| ``…time.MicroTime``, ``Time``, ``NanoTime`` | time | ``HH:MM:SS.ffffff`` |
| ``…data.Json``, ``Uuid``, ``Xml``, ``…time.ZonedTime`` | json, uuid, xml, timetz | the string |
| bytes | bytea | base64 -> hex (as wal2json prints bytea) |
| array | ``<element>[]`` | a PostgreSQL array literal ``{a,"b c",NULL}`` |

(``…`` is ``org.apache.kafka.connect.`` for Decimal, ``io.debezium.`` otherwise.)

When the connector runs with ``column.propagate.source.type`` the schema names each column's own type
(``__debezium.source.column.type``, ``…length``, ``…scale``) and that type is used instead.
 Debezium's placeholder for an unchanged TOASTed value (``unavailable.value.placeholder``, default
``__debezium_unavailable_value``) comes as a string, as its UTF-8 bytes in base64 (bytea, decimals) or as an
array holding it; ``is_placeholder`` recognises every form: such a column is *absent* from the event (its
previous value carries on), never a value.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

__all__ = ["DEFAULT_PLACEHOLDER", "ColumnCodec", "codec_of", "is_placeholder", "plain_text"]

DEFAULT_PLACEHOLDER = "__debezium_unavailable_value"

_EPOCH = datetime(1970, 1, 1)
_INTS = {"int8": "smallint", "int16": "smallint", "int32": "integer", "int64": "bigint"}
_FLOATS = {"float": "real", "double": "double precision", "float32": "real", "float64": "double precision"}
_STRING_NAMES = {
    "io.debezium.data.Json": "json",
    "io.debezium.data.Uuid": "uuid",
    "io.debezium.data.Xml": "xml",
    "io.debezium.time.ZonedTime": "time with time zone",
    "io.debezium.data.Enum": "text",
}


class ColumnCodec:
    """How one column's values become text, and the PostgreSQL type it has (None: not known)."""

    __slots__ = ("pg_type", "text")

    def __init__(self, pg_type: str | None, text: Callable[[Any], str | None]) -> None:
        self.pg_type, self.text = pg_type, text


def codec_of(field: dict[str, Any]) -> ColumnCodec:
    """The codec of one field of the ``before``/``after`` struct schema."""
    name, kind = field.get("name"), field.get("type")
    params = field.get("parameters") or {}
    source_type = _source_type(params)
    if name == "org.apache.kafka.connect.data.Decimal":
        scale = int(params.get("scale", 0))
        precision = params.get("connect.decimal.precision")
        pg = f"numeric({precision},{scale})" if precision else "numeric"
        return ColumnCodec(source_type or pg, lambda v: _decimal(v, scale))
    if name == "io.debezium.data.VariableScaleDecimal":
        return ColumnCodec(source_type or "numeric", _variable_decimal)
    if name == "io.debezium.time.Date":
        return ColumnCodec(source_type or "date", _date)
    for suffix, per_second in (("MicroTimestamp", 10**6), ("NanoTimestamp", 10**9), ("Timestamp", 10**3)):
        if name == f"io.debezium.time.{suffix}":
            return ColumnCodec(source_type or "timestamp", _timestamp(per_second))
    if name == "io.debezium.time.ZonedTimestamp":
        return ColumnCodec(source_type or "timestamp with time zone", _same)
    for suffix, per_second in (("MicroTime", 10**6), ("NanoTime", 10**9), ("Time", 10**3)):
        if name == f"io.debezium.time.{suffix}":
            return ColumnCodec(source_type or "time", _time_of_day(per_second))
    if name == "io.debezium.time.Interval":
        return ColumnCodec(source_type or "interval", _interval)
    if name == "io.debezium.time.MicroDuration":  # microseconds, months taken as 30.4375 days: lossy
        return ColumnCodec(source_type or "interval", plain_text)
    if name in _STRING_NAMES:
        return ColumnCodec(source_type or _STRING_NAMES[name], _same)
    if kind in _FLOATS:
        return ColumnCodec(source_type or _FLOATS[kind], _float)
    if kind in _INTS or kind == "boolean":
        return ColumnCodec(source_type or _INTS.get(kind) or "boolean", plain_text)
    if kind == "bytes":
        return ColumnCodec(source_type or "bytea", _hex)
    if kind == "array":
        element = codec_of(field.get("items") or {})
        array_type = f"{element.pg_type}[]" if element.pg_type else None
        return ColumnCodec(source_type or array_type, lambda v: _array(v, element))
    if kind == "string" and source_type and source_type.startswith(("numeric", "decimal")):
        return ColumnCodec(source_type, _numeric_text)
    if kind == "string":
        return ColumnCodec(source_type or "text", _same)
    return ColumnCodec(source_type, plain_text)  # a type Debezium did not name: its JSON as text


def plain_text(v: Any) -> str | None:
    """A value without a schema (``schemas.enable=false``), as text: strings as they are, numbers with their
    literal digits, booleans ``true``/``false``, arrays as PostgreSQL array literals, objects as JSON."""
    if v is None or isinstance(v, str):
        return v
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, list):
        return _array(v, None)
    if isinstance(v, dict):
        return json.dumps(v, separators=(",", ":"))
    text = getattr(v, "text", None)  # the exact digits the decoder kept (resolver.formats.wal2json_record)
    return text if text is not None else str(v)


def is_placeholder(v: Any, placeholder: str) -> bool:
    """Whether ``v`` is Debezium's placeholder for an unchanged TOASTed value, in any of its forms."""
    if isinstance(v, str):
        return v == placeholder or v == _b64(placeholder)
    if isinstance(v, list):
        return len(v) == 1 and is_placeholder(v[0], placeholder)
    if isinstance(v, dict):  # VariableScaleDecimal
        return is_placeholder(v.get("value"), placeholder)
    return False


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _source_type(params: dict[str, Any]) -> str | None:
    """The column's own type from ``column.propagate.source.type``, spelled as wal2json would."""
    name = params.get("__debezium.source.column.type")
    if not name:
        return None
    name = str(name).lower()
    length, scale = (
        params.get("__debezium.source.column.length"),
        params.get("__debezium.source.column.scale"),
    )
    if name in ("numeric", "decimal"):  # without a precision Debezium reports 131089 (its own mark)
        fixed = length and 0 < int(length) <= 1000
        return f"numeric({length},{scale or 0})" if fixed else "numeric"
    if name.startswith("_"):  # PostgreSQL's name of an array type
        return name[1:] + "[]"
    return name


#: how Debezium writes a float's (Jackson) and a numeric's (decimal.handling.mode=string) special values
_NOT_FINITE = frozenset(("NaN", "Infinity", "-Infinity", "NAN", "POSITIVE_INFINITY", "NEGATIVE_INFINITY"))


def _float(v: Any) -> str | None:
    """A float; NaN and ±Infinity (Jackson writes them as the strings ``"NaN"``, ``"Infinity"``) are NULL, as
    wal2json prints them."""
    if v in _NOT_FINITE or (isinstance(v, float) and (v != v or v in (float("inf"), float("-inf")))):
        return None
    return plain_text(v)


def _numeric_text(v: Any) -> str | None:
    """A numeric sent as text (``decimal.handling.mode=string``): exact; NaN and ±Infinity are NULL."""
    return None if v in _NOT_FINITE else plain_text(v)


def _same(v: Any) -> str | None:
    return None if v is None else str(v)


def _unscaled(b64: str) -> int:
    return int.from_bytes(base64.b64decode(b64), "big", signed=True)


def _decimal(v: Any, scale: int) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):  # decimal.handling.mode=double or string: already a number or its text
        return plain_text(v)
    return _scaled(_unscaled(v), scale)


def _variable_decimal(v: Any) -> str | None:
    if v is None:
        return None
    return _scaled(_unscaled(v["value"]), int(v["scale"]))


def _scaled(unscaled: int, scale: int) -> str:
    """``unscaled`` x 10^-``scale`` as plain digits, exactly (a Decimal built from text is not rounded)."""
    return format(Decimal(f"{unscaled}E{-scale}"), "f")


def _date(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    return (date(1970, 1, 1) + timedelta(days=int(v))).isoformat()


def _timestamp(per_second: int) -> Callable[[Any], str | None]:
    def text(v: Any) -> str | None:
        if v is None:
            return None
        if isinstance(v, str):  # time.precision.mode=isostring
            return v
        seconds, rest = divmod(int(v), per_second)
        at = _EPOCH + timedelta(seconds=seconds, microseconds=rest * 10**6 // per_second)
        return at.isoformat(sep=" ")

    return text


def _time_of_day(per_second: int) -> Callable[[Any], str | None]:
    def text(v: Any) -> str | None:
        if v is None or isinstance(v, str):
            return v
        micros = int(v) * 10**6 // per_second
        hours, rest = divmod(micros, 3600 * 10**6)
        minutes, rest = divmod(rest, 60 * 10**6)
        seconds, micro = divmod(rest, 10**6)
        return f"{hours:02d}:{minutes:02d}:{seconds:02d}" + (f".{micro:06d}" if micro else "")

    return text


_ISO_INTERVAL = re.compile(r"^P(-?\d+)Y(-?\d+)M(-?\d+)DT(-?\d+)H(-?\d+)M(-?\d+(?:\.\d+)?)S$")


def _interval(v: Any) -> str | None:
    """``interval.handling.mode=string``'s ISO 8601 (``P1Y2M3DT4H5M6.5S``) as PostgreSQL prints an interval
    (IntervalStyle ``postgres``: ``1 year 2 mons 3 days 04:05:06.5``, ``-1 days +02:00:00``)."""
    if v is None:
        return None
    m = _ISO_INTERVAL.match(v)
    if m is None:
        return str(v)
    out, is_zero, is_before = [], True, False
    for value, unit in zip((int(g) for g in m.groups()[:3]), ("year", "mon", "day"), strict=True):
        if value:
            plus = "+" if is_before and value > 0 else ""
            out.append(f"{plus}{value} {unit}{'' if value == 1 else 's'}")
            is_before, is_zero = value < 0, False
    hours, minutes, seconds = int(m.group(4)), int(m.group(5)), Decimal(m.group(6))
    if is_zero or hours or minutes or seconds:
        sign = "-" if hours < 0 or minutes < 0 or seconds < 0 else ("+" if is_before else "")
        whole = int(abs(seconds))
        micros = int((abs(seconds) - whole) * 10**6)
        fraction = f".{micros:06d}".rstrip("0") if micros else ""
        out.append(f"{sign}{abs(hours):02d}:{abs(minutes):02d}:{whole:02d}{fraction}")
    return " ".join(out)


def _hex(v: Any) -> str | None:
    if v is None:
        return None
    return base64.b64decode(v).hex()


def _array(values: list[Any], element: ColumnCodec | None) -> str | None:
    """A PostgreSQL array literal: elements quoted when they need it, NULL unquoted."""
    if values is None:
        return None
    items = []
    for v in values:
        text = element.text(v) if element is not None else plain_text(v)
        if text is None:
            items.append("NULL")
        elif text == "" or text.upper() == "NULL" or any(c in _ARRAY_QUOTED for c in text):
            items.append('"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
        else:
            items.append(text)
    return "{" + ",".join(items) + "}"


_ARRAY_QUOTED = frozenset(' ,{}"\\\t\n\r\v\f')  # array_out quotes these, and whitespace
