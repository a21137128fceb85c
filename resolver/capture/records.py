"""Rows copied from a table in a snapshot, written as the wal2json format-2 records the stream would have
carried had each row been inserted at the snapshot's point: one transaction (``B``, an ``I`` per row, ``C``)
whose commit LSN is the slot's consistent point, so the rows a snapshot copies and the changes the slot
streams after it are one stream, read by the same reader (``resolver capture``, docs/capture.md).

The ``I`` lines are printed by PostgreSQL itself (``insert_query``: a query of one text column, the line,
for ``COPY ... TO STDOUT``), so the copy moves bytes and never handles a row. A value is printed the way
wal2json prints it (``../shared/reference/wal2json_spec.md`` section 5): the output text of the column's
type, in a session with the README's settings (ISO dates, UTC, hex bytea, ``extra_float_digits=1``); int2,
int4, int8, oid, float4, float8 and numeric as an unquoted JSON number (NaN and ±Infinity as ``null``), bool
as ``true``/``false``, bytea as its hex digits without ``\\x``, everything else (domains included) as a JSON
string (``to_json`` of the text). The reader then types them exactly as it types streamed values. The
``B``, ``T`` and ``C`` lines are printed here. No Spark, no connection; psycopg's ``sql`` only when
a query is built.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from resolver.lsn import format_lsn

if TYPE_CHECKING:
    from psycopg import sql

__all__ = [
    "NUMBER_TYPES",
    "SnapshotColumn",
    "SnapshotTable",
    "insert_query",
    "transaction_end",
    "transaction_head",
]

#: base types wal2json prints as JSON numbers (by type OID: a domain over them is printed as a string)
NUMBER_TYPES = frozenset({"int2", "int4", "int8", "oid", "float4", "float8", "numeric"})
#: the number types with NaN and ±Infinity, which wal2json prints as ``null``
_SPECIAL_TYPES = frozenset({"float4", "float8", "numeric"})


@dataclass(frozen=True)
class SnapshotColumn:
    """A column as the catalog describes it: its name, its type as wal2json prints it
    (``format_type(atttypid, atttypmod)``) and its type's own name (``pg_type.typname``)."""

    name: str
    type: str
    typname: str

    def value_sql(self) -> sql.Composable:
        """The SQL expression of the JSON text wal2json prints for this column's value (never NULL)."""
        from psycopg import sql

        column = sql.Identifier(self.name)
        if self.typname in _SPECIAL_TYPES:
            text = sql.SQL(
                "CASE WHEN {c}::text IN ('NaN', 'Infinity', '-Infinity') THEN NULL ELSE {c}::text END"
            )
            value = text.format(c=column)
        elif self.typname in NUMBER_TYPES:
            value = sql.SQL("{}::text").format(column)
        elif self.typname == "bool":
            value = sql.SQL("CASE WHEN {c} THEN 'true' WHEN NOT {c} THEN 'false' END").format(c=column)
        elif self.typname == "bytea":  # wal2json prints the hex digits only
            value = sql.SQL("to_json(encode({}, 'hex'))::text").format(column)
        else:
            value = sql.SQL("to_json({}::text)::text").format(column)
        return sql.SQL("coalesce({}, 'null')").format(value)


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


def insert_query(
    table: SnapshotTable, lsn: int, taken: str, where: sql.Composable, xid: int = 0
) -> sql.Composed:
    """A query of the ``I`` line of each of the table's rows that ``where`` selects, in ``ctid`` order: one
    text column, for ``COPY (...) TO STDOUT``."""
    from psycopg import sql

    head = _dumps(
        {"action": "I", "xid": xid, "timestamp": taken, "lsn": format_lsn(lsn), "schema": table.schema}
    )
    pieces: list[sql.Composable] = [sql.Literal(f'{head[:-1]},"table":{_dumps(table.name)},"columns":[')]
    for i, column in enumerate(table.columns):
        name = f'{"," if i else ""}{{"name":{_dumps(column.name)},"type":{_dumps(column.type)},"value":'
        pieces += [sql.Literal(name), column.value_sql(), sql.Literal("}")]
    pk = _dumps([{"name": c.name, "type": c.type} for c in table.primary_key])
    pieces.append(sql.Literal(f'],"pk":{pk}}}'))
    return sql.SQL("SELECT {} FROM ONLY {}.{} WHERE {} ORDER BY ctid").format(
        sql.SQL(" || ").join(pieces), sql.Identifier(table.schema), sql.Identifier(table.name), where
    )


def transaction_head(
    lsn: int, taken: str, xid: int = 0, truncated: Sequence[SnapshotTable] = ()
) -> Iterator[str]:
    """A snapshot transaction's ``B`` and the ``T`` of each table of ``truncated``."""
    point = format_lsn(lsn)
    yield _dumps({"action": "B", "xid": xid, "timestamp": taken, "lsn": point, "nextlsn": point})
    for table in truncated:
        truncate = {"action": "T", "xid": xid, "timestamp": taken, "lsn": point, "schema": table.schema}
        yield _dumps({**truncate, "table": table.name})


def transaction_end(lsn: int, taken: str, xid: int = 0) -> str:
    """A snapshot transaction's ``C``."""
    point = format_lsn(lsn)
    return _dumps({"action": "C", "xid": xid, "timestamp": taken, "lsn": point, "nextlsn": point})


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
