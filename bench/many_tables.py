"""G9, many tables: one ingest of a batch over 20 tables x 100 events against the same batch over one table,
each into a lake that already holds the tables' first batch (the steady state of a scheduled run); beside
it 50 tables x 10 events (many tables with a handful of changes each), and G12: 20 tables x 100 inserts of
new rows each (logs, events: tables that only gain rows).

``python -m bench.many_tables`` measures each beside its *floor*: for the same numbers of tables, only the
writes every batch of a table must make under the lake's contracts of 2026-12-05 (DESIGN.md: the change
store appended to, the history and the snapshot each changed in one Delta commit, a MERGE), on tables of
three columns with sources of the same rows, on the same pool of threads the resolver applies tables on;
G12's floor is two plain Delta appends per table (its history and its snapshot). Nothing of the resolver
runs in a floor: what one batch over N tables costs above it is the resolver's own.

    python -m bench.many_tables                 # g9 (1 and 20 tables), small (50 x 10), g12; median of 3
    python -m bench.many_tables --cases g12 --repeat 5
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
from dataclasses import dataclass, replace

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


def floor_lake(spark, root: str, tables: int, rows: int = EVENTS) -> None:  # type: ignore[no-untyped-def]
    """For each table, its three Delta tables (change store, history, snapshot) holding ``rows`` rows each."""
    from pyspark.sql import functions as F

    seed = spark.range(rows).select(F.col("id").alias("k"), F.col("id").alias("v"), F.lit(0).alias("lsn"))
    for i in range(tables):
        for kind in ("store", "history", "snapshot"):
            seed.write.format("delta").save(os.path.join(root, f"{kind}{i:02d}"))


def floor_batch(spark, root: str, tables: int, batch: int, rows: int = EVENTS) -> None:  # type: ignore[no-untyped-def]  # noqa: E501
    """Each table's writes of one batch, on the resolver's pool of threads: ``rows`` rows appended to the
    change store, then one MERGE of them (matched rows updated, the rest inserted, bounded by the key range)
    into the history beside one into the snapshot, at once (as the resolver runs its two)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from resolver.spark.parallelism import parallel_tables

    def one(i: int) -> None:
        source = spark.range(rows).select(
            F.col("id").alias("k"), (F.col("id") + batch).alias("v"), F.lit(batch).alias("lsn")
        )
        source = source.localCheckpoint()
        source.write.format("delta").mode("append").save(os.path.join(root, f"store{i:02d}"))

        def merge(kind: str) -> None:
            target = DeltaTable.forPath(spark, os.path.join(root, f"{kind}{i:02d}"))
            condition = f"t.k BETWEEN 0 AND {rows - 1} AND t.k = s.k"
            merge = target.alias("t").merge(source.alias("s"), condition)
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


def floor_appends(spark, root: str, tables: int, batch: int, rows: int = EVENTS) -> None:  # type: ignore[no-untyped-def]  # noqa: E501
    """G12's floor: each table's ``rows`` new rows appended plainly to its history and its snapshot, on the
    resolver's pool of threads, the two appends of a table at once."""
    from pyspark.sql import functions as F

    from resolver.spark.parallelism import parallel_tables

    def one(i: int) -> None:
        source = spark.range(batch * rows, (batch + 1) * rows).select(
            F.col("id").alias("k"), F.col("id").alias("v"), F.lit(batch).alias("lsn")
        )

        def append(kind: str) -> None:
            source.write.format("delta").mode("append").save(os.path.join(root, f"{kind}{i:02d}"))

        with ThreadPoolExecutor(max_workers=1) as side:
            history = side.submit(append, "history")
            try:
                append("snapshot")
            finally:
                history.result()

    with ThreadPoolExecutor(max_workers=max(1, min(parallel_tables(spark), tables))) as pool:
        list(pool.map(one, range(tables)))


@dataclass(frozen=True)
class Case:
    """One line of the bench: ``tables`` tables x ``events`` events each in one batch, into a lake holding
    their first batch; ``inserts``: every event inserts a new row (G12), against plain appends."""

    label: str
    tables: int
    events: int
    inserts: bool = False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.many_tables", description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=TABLES, help="tables of the many-table batch")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side (median)")
    parser.add_argument(
        "--cases",
        default="g9,small,g12",
        help="which lines: g9 (1 and --tables tables x 100 events), small (50 tables x 10 events), g12 "
        "(--tables tables x 100 inserts of new rows against plain appends)",
    )
    args = parser.parse_args(argv)
    from bench.metrics import job_ids
    from resolver import ingest, local_session

    chosen = set(args.cases.split(","))
    cases = [
        *([Case("g9", 1, EVENTS), Case("g9", args.tables, EVENTS)] if "g9" in chosen else []),
        *([Case("small", 50, 10)] if "small" in chosen else []),
        *([Case("g12", args.tables, EVENTS, inserts=True)] if "g12" in chosen else []),
    ]
    spark = local_session("bench-many-tables", spark__ui__retainedJobs="1000000")
    work = tempfile.mkdtemp(prefix="bench-many-tables-")
    seconds: dict[tuple[str, Case], list[float]] = {}
    jobs: dict[tuple[str, Case], list[int]] = {}

    def timed(side: str, case: Case, fn: Callable[[], object]) -> None:
        before = job_ids(spark)
        start = time.perf_counter()
        fn()
        seconds.setdefault((side, case), []).append(time.perf_counter() - start)
        jobs.setdefault((side, case), []).append(len(job_ids(spark) - before))

    try:
        for case in cases:
            mix = {"insert": 1.0, "update": 0.0, "delete": 0.0} if case.inserts else {}
            spec = generate(Spec(batch_events=case.events, batches=2, seed=9, **mix))
            folder = os.path.join(work, f"ours-{case.label}-{case.tables}")
            os.makedirs(folder)
            first = write_tables(spec.batches[0].txns, case.tables, os.path.join(folder, "first.json"))
            second = write_tables(spec.batches[1].txns, case.tables, os.path.join(folder, "second.json"))
            seeded = os.path.join(folder, "lake")
            ingest(spark, [first], seeded, "wal2json-v2")
            floor_seed = os.path.join(work, f"floor-{case.label}-{case.tables}")
            floor_lake(spark, floor_seed, case.tables, case.events)
            floor_fn = floor_appends if case.inserts else floor_batch
            for n in range(args.repeat + 1):  # the first run of each side warms up, and is not counted
                lake, floor = os.path.join(folder, f"run{n}"), os.path.join(floor_seed + f"-run{n}")
                shutil.copytree(seeded, lake)
                shutil.copytree(floor_seed, floor)
                for side, fn in (
                    ("ours", lambda lake=lake, second=second: ingest(spark, [second], lake, "wal2json-v2")),
                    (
                        "floor",
                        lambda floor=floor, case=case, n=n, write=floor_fn: write(
                            spark, floor, case.tables, n + 1, case.events
                        ),
                    ),
                ):
                    timed(side, case, fn)
                    if n == 0:
                        seconds[(side, case)].pop()
                        jobs[(side, case)].pop()
                shutil.rmtree(lake)
                shutil.rmtree(floor)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in seconds.items()}

    def line(side: str, case: Case) -> str:
        got = med[(side, case)]
        return f"{got:6.1f} s ({statistics.median(jobs[(side, case)]):.0f} jobs)"

    print(f"one batch each (median of {args.repeat}), load average {os.getloadavg()[0]:.2f} (2 cores here)")
    for case in cases:
        what = "new rows" if case.inserts else "events"
        floor = "plain appends" if case.inserts else "floor"
        ours, base = med[("ours", case)], med[("floor", case)]
        print(
            f"  {case.label:5} {case.tables:2} table(s) x {case.events} {what}: ours {line('ours', case)}, "
            f"{floor} {line('floor', case)}: ours over it {ours / base:.2f}x"
        )
    g9 = [c for c in cases if c.label == "g9"]
    if len(g9) == 2:
        one, many = med[("ours", g9[0])], med[("ours", g9[1])]
        print(f"  G9 ratio ({g9[1].tables} tables over 1): {many / one:.2f}x (goal <= 5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
