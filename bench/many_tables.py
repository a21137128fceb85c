"""G9, many tables: one ingest of a batch over 20 tables x 100 events against the same batch over one table,
each into a lake that already holds the tables' first batch (the steady state of a scheduled run); beside
it 50 tables x 10 events (many tables with a handful of changes each), and G12: 20 tables x 100 inserts of
new rows each (logs, events: tables that only gain rows). The "waiting" line is G9's 20 tables under a
freshness bound (``resolver.batch.deferral``): five batches in a row, whose first four leave each table's
events in bronze and whose fifth applies them all, timed as the mean of a batch.

``python -m bench.many_tables`` measures each beside its *floor*: for the same numbers of tables, only the
writes every batch of a table must make under the lake's contracts of 2026-12-05 (DESIGN.md: the change
store appended to, the history and the snapshot each changed in one Delta commit, a MERGE), on tables of
three columns with sources of the same rows, on the same pool of threads the resolver applies tables on;
G12's floor is two plain Delta appends per table (its history and its snapshot). Nothing of the resolver
runs in a floor: what one batch over N tables costs above it is the resolver's own.

    python -m bench.many_tables                 # g9 (1 and 20 tables), small (50 x 10), g12, waiting
    python -m bench.many_tables --cases g9,waiting
    python -m bench.many_tables --cases g12 --repeat 5
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from bench.goals import Bench, Goal, _ok
from bench.workload import Spec, Txn, generate, write_wal2json
from resolver.config.batch_options import BatchOptions, Freshness

TABLES = 20
EVENTS = 100
#: batches of the "waiting" line: each table's events wait for 4 of them and the 5th applies them
WAITING_BATCHES = 5


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
    #: batches applied one after the other in each run, its seconds and jobs the mean per batch; with
    #: ``waits``, under a freshness bound whose event limit is ``batches`` x ``events``: each table's
    #: events wait in bronze for ``batches`` - 1 batches and the last applies them all
    batches: int = 1
    waits: bool = False

    @property
    def floor_name(self) -> str:
        return "plain appends" if self.inserts else "floor"


def cases_of(chosen: set[str], tables: int = TABLES) -> list[Case]:
    """The lines ``chosen`` names: g9 (1 and ``tables`` tables x 100 events), small (50 x 10), g12."""
    return [
        *([Case("g9", 1, EVENTS), Case("g9", tables, EVENTS)] if "g9" in chosen else []),
        *(
            [Case("waiting", tables, EVENTS, batches=WAITING_BATCHES, waits=True)]
            if "waiting" in chosen
            else []
        ),
        *([Case("small", 50, 10)] if "small" in chosen else []),
        *([Case("g12", tables, EVENTS, inserts=True)] if "g12" in chosen else []),
    ]


@dataclass
class Measured:
    """Each case's runs, ours and its floor's, measured side by side (``measure_cases``)."""

    seconds: dict[tuple[str, Case], list[float]] = field(default_factory=dict)
    jobs: dict[tuple[str, Case], list[int]] = field(default_factory=dict)

    def median(self, side: str, case: Case) -> float:
        return statistics.median(self.seconds[(side, case)])

    def jobs_of(self, side: str, case: Case) -> float:
        return statistics.median(self.jobs[(side, case)])

    def over_floor(self, case: Case) -> float:
        return self.median("ours", case) / self.median("floor", case)

    def line(self, side: str, case: Case) -> str:
        runs = " ".join(f"{s:.1f}" for s in self.seconds[(side, case)])
        return f"{self.median(side, case):.1f} s (runs {runs}), {self.jobs_of(side, case):.0f} jobs"


def measure_cases(spark, cases: list[Case], repeat: int, work: str) -> Measured:  # type: ignore[no-untyped-def]
    """Each case's batch applied by ``ingest`` to fresh copies of a lake holding its first batch, beside its
    floor written to fresh copies of a floor lake; one run of each side first, not counted (warm-up), then
    ``repeat`` runs each, alternating."""
    from bench.metrics import job_ids
    from resolver import ingest

    measured = Measured()

    def timed(side: str, case: Case, fn: Callable[[], object], counted: bool, batches: int = 1) -> None:
        before = job_ids(spark)
        start = time.perf_counter()
        fn()
        if counted:
            measured.seconds.setdefault((side, case), []).append((time.perf_counter() - start) / batches)
            measured.jobs.setdefault((side, case), []).append(round(len(job_ids(spark) - before) / batches))

    for case in cases:
        mix = {"insert": 1.0, "update": 0.0, "delete": 0.0} if case.inserts else {}
        spec = generate(Spec(batch_events=case.events, batches=1 + case.batches, seed=9, **mix))
        folder = os.path.join(work, f"ours-{case.label}-{case.tables}")
        os.makedirs(folder)
        first = write_tables(spec.batches[0].txns, case.tables, os.path.join(folder, "first.json"))
        later = [
            write_tables(b.txns, case.tables, os.path.join(folder, f"later{i}.json"))
            for i, b in enumerate(spec.batches[1:])
        ]
        options = None
        if case.waits:
            options = BatchOptions(freshness=Freshness(86_400, below_events=case.batches * case.events))
        seeded = os.path.join(folder, "lake")
        ingest(spark, [first], seeded, "wal2json-v2")
        floor_seed = os.path.join(work, f"floor-{case.label}-{case.tables}")
        floor_lake(spark, floor_seed, case.tables, case.events)
        floor_fn = floor_appends if case.inserts else floor_batch
        for n in range(repeat + 1):  # the first run of each side warms up, and is not counted
            lake, floor = os.path.join(folder, f"run{n}"), os.path.join(floor_seed + f"-run{n}")
            shutil.copytree(seeded, lake)
            shutil.copytree(floor_seed, floor)
            apply = functools.partial(_ingest_each, spark, later, lake, options)
            timed("ours", case, apply, n > 0, case.batches)
            write_floor = functools.partial(floor_fn, spark, floor, case.tables, n + 1, case.events)
            timed("floor", case, write_floor, n > 0)
            shutil.rmtree(lake)
            shutil.rmtree(floor)
    return measured


def _ingest_each(spark, files: list[str], lake: str, options) -> None:  # type: ignore[no-untyped-def]
    """Each file ingested as a batch of its own, in order."""
    from resolver import ingest

    for path in files:
        ingest(spark, [path], lake, "wal2json-v2", options=options)


def many_table_goals(bench: Bench, chosen: set[str]) -> list[Goal]:
    """Issue 68's lines for ``python -m bench``: G9 (20 tables over 1, and over their floor) and 50 tables x
    10 events over their floor (``chosen`` has "g9"), G12 against plain appends (``chosen`` has "g12")."""
    work = bench._dir("many-tables")  # noqa: SLF001
    os.makedirs(work)
    cases = cases_of(chosen)
    lines = ", ".join(f"{c.label} {c.tables} x {c.events}" for c in cases)
    bench.log(f"  {lines}, each beside its floor")
    got = measure_cases(bench.spark, cases, bench.scale.repeat, work)
    goals = []
    for case in cases:
        if (case.label == "g9" and case.tables == 1) or case.waits:
            continue
        ratio = got.over_floor(case)
        what = "new rows" if case.inserts else "events"
        target = {"g9": "<= 1.5", "g12": "<= 2"}.get(case.label)
        name = {"g9": "G9", "g12": "G12", "small": "G9"}[case.label]
        goals.append(
            Goal(
                f"{name} one ingest of {case.tables} tables x {case.events} {what} vs its {case.floor_name}",
                ratio,
                target or "-",
                _ok(ratio, target) if target else None,
                [f"ours: {got.line('ours', case)}", f"{case.floor_name}: {got.line('floor', case)}"],
                note=FLOOR_NOTE if not case.inserts else APPENDS_NOTE,
                why=WHY[case.label],
            )
        )
    g9 = [c for c in cases if c.label == "g9"]
    if len(g9) == 2:
        ratio = got.median("ours", g9[1]) / got.median("ours", g9[0])
        goals.insert(
            0,
            Goal(
                f"G9 one ingest of {g9[1].tables} tables x {EVENTS} events vs 1 table x {EVENTS} events",
                ratio,
                "<= 5",
                _ok(ratio, "<= 5"),
                [f"1 table: {got.line('ours', g9[0])}", f"{g9[1].tables} tables: {got.line('ours', g9[1])}"],
                why=WHY["g9 ratio"],
            ),
        )
    waiting = [c for c in cases if c.waits]
    if len(g9) == 2 and waiting:
        case = waiting[0]
        ratio = got.median("ours", case) / got.median("ours", g9[0])
        goals.insert(
            1,
            Goal(
                f"G9 with a freshness bound: {case.tables} tables x {case.events} events a batch, each "
                f"table applied every {case.batches}th batch, vs 1 table x {EVENTS} events",
                ratio,
                "<= 5",
                _ok(ratio, "<= 5"),
                [
                    f"1 table, every batch applied: {got.line('ours', g9[0])}",
                    f"{case.tables} tables, a batch's mean over {case.batches}: {got.line('ours', case)}",
                    f"{g9[1].tables} tables, every batch applied: {got.line('ours', g9[1])}",
                ],
                why=WHY["waiting"],
            ),
        )
    return goals


FLOOR_NOTE = (
    "floor: per table the change store appended to and one MERGE each into the history and the snapshot, "
    "sources given, on tables of three columns, on the resolver's pool of threads (bench.many_tables)"
)
APPENDS_NOTE = (
    "plain appends: each table's new rows appended to its history and its snapshot (bench.many_tables)"
)
WHY = {
    "g9 ratio": "Every table of a batch writes its own Delta tables: the batch's plan, bronze and explode "
    "run once, and each table of this batch (whole rows, in order: resolver.table.continuation) resolves in "
    "one job and MERGEs its history and its snapshot (about 5 jobs each); the tables' markers are one "
    "commit after the last. On 2 cores the tables' jobs queue behind each other: 20 tables' MERGEs alone "
    "(the floor, the G9 floor line) take longer than 5x one table's whole batch here. What reaches it: "
    "small tables' events waiting in bronze under a freshness bound (the next line).",
    "g9": "The floor is the same MERGEs with their sources given; above it: the batch's plan, bronze and "
    "explode, each table's resolution (1 job), the lake's markers' commit and the per-table planning and "
    "code compilation of its queries.",
    "small": "",
    "waiting": "With a freshness bound (resolver.batch.deferral; docs/silver.md, Tables that wait) a table "
    f"whose events number fewer than the bound's limit ({WAITING_BATCHES} batches' events here) leaves them "
    "in bronze: four batches in five write only bronze and the lake's markers, and the fifth applies "
    f"{WAITING_BATCHES} batches' events of every table in one MERGE each. The lake then holds the same rows "
    "as had every batch been applied (tests/spark/test_deferral.py).",
    "g12": "Ours appends each table's rows to its history and snapshot (the floor's two appends) and, beyond "
    "them, runs the batch's plan (2 jobs), bronze (3) and explode (1: planned on the pool of table threads "
    "beside bronze's write, its projections Spark SQL text), opens each table's Delta tables (one look at "
    "each log) and commits the lake's markers once; the floor's 40 appends vary by 15% from run to run here.",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.many_tables", description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=TABLES, help="tables of the many-table batch")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side (median)")
    parser.add_argument(
        "--cases",
        default="g9,small,g12,waiting",
        help="which lines: g9 (1 and --tables tables x 100 events), small (50 tables x 10 events), waiting "
        "(--tables tables x 100 events a batch under a freshness bound, 5 batches: 4 wait), g12 "
        "(--tables tables x 100 inserts of new rows against plain appends)",
    )
    args = parser.parse_args(argv)
    from resolver import local_session

    cases = cases_of(set(args.cases.split(",")), args.tables)
    spark = local_session("bench-many-tables", spark__ui__retainedJobs="1000000")
    work = tempfile.mkdtemp(prefix="bench-many-tables-")
    try:
        got = measure_cases(spark, cases, args.repeat, work)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)

    print(f"one batch each (median of {args.repeat}), load average {os.getloadavg()[0]:.2f} (2 cores here)")
    for case in cases:
        what = "new rows" if case.inserts else "events"
        print(
            f"  {case.label:5} {case.tables:2} table(s) x {case.events} {what}: "
            f"ours {got.line('ours', case)}, {case.floor_name} {got.line('floor', case)}: "
            f"ours over it {got.over_floor(case):.2f}x"
        )
    g9 = [c for c in cases if c.label == "g9"]
    if len(g9) == 2:
        one, many = got.median("ours", g9[0]), got.median("ours", g9[1])
        print(f"  G9 ratio ({g9[1].tables} tables over 1): {many / one:.2f}x (goal <= 5)")
        for case in (c for c in cases if c.waits):
            print(
                f"  G9 with a freshness bound ({case.tables} tables, each applied every {case.batches}th "
                f"batch, over 1 table every batch): {got.median('ours', case) / one:.2f}x (goal <= 5)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
