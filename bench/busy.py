"""G10, a busy database: PostgreSQL's own TPC-B workload (pgbench) captured by ``resolver capture`` and
applied to a lake, on a private PostgreSQL 15 + wal2json (the tests' harness):

    python -m bench.busy                                     # scale 10, 20,000 transactions, rates 250..1000
    python -m bench.busy --scale 1 --transactions 2000 --rates 100,200 --seconds 60     # a quick look

1. ``pgbench -i -s SCALE`` (100,000 accounts per scale unit), ``pgbench_history`` made ``REPLICA IDENTITY
   FULL`` (pgbench gives it no key), then ``capture_once``: the slot, its snapshot files.
2. **Initial load**: the snapshot files applied as one ``ingest`` (rows per second).
3. **One batch** (goal: >= 10,000 events per second): ``pgbench -c CLIENTS -t ...`` runs ``--transactions``
   TPC-B transactions (3 updates and 1 insert each), one ``capture_once`` lands them, and one ``ingest``
   applies every landed file: events per second of that ingest. Beside it, its **floor**
   (``bench.busy_floor``): the same batch's writes alone, made with plain Delta operations to a copy of the
   lake before it, their sources given: the most events per second any resolver keeping these Delta tables
   reaches here. ``--repeat N`` applies both again to fresh copies of the lake before the batch,
   alternating, and prints ours warm against the floor warm (the first batch compiles what the session has
   not run yet).
4. **Keep-up** (goal: ratio <= 1 at 1,000 transactions per second): for each ``--rates`` rate, ``pgbench -R
   RATE -T SECONDS`` while a capture lands the changes every ``--period`` seconds of the source's time, then
   each period's files are applied by one ``ingest``, as a scheduled ``resolver run`` would: the ratio is
   the sum of the ingests' seconds over the production's. The highest rate kept up with (ratio <= 1, and
   every lower rate tried too) is printed.

One warm SparkSession (``resolver.local_session``). Prints the machine's load average with the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path


def _pgbench(db, *args: str) -> None:  # type: ignore[no-untyped-def]
    from tests.harness.postgres import find_bindir

    command = [str(find_bindir() / "pgbench"), *args, db.dsn]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"pgbench {' '.join(args)} failed: {done.stderr.strip()[-500:]}")


def _files(summary) -> list[str]:  # type: ignore[no-untyped-def]
    return list(summary.files)


@contextlib.contextmanager
def _steps_of(spark, lines: list[str]) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """The block's Spark jobs and seconds per step (``bench.steps``: seconds summed over the tables, which
    run on a pool of threads), added to ``lines``."""
    import collections
    import logging

    from bench.steps import STEPS, StepTimes, jobs_of, step_of

    seen = set(jobs_of(spark))
    times = StepTimes()
    steps_log = logging.getLogger("resolver.spark.steps")
    level = steps_log.level
    steps_log.addHandler(times)
    steps_log.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        steps_log.removeHandler(times)
        steps_log.setLevel(level)
    listed = {i: job for i, job in jobs_of(spark).items() if i not in seen}
    jobs = collections.Counter(step_of(d) for d, *_ in listed.values())
    lines.append("  the batch's steps (jobs, seconds summed over the tables):")
    for name in (*STEPS, "(no step)"):
        if jobs[name] or times.seconds[name] >= 0.05:
            lines.append(f"    {jobs[name]:4d}  {times.seconds[name]:7.2f} s  {name}")
    lines.append("  its jobs (id, stages, seconds from submission to end, description):")
    for i, (description, _site, stages, seconds) in sorted(listed.items()):
        lines.append(f"    {i:5d} {stages:2d} {seconds:6.2f} s  {description[:150]}")


def _timed_ingest(spark, files: list[str], lake: Path) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    from resolver import ingest

    began = time.perf_counter()
    result = ingest(spark, files, str(lake), "wal2json-v2")
    seconds = time.perf_counter() - began
    assert result.quarantined == 0, result
    return seconds, result.accepted


def _runs(seconds: list[float]) -> str:
    return " ".join(f"{s:.1f}" for s in seconds) + " s"


def _batch_and_floor(spark, files: list[str], lakes: tuple[Path, Path, Path], args, lines: list[str]):  # type: ignore[no-untyped-def]
    """The one batch applied by ``ingest`` and its floor, each ``args.repeat`` times (the first into the lake
    itself, the session's first batch after its initial load; later ones into fresh copies of the lake
    before it, ours and the floor alternating): their seconds and the batch's events."""
    from bench.busy_floor import write_floor, writes_of_batch
    from resolver.spark.parallelism import parallel_tables

    before, lake, work = lakes
    with _steps_of(spark, lines) if args.steps and args.repeat == 1 else contextlib.nullcontext():
        first, events = _timed_ingest(spark, files, lake)
    writes = writes_of_batch(spark, str(before), str(lake), str(work / "floor-sources"))
    pool = parallel_tables(spark)
    batch, floor = [first], []
    for n in range(args.repeat):
        # each copy a path of its own: Delta caches a table's log by its path
        floored = work / f"lake-floor{n}"
        floor.append(_on_copy(before, floored, lambda c: write_floor(spark, str(c), writes, pool)))
        if n + 1 < args.repeat:
            last = args.steps and n + 2 == args.repeat  # --steps lists ours' last (warm) run
            with _steps_of(spark, lines) if last else contextlib.nullcontext():
                again = work / f"lake-again{n}"
                batch.append(_on_copy(before, again, lambda c: _timed_ingest(spark, files, c)[0]))
    return batch, events, floor


def _on_copy(lake: Path, copy: Path, apply: Callable[[Path], float]) -> float:
    """``apply`` to a fresh copy of ``lake`` at ``copy`` (removed afterwards): its seconds."""
    shutil.copytree(lake, copy)
    try:
        return apply(copy)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def keep_up(spark, db, options, rate: int, seconds: int, period: int, lake: Path) -> float:  # type: ignore[no-untyped-def]
    """The keep-up ratio at ``rate`` transactions per second: the ingests' seconds over ``seconds``."""
    from resolver.capture.snapshot import capture_once

    periods: list[list[str]] = []
    producer = threading.Thread(target=_pgbench, args=(db, "-n", "-c", "4", "-j", "2", "-R", str(rate),
                                                       "-T", str(seconds)))  # fmt: skip
    began = time.monotonic()
    producer.start()
    while producer.is_alive():
        producer.join(max(0.0, began + period * (len(periods) + 1) - time.monotonic()))
        periods.append(_files(capture_once(options)))
    applied = 0.0
    for files in periods:
        if files:
            applied += _timed_ingest(spark, files, lake)[0]
    return applied / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.busy", description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=10, help="pgbench scale (100,000 accounts each)")
    parser.add_argument("--transactions", type=int, default=20_000, help="TPC-B transactions of the batch")
    parser.add_argument("--rates", default="250,500,1000", help="transactions per second to keep up with")
    parser.add_argument("--seconds", type=int, default=120, help="production time of each rate")
    parser.add_argument("--period", type=int, default=60, help="seconds of source time per scheduled run")
    parser.add_argument("--keep", action="store_true", help="keep the files in the temporary folder")
    parser.add_argument(
        "--repeat", type=int, default=1,
        help="apply the one batch and its floor this many times (later ones warm, to copies of the lake)",
    )  # fmt: skip
    parser.add_argument(
        "--steps", action="store_true", help="also the jobs and seconds per step (bench.steps) of ours' last"
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: expected 1 or more")
    from resolver import local_session
    from resolver.capture.snapshot import CaptureOptions, capture_once
    from tests.harness.postgres import PgServer

    work = Path(tempfile.mkdtemp(prefix="bench-busy-"))
    spark = local_session("bench-busy")
    lines = []
    try:
        with PgServer() as server:
            db = server.create_database("bench")
            _pgbench(db, "-i", "-s", str(args.scale), "-q")
            db.execute("ALTER TABLE public.pgbench_history REPLICA IDENTITY FULL")
            options = CaptureOptions(db.dsn, str(work / "landing"), "busy", ("public.pgbench_*",))
            snapshot = capture_once(options)
            lake = work / "lake"
            load, rows = _timed_ingest(spark, _files(snapshot), lake)
            lines.append(f"initial load   {rows} rows in {load:.1f} s = {rows / load:,.0f} rows/s")
            _pgbench(db, "-n", "-c", "4", "-j", "2", "-t", str(args.transactions // 4))
            before = work / "lake-before"
            shutil.copytree(lake, before)
            files = _files(capture_once(options))
            batch, events, floor = _batch_and_floor(spark, files, (before, lake, work), args, lines)
            lines.append(
                f"one batch      {events} events of {args.transactions} transactions in {batch[0]:.1f} s = "
                f"{events / batch[0]:,.0f} events/s (goal >= 10,000)"
            )
            lines.append(
                f"  its floor    the same batch's writes alone, sources given (bench/busy_floor.py): "
                f"{floor[0]:.1f} s = {events / floor[0]:,.0f} events/s; "
                f"ours {batch[0] / floor[0]:.2f}x the floor"
            )
            if args.repeat > 1:
                lines.append(
                    f"  warm         each applied again to a fresh copy of the lake before it, alternating: "
                    f"ours {_runs(batch[1:])}, floor {_runs(floor[1:])}; ours "
                    f"{statistics.median(batch[1:]) / statistics.median(floor[1:]):.2f}x the floor (medians)"
                )
            shutil.rmtree(before, ignore_errors=True)
            ratios = {}
            for rate in [int(r) for r in args.rates.split(",") if r.strip()]:
                ratios[rate] = keep_up(spark, db, options, rate, args.seconds, args.period, lake)
                lines.append(f"keep-up        {rate} transactions/s: ratio {ratios[rate]:.2f} (goal <= 1)")
            kept = None  # the highest rate kept up with, every lower rate tried kept up with too
            for rate in sorted(ratios):
                if ratios[rate] > 1:
                    break
                kept = rate
            lines.append(f"highest rate kept up with (and every lower one): {kept or 'none'} transactions/s")
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    lines.append(f"load average {os.getloadavg()[0]:.2f} (2 cores here)")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
