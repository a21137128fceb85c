"""What a snapshot copies of a table: its columns as the catalog describes them, and the query whose rows
PostgreSQL sends through ``COPY ... TO STDOUT (FORMAT csv)``, each value as the text the reader holds for it
had the stream carried the row (``resolver capture``, docs/capture.md; ``resolver.capture.snapshot_file``
turns those rows into change events at the snapshot's consistent point).

A value's text is what wal2json prints for it (``../shared/reference/wal2json_spec.md`` section 5), as the
reader keeps it. wal2json calls the output function of the column's type on the value and then looks at the
column's type OID, and only at it: int2, int4, int8, oid, float4, float8 and numeric print their digits (NaN
and ±Infinity as ``null``), bool ``true``/``false``, bytea its hex digits without ``\\x``; every other type
prints its output text as it is. The rule is the same here, once: a column of one of those nine type OIDs
gets the expression that prints as wal2json does, and every other column is selected as it is, so that
``COPY`` prints it with its type's output function, exactly as the stream does. That covers every type the
next database brings without a list: a domain (over any type, nested: its OID is not the base type's, so a
domain over ``boolean`` prints ``t`` and one over ``integer`` its digits as text, as wal2json does),
``character(n)`` with its padding, ``inet`` without a host's ``/32``, enums, arrays, ranges, multiranges,
composite types and extension types (``hstore``, ``ltree``, ``citext``, ``isn``). A cast to ``text`` is not
the output function: ``bpchar::text`` drops the padding, ``text(inet)`` adds the netmask and ``bool::text``
spells ``true``. The session has the README's settings (ISO dates, UTC, hex bytea, ``extra_float_digits=1``).
The reader then types the values exactly as it types streamed ones. No Spark, no connection; psycopg's
``sql`` only when a query is built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from psycopg import sql

__all__ = [
    "BOOL_OID",
    "BYTEA_OID",
    "NUMBER_OIDS",
    "SnapshotColumn",
    "SnapshotTable",
    "streamed_type",
    "values_query",
]

#: the type OIDs wal2json prints as JSON numbers (int2, int4, int8, oid, float4, float8, numeric): their
#: output text, NaN and ±Infinity as ``null``. By OID: a domain over them is printed as its text.
NUMBER_OIDS = frozenset({21, 23, 20, 26, 700, 701, 1700})
BOOL_OID, BYTEA_OID = 16, 17


_QUOTED_NAME = re.compile(r'"([^"]*)"')


def streamed_type(format_type: str) -> str:
    """A column's type as wal2json's format 2 prints it, from ``format_type(atttypid, atttypmod)``: wal2json
    writes a type name that starts with ``"`` and does not end with ``]`` into its JSON without escaping
    it (``../shared/reference/wal2json_spec.md`` 5.2), so a quoted identifier alone (``"char"``, a domain
    named ``"My Domain"``) reaches the reader without its quotes. Any other name is printed as it is."""
    quoted = _QUOTED_NAME.fullmatch(format_type)
    return quoted.group(1) if quoted else format_type


@dataclass(frozen=True)
class SnapshotColumn:
    """A column as the catalog describes it: its name, its type as wal2json prints it (``streamed_type``
    of ``format_type(atttypid, atttypmod)``) and its type's OID (``atttypid``: a domain's own)."""

    name: str
    type: str
    type_oid: int

    def text_sql(self) -> sql.Composable:
        """The SQL expression of the text the reader holds for this column's value as wal2json prints it
        (NULL for SQL NULL, and for what wal2json prints as ``null``)."""
        from psycopg import sql

        column = sql.Identifier(self.name)
        if self.type_oid in NUMBER_OIDS:  # their output text; the integers' has no special values
            text = sql.SQL(
                "CASE WHEN {c}::text IN ('NaN', 'Infinity', '-Infinity') THEN NULL ELSE {c}::text END"
            )
            return text.format(c=column)
        if self.type_oid == BOOL_OID:
            return sql.SQL("CASE WHEN {c} THEN 'true' WHEN NOT {c} THEN 'false' END").format(c=column)
        if self.type_oid == BYTEA_OID:  # wal2json prints the hex digits only
            return sql.SQL("encode({}, 'hex')").format(column)
        return column  # COPY prints it with its type's output function, as wal2json does


@dataclass(frozen=True)
class SnapshotTable:
    """A table to copy: its schema, name, columns in attribute order and primary-key columns (key order);
    for a partitioned table (``partitioned``), the (schema, name) of each partition that holds rows (its
    leaves, every level down), which the copy reads under the table's name."""

    schema: str
    name: str
    columns: tuple[SnapshotColumn, ...]
    primary_key: tuple[SnapshotColumn, ...] = ()
    leaves: tuple[tuple[str, str], ...] = ()
    partitioned: bool = False

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def relations(self) -> tuple[tuple[str, str], ...]:
        """What the copy reads rows from: the leaves of a partitioned table, else the table itself."""
        return self.leaves if self.partitioned else ((self.schema, self.name),)


def values_query(table: SnapshotTable, relation: tuple[str, str], where: sql.Composable) -> sql.Composed:
    """A query of the rows ``where`` selects of ``relation`` (the table, or one of its leaves: the columns
    are taken by name, so a partition whose columns lie in another order reads the same), in ``ctid``
    order, for ``COPY (...) TO STDOUT (FORMAT csv)``: a constant first column (so no row is an empty line,
    whatever the table's columns), then each column's value text (``SnapshotColumn.text_sql``)."""
    from psycopg import sql

    values = [sql.SQL("1"), *(column.text_sql() for column in table.columns)]
    return sql.SQL("SELECT {} FROM ONLY {}.{} WHERE {} ORDER BY ctid").format(
        sql.SQL(", ").join(values), sql.Identifier(relation[0]), sql.Identifier(relation[1]), where
    )
