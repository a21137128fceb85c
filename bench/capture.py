"""How fast does ``resolver capture`` bring a database into a lake, against the plain ways of moving the same
data? Two ratios, each side measured in the same run on the same PostgreSQL 15 + wal2json (a private server
on a loopback port, the tests' harness):

    python -m bench.capture                          # 200,000 rows, 100,000 changes, median of 3
    python -m bench.capture --rows 50000 --changes 5000 --repeat 1

1. **Initial load** (goal: ratio <= 2): ours = ``capture_once`` (a slot exporting a snapshot, every row
   copied into a snapshot file) + ``resolver ingest`` of that file into a fresh lake, against
   ``COPY ... TO STDOUT (FORMAT csv)`` into a file + Spark's ``read.csv`` with the table's schema +
   ``write.format("delta")``. Rows per second of each, and the copy alone. A third side, the *floor*:
   the same COPY, then the snapshot, history and bronze that DESIGN.md's contracts make every load write,
   written plainly from the CSV with no work of our own: no load that keeps the contracts beats it.
2. **Capture throughput** (goal: ratio <= 1.5): ``--changes`` single-row updates in transactions of 10,
   read by three slots created at the same position: ours = ``capture_once``'s drain (the slot read up to
   the current position, a durable landing file, the slot confirmed) and a running capture
   (``stream_changes`` over the replication protocol, files closed every 0.2 s, timed until the slot is
   confirmed up to the end, polled every 10 ms), against ``pg_recvlogical --start --endpos`` writing the
   same wal2json options to a file. The drain's and pg_recvlogical's files must hold the same records, and
   the running capture's files as many changes. The default backlog (100,000) is large enough that the
   ratio measures throughput: at 20,000 a running capture's start and its last file's 0.2 s were most of its
   time (3.22x, 2026-11-27).

The table is pgbench's ``pgbench_accounts`` shape (int key, two ints, ``char(84)`` filler). One warm
SparkSession (``resolver.local_session``); the first repeat of each side also warms up.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from resolver.lsn import parse_lsn

TABLE_SQL = (
    "CREATE TABLE public.accounts (aid int PRIMARY KEY, bid int NOT NULL, abalance int NOT NULL, "
    "filler char(84))"
)


def _load(db, rows: int) -> None:  # type: ignore[no-untyped-def]
    db.execute(TABLE_SQL)
    db.execute(
        f"INSERT INTO public.accounts SELECT g, 1 + g / 100000, 0, '' FROM generate_series(1, {rows}) g"
    )
    db.execute("VACUUM ANALYZE public.accounts")


def _median(values: list[float]) -> float:
    return statistics.median(values)


def initial_load(spark, db, rows: int, repeat: int, work: Path) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Seconds of ours (copy, apply) and of the baseline (COPY, Spark write), medians of ``repeat``."""
    import psycopg

    from resolver import ingest
    from resolver.capture.snapshot import CaptureOptions, capture_once

    copy, apply, base, floor = [], [], [], []
    for n in range(repeat + 1):  # the first run warms up and is not counted
        landing, lake = work / f"landing{n}", work / f"lake{n}"
        began = time.perf_counter()
        summary = capture_once(CaptureOptions(db.dsn, str(landing), f"load{n}", ("public.accounts",)))
        copied = time.perf_counter()
        result = ingest(spark, summary.files, str(lake), "wal2json-v2")
        done = time.perf_counter()
        assert result.accepted == rows and result.quarantined == 0, result
        db.execute(f"SELECT pg_drop_replication_slot('load{n}')")

        csv, table = work / f"copy{n}.csv", work / f"delta{n}"
        began_base = time.perf_counter()
        with psycopg.connect(db.dsn) as conn, open(csv, "wb") as out:
            with conn.cursor().copy("COPY public.accounts TO STDOUT (FORMAT csv)") as stream:
                for chunk in stream:
                    out.write(chunk)
        copied_base = time.perf_counter()
        schema = "aid INT, bid INT, abalance INT, filler STRING"
        spark.read.csv(str(csv), schema=schema).write.format("delta").save(str(table))
        done_base = time.perf_counter()
        _contract_tables(spark, spark.read.csv(str(csv), schema=schema), work / f"floor{n}")
        done_floor = time.perf_counter()
        if n:
            copy.append(copied - began)
            apply.append(done - copied)
            base.append(done_base - began_base)
            floor.append(copied_base - began_base + done_floor - done_base)
    return {
        "copy": _median(copy),
        "apply": _median(apply),
        "baseline": _median(base),
        "floor": _median(floor),
    }


def _contract_tables(spark, rows, folder: Path) -> None:  # type: ignore[no-untyped-def]
    """The least any load that keeps DESIGN.md's contracts writes, with no work of its own: the rows
    written plainly as a snapshot (Change Data Feed on), a history (the six technical columns, Change
    Data Feed on) and bronze (one append-only row per event with its text), from one cached read."""
    from pyspark.sql import functions as F

    cdf = {"delta.enableChangeDataFeed": "true"}
    rows = rows.cache()
    rows.write.format("delta").options(**cdf).save(str(folder / "snapshot"))
    far = F.lit("9999-12-31 23:59:59.999999").cast("timestamp")
    now = F.current_timestamp()
    history = rows.select(
        "*",
        now.alias("__start_time"),
        far.alias("__end_time"),
        F.lit(True).alias("__is_current"),
        F.lit(False).alias("__is_deleted"),
        F.lit(1).cast("long").alias("__start_lsn"),
        F.lit(2**63 - 1).cast("long").alias("__end_lsn"),
    )
    history.write.format("delta").options(**cdf).save(str(folder / "history"))
    bronze = rows.select(
        F.lit("public.accounts").alias("table"),
        F.lit(1).cast("long").alias("commit_lsn"),
        F.monotonically_increasing_id().alias("position"),
        F.to_json(F.struct(*rows.columns)).alias("raw"),
    )
    bronze.write.format("delta").option("delta.appendOnly", "true").save(str(folder / "bronze"))
    rows.unpersist()


def capture_throughput(db, changes: int, repeat: int, work: Path) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Seconds of our drain, a running capture and ``pg_recvlogical`` over the same changes, medians of
    ``repeat``."""
    from resolver.capture.snapshot import STREAM_OPTIONS, CaptureOptions, capture_once
    from tests.harness.postgres import find_bindir

    ours, theirs, stream = [], [], []
    for n in range(repeat + 1):
        landing = work / f"stream{n}"
        options = CaptureOptions(db.dsn, str(landing), f"ours{n}", ("public.accounts",))
        capture_once(options)  # the slot and its snapshot; the changes come after
        db.execute(f"SELECT pg_create_logical_replication_slot('theirs{n}', 'wal2json')")
        running = CaptureOptions(db.dsn, str(work / f"running{n}"), f"running{n}", ("public.accounts",))
        capture_once(running)
        for first in range(0, changes, 10):
            updates = ";".join(
                f"UPDATE public.accounts SET abalance = abalance + 1 WHERE aid = {1 + (first + i) * 7 % 1000}"
                for i in range(min(10, changes - first))
            )
            db.execute(f"BEGIN;{updates};COMMIT")
        end = str(db.query("SELECT pg_current_wal_lsn()::text")[0][0])
        began = time.perf_counter()
        drained = capture_once(options)
        mine = time.perf_counter() - began
        out = work / f"recvlogical{n}.json"
        command = [str(find_bindir() / "pg_recvlogical"), "-d", db.dsn, "--slot", f"theirs{n}", "--start"]
        command += ["--endpos", end, "--no-loop", "-f", str(out)]
        command += [a for k, v in STREAM_OPTIONS.items() for a in ("-o", f"{k}={v}")]
        began = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env={"PGOPTIONS": _pgoptions()})
        other = time.perf_counter() - began
        streamed, files = _running(db, running, parse_lsn(end))
        written = [json.loads(x) for x in Path(drained.files[-1]).read_text().splitlines()]
        received = [json.loads(x) for x in out.read_text().splitlines()]
        assert _changes(written) == _changes(received) == changes, (_changes(written), _changes(received))
        landed = [json.loads(x) for f in files for x in Path(f).read_text().splitlines()]
        assert _changes(landed) == changes, _changes(landed)
        for slot in (f"ours{n}", f"theirs{n}", f"running{n}"):
            db.execute(f"SELECT pg_drop_replication_slot('{slot}')")
        if n:
            ours.append(mine)
            theirs.append(other)
            stream.append(streamed)
    return {"ours": _median(ours), "running": _median(stream), "pg_recvlogical": _median(theirs)}


def _running(db, options, end: int) -> tuple[float, list[str]]:  # type: ignore[no-untyped-def]
    """Seconds a running capture takes until the slot is confirmed up to ``end``, and its files."""
    from resolver.capture.stream import stream_changes

    stop, result = threading.Event(), []
    began = time.perf_counter()
    thread = threading.Thread(target=lambda: result.append(stream_changes(options, 0.2, stop)))
    thread.start()
    query = "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s"
    while parse_lsn(db.query(query, (options.slot,))[0][0]) < end:
        assert thread.is_alive(), "the running capture ended"
        time.sleep(0.01)
    took = time.perf_counter() - began
    stop.set()
    thread.join()
    return took, result[0].files


def _changes(records: list[dict]) -> int:  # type: ignore[type-arg]
    return sum(r["action"] in ("I", "U", "D") for r in records)


def _pgoptions() -> str:
    from resolver.capture.source import SESSION_SETTINGS

    return " ".join(f"-c {k}={v}" for k, v in SESSION_SETTINGS.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.capture", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the table before the slot")
    parser.add_argument(
        "--changes", type=int, default=100_000, help="updates read by the captures (a backlog: throughput)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side (after a warm-up)")
    parser.add_argument("--keep", action="store_true", help="keep the files in the temporary folder")
    args = parser.parse_args(argv)
    from resolver import local_session
    from tests.harness.postgres import PgServer

    work = Path(tempfile.mkdtemp(prefix="bench-capture-"))
    spark = local_session("bench-capture")
    try:
        with PgServer() as server:
            db = server.create_database("bench")
            _load(db, args.rows)
            load = initial_load(spark, db, args.rows, args.repeat, work)
            stream = capture_throughput(db, args.changes, args.repeat, work)
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    ours_load = load["copy"] + load["apply"]
    lines = [
        f"initial load, {args.rows} rows (median of {args.repeat}):",
        f"  ours      {ours_load:7.1f} s  {args.rows / ours_load:9.0f} rows/s  "
        f"(copy {load['copy']:.1f} s = {args.rows / load['copy']:.0f} rows/s, apply {load['apply']:.1f} s)",
        f"  baseline  {load['baseline']:7.1f} s  {args.rows / load['baseline']:9.0f} rows/s  "
        "(COPY TO csv + Spark write.format('delta'))",
        f"  floor     {load['floor']:7.1f} s  {args.rows / load['floor']:9.0f} rows/s  "
        "(the same COPY + the snapshot, history and bronze written plainly: what the contracts cost)",
        f"  ratio     {ours_load / load['baseline']:.2f}x  (goal <= 2; the floor alone is "
        f"{load['floor'] / load['baseline']:.2f}x)",
        f"capture, {args.changes} changes in transactions of 10 (median of {args.repeat}):",
        f"  ours            {stream['ours']:6.2f} s  {args.changes / stream['ours']:9.0f} changes/s",
        f"  running         {stream['running']:6.2f} s  {args.changes / stream['running']:9.0f} changes/s  "
        "(replication protocol, files every 0.2 s)",
        f"  pg_recvlogical  {stream['pg_recvlogical']:6.2f} s  "
        f"{args.changes / stream['pg_recvlogical']:9.0f} changes/s",
        f"  ratio           {stream['ours'] / stream['pg_recvlogical']:.2f}x drain, "
        f"{stream['running'] / stream['pg_recvlogical']:.2f}x running  (goal <= 1.5)",
    ]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
