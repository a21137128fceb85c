"""``resolver run``: a landing folder that grows between runs, runs killed mid-way, two runs at once, a
failing table that does not stop the others, and the per-table settings of a pipeline file. Ground truth is
a real PostgreSQL: the lake must equal the database after every run (the differential check of
tests/difftest.py: snapshot = final state, history as of every commit = the state after that commit)."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from resolver import run_pipeline
from resolver.cli.main import main
from resolver.lake.folders import history_path, snapshot_path
from resolver.lake.lock import LakeBusy, lock_path
from resolver.pipelines.run import ledger_path
from tests import difftest as d
from tests.harness.fixtures import Captures
from tests.harness.postgres import PgDatabase, write_lines
from tests.harness.processes import Resolver
from tests.pipelines import failing_orders_pipeline, pipeline_file

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
FILES = 9
#: which progress line a later round's first run is killed at: in the middle of the silver tables, and after
#: the batch was applied but before the ledger recorded it (a run killed before it read anything leaves only
#: its lock, which these take over as well)
KILL_AT = ("done (1)", "new, ")


def _kill_at(pipeline: Path, marker: str) -> str:
    """Run ``resolver run`` in a child process and SIGKILL it once a progress line contains ``marker``.
    Returns the lines it printed."""
    child = Resolver("run", str(pipeline))
    child.until(marker)
    status, _ = child.stop(signal.SIGKILL, timeout=120)  # reaped: its process id is gone, its lock stale
    assert status == -signal.SIGKILL, "the run ended before the kill point:\n" + "\n".join(child.seen)
    return "\n".join(child.seen)


def test_the_replayed_workload_holds_the_cases_of_its_tables(captures: Captures) -> None:
    """The kill tests keep two tables of the replayed workload (``d.KILL_TABLES``): they must still see key
    changes, TOASTed columns left out of updates and truncates (a guard against a workload that quietly
    stops producing a case for them)."""
    cases = d.replay_cases(captures.get(d.REPLAY_SEED, d.REPLAY_TRANSACTIONS), d.KILL_TABLES)
    assert all(n > 0 for n in cases.values()), cases


def test_a_growing_landing_folder_with_killed_runs_equals_postgresql(
    spark: SparkSession, captures: Captures, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cap = captures.get(d.REPLAY_SEED, d.REPLAY_TRANSACTIONS)
    files = d.landed_files(cap, FILES)  # cut inside transactions too
    ends, n = {}, 0
    for frame in cap.frames[2]:
        n += len(frame.lines)
        ends[frame.lsn] = n  # lines up to this transaction's commit
    tables = d.KILL_TABLES
    include = "[" + ", ".join(t.qualified for t in tables) + "]"
    pipeline = pipeline_file(tmp_path, max_files_per_batch=3, include=include)
    lake = tmp_path / "lake"
    rounds = [4, 7, FILES]  # the first run makes two batches; the others, one each
    for r, upto in enumerate(rounds):
        for i in range(rounds[r - 1] if r else 0, upto):
            write_lines(tmp_path / "landing" / f"{i:04d}.json", files[i])
        printed = _kill_at(pipeline, KILL_AT[r - 1]) if r else ""
        with caplog.at_level(
            logging.WARNING, logger="resolver.lake.lock"
        ):  # once the killed run's JVM is gone
            summary = run_pipeline(spark, str(pipeline), wait_seconds=300)
        assert ("taking over the lock" in caplog.text) == bool(r), printed
        caplog.clear()
        assert summary.status == "ok" and not summary.failed_tables
        landed = sum(len(f) for f in files[:upto])
        timeline = [c for c in cap.timeline[2] if ends[c.lsn] <= landed]  # commits that have landed
        silver = d.collect_silver(spark, lake, tables)
        problems = d.check_lake(silver, timeline, tables)
        assert not problems, f"round {r} (files 0..{upto - 1}):\n" + "\n".join(problems[:30])
        assert not (lake / "quarantine").exists(), "a transaction cut by a file boundary was quarantined"
        ledger = spark.read.format("delta").load(ledger_path(str(lake))).select("path").collect()
        paths = [row["path"] for row in ledger]
        settled = d.settled_files(files, upto)  # a transaction still open waits for its commit
        assert sorted(paths) == sorted({str(tmp_path / "landing" / f"{i:04d}.json") for i in range(settled)})
    again = run_pipeline(spark, str(pipeline))
    assert (again.status, again.files_new, again.batches) == ("idle", 0, [])
    assert not os.path.exists(lock_path(str(lake)))


def test_two_runs_at_once(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = pipeline_file(tmp_path)
    for name in ("0001.json", "0002.json"):
        (tmp_path / "landing" / name).write_bytes(
            (ROOT / "samples" / "wal2json-v2" / "0001.json").read_bytes()
        )
    lake = str(tmp_path / "lake")
    first: list[object] = []
    worker = threading.Thread(target=lambda: first.append(run_pipeline(spark, str(pipeline))))
    worker.start()
    deadline = time.monotonic() + 120
    while not os.path.exists(lock_path(lake)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert worker.is_alive(), "the first run ended before the second one started"
    with pytest.raises(LakeBusy) as busy:
        run_pipeline(spark, str(pipeline))
    assert f"lake {lake} is being written by run 20" in str(busy.value)
    assert str(busy.value).endswith(
        f"expected no other run (pass --wait SECONDS to wait for it, or remove {lock_path(lake)} if that "
        "process is gone)"
    )
    assert main(["run", str(pipeline)]) == 4
    assert capsys.readouterr().err.startswith(f"resolver: busy: lake {lake} is being written by run ")
    second = run_pipeline(spark, str(pipeline), wait_seconds=600)  # waits for the first, then finds nothing
    worker.join()
    assert [s.status for s in first] == ["ok"] and second.status == "idle"
    snap = spark.read.format("delta").load(snapshot_path(lake, "public.orders"))
    assert snap.count() == 3  # the same events twice (two files): applied once
    ledger = spark.read.format("delta").load(ledger_path(lake))
    assert ledger.count() == 2


def test_a_failing_table_does_not_stop_the_others(spark: SparkSession, tmp_path: Path) -> None:
    pipeline = failing_orders_pipeline(tmp_path)
    schemas = tmp_path / "schemas"
    lake = str(tmp_path / "lake")
    summary = run_pipeline(spark, str(pipeline))
    assert summary.status == "partial" and list(summary.failed_tables) == ["public.orders"]
    assert summary.failed_tables["public.orders"].startswith(
        "table public.orders: column amount is not in public.orders.yaml, first at commit LSN "
    )
    assert {t.table for t in summary.tables() if not t.error} == {"public.audit_log", "public.customers"}
    assert spark.read.format("delta").load(snapshot_path(lake, "public.customers")).count() == 6
    assert not os.path.exists(snapshot_path(lake, "public.orders"))
    assert not DeltaTable.isDeltaTable(spark, ledger_path(lake))  # the batch is read again next run
    (schemas / "public.orders.yaml").unlink()
    fixed = run_pipeline(spark, str(pipeline))
    assert (fixed.status, fixed.files_applied) == ("ok", 1)
    assert spark.read.format("delta").load(snapshot_path(lake, "public.orders")).count() == 3
    assert main(["run", str(pipeline), "--quiet"]) == 0


def test_per_table_settings(spark: SparkSession, pg_db: PgDatabase, tmp_path: Path) -> None:
    pg_db.execute(
        "CREATE TABLE t (id int PRIMARY KEY, status text, seen int);"
        "CREATE TABLE h (id int PRIMARY KEY, v text); CREATE TABLE s (id int PRIMARY KEY, v text)"
    )
    pg_db.create_slot("s")
    steps = [
        "INSERT INTO t VALUES (1, 'a', 0); INSERT INTO h VALUES (1, 'x'); INSERT INTO s VALUES (1, 'x')",
        "UPDATE t SET seen = 1 WHERE id = 1; UPDATE h SET v = 'y'; UPDATE s SET v = 'y'",
        "UPDATE t SET seen = 2 WHERE id = 1",
        "UPDATE t SET status = 'b' WHERE id = 1",
        "UPDATE t SET seen = 3 WHERE id = 1",
    ]
    for step in steps:
        pg_db.execute(step)
    write_lines(tmp_path / "landing" / "0001.json", pg_db.capture("s", 2, consume=True))
    pipeline = pipeline_file(
        tmp_path,
        tables="{public.t: {track_history: [status], cluster_by_key: true}, public.h: {outputs: [history]}, "
        "public.s: {outputs: [snapshot]}}",
    )
    lake = str(tmp_path / "lake")
    assert run_pipeline(spark, str(pipeline)).status == "ok"
    hist = spark.read.format("delta").load(history_path(lake, "public.t"))
    rows = [tuple(r) for r in hist.orderBy("__start_lsn").select("status", "seen", "__is_current").collect()]
    # only the status change opened a version; the seen changes updated the open version in place
    assert rows == [("a", 2, False), ("b", 3, True)]
    first, second = hist.orderBy("__start_lsn").select("__start_lsn", "__end_lsn").collect()
    assert first["__end_lsn"] == second["__start_lsn"]
    snap = spark.read.format("delta").load(snapshot_path(lake, "public.t"))
    assert [tuple(r) for r in snap.select("id", "status", "seen").collect()] == [(1, "b", 3)]
    detail = DeltaTable.forPath(spark, history_path(lake, "public.t")).detail().first()
    assert detail is not None and list(detail["clusteringColumns"]) == ["id"]
    assert not os.path.exists(snapshot_path(lake, "public.h"))
    h = spark.read.format("delta").load(history_path(lake, "public.h"))
    assert sorted(tuple(r) for r in h.select("v", "__is_current").collect()) == [("x", False), ("y", True)]
    assert not os.path.exists(history_path(lake, "public.s"))
    s = spark.read.format("delta").load(snapshot_path(lake, "public.s"))
    assert [tuple(r) for r in s.select("id", "v").collect()] == [(1, "y")]
    # a later batch: the snapshot-only table diffs against its snapshot, the history-only one its history
    pg_db.execute("UPDATE s SET v = 'z'; UPDATE h SET v = 'z'; DELETE FROM t")
    write_lines(tmp_path / "landing" / "0002.json", pg_db.capture("s", 2, consume=True))
    assert run_pipeline(spark, str(pipeline)).status == "ok"
    s = spark.read.format("delta").load(snapshot_path(lake, "public.s"))
    assert [tuple(r) for r in s.select("id", "v").collect()] == [(1, "z")]
    h = spark.read.format("delta").load(history_path(lake, "public.h"))
    assert sorted(tuple(r) for r in h.select("v", "__is_current").collect()) == [
        ("x", False),
        ("y", False),
        ("z", True),
    ]
    hist = spark.read.format("delta").load(history_path(lake, "public.t"))
    rows = [
        tuple(r)
        for r in hist.orderBy("__start_lsn").select("status", "__is_current", "__is_deleted").collect()
    ]
    assert rows == [("a", False, False), ("b", False, True)]


def test_a_pipeline_of_debezium_files_is_detected_and_applied_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    vectors = Path(__file__).resolve().parents[1] / "vectors" / "debezium"
    landing = tmp_path / "landing"
    landing.mkdir()
    lines = (vectors / "envelope.jsonl").read_text("utf-8").splitlines()
    create = next(i for i, line in enumerate(lines) if "__debezium.oldkey" in line)
    (landing / "0001.jsonl").write_text("\n".join(lines[:create]) + "\n", "utf-8")  # a key change cut in two
    (landing / "0002.jsonl").write_text("\n".join(lines[create:]) + "\n", "utf-8")
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text("source: {path: landing/}\nlake: lake/\nmax_files_per_batch: 1\n")  # format detected
    summary = run_pipeline(spark, str(pipeline))
    assert (summary.files_applied, len(summary.batches), summary.failed_tables) == (2, 2, {})
    assert sum(b.accepted for b in summary.batches) == 20 and sum(b.quarantined for b in summary.batches) == 0
    items = {
        r["id"]: r
        for r in spark.read.format("delta")
        .load(snapshot_path(str(tmp_path / "lake"), "public.items"))
        .collect()
    }
    direct = tmp_path / "direct"
    from resolver import ingest

    ingest(spark, [str(vectors / "envelope.jsonl")], str(direct), "debezium-json")
    expected = {
        r["id"]: r
        for r in spark.read.format("delta").load(snapshot_path(str(direct), "public.items")).collect()
    }
    assert items.keys() == expected.keys() and 20 in items and 2 not in items  # the row moved from 2 to 20
    assert all(
        items[k]["big"] == expected[k]["big"] and items[k]["name"] == expected[k]["name"] for k in items
    )
    assert run_pipeline(spark, str(pipeline)).files_applied == 0
