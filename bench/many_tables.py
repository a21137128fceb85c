"""G9, many tables: one ingest of a batch over 20 tables x 100 events against the same batch over one table,
each into a lake that already holds the tables' first batch (the steady state of a scheduled run)."""

from __future__ import annotations

import os
import shutil
import statistics
from collections.abc import Callable
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
        "<= 2",
        _ok(ratio, "<= 2"),
        [_runs_text("1 table", runs[1]), _runs_text(f"{TABLES} tables", runs[TABLES])],
        why=f"Every table of a batch runs its own fixed plan of Spark jobs ({jobs[TABLES]:.0f} jobs for "
        f"{TABLES} tables against {jobs[1]:.0f} for one); tables run on a pool of threads "
        "(spark.resolver.parallelTables), so on 2 cores their jobs queue behind each other. What would move "
        "it: fewer jobs per table, and the tables of a batch sharing one metadata pass and one MERGE per "
        "silver layer.",
    )
