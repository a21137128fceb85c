"""What a rename and a type change cost on a large history: rewritten (the default) or in Delta's metadata.

    python -m bench.schema_change [--rows 1000000] [--repeat 3]

A batch that carries a rename or a widening makes it on the table's snapshot and history before it writes
them (``resolver.lake.tables``). By default (``schema_changes: rewrite``) each is rewritten with the new
names and types, one overwrite commit, so that every Delta reader reads it (delta-rs and Polars read
neither column mapping nor type widening today); ``schema_changes: metadata`` renames with column mapping
and widens with type widening, no file rewritten. This times both on fresh copies of one history table
shaped like a source table's (``--rows`` rows: a bigint key, an int, a numeric, four text columns and the
history's columns, as ``resolver ingest`` writes them), renaming a text column and widening the int and
the numeric in one step, each repeat in alternating order after one warm-up of both; medians, Spark jobs
and the ratio are printed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bench.metrics import Run, measure
from resolver.models import SchemaChanges
from resolver.tablelayout import Column_, TableLayout

__all__ = ["main"]

_BEFORE = [("id", "bigint"), ("n", "int"), ("amount", "decimal(10,2)"), ("mail", "string")]
_AFTER = [("id", "bigint"), ("n", "bigint"), ("amount", "decimal(14,4)"), ("email", "string")]


def _history(spark: SparkSession, path: str, rows: int) -> None:
    """A history table of ``rows`` open versions, with the silver tables' properties."""
    data = spark.range(rows).select(
        F.col("id"),
        (F.col("id") % 1000).cast("int").alias("n"),
        (F.col("id") / 7).cast("decimal(10,2)").alias("amount"),
        F.concat(F.lit("user"), F.col("id").cast("string"), F.lit("@example.com")).alias("mail"),
        *[F.sha2(F.col("id").cast("string"), 256).substr(1, 24).alias(f"t{i}") for i in range(3)],
        (F.col("id") * 16).alias("__start_lsn"),
        F.lit(2**63 - 1).alias("__end_lsn"),
        F.current_timestamp().alias("__start_time"),
        F.lit("9999-12-31 23:59:59.999999").cast("timestamp").alias("__end_time"),
        F.lit(True).alias("__is_current"),
        F.lit(False).alias("__is_deleted"),
    )
    data.repartition(4).write.format("delta").option("delta.enableChangeDataFeed", "true").save(path)


def _layout(changes: SchemaChanges) -> TableLayout:
    columns = tuple(Column_(n, t) for n, t in _AFTER) + tuple(Column_(f"t{i}", "string") for i in range(3))
    return TableLayout(
        "public.accounts", columns, ("id",), renames=(("mail", "email"),), schema_changes=changes
    )


def _change(spark: SparkSession, path: str, changes: SchemaChanges) -> None:
    """Rename and widen the table as a batch carrying those changes does (``resolver.lake.tables``)."""
    from delta.tables import DeltaTable

    from resolver.lake import tables

    layout = _layout(changes)
    wanted = dict(_AFTER)
    target = T.StructType(
        [
            T.StructField(name, T._parse_datatype_string(wanted[name]) if name in wanted else f.dataType)  # noqa: SLF001
            for f in DeltaTable.forPath(spark, path).toDF().schema.fields
            for name in ["email" if f.name == "mail" else f.name]
        ]
    )
    source = T.StructType([f for f in target.fields if not f.name.startswith("__")])
    tables._open(spark, path, tables._Spec(target, {}, ""), source, layout, changes)  # noqa: SLF001


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.schema_change", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    from resolver import local_session

    spark = local_session("bench-schema-change", spark__ui__retainedJobs="100000")
    work = Path(tempfile.mkdtemp(prefix="bench-schema-change-"))
    try:
        source = str(work / "source")
        _history(spark, source, args.rows)
        runs: dict[SchemaChanges, list[Run]] = {c: [] for c in SchemaChanges}
        order = list(SchemaChanges)
        for i in range(args.repeat + 1):  # the first: a warm-up of both, not counted
            for changes in order if i % 2 == 0 else reversed(order):
                copy = str(work / f"{changes.value}-{i}")
                shutil.copytree(source, copy)
                run = measure(spark, lambda c=copy, m=changes: _change(spark, c, m), {})
                if i:
                    runs[changes].append(run)
                got = spark.read.format("delta").load(copy)
                assert dict(got.dtypes)["n"] == "bigint" and "email" in got.columns
                shutil.rmtree(copy)
        seconds = {c: statistics.median(r.seconds for r in runs[c]) for c in SchemaChanges}
        print(
            f"{args.rows:,} history rows; rename mail -> email, widen n int -> bigint and amount to "
            f"decimal(14,4); median of {args.repeat}"
        )
        for c in SchemaChanges:
            print(f"  {c.value:9} {seconds[c]:7.2f} s  {runs[c][-1].jobs:3} Spark jobs")
        ratio = seconds[SchemaChanges.REWRITE] / seconds[SchemaChanges.METADATA]
        print(f"  rewrite over metadata: {ratio:.1f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
