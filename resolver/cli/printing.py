"""Rows as text for the commands' output (``resolver as-of``, ``optimize``, ``vacuum``): values as
printable cells, CSV-ready columns, and left-aligned columns. Imports no Spark at module level."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from resolver.spark import sql

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

CELL = 40
"""Widest cell printed by ``resolver as-of`` (longer values end in '...')."""


def csv_ready(rows: DataFrame) -> DataFrame:
    """CSV holds text only: binary values as PostgreSQL's hex text, nested values as JSON. (Written with
    quotes doubled inside quoted values, as RFC 4180 and PostgreSQL's COPY expect.)"""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    def text(field: T.StructField) -> Column:
        if isinstance(field.dataType, T.BinaryType):
            return F.concat(F.lit("\\x"), F.lower(F.hex(sql.col(field.name)))).alias(field.name)
        if isinstance(field.dataType, T.ArrayType | T.MapType | T.StructType):
            return F.to_json(sql.col(field.name)).alias(field.name)
        return sql.col(field.name)

    return rows.select(*[text(f) for f in rows.schema.fields])


def text_rows(rows: DataFrame) -> list[list[str]]:
    """The rows as printable text: values as Spark casts them (timestamps in the session's time zone, UTC
    for ``local_session``), binary as hex, NULL as NULL, control characters escaped, long values cut."""
    text = csv_ready(rows)
    out = []
    for row in text.select(*[sql.col(c).cast("string") for c in text.columns]).collect():
        out.append([cell(v) for v in row])
    return out


def cell(value: str | None) -> str:
    if value is None:
        return "NULL"
    value = "".join(c if c.isprintable() else repr(c)[1:-1] for c in value)
    return value if len(value) <= CELL else value[: CELL - 3] + "..."


def render(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns two spaces apart, header first."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    return ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
