"""The Debezium input of ``bench.parse_speed``: the very events of a wal2json file (``bench.wal2json_input``)
written as Debezium's PostgreSQL connector would send them, so both formats hold the same N changes.

One whole Kafka record a line, as resolver's Kafka source lands them: ``{"topic", "partition",
"offset", "key", "value"}`` (partition 0, each topic's own offsets), key and value as Kafka Connect's
``JsonConverter`` writes them with ``schemas.enable=true`` (the envelope ``{"schema", "payload"}``, shaped
like ``tests/vectors/debezium/envelope.jsonl``, Debezium 3.6.1). The connector settings are the README's
("From Debezium"): ``decimal.handling.mode=string`` (numerics as text), ``column.propagate.source.type=.*``
(every column's schema names its PostgreSQL type); bytea as base64, timestamptz as a ZonedTimestamp, no
transaction metadata, a tombstone after every delete. The records of both tables are interleaved in commit
order, as one capture writes them (a landed micro-batch groups them by topic instead; the reader orders
events by their LSNs either way).

Each wal2json change becomes one record of topic ``dbz.public.<table>``: I -> ``op: c`` (``after``), U ->
``op: u`` (``after``; ``before`` null, REPLICA IDENTITY DEFAULT), D -> ``op: d`` (``before`` holds the key,
its other columns null) then a tombstone. ``source.lsn`` is the change's wal2json ``lsn``, ``txId`` its
``xid``, ``ts_us`` its commit time, ``sequence`` ``["<previous transaction's nextlsn>", "<lsn>"]`` (the
first transaction's previous commit is taken 0x30 before its first change).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
from collections.abc import Callable
from typing import Any

from bench.wal2json_input import Layout, split_in_two

__all__ = ["generate", "pg_array"]

_UTC = dt.UTC
_CUSTOMERS = [
    ("id", "bigint"),
    ("name", "text"),
    ("email", "text"),
    ("balance", "numeric(12,2)"),
    ("score", "double precision"),
    ("tags", "text[]"),
    ("profile", "jsonb"),
    ("avatar", "bytea"),
    ("notes", "text"),
    ("created_at", "timestamp with time zone"),
]
_ORDERS = [("customer_id", "bigint"), ("order_no", "integer"), ("amount", "numeric"), ("status", "text")]
_KEYS = {"customers": ["id"], "orders": ["customer_id", "order_no"]}
_COLUMNS = {"customers": [n for n, _ in _CUSTOMERS], "orders": [n for n, _ in _ORDERS]}

#: wal2json's type name -> (Connect schema of the column, its PostgreSQL type, length, scale as Debezium says)
_BIG = "2147483647"
_TYPES: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "bigint": ({"type": "int64"}, "INT8", "19", "0"),
    "integer": ({"type": "int32"}, "INT4", "10", "0"),
    "text": ({"type": "string"}, "TEXT", _BIG, "0"),
    "numeric(12,2)": ({"type": "string"}, "NUMERIC", "12", "2"),
    "numeric": ({"type": "string"}, "NUMERIC", "131089", "0"),
    "double precision": ({"type": "double"}, "FLOAT8", "17", "17"),
    "text[]": ({"type": "array", "items": {"type": "string", "optional": True}}, "_TEXT", _BIG, "0"),
    "jsonb": ({"type": "string", "name": "io.debezium.data.Json", "version": 1}, "JSONB", _BIG, "0"),
    "bytea": ({"type": "bytes"}, "BYTEA", _BIG, "0"),
    "timestamp with time zone": (
        {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1},
        "TIMESTAMPTZ",
        "35",
        "6",
    ),
}


def _column(name: str, pg: str, key: bool) -> dict[str, Any]:
    schema, source_type, length, scale = _TYPES[pg]
    out = {"type": schema["type"]}
    if "items" in schema:
        out["items"] = schema["items"]
    out["optional"] = not key
    out.update({k: v for k, v in schema.items() if k in ("name", "version")})
    out["parameters"] = {
        "__debezium.source.column.type": source_type,
        "__debezium.source.column.length": length,
        "__debezium.source.column.scale": scale,
    }
    out["field"] = name
    return out


def _f(kind: str, field: str, optional: bool = True, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "optional": optional, **extra, "field": field}


_SOURCE = {
    "type": "struct",
    "fields": [
        _f("string", "version", False),
        _f("string", "connector", False),
        _f("string", "name", False),
        _f("int64", "ts_ms", False),
        _f("string", "snapshot", name="io.debezium.data.Enum", version=1, default="false", parameters={
            "allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
        }),
        _f("string", "db", False),
        _f("string", "sequence"),
        _f("int64", "ts_us"),
        _f("int64", "ts_ns"),
        _f("string", "schema", False),
        _f("string", "table", False),
        _f("int64", "txId"),
        _f("int64", "lsn"),
        _f("int64", "xmin"),
        _f("string", "origin"),
        _f("int64", "origin_lsn"),
    ],
    "optional": False,
    "name": "io.debezium.connector.postgresql.Source",
    "version": 1,
    "field": "source",
}  # fmt: skip
_BLOCK = {
    "type": "struct",
    "fields": [_f("string", "id", False), _f("int64", "total_order", False),
               _f("int64", "data_collection_order", False)],
    "optional": True,
    "name": "event.block",
    "version": 1,
    "field": "transaction",
}  # fmt: skip


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _schemas(table: str, columns: list[tuple[str, str]]) -> tuple[str, str, str]:
    """(topic, key schema JSON, value schema JSON) of one table, as the connector writes them."""
    topic, keys = f"dbz.public.{table}", _KEYS[table]
    row = [_column(n, t, n in keys) for n, t in columns]
    key = {"type": "struct", "fields": [c for c in row if c["field"] in keys], "optional": False,
           "name": f"{topic}.Key"}  # fmt: skip
    image = {"type": "struct", "fields": row, "optional": True, "name": f"{topic}.Value"}
    value = {
        "type": "struct",
        "fields": [{**image, "field": "before"}, {**image, "field": "after"}, _SOURCE, _BLOCK,
                   _f("string", "op", False), *(_f("int64", f) for f in ("ts_ms", "ts_us", "ts_ns"))],
        "optional": False,
        "name": f"{topic}.Envelope",
        "version": 2,
    }  # fmt: skip
    return topic, _dumps(key), _dumps(value)


_TABLES = {t: _schemas(t, cols) for t, cols in (("customers", _CUSTOMERS), ("orders", _ORDERS))}


def pg_array(literal: str | None) -> list[str | None] | None:
    """A one-dimensional PostgreSQL array literal (``{a,"b c",NULL}``) as the list Debezium sends."""
    if literal is None:
        return None
    out: list[str | None] = []
    body, i = literal[1:-1], 0
    while i < len(body):
        if body[i] == '"':
            i, chars = i + 1, []
            while body[i] != '"':
                if body[i] == "\\":
                    i += 1
                chars.append(body[i])
                i += 1
            out.append("".join(chars))
            i += 2  # the closing quote and the comma
        else:
            end = body.find(",", i)
            end = len(body) if end < 0 else end
            out.append(None if body[i:end] == "NULL" else body[i:end])
            i = end + 1
    return out


def _zoned(text: str) -> str:
    """wal2json's ``2023-05-01 12:34:56.12+00`` as a ZonedTimestamp: ``2023-05-01T12:34:56.120000Z``."""
    at = dt.datetime.fromisoformat(text)
    return at.astimezone(_UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "numeric(12,2)": str,
    "numeric": str,
    "double precision": float,
    "text[]": pg_array,
    "bytea": lambda v: base64.b64encode(bytes.fromhex(v)).decode("ascii"),
    "timestamp with time zone": _zoned,
}


def _image(columns: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for c in columns:
        v, convert = c["value"], _CONVERT.get(c["type"])
        out[c["name"]] = v if v is None or convert is None else convert(v)
    return out


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def generate(directory: str, name: str, source: Layout) -> Layout:
    """Write the events of the wal2json file ``source`` as Debezium records, and the 2-file layout of the
    same cut at the same transaction boundary."""
    decode = json.JSONDecoder(parse_float=str).decode  # numerics keep every digit
    path = os.path.join(directory, name)
    events = lines = size = tombstones = 0
    cut, prev_commit, commit_us, order = 0, None, 0, 0
    offsets: dict[str, int] = {}
    buf: list[bytes] = []
    with open(source.path, "rb") as fi, open(path, "wb") as out:
        for raw in fi:
            rec = decode(raw.decode("utf-8"))
            action = rec["action"]
            if action == "B":
                stamp = dt.datetime.fromisoformat(rec["timestamp"])
                commit_us = int(stamp.timestamp()) * 1_000_000 + stamp.microsecond
                continue
            if action == "C":
                prev_commit = _lsn(rec["nextlsn"])
                if not cut and events >= source.events // 2:
                    cut = size + sum(map(len, buf))
                if len(buf) >= 4096:
                    out.write(b"".join(buf))
                    size, buf = size + sum(map(len, buf)), []
                continue
            table, lsn = rec["table"], _lsn(rec["lsn"])
            topic, key_schema, value_schema = _TABLES[table]
            prev_commit = lsn - 0x30 if prev_commit is None else prev_commit
            key_names = _KEYS[table]
            if action == "D":
                key = {c["name"]: c["value"] for c in rec["identity"]}
                before, after = {n: key.get(n) for n in _COLUMNS[table]}, None
            else:
                before, after = None, _image(rec["columns"])
                key = {n: after[n] for n in key_names}
            order += 1
            sent_us = commit_us + 180_000 + order % 7000  # when the connector handled it
            payload = {
                "before": before,
                "after": after,
                "source": {
                    "version": "3.6.1.Final", "connector": "postgresql", "name": "dbz",
                    "ts_ms": commit_us // 1000, "snapshot": "false", "db": "bench",
                    "sequence": f'["{prev_commit}","{lsn}"]', "ts_us": commit_us, "ts_ns": commit_us * 1000,
                    "schema": "public", "table": table, "txId": int(rec["xid"]), "lsn": lsn, "xmin": None,
                    "origin": None, "origin_lsn": None,
                },
                "transaction": None,
                "op": {"I": "c", "U": "u", "D": "d"}[action],
                "ts_ms": sent_us // 1000, "ts_us": sent_us, "ts_ns": sent_us * 1000 + order % 997,
            }  # fmt: skip
            key_json = f'{{"schema":{key_schema},"payload":{_dumps(key)}}}'
            value = f'{{"schema":{value_schema},"payload":{_dumps(payload)}}}'
            for v in (value, "null") if action == "D" else (value,):
                offset = offsets[topic] = offsets.get(topic, -1) + 1
                buf.append(
                    f'{{"topic":"{topic}","partition":0,"offset":{offset},"key":{key_json},"value":{v}}}\n'.encode()
                )
                lines += 1
            events += 1
            tombstones += action == "D"
        out.write(b"".join(buf))
        size += sum(map(len, buf))
    if events != source.events:
        raise ValueError(f"{source.path}: {events} changes read, its layout says {source.events}")
    parts = split_in_two(path, cut, size)
    expected = {"events": events, "quarantined": 0, "transactions": 0, "tombstones": tombstones}
    return Layout(
        path, parts, events, source.transactions, lines, size, [cut, size - cut], dict(source.ops),
        fmt="debezium-json", expected=expected,
    )  # fmt: skip
