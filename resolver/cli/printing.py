"""Rows as text for the commands' output (``resolver as-of``, ``optimize``, ``vacuum``): values as
printable cells, CSV-ready columns, and left-aligned columns. Imports no Spark at module level."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from resolver.errors import ConfigError
from resolver.spark import sql

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

OUT_FORMATS = ("csv", "parquet", "delta", "json")
"""What ``--out-format`` may name (``resolver as-of``, ``resolver changes``)."""

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


def add_output_arguments(parser: argparse.ArgumentParser, what: str, ordered: str) -> None:
    """``--out``, ``--out-format`` and ``--limit`` of a command that prints ``what`` (rows, changes),
    ``ordered`` as it says, or writes them all."""
    parser.add_argument(
        "--out", metavar="PATH", help=f"write every one of the {what} to this new folder instead"
    )
    parser.add_argument("--out-format", choices=OUT_FORMATS, help="format of --out (default parquet)")
    parser.add_argument(
        "--limit", type=_count, default=20, metavar="N", help=f"{what} to print, {ordered} (default 20)"
    )


def check_output(args: argparse.Namespace) -> None:
    """The output arguments' one-line errors, before Spark starts."""
    if args.out_format is not None and args.out is None:
        raise ConfigError(
            f"{args.command}: found --out-format {args.out_format} without --out, expected both or neither"
        )
    if args.out is not None and os.path.exists(args.out):
        raise ConfigError(
            f"{args.command}: --out {args.out} exists, expected a new path (remove it or choose another)"
        )


def print_or_write(
    rows: DataFrame, args: argparse.Namespace, order: Sequence[str], written: str, printed: str
) -> None:
    """Write every row to ``--out`` (then one line: the count and ``written``), or print the first
    ``--limit`` in ``order`` (then the count and ``printed``)."""
    total = rows.count()
    if args.out is not None:
        fmt = args.out_format or "parquet"
        writer = csv_ready(rows).write.options(header="true", escape='"') if fmt == "csv" else rows.write
        writer.format(fmt).save(args.out)
        print(f"wrote {total} {written} to {args.out} ({fmt})")
        return
    shown = text_rows(rows.orderBy(*[sql.col(c) for c in order]).limit(args.limit))
    for line in render(rows.columns, shown):
        print(line)
    more = f"; {len(shown)} shown (--limit {args.limit})" if len(shown) < total else ""
    print(f"{total} {printed}{more}")


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"found {value}, expected 0 or more")
    return value
