"""One batch of updates into a large table: time, Spark jobs and MERGE metrics (issue 3's measurement).

    python -m bench.resolve_speed --rows 1000000 --batch 100000

Writes synthetic wal2json format-2 files (a table ``public.accounts (id bigint PK, name text, balance
numeric(12,2), note text)``): one file inserting ``--rows`` rows in transactions of 1,000, then one file of
``--batch`` events (updates of random keys, 5% deletes, 5% key changes) in transactions of 100. Ingests
the first (building the 1M-row snapshot and history), then times the second, and prints the seconds,
the Spark jobs each stage ran and the history/snapshot MERGE metrics.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

from resolver import ingest, local_session
from resolver.silver import history_path, snapshot_path


def _txn(out: list[str], xid: int, lsn: int, changes: list[dict]) -> None:
    ts = f"2026-01-01 00:00:{(xid % 60):02d}+00"
    head = {"action": "B", "xid": xid, "timestamp": ts, "lsn": f"0/{lsn - 16:X}", "nextlsn": f"0/{lsn:X}"}
    out.append(json.dumps(head))
    for c in changes:
        out.append(json.dumps({"xid": xid, "timestamp": ts, "schema": "public", "table": "accounts", **c}))
    out.append(json.dumps({**head, "action": "C"}))


PK = [{"name": "id", "type": "bigint"}]


def _cols(i: int, balance: str, note: str) -> list[dict]:
    return [
        {"name": "id", "type": "bigint", "value": i},
        {"name": "name", "type": "text", "value": f"account {i}"},
        {"name": "balance", "type": "numeric(12,2)", "value": balance},
        {"name": "note", "type": "text", "value": note},
    ]


def write_inputs(folder: Path, rows: int, batch: int, seed: int = 0) -> tuple[Path, Path]:
    rnd = random.Random(seed)
    lines: list[str] = []
    xid, lsn = 1000, 1 << 24
    for start in range(0, rows, 1000):
        changes = [
            {"action": "I", "columns": _cols(i, "0.00", "new"), "pk": PK} for i in range(start, start + 1000)
        ]
        xid, lsn = xid + 1, lsn + 4096
        _txn(lines, xid, lsn, changes)
    base = folder / "base.json"
    base.write_text("\n".join(lines) + "\n")
    lines = []
    live = set(range(rows))
    next_key = rows
    pending: list[dict] = []
    for n in range(batch):
        k = rnd.randrange(rows)
        while k not in live:
            k = rnd.randrange(rows)
        r = rnd.random()
        ident = [{"name": "id", "type": "bigint", "value": k}]
        if r < 0.05:
            pending.append({"action": "D", "identity": ident, "pk": PK})
            live.discard(k)
        elif r < 0.10:
            cols = _cols(next_key, f"{rnd.randrange(10**6)}.00", "moved")
            pending.append({"action": "U", "columns": cols, "identity": ident, "pk": PK})
            live.discard(k)
            next_key += 1
        else:
            pending.append(
                {
                    "action": "U",
                    "columns": _cols(k, f"{rnd.randrange(10**6)}.00", f"n{n}"),
                    "identity": ident,
                    "pk": PK,
                }
            )
        if len(pending) == 100:
            xid, lsn = xid + 1, lsn + 4096
            _txn(lines, xid, lsn, pending)
            pending = []
    if pending:
        _txn(lines, xid + 1, lsn + 4096, pending)
    updates = folder / "batch.json"
    updates.write_text("\n".join(lines) + "\n")
    return base, updates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--shuffle-partitions", default="8")
    args = parser.parse_args()
    spark = local_session("bench-resolve", spark__sql__shuffle__partitions=args.shuffle_partitions)
    sc = spark.sparkContext
    folder = Path(tempfile.mkdtemp(prefix="bench-resolve-"))
    try:
        base, batch = write_inputs(folder, args.rows, args.batch)
        lake = str(folder / "lake")
        for name, path in (("base", base), ("batch", batch)):
            sc.setJobGroup(name, name)
            start = time.perf_counter()
            summary = ingest(spark, [str(path)], lake, "wal2json-v2")
            secs = time.perf_counter() - start
            jobs = len(sc.statusTracker().getJobIdsForGroup(name))
            (t,) = summary.tables
            print(
                f"{name}: {summary.events_read} events in {secs:.1f} s, {jobs} Spark jobs; "
                f"inserted {t.inserted} updated {t.updated} deleted {t.deleted} moved {t.moved} "
                f"versions written {t.versions_written} rounds {t.rounds}"
            )
        for label, path in (
            ("history", history_path(lake, "public.accounts")),
            ("snapshot", snapshot_path(lake, "public.accounts")),
        ):
            last = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").select("operationMetrics").first()[0]
            keep = (
                "numTargetFilesAdded",
                "numTargetFilesRemoved",
                "numTargetRowsCopied",
                "numTargetRowsUpdated",
                "numTargetRowsInserted",
                "numTargetRowsDeleted",
                "executionTimeMs",
            )
            print(label, {k: last.get(k) for k in keep})
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
