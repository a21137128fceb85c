"""G9, many tables: one ingest of a batch over 20 tables x 100 events against the same batch over one table,
each into a lake that already holds the tables' first batch (the steady state of a scheduled run).

``python -m bench.many_tables`` measures it beside its *floor*: for the same numbers of tables, only the
writes every batch of a table must make under the lake's contracts (DESIGN.md: the change store appended to,
the history and the snapshot each changed in one Delta commit, a MERGE), on tables of three columns with
sources of 100 rows, on the same pool of threads the resolver applies tables on. Nothing of the resolver
runs in the floor: what one batch over N tables costs above it is the resolver's own.

    python -m bench.many_tables                 # 1 and 20 tables, median of 3
    python -m bench.many_tables --tables 10 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from bench.goals import Bench, Goal, _med, _ok, _runs_text
from bench.workload import Spec, Txn, generate, write_wal2json

TABLES = 20
EVENTS = 100


def write_tables(txns: list[Txn], tables: int, path: str) -> str:
    """The transactions once per table ``public.bench_00``, ``public.bench_01``, ...: each table's copy at
    its own commit LSNs (shifted by the table's number) and transaction ids, as one wal2json v2 file."""
    parts = []
    for i in range(tables):
        shifted = [replace(t, lsn=t.lsn + i, xid=t.xid * 100 + i) for t in txns]
        part = write_wal2json(shifted, f"{path}.{i}")
        with open(part, encoding="utf-8") as fh:
            parts.append(fh.read().replace('"table":"bench",', f'"table":"bench_{i:02d}",'))
        os.remove(part)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("".join(parts))
    return path


def g9_many_tables(bench: Bench) -> Goal:
    from resolver import ingest

    work = generate(Spec(batch_events=EVENTS, batches=2, seed=9))
    runs = {}
    for tables in (1, TABLES):
        folder = bench._dir(f"g9-{tables}")  # noqa: SLF001
        first = write_tables(work.batches[0].txns, tables, os.path.join(folder, "first.json"))
        second = write_tables(work.batches[1].txns, tables, os.path.join(folder, "second.json"))
        seeded = os.path.join(folder, "lake")
        ingest(bench.spark, [first], seeded, "wal2json-v2")
        bench.log(f"  G9 a batch of {tables} table(s) x {EVENTS} events")

        def setup(
            seeded: str = seeded, second: str = second
        ) -> tuple[Callable[[], object], dict[str, str], str]:
            lake = bench._dir("g9-ours")  # noqa: SLF001
            shutil.copytree(seeded, lake)
            return (lambda: ingest(bench.spark, [second], lake, "wal2json-v2")), {}, lake

        runs[tables] = bench._series(setup)  # noqa: SLF001
    ratio = _med(runs[TABLES]) / _med(runs[1])
    jobs = {n: statistics.median(r.jobs for r in runs[n]) for n in runs}
    return Goal(
        f"G9 one ingest of {TABLES} tables x {EVENTS} events vs 1 table x {EVENTS} events",
        ratio,
        "<= 3",
        _ok(ratio, "<= 3"),
        [_runs_text("1 table", runs[1]), _runs_text(f"{TABLES} tables", runs[TABLES])],
        why=f"Every table of a batch writes its own Delta tables ({jobs[TABLES]:.0f} jobs for {TABLES} "
        f"tables against {jobs[1]:.0f} for one): the batch's plan, bronze and explode run once, and each "
        "table appends to its change store, reads its affected keys' rows, resolves them and MERGEs its "
        "history and its snapshot (10 of its 15 jobs); tables run on a pool of threads "
        "(spark.resolver.parallelTables), so on 2 cores their jobs queue behind each other. What bounds it: "
        "a Delta MERGE per silver table and batch; `python -m bench.many_tables` measures those writes alone "
        "(the floor), whose 20 tables take longer than 3x our one-table batch here.",
    )


def floor_lake(spark, root: str, tables: int) -> None:  # type: ignore[no-untyped-def]
    """For each table, its three Delta tables (change store, history, snapshot) holding 100 rows each."""
    from pyspark.sql import functions as F

    rows = spark.range(EVENTS).select(F.col("id").alias("k"), F.col("id").alias("v"), F.lit(0).alias("lsn"))
    for i in range(tables):
        for kind in ("store", "history", "snapshot"):
            rows.write.format("delta").save(os.path.join(root, f"{kind}{i:02d}"))


def floor_batch(spark, root: str, tables: int, batch: int) -> None:  # type: ignore[no-untyped-def]
    """Each table's writes of one batch, on the resolver's pool of threads: 100 rows appended to the change
    store, then one MERGE of them (matched rows updated, the rest inserted, bounded by the key range) into
    the history beside one into the snapshot, at once (as the resolver runs its two)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from resolver.spark.parallelism import parallel_tables

    def one(i: int) -> None:
        rows = spark.range(EVENTS).select(
            F.col("id").alias("k"), (F.col("id") + batch).alias("v"), F.lit(batch).alias("lsn")
        )
        rows = rows.localCheckpoint()
        rows.write.format("delta").mode("append").save(os.path.join(root, f"store{i:02d}"))

        def merge(kind: str) -> None:
            target = DeltaTable.forPath(spark, os.path.join(root, f"{kind}{i:02d}"))
            condition = f"t.k BETWEEN 0 AND {EVENTS - 1} AND t.k = s.k"
            merge = target.alias("t").merge(rows.alias("s"), condition)
            merge.whenMatchedUpdate(
                "t.v <> s.v", {"v": "s.v", "lsn": "s.lsn"}
            ).whenNotMatchedInsertAll().execute()

        with ThreadPoolExecutor(max_workers=1) as side:  # at once, as resolver.table.apply.write_silver
            history = side.submit(merge, "history")
            try:
                merge("snapshot")
            finally:
                history.result()

    with ThreadPoolExecutor(max_workers=max(1, min(parallel_tables(spark), tables))) as pool:
        list(pool.map(one, range(tables)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.many_tables", description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=TABLES, help="tables of the many-table batch")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side (median)")
    args = parser.parse_args(argv)
    from bench.metrics import job_ids
    from resolver import ingest, local_session

    spark = local_session("bench-many-tables", spark__ui__retainedJobs="1000000")
    work = tempfile.mkdtemp(prefix="bench-many-tables-")
    spec = generate(Spec(batch_events=EVENTS, batches=2, seed=9))
    seconds: dict[tuple[str, int], list[float]] = {}
    jobs: dict[tuple[str, int], list[int]] = {}

    def timed(side: str, tables: int, fn: Callable[[], object]) -> None:
        before = job_ids(spark)
        start = time.perf_counter()
        fn()
        seconds.setdefault((side, tables), []).append(time.perf_counter() - start)
        jobs.setdefault((side, tables), []).append(len(job_ids(spark) - before))

    try:
        for tables in (1, args.tables):
            folder = os.path.join(work, f"ours-{tables}")
            os.makedirs(folder)
            first = write_tables(spec.batches[0].txns, tables, os.path.join(folder, "first.json"))
            second = write_tables(spec.batches[1].txns, tables, os.path.join(folder, "second.json"))
            seeded = os.path.join(folder, "lake")
            ingest(spark, [first], seeded, "wal2json-v2")
            floor_seed = os.path.join(work, f"floor-{tables}")
            floor_lake(spark, floor_seed, tables)
            for n in range(args.repeat + 1):  # the first run of each side warms up, and is not counted
                lake, floor = os.path.join(folder, f"run{n}"), os.path.join(work, f"floor-{tables}-run{n}")
                shutil.copytree(seeded, lake)
                shutil.copytree(floor_seed, floor)
                for side, fn in (
                    ("ours", lambda lake=lake, second=second: ingest(spark, [second], lake, "wal2json-v2")),
                    (
                        "floor",
                        lambda floor=floor, tables=tables, n=n: floor_batch(spark, floor, tables, n + 1),
                    ),
                ):
                    timed(side, tables, fn)
                    if n == 0:
                        seconds[(side, tables)].pop()
                        jobs[(side, tables)].pop()
                shutil.rmtree(lake)
                shutil.rmtree(floor)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in seconds.items()}
    print(
        f"G9: one batch of {args.tables} tables x {EVENTS} events against 1 table (median of {args.repeat})"
    )
    for side in ("ours", "floor"):
        one, many = med[(side, 1)], med[(side, args.tables)]
        print(
            f"  {side:5}  1 table {one:6.1f} s ({statistics.median(jobs[(side, 1)]):.0f} jobs)   "
            f"{args.tables} tables {many:6.1f} s ({statistics.median(jobs[(side, args.tables)]):.0f} jobs)   "
            f"ratio {many / one:5.2f}x"
        )
    ours_many, floor_many = med[("ours", args.tables)], med[("floor", args.tables)]
    print(
        f"  {args.tables} tables, ours over the floor: {ours_many / floor_many:.2f}x; the floor of "
        f"{args.tables} tables over ours for 1 table (the best a G9 ratio can be): "
        f"{floor_many / med[('ours', 1)]:.2f}x (goal <= 3)"
    )
    print(f"  load average {os.getloadavg()[0]:.2f} (2 cores here)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
