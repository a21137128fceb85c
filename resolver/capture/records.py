"""What a snapshot copies of a table: its columns as the catalog describes them, and the query whose rows
PostgreSQL sends through ``COPY ... TO STDOUT (FORMAT csv)``, each value as the text the reader holds for it
had the stream carried the row (``resolver capture``, docs/capture.md; ``resolver.capture.snapshot_file``
turns those rows into change events at the snapshot's consistent point).

A value's text is what wal2json prints for it (``../shared/reference/wal2json_spec.md`` section 5), as the
reader keeps it: the output text of the column's type, in a session with the README's settings (ISO dates,
UTC, hex bytea, ``extra_float_digits=1``): int2, int4, int8, oid, float4, float8 and numeric their digits
(NaN and ±Infinity NULL, as wal2json prints them ``null``), bool ``true``/``false``, bytea its hex digits
without ``\\x``, everything else (domains included) the type's text. The reader then types them exactly as it
types streamed values. No Spark, no connection; psycopg's ``sql`` only when a query is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from psycopg import sql

__all__ = ["SnapshotColumn", "SnapshotTable", "values_query"]

#: the number types with NaN and ±Infinity, which wal2json prints as ``null`` (by type OID: a domain over
#: them is printed as a string, its text)
_SPECIAL_TYPES = frozenset({"float4", "float8", "numeric"})


@dataclass(frozen=True)
class SnapshotColumn:
    """A column as the catalog describes it: its name, its type as wal2json prints it
    (``format_type(atttypid, atttypmod)``) and its type's own name (``pg_type.typname``)."""

    name: str
    type: str
    typname: str

    def text_sql(self) -> sql.Composable:
        """The SQL expression of the text the reader holds for this column's value as wal2json prints it
        (NULL for SQL NULL, and for what wal2json prints as ``null``)."""
        from psycopg import sql

        column = sql.Identifier(self.name)
        if self.typname in _SPECIAL_TYPES:
            text = sql.SQL(
                "CASE WHEN {c}::text IN ('NaN', 'Infinity', '-Infinity') THEN NULL ELSE {c}::text END"
            )
            return text.format(c=column)
        if self.typname == "bool":
            return sql.SQL("CASE WHEN {c} THEN 'true' WHEN NOT {c} THEN 'false' END").format(c=column)
        if self.typname == "bytea":  # wal2json prints the hex digits only
            return sql.SQL("encode({}, 'hex')").format(column)
        # a number's digits as wal2json prints them, or a string's content: the type's text output either way
        return sql.SQL("{}::text").format(column)


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


def values_query(table: SnapshotTable, where: sql.Composable) -> sql.Composed:
    """A query of the table's rows that ``where`` selects, in ``ctid`` order, for ``COPY (...) TO STDOUT
    (FORMAT csv)``: a constant first column (so no row is an empty line, whatever the table's columns), then
    each column's value text (``SnapshotColumn.text_sql``)."""
    from psycopg import sql

    values = [sql.SQL("1"), *(column.text_sql() for column in table.columns)]
    return sql.SQL("SELECT {} FROM ONLY {}.{} WHERE {} ORDER BY ctid").format(
        sql.SQL(", ").join(values), sql.Identifier(table.schema), sql.Identifier(table.name), where
    )
