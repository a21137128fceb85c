"""The floor under a first batch: what Spark and Delta cost on this machine before the resolver does anything.

    python -m bench.floor

In a fresh process: start ``local_session``, read the README's sample with Spark's JSON reader, write 9
tiny Delta tables (as many as a 3-table first batch writes: a change store, history and snapshot per table)
and run 3 tiny MERGEs. Prints the seconds of each part and the total. The README's first command does all of
this and more (bronze, the schema log, the resolution), so no first batch of the sample can be faster than
this total on the same machine (2026-11-26, this 2-core machine: 42.6 s: session 9.4, first read 5.4, 9
writes 13.1, 3 MERGEs 14.7).
"""

from __future__ import annotations

import os
import tempfile
import time

from resolver import local_session

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples", "wal2json-v2")


def main() -> int:
    start = time.perf_counter()
    spark = local_session("bench-floor")
    from delta.tables import DeltaTable

    marks = [("session", time.perf_counter())]
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp:
        spark.read.json(SAMPLE).count()
        marks.append(("first read", time.perf_counter()))
        for i in range(9):
            spark.range(10).write.format("delta").save(f"{tmp}/t{i}")
        marks.append(("9 Delta writes", time.perf_counter()))
        for i in range(3):
            target = DeltaTable.forPath(spark, f"{tmp}/t{i}").alias("t")
            merge = target.merge(spark.range(5, 15).alias("s"), "t.id = s.id")
            merge.whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
        marks.append(("3 MERGEs", time.perf_counter()))
    spark.stop()
    previous = start
    for name, at in marks:
        print(f"{name:16s} {at - previous:6.1f} s")
        previous = at
    print(f"{'total':16s} {marks[-1][1] - start:6.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
