"""Where the Spark jobs of a batch go: ingest files one batch each into a fresh lake and count, per batch,
the jobs of each step (``resolver.spark.steps``: the description every job of a step carries).

    python -m bench.steps                                  # samples/seed000: batches 1, 2, 3, batch 1 again
    python -m bench.steps landing/0001.json landing/0002.json
    python -m bench.steps --tables 20          # three batches of 100 events on each of 20 tables (G9's)
    python -m bench.steps --tables 20 --inserts   # the same, every event a new row (G12's)
    python -m bench.steps --load 3 landing/*.parquet   # an initial load's files as one batch, 3 fresh lakes
    python -m bench.steps --jobs --cpu         # also every job's seconds, and the JVM's CPU by thread group
 Jobs and seconds are summed over the batch's tables (a step that runs no job is listed when it takes
0.05 s or more); jobs no step claims (Delta's log replays on a thread between steps,
Spark's own) are counted under ``(no step)``. The first batch also pays for the session's warm-up.
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import re
import tempfile
import time

from bench.jvm_cpu import JvmCpu, driver_pid
from resolver import ingest, local_session
from resolver.spark.steps import DESCRIPTION

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED000 = [
    os.path.join(ROOT, "samples", "seed000", f)
    for f in ("batch1.json", "batch2.json", "batch3.json", "batch1-twice.json")
]


#: the steps ``resolver`` names (``resolver.batch.ingest.ingest`` and ``resolver.table.apply.apply_table``),
#: in order
STEPS = (
    "plan", "read and count", "quarantine", "bronze", "schema log", "tables", "explode", "store merge",
    "store append", "affected keys", "read changes", "resolve", "read history", "diff history", "counts",
    "history merge", "history append", "snapshot merge", "snapshot append", "marker", "markers",
)  # fmt: skip
_STEP = re.compile(r"(?:^|: )(" + "|".join(re.escape(s) for s in STEPS) + r")(?=$|: | - )")


def step_of(description: str) -> str:
    """The step a job's description names (Delta prefixes and suffixes its own words), or ``(no step)``."""
    found = _STEP.findall(description.replace("Delta: ", ""))
    return found[-1] if found else "(no step)"  # the last: a table may be called like a step


def job_descriptions(spark) -> dict[int, str]:  # type: ignore[no-untyped-def]
    """Every job the status store holds: id -> description (``(no step)`` when it has none)."""
    return {i: d for i, (d, *_) in jobs_of(spark).items()}


def jobs_of(spark) -> dict[int, tuple[str, str, int, float]]:  # type: ignore[no-untyped-def]
    """Every job the status store holds: id -> (description or ``(no step)``, call site, stage count,
    seconds from submission to completion)."""
    sc = spark.sparkContext
    sc._jsc.sc().listenerBus().waitUntilEmpty()  # noqa: SLF001
    out = {}
    it = sc._jsc.sc().statusStore().jobsList(None).iterator()  # noqa: SLF001
    while it.hasNext():
        job = it.next()
        described = job.description()
        text = str(described.get()) if described.isDefined() else "(no step)"
        seconds = 0.0
        if job.submissionTime().isDefined() and job.completionTime().isDefined():
            seconds = (job.completionTime().get().getTime() - job.submissionTime().get().getTime()) / 1000
        out[int(job.jobId())] = (text, str(job.name()), int(job.stageIds().size()), seconds)
    return out


class StepTimes(logging.Handler):
    """Seconds per step, from the DEBUG line ``resolver.spark.steps`` logs at the end of each step."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seconds: collections.Counter[str] = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        _table, name, seconds = record.args  # type: ignore[misc]
        self.seconds[str(name)] += float(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.steps", description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="files to ingest, one batch each (default: samples/seed000)")
    parser.add_argument(
        "--jobs", action="store_true", help="also list every job: seconds, step, call site, stages"
    )
    parser.add_argument("--tables", type=int, help="instead of files: 3 batches of 100 events on N tables")
    parser.add_argument(
        "--inserts", action="store_true", help="with --tables: every event inserts a new row (G12's batches)"
    )
    parser.add_argument(
        "--cpu", action="store_true", help="also the driver JVM's CPU seconds by thread group (Linux's /proc)"
    )
    parser.add_argument(
        "--load",
        type=int,
        metavar="N",
        help="the files as one batch (an initial load: a table's snapshot files), N times, each into a fresh "
        "lake (the first also warms the session up)",
    )
    args = parser.parse_args(argv)
    if args.load and (args.tables or not args.files):
        parser.error("--load needs files (and no --tables)")
    spark = local_session("bench-steps", spark__ui__retainedJobs="1000000")
    assert spark.sparkContext.getLocalProperty(DESCRIPTION) is None
    seen: set[int] = set()
    times = StepTimes()
    steps_log = logging.getLogger("resolver.spark.steps")
    steps_log.addHandler(times)
    steps_log.setLevel(logging.DEBUG)
    cpu = JvmCpu(driver_pid(spark)) if args.cpu else None
    with tempfile.TemporaryDirectory(prefix="bench-steps-") as tmp:
        lake = os.path.join(tmp, "lake")
        files = _many_tables(args.tables, tmp, args.inserts) if args.tables else args.files or SEED000
        runs = [(os.path.basename(p), [p], lake) for p in files]
        if args.load:
            label = f"{len(files)} file(s) as one batch into a fresh lake"
            runs = [(f"{label}, {n + 1} of {args.load}", files, f"{lake}{n}") for n in range(args.load)]
        for label, paths, into in runs:
            times.seconds.clear()
            cpu_before = cpu.read() if cpu else None
            python_before = os.times()
            start = time.perf_counter()
            summary = ingest(spark, paths, into, None)
            seconds = time.perf_counter() - start
            python_after = os.times()
            listed = {i: j for i, j in jobs_of(spark).items() if i not in seen}
            jobs = {i: d for i, (d, *_) in listed.items()}
            seen.update(jobs)
            steps = collections.Counter(step_of(d) for d in jobs.values())
            tables = len(summary.tables)
            per_table = f" ({len(jobs) / tables:.1f} per table)" if tables > 1 else ""
            print(f"{label}: {seconds:.1f} s, {len(jobs)} Spark jobs{per_table}, {tables} table(s)")
            for name in (*STEPS, "(no step)"):
                if steps[name] or times.seconds[name] >= 0.05:
                    took = f"{times.seconds[name]:6.2f} s" if name in times.seconds else " " * 8
                    print(f"  {steps[name]:4d}  {took}  {name}")
            if cpu and cpu_before:
                spent = cpu.since(cpu_before)
                python = python_after.user + python_after.system - python_before.user - python_before.system
                jvm = sum(spent.values())
                print(f"  CPU: the JVM {jvm:.1f} s, Python {python:.1f} s, wall clock {seconds:.1f} s")
                for group, used in spent.items():
                    print(f"  {used:10.2f} s  {group}")
            if args.jobs:
                for i, (described, site, stages, took) in sorted(listed.items()):
                    print(
                        f"    job {i:5d} {took:6.2f} s  {step_of(described):15s} {stages} stage(s)  {site}"
                        f"  [{described}]"
                    )
    spark.stop()
    return 0


def _many_tables(tables: int, folder: str, inserts: bool) -> list[str]:
    """Three batches of 100 events (``bench.workload``, seed 9), each on ``tables`` tables at once, as G9
    writes them (``bench.many_tables``); ``inserts``: every event inserts a new row, as G12's."""
    from bench.many_tables import EVENTS, write_tables
    from bench.workload import Spec, generate

    mix = {"insert": 1.0, "update": 0.0, "delete": 0.0} if inserts else {}
    work = generate(Spec(batch_events=EVENTS, batches=3, seed=9, **mix))
    return [
        write_tables(batch.txns, tables, os.path.join(folder, f"batch{i + 1}-{tables}-tables.json"))
        for i, batch in enumerate(work.batches)
    ]


if __name__ == "__main__":
    raise SystemExit(main())
