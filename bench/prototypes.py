"""A prototype of the design that would reach issue 68's G9 ratio (<= 5x) on 2 cores, measured beside
today's code and the floors of ``bench.many_tables``, in one process, side by side. It is not the product: it
patches the resolver for the run and leaves out what the design would still have to build.

    python -m bench.prototypes                  # G9, median of 3
    python -m bench.prototypes --repeat 5

- **deferred**: every table but the first (``public.bench_00``) applies nothing to its silver tables in this
  batch (its events stay in bronze, as those of a table whose silver writes wait under a freshness bound
  would, its marker among the lake's markers saying up to which commit the table is complete). What it leaves
  out: the batch that finally applies the waiting events reads them back from bronze (the change store's
  catch-up, ``resolver.table.later_batch.LaterBatch._catch_up``, does that today for the store), and
  ``resolver as-of`` and ``--status`` saying up to which commit each table is complete.

The first run of this tool (2026-12-06, before the lake's markers were built) also prototyped them:
``bench/README.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from unittest import mock

from bench.many_tables import EVENTS, TABLES, floor_appends, floor_batch, floor_lake, write_tables
from bench.workload import Spec, generate


@contextlib.contextmanager
def deferred(spark, lake: str) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Every table but ``public.bench_00`` deferred: nothing applied to its silver tables."""
    from resolver.batch import ingest as ingest_module
    from resolver.table.summaries import empty_summary

    real = ingest_module.apply_table

    def apply_table(spark, events, table):  # type: ignore[no-untyped-def]
        if table.meta.table == "public.bench_00":
            return real(spark, events, table)
        return ingest_module.TableApplied(empty_summary(table.meta.table, table.meta, None))

    with mock.patch.object(ingest_module, "apply_table", apply_table):
        yield


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.prototypes", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side (median)")
    args = parser.parse_args(argv)
    from resolver import ingest, local_session

    spark = local_session("bench-prototypes", spark__ui__retainedJobs="1000000")
    work = tempfile.mkdtemp(prefix="bench-prototypes-")
    seconds: dict[str, list[float]] = {}

    def run(label: str, seeded: str, fn: Callable[[str], object]) -> None:
        lake = os.path.join(work, "run")
        shutil.copytree(seeded, lake)
        start = time.perf_counter()
        fn(lake)
        seconds.setdefault(label, []).append(time.perf_counter() - start)
        shutil.rmtree(lake)

    def ours(
        second: str, prototype: Callable[..., contextlib.AbstractContextManager[None]] | None, lake: str
    ):  # type: ignore[no-untyped-def]  # noqa: E501
        with prototype(spark, lake) if prototype else contextlib.nullcontext():
            ingest(spark, [second], lake, "wal2json-v2")

    try:
        lines = []
        for label, tables, inserts in (("g9-1", 1, False), ("g9", TABLES, False)):
            mix = {"insert": 1.0, "update": 0.0, "delete": 0.0} if inserts else {}
            spec = generate(Spec(batch_events=EVENTS, batches=2, seed=9, **mix))
            folder = os.path.join(work, label)
            os.makedirs(folder)
            first = write_tables(spec.batches[0].txns, tables, os.path.join(folder, "first.json"))
            second = write_tables(spec.batches[1].txns, tables, os.path.join(folder, "second.json"))
            seeded = os.path.join(folder, "lake")
            ingest(spark, [first], seeded, "wal2json-v2")
            floor_seed = os.path.join(folder, "floor")
            floor_lake(spark, floor_seed, tables, EVENTS)
            floor_fn = floor_appends if inserts else floor_batch
            sides: dict[str, Callable[[str], object]] = {
                "today": functools.partial(ours, second, None),
                "floor": lambda lake, floor_fn=floor_fn, tables=tables: floor_fn(
                    spark, lake, tables, 1, EVENTS
                ),
            }
            if label == "g9":
                sides["deferred"] = functools.partial(ours, second, deferred)
            for n in range(args.repeat + 1):  # the first run of each side warms up, and is not counted
                for side, fn in sides.items():
                    run(f"{label} {side}", floor_seed if side == "floor" else seeded, fn)
                    if n == 0:
                        seconds[f"{label} {side}"].pop()
            lines.append(label)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in seconds.items()}

    def runs(key: str) -> str:
        return f"{med[key]:5.1f} s (runs {' '.join(f'{s:.1f}' for s in seconds[key])})"

    print(f"one batch each (median of {args.repeat}), load average {os.getloadavg()[0]:.2f} (2 cores here)")
    for key in seconds:
        print(f"  {key:20} {runs(key)}")
    print(f"  G9 20 tables over 1: today {med['g9 today'] / med['g9-1 today']:.2f}x, deferred "
          f"{med['g9 deferred'] / med['g9-1 today']:.2f}x (goal <= 5)")  # fmt: skip
    print(f"  G9 20 tables over their floor: today {med['g9 today'] / med['g9 floor']:.2f}x (goal <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
