"""Rows copied from a table in a snapshot, written as the wal2json format-2 records the stream would have
carried had each row been inserted at the snapshot's point: one transaction (``B``, an ``I`` per row, ``C``)
whose commit LSN is the slot's consistent point, so the rows a snapshot copies and the changes the slot
streams after it are one stream, read by the same reader (``resolver capture``, docs/capture.md).

A value is printed the way wal2json prints it (``../shared/reference/wal2json_spec.md`` section 5): the
output text of the column's type, in a session with the README's settings (ISO dates, UTC, hex bytea,
``extra_float_digits=1``); int2, int4, int8, oid, float4, float8 and numeric as an unquoted JSON number
(NaN and ±Infinity as ``null``), bool as ``true``/``false``, bytea as its hex digits without ``\\x``,
everything else (domains included) as a JSON string. The reader then types them exactly as it types
streamed values. No Spark, no database.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from resolver.lsn import format_lsn

__all__ = [
    "NUMBER_TYPES",
    "SnapshotColumn",
    "SnapshotTable",
    "insert_lines",
    "transaction_end",
    "transaction_head",
    "value_json",
]

#: base types wal2json prints as JSON numbers (by type OID: a domain over them is printed as a string)
NUMBER_TYPES = frozenset({"int2", "int4", "int8", "oid", "float4", "float8", "numeric"})
_SPECIAL_NUMBERS = frozenset({"NaN", "Infinity", "-Infinity"})
_DIGITS = re.compile(r"[-+0-9.eE]+")


@dataclass(frozen=True)
class SnapshotColumn:
    """A column as the catalog describes it: its name, its type as wal2json prints it
    (``format_type(atttypid, atttypmod)``) and its type's own name (``pg_type.typname``)."""

    name: str
    type: str
    typname: str

    def value(self, text: str | None) -> str:
        """The JSON text wal2json prints for this column's output text (``None`` is SQL NULL)."""
        return value_json(text, self.typname)


@dataclass(frozen=True)
class SnapshotTable:
    """A table to copy: its schema, name, columns in attribute order and primary-key columns (key order)."""

    schema: str
    name: str
    columns: tuple[SnapshotColumn, ...]
    primary_key: tuple[SnapshotColumn, ...] = ()

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


def value_json(text: str | None, typname: str) -> str:
    """A column's output text as wal2json format 2 prints it, as JSON text: a number with PostgreSQL's own
    digits (``3.540``, 20-digit integers), ``true``/``false``, ``null`` or a string."""
    if text is None:
        return "null"
    if typname in NUMBER_TYPES:
        if text in _SPECIAL_NUMBERS:
            return "null"
        if not _DIGITS.fullmatch(text):
            raise ValueError(f"a {typname} printed {text!r}: expected digits, sign, point and exponent only")
        return text
    if typname == "bool":
        return "true" if text in ("t", "true") else "false"  # bool's output text, or its cast to text
    if typname == "bytea":
        return _dumps(text.removeprefix("\\x"))  # wal2json prints the hex digits only
    return _dumps(text)


def transaction_head(
    lsn: int, taken: str, xid: int = 0, truncated: Sequence[SnapshotTable] = ()
) -> Iterator[str]:
    """A snapshot transaction's ``B`` and the ``T`` of each table of ``truncated``."""
    point = format_lsn(lsn)
    yield _dumps({"action": "B", "xid": xid, "timestamp": taken, "lsn": point, "nextlsn": point})
    for table in truncated:
        truncate = {"action": "T", "xid": xid, "timestamp": taken, "lsn": point, "schema": table.schema}
        yield _dumps({**truncate, "table": table.name})


def insert_lines(
    rows: Iterable[tuple[SnapshotTable, Sequence[str | None]]], lsn: int, taken: str, xid: int = 0
) -> Iterator[str]:
    """An ``I`` line per row of (table, output texts in column order)."""
    point = format_lsn(lsn)
    for table, values in rows:
        head = _dumps({"action": "I", "xid": xid, "timestamp": taken, "lsn": point, "schema": table.schema})
        columns = ",".join(
            f'{{"name":{_dumps(c.name)},"type":{_dumps(c.type)},"value":{c.value(v)}}}'
            for c, v in zip(table.columns, values, strict=True)
        )
        pk = _dumps([{"name": c.name, "type": c.type} for c in table.primary_key])
        yield f'{head[:-1]},"table":{_dumps(table.name)},"columns":[{columns}],"pk":{pk}}}'


def transaction_end(lsn: int, taken: str, xid: int = 0) -> str:
    """A snapshot transaction's ``C``."""
    point = format_lsn(lsn)
    return _dumps({"action": "C", "xid": xid, "timestamp": taken, "lsn": point, "nextlsn": point})


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
