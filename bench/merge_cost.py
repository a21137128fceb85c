"""What the MERGEs into a large table cost with and without deletion vectors, side by side.

    python -m bench.merge_cost [--rows 1000000] [--changed 58000] [--files 4] [--filler blank|random]
                               [--repeat 3]

Issue 36 asks of large batches that no step's cost grow with the table, and G10 found one that does: each
MERGE into ``pgbench_accounts`` (1,000,000 rows) updated 58,209 rows and copied 941,791 (16 rows copied per
row changed), because the updated accounts are spread over every file. Deletion vectors copy none, but
G10's one run with them (turned on in that batch) was slower. This separates the parts, on the two silver
tables of one table shaped like ``pgbench_accounts`` (``--rows`` rows in ``--files`` key-sorted files, as an
initial load writes them: a history of open versions and its snapshot), in one process, both sides on fresh
copies of the same tables:

- **turn on**: the table property that makes later MERGEs write deletion vectors, on both tables (a table
  the resolver writes does this once, when its change store reaches
  ``spark.resolver.deletionVectors.fromBytes``);
- **history, first MERGE**: the resolver's own history MERGE (``resolver.table.merge.merge_versions``) of a
  batch that closes the open versions of about ``--changed`` random keys and opens their new ones;
- **history, next MERGE**: a second such batch, of other keys, on the result (the steady state: files that
  carry a deletion vector already, and the first batch's new files);
- **snapshot, first/next MERGE**: the resolver's snapshot MERGE (``merge_snapshot``) of the same batches'
  current versions;
- **read**: a query over the history's current versions after both (a sum over ``__is_current``), which
  must apply the vectors.

Each repeat runs copy-on-write and deletion vectors in alternating order, after one warm-up of both; the
medians are printed with the Spark jobs and the MERGE metrics (files removed, rows copied, deletion vectors
added and updated, bytes written).
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import tempfile
from pathlib import Path

from bench.metrics import Run, measure

MAX_LSN = (1 << 63) - 1
SNAPSHOT_COLS = ["aid", "bid", "abalance", "filler"]
HISTORY_COLS = [*SNAPSHOT_COLS, "__start_lsn", "__end_lsn", "__is_current"]
SIDES = ("copy-on-write", "deletion vectors")
MERGES = ("history, first MERGE", "history, next MERGE", "snapshot, first MERGE", "snapshot, next MERGE")
PARTS = ("turn on", *MERGES, "read")


def filler(kind: str, key: str):  # type: ignore[no-untyped-def]
    """The 84 characters of ``filler`` of the row whose key is the column ``key``: ``blank`` as pgbench
    writes them (they compress to almost nothing), ``random`` as a table of real text would hold them (84
    hexadecimal digits of a hash of the key: about 42 bytes a row that do not compress)."""
    from pyspark.sql import functions as F

    if kind == "blank":
        return F.lit(" " * 84)
    return F.substring(
        F.concat(F.sha2(F.col(key).cast("string"), 256), F.md5(F.col(key).cast("string"))), 1, 84
    )


def seed(spark, folder: Path, rows: int, files: int, kind: str) -> None:  # type: ignore[no-untyped-def]
    """``rows`` accounts, key-sorted into ``files`` files: ``history`` (each an open version from LSN 1)
    and ``snapshot``, with the deletion-vector feature supported but off (as the resolver creates them)."""
    from pyspark.sql import functions as F

    from resolver.lake.deletion_vectors import OFF

    history = spark.range(1, rows + 1).select(
        F.col("id").alias("aid"),
        (F.col("id") % 10 + 1).cast("int").alias("bid"),
        F.lit(0).alias("abalance"),
        filler(kind, "id").alias("filler"),
        F.lit(1).cast("long").alias("__start_lsn"),
        F.lit(MAX_LSN).cast("long").alias("__end_lsn"),
        F.lit(True).alias("__is_current"),
    )
    for name, df in (("history", history), ("snapshot", history.select(*SNAPSHOT_COLS))):
        writer = df.repartitionByRange(files, "aid").sortWithinPartitions("aid").write.format("delta")
        for option, value in OFF.items():
            writer = writer.option(option, value)
        writer.save(str(folder / name))


def batch(spark, rows: int, changed: int, number: int, kind: str):  # type: ignore[no-untyped-def]
    """The versions of batch ``number`` (1, 2, ...; its commit LSN is 100 x ``number``): for about
    ``changed`` random keys, none changed by an earlier batch, the open version of the load closed at that
    LSN and the new one opened there."""
    from pyspark.sql import functions as F

    lsn = 100 * number
    # the keys whose share is in [number - 1, number) change in batch number (one draw per key)
    keys = (
        spark.range(1, rows + 1)
        .select(F.col("id").alias("aid"), (F.rand(7) * F.lit(rows / changed)).alias("share"))
        .filter((F.col("share") >= number - 1) & (F.col("share") < number))
        .select("aid")
    )
    new = F.col("new")
    return keys.select("aid", F.explode(F.array(F.lit(False), F.lit(True))).alias("new")).select(
        "aid",
        (F.col("aid") % 10 + 1).cast("int").alias("bid"),
        F.when(new, F.lit(lsn)).otherwise(F.lit(0)).alias("abalance"),
        filler(kind, "aid").alias("filler"),
        F.when(new, F.lit(lsn)).otherwise(F.lit(1)).cast("long").alias("__start_lsn"),
        F.when(new, F.lit(MAX_LSN)).otherwise(F.lit(lsn)).cast("long").alias("__end_lsn"),
        new.alias("__is_current"),
    )


def one_side(spark, base: Path, work: Path, side: str, batches) -> dict[str, Run]:  # type: ignore[no-untyped-def]
    """Copy the base tables and run the parts on the copies; each part's Run. ``batches``: each batch's
    versions (checkpointed) and its commit LSN."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from resolver.lake.deletion_vectors import ON
    from resolver.lake.delta import set_properties
    from resolver.table.merge import merge_snapshot, merge_versions, newest_rows

    folder = work / side.replace(" ", "-")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(base, folder)
    history, snapshot = str(folder / "history"), str(folder / "snapshot")
    tables = {"history": history, "snapshot": snapshot}

    def turn_on() -> None:
        if side == SIDES[1]:
            for path in (history, snapshot):
                set_properties(spark, path, ON)

    def history_merge(versions, lsn: int) -> None:  # type: ignore[no-untyped-def]
        merge_versions(DeltaTable.forPath(spark, history), versions, ["aid"], HISTORY_COLS, [], lsn)

    def snapshot_merge(versions, lsn: int) -> None:  # type: ignore[no-untyped-def]
        newest = newest_rows(versions, ["aid"], SNAPSHOT_COLS)  # the batch follows all the table held
        merge_snapshot(DeltaTable.forPath(spark, snapshot), newest, ["aid"], SNAPSHOT_COLS, [])

    runs = {"turn on": measure(spark, turn_on, tables)}
    steps = [(history_merge, *b) for b in batches] + [(snapshot_merge, *b) for b in batches]
    for part, (merge, versions, lsn) in zip(MERGES, steps, strict=True):
        runs[part] = measure(spark, functools.partial(merge, versions, lsn), tables)
    current = spark.read.format("delta").load(history).filter("__is_current")
    runs["read"] = measure(spark, lambda: current.agg(F.sum("abalance")).first(), {})
    return runs


def _metrics(run: Run) -> str:
    """The MERGE metrics of a part's one MERGE."""
    m = run.merges()[0]["metrics"]
    return (
        f"files removed {m.get('numTargetFilesRemoved', 0)}, "
        f"rows copied {m.get('numTargetRowsCopied', 0):,}, "
        f"updated {m.get('numTargetRowsUpdated', 0):,}, inserted {m.get('numTargetRowsInserted', 0):,}, "
        f"deletion vectors added {m.get('numTargetDeletionVectorsAdded', 0)}, "
        f"updated {m.get('numTargetDeletionVectorsUpdated', 0)}, "
        f"bytes written {m.get('numTargetBytesAdded', 0) / 1e6:.1f} MB"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.merge_cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of each table (default 1,000,000)")
    p.add_argument("--changed", type=int, default=58_000, help="keys each batch changes (default 58,000)")
    p.add_argument("--files", type=int, default=4, help="files of each table (default 4, as G10's load)")
    p.add_argument(
        "--filler",
        choices=("blank", "random"),
        default="blank",
        help="the filler column: blank as pgbench's (default) or incompressible text",
    )
    p.add_argument("--repeat", type=int, default=3, help="timed repeats of each side (default 3)")
    p.add_argument("--tmpdir", default=None, help="where the tables go (default: the system's temp folder)")
    args = p.parse_args(argv)

    from resolver import local_session

    spark = local_session("bench-merge-cost", spark__ui__retainedJobs="100000")
    runs: dict[str, dict[str, list[Run]]] = {s: {p: [] for p in PARTS} for s in SIDES}
    with tempfile.TemporaryDirectory(prefix="bench-merge-cost-", dir=args.tmpdir) as tmp:
        work = Path(tmp)
        seed(spark, work / "base", args.rows, args.files, args.filler)
        batches = [
            (batch(spark, args.rows, args.changed, n, args.filler).localCheckpoint(eager=True), 100 * n)
            for n in (1, 2)
        ]
        print(
            f"tables: {args.rows:,} rows in {args.files} files each; each batch: about {args.changed:,} keys"
        )
        for i in range(args.repeat + 1):  # the first is the warm-up, not counted
            for side in SIDES if i % 2 == 0 else SIDES[::-1]:
                got = one_side(spark, work / "base", work, side, batches)
                if i > 0:
                    for part, run in got.items():
                        runs[side][part].append(run)
                line = ", ".join(f"{part} {run.seconds:.2f} s" for part, run in got.items())
                print(f"{'warm-up' if i == 0 else f'run {i}'}: {side}: {line}", flush=True)
    spark.stop()
    print(f"\nmedians of {args.repeat} (seconds; Spark jobs of the first timed run):")
    print(f"| part | {' | '.join(SIDES)} |\n|---|---|---|")
    for part in PARTS:
        cells = []
        for side in SIDES:
            rs = runs[side][part]
            cells.append(f"{statistics.median(r.seconds for r in rs):.2f} s, {rs[0].jobs} jobs")
        print(f"| {part} | {' | '.join(cells)} |")
    for side in SIDES:
        for part in MERGES:
            print(f"{side}, {part}: {_metrics(runs[side][part][0])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
