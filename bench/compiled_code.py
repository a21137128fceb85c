"""What keeping Spark's compiled code between batches is worth: G10's workload (pgbench's TPC-B on a private
PostgreSQL 15 + wal2json, captured by ``resolver capture``) applied batch after batch in one session, once per
size of Spark's cache of generated classes (``spark.sql.codegen.cache.maxEntries``, a setting a session only
takes at its start: one child process per size, run one after the other on the same captured files).

    python -m bench.compiled_code                 # scale 10, 8 batches, caches of 100 and 4,000 classes
    python -m bench.compiled_code --scale 1 --batches 3 --transactions 2000 --entries 100,400,4000

For each size it prints every batch's seconds, the CPU seconds the JVM's JIT compiler spent during it (read
from ``/proc``, ``bench.jvm_cpu``) and how many classes Spark compiled for it (Spark's ``CodegenMetrics``),
then the sum over the batches after the first two (the initial load and the first later batch, which
compile everything whatever the size). Spark's own default is 100; ``local_session`` keeps 4,000
(``resolver.spark.session``; bench/README.md, "Compiled code kept").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def capture(scale: int, batches: int, transactions: int, work: Path) -> list[list[str]]:
    """The snapshot files of a scale-``scale`` pgbench database, then ``batches`` sets of files of
    ``transactions`` TPC-B transactions each: one list of files per batch, the snapshot's first."""
    from bench.busy import _files, _pgbench
    from resolver.capture.snapshot import CaptureOptions, capture_once
    from tests.harness.postgres import PgServer

    with PgServer() as server:
        db = server.create_database("bench")
        _pgbench(db, "-i", "-s", str(scale), "-q")
        db.execute("ALTER TABLE public.pgbench_history REPLICA IDENTITY FULL")
        options = CaptureOptions(db.dsn, str(work / "landing"), "compiled", ("public.pgbench_*",))
        sets = [_files(capture_once(options))]
        for _ in range(batches):
            _pgbench(db, "-n", "-c", "4", "-j", "2", "-t", str(max(1, transactions // 4)))
            sets.append(_files(capture_once(options)))
    return sets


def apply_batches(sets: list[list[str]], lake: str, entries: int) -> list[dict[str, float]]:
    """Every set of files applied in turn as one ``ingest`` into ``lake``, in a session keeping ``entries``
    compiled classes: per batch its seconds, events, JIT CPU seconds and classes."""
    from bench.jvm_cpu import JvmCpu, driver_pid
    from resolver import ingest, local_session

    spark = local_session("bench-compiled-code", spark__sql__codegen__cache__maxEntries=str(entries))
    cpu = JvmCpu(driver_pid(spark))
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # noqa: SLF001
    out = []
    try:
        for files in sets:
            classes, before, began = (
                metrics.METRIC_COMPILATION_TIME().getCount(),
                cpu.read(),
                time.perf_counter(),
            )
            summary = ingest(spark, files, lake, "wal2json-v2")
            seconds = time.perf_counter() - began
            jit = cpu.since(before).get("JIT compiler", 0.0)
            compiled = metrics.METRIC_COMPILATION_TIME().getCount() - classes
            out.append({"seconds": seconds, "events": summary.accepted, "jit": jit, "classes": compiled})
    finally:
        spark.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compiled_code", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--scale", type=int, default=10, help="pgbench scale (100,000 accounts each)")
    parser.add_argument("--batches", type=int, default=8, help="batches after the initial load")
    parser.add_argument("--transactions", type=int, default=20_000, help="TPC-B transactions per batch")
    parser.add_argument("--entries", default="100,4000", help="cache sizes to compare (Spark's default: 100)")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # internal: SETS_JSON LAKE ENTRIES
    args = parser.parse_args(argv)
    if args.child:
        sets_json, lake, entries = args.child.split(",")
        print(json.dumps(apply_batches(json.loads(Path(sets_json).read_text()), lake, int(entries))))
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-compiled-"))
    try:
        sets = capture(args.scale, args.batches, args.transactions, work)
        sets_json = work / "sets.json"
        sets_json.write_text(json.dumps(sets))
        lines = []
        for entries in [int(e) for e in args.entries.split(",") if e.strip()]:
            lake = work / f"lake-{entries}"
            child = [sys.executable, "-m", "bench.compiled_code", "--child", f"{sets_json},{lake},{entries}"]
            done = subprocess.run(child, capture_output=True, text=True, check=True)
            batches = json.loads(done.stdout.strip().splitlines()[-1])
            shutil.rmtree(lake, ignore_errors=True)
            lines.append(f"a cache of {entries:,} classes" + (" (Spark's default)" if entries == 100 else ""))
            for i, b in enumerate(batches):
                kind = "initial load" if i == 0 else f"batch {i}"
                lines.append(
                    f"  {kind:12s} {b['events']:>9,.0f} events {b['seconds']:6.1f} s  JIT {b['jit']:5.1f} s  "
                    f"{b['classes']:4.0f} classes compiled"
                )
            later = batches[2:]
            lines.append(f"  batches 2-{len(batches) - 1}: {sum(b['seconds'] for b in later):.1f} s")
        lines.append(f"load average {os.getloadavg()[0]:.2f} (2 cores here)")
        print("\n".join(lines))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
