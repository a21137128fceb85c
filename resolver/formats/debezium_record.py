"""What a Debezium line holds besides the change itself: the Kafka record around the value (its key, which
names the primary key, and the headers Debezium puts on a key change), and the columns' codecs from the
value's Connect schema. No Spark.

A key change is sent as a delete of the old key, a tombstone and a create of the new key. Debezium marks
both halves with a header holding the other half's key: ``__debezium.newkey`` on the delete and
``__debezium.oldkey`` on the create. When the headers are JSON (Kafka Connect's ``JsonConverter`` as the
header converter, what ``resolver``'s Kafka source lands and the embedded engine's JSON format write), the
create alone says which row moved, wherever the delete is (another file, micro-batch or partition).
Headers come as an object ``{name: value}`` or as Kafka's list ``[{"key": name, "value": text}]``; a value
is JSON, or text holding JSON; one that is neither (``SimpleHeaderConverter``'s ``Struct{id=1}``) is
ignored, and the two halves are then paired only when the create follows the delete in one file.
"""

from __future__ import annotations

import json
from typing import Any

from resolver.formats.debezium_values import ColumnCodec, codec_of

__all__ = ["NEW_KEY", "OLD_KEY", "codecs", "header_key", "is_whole_record", "key_names"]

OLD_KEY = "__debezium.oldkey"
NEW_KEY = "__debezium.newkey"


def is_whole_record(obj: Any) -> bool:
    """Whether a decoded line is a whole Kafka record ``{"key", "value", "headers"}``, not a value."""
    return isinstance(obj, dict) and "value" in obj and not {"op", "status", "payload"} & obj.keys()


def key_names(key: Any) -> list[str] | None:
    """The primary key's column names from a record's key (envelope or plain), if it has one."""
    fields = _fields(key)
    return list(fields) if fields else None


def header_key(headers: Any, name: str) -> dict[str, Any] | None:
    """The key a record's header ``name`` holds (its fields and values), if it holds one as JSON."""
    if isinstance(headers, list):
        found = [h.get("value") for h in headers if isinstance(h, dict) and h.get("key") == name]
        value = found[-1] if found else None
    else:
        value = headers.get(name) if isinstance(headers, dict) else None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return _fields(value)


def codecs(schema: dict[str, Any] | None) -> dict[str, ColumnCodec]:
    """Each column's codec, from the envelope's ``after`` (or ``before``) struct; none without a schema."""
    if not schema:
        return {}
    for part in schema.get("fields") or []:
        if part.get("field") in ("after", "before") and part.get("fields"):
            return {f["field"]: codec_of(f) for f in part["fields"]}
    return {}


def _fields(key: Any) -> dict[str, Any] | None:
    """A key's fields and values, from its envelope ``{"schema", "payload"}`` or as it is."""
    if not isinstance(key, dict):
        return None
    fields = key.get("payload") if "payload" in key and "schema" in key else key
    return fields if isinstance(fields, dict) and fields else None
