"""A call's own price: the same small later batch applied by a ``resolver ingest`` process started for it (as
a scheduled ``resolver run`` is, every time) and by one warm process that stays up (as ``resolver run
--stream`` does), side by side.

    python -m bench.call_price                  # samples/seed000: batch 2 into a lake holding batch 1, 3 each
    python -m bench.call_price --repeat 5

Cold: each run copies the seeded lake and times a whole ``resolver ingest`` process (Spark's and Delta's
start, the JVM as the command sets it for small input, the queries compiled, the batch, the exit). Warm: one
``local_session`` in this process, one ingest of the batch into a copy first (not counted: the session's start
and first compilation, which a stream pays once), then the same ingest into fresh copies. The difference is
what a scheduled call pays before and around its batch; ``README.md`` ("Running on a schedule or as a stream")
says when a stream is worth it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRST = os.path.join(ROOT, "samples", "seed000", "batch1.json")
LATER = os.path.join(ROOT, "samples", "seed000", "batch2.json")


def _cold(lake: str) -> float:
    """Seconds of one whole ``resolver ingest`` process applying the later batch to ``lake``."""
    command = [sys.executable, "-m", "resolver", "ingest", LATER, "--lake", lake, "--json"]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.call_price", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side (median)")
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="bench-call-price-")
    seeded = os.path.join(work, "seeded")
    try:
        subprocess.run(
            [sys.executable, "-m", "resolver", "ingest", FIRST, "--lake", seeded, "--json"],
            check=True,
            capture_output=True,
        )
        cold = []
        for n in range(args.repeat):
            lake = os.path.join(work, f"cold{n}")
            shutil.copytree(seeded, lake)
            cold.append(_cold(lake))
        from resolver import ingest, local_session

        started = time.perf_counter()
        spark = local_session("bench-call-price")
        warm = []
        for n in range(args.repeat + 1):  # the first warms the session up, and is not counted
            lake = os.path.join(work, f"warm{n}")
            shutil.copytree(seeded, lake)
            start = time.perf_counter()
            ingest(spark, [LATER], lake, None)
            if n == 0:
                first = time.perf_counter() - started
            else:
                warm.append(time.perf_counter() - start)
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    c, w = statistics.median(cold), statistics.median(warm)
    print(f"samples/seed000 batch 2 into a lake holding batch 1 (median of {args.repeat}), load average "
          f"{os.getloadavg()[0]:.2f} (2 cores here)")  # fmt: skip
    runs = {side: " ".join(f"{s:.1f}" for s in got) for side, got in (("cold", cold), ("warm", warm))}
    print(f"  cold: a resolver ingest process {c:5.1f} s (runs {runs['cold']})")
    print(f"  warm: the same ingest in a process that stays up {w:5.1f} s (runs {runs['warm']})")
    print(f"  the warm process's start and first batch: {first:.1f} s, paid once")
    print(f"  a call's own price: {c - w:.1f} s ({c / w:.1f}x the warm batch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
