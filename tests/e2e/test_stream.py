"""``resolver run --stream``: the pipeline as a Structured Streaming query. A continuous stream over a landing
folder that grows while it runs, killed with SIGKILL in a micro-batch and started again, then stopped with
SIGTERM; ``--stream --once`` after a scheduled run on the same lake; a micro-batch whose table failed stops
the query uncommitted and is applied on the next start. Ground truth is a real PostgreSQL (the differential
check of tests/difftest.py) and the sample stream's expected tables."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver import run_pipeline
from resolver.cli.main import main
from resolver.config.pipeline import load_pipeline
from resolver.lake.folders import snapshot_path
from resolver.pipelines.run import ledger_path
from resolver.pipelines.stream import checkpoint_path, run_stream
from tests import difftest as d
from tests.harness.fixtures import Captures
from tests.harness.postgres import write_lines
from tests.harness.processes import Resolver
from tests.pipelines import failing_orders_pipeline
from tests.samplelake import sample_lake_problems

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
FILES = 5


def _pipeline(folder: Path, **extra: str) -> Path:
    lines = [
        "source: {path: landing/, format: wal2json-v2}",
        "lake: lake/",
        "max_files_per_batch: 2",
        *[f"{k}: {v}" for k, v in extra.items()],
    ]
    path = folder / "pipeline.yaml"
    path.write_text("\n".join(lines) + "\n")
    (folder / "landing").mkdir(exist_ok=True)
    return path


def test_a_killed_stream_over_a_growing_folder_equals_postgresql(
    spark: SparkSession, captures: Captures, tmp_path: Path
) -> None:
    cap = captures.get(d.REPLAY_SEED, d.REPLAY_TRANSACTIONS)
    files = d.landed_files(cap, FILES)  # cut inside transactions too
    tables = d.KILL_TABLES
    include = "[" + ", ".join(t.qualified for t in tables) + "]"
    pipeline = _pipeline(tmp_path, stream="{trigger_seconds: 1}", include=include)
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    now = int(time.time())
    for i in range(4):
        write_lines(landing / f"{i:04d}.json", files[i])
        os.utime(landing / f"{i:04d}.json", (now - 60 + i, now - 60 + i))  # the file source's order: by time
    first = Resolver("run", str(pipeline), "--stream")
    first.until("done (1)")  # a table of the first micro-batch written, the others not yet
    status, _ = first.stop(signal.SIGKILL)
    assert status == -signal.SIGKILL
    again = Resolver("run", str(pipeline), "--stream")
    settled = d.settled_files(files, 4)  # files from where a still-open transaction began wait for it
    again.applied_until(settled)  # the killed micro-batch again, then the next
    for i in range(4, FILES):  # more files land while the stream runs, each whole (a hidden name, renamed)
        write_lines(landing / f".{i:04d}.json.tmp", files[i])
        os.rename(landing / f".{i:04d}.json.tmp", landing / f"{i:04d}.json")
    again.applied_until(FILES - settled)
    status, out = again.stop(signal.SIGTERM)
    assert status == 0, "\n".join(again.seen)
    assert "status               ok" in out, out
    problems = d.check_lake(d.collect_silver(spark, lake, tables), cap.timeline[2], tables)
    assert not problems, "\n".join(problems[:30])
    assert not (lake / "quarantine").exists(), "a transaction cut by a file boundary was quarantined"
    ledger = spark.read.format("delta").load(ledger_path(str(lake))).select("path").collect()
    assert sorted(r["path"] for r in ledger) == [str(landing / f"{i:04d}.json") for i in range(FILES)]
    assert os.path.isdir(checkpoint_path(load_pipeline(pipeline)))


def test_stream_once_after_a_scheduled_run_applies_only_the_new_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    sample = (ROOT / "samples/wal2json-v2/0001.json").read_bytes().splitlines()
    parts = [sample[:9], sample[9:20], sample[20:]]  # cut inside transactions
    pipeline_file = _pipeline(tmp_path)
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_lines(landing / "0001.json", parts[0])
    assert run_pipeline(spark, str(pipeline_file)).files_applied == 1
    write_lines(landing / "0002.json", parts[1])
    write_lines(landing / "0003.json", parts[2])
    pipeline = load_pipeline(pipeline_file)
    summary = run_stream(spark, pipeline, once=True)
    assert (summary.status, summary.files_new, summary.files_applied) == ("ok", 2, 2)
    assert sample_lake_problems(lake) == 0
    assert not (lake / "quarantine").exists()
    idle = run_stream(spark, pipeline, once=True)  # the checkpoint holds every file: no micro-batch
    assert (idle.status, idle.files_new, idle.batches) == ("idle", 0, [])
    ledger = spark.read.format("delta").load(ledger_path(str(lake))).select("path", "run_id").collect()
    assert len(ledger) == 3


def test_a_micro_batch_whose_table_failed_is_applied_on_the_next_start(
    spark: SparkSession, tmp_path: Path
) -> None:
    pipeline = failing_orders_pipeline(tmp_path)
    schemas = tmp_path / "schemas"
    lake = str(tmp_path / "lake")
    assert main(["run", str(pipeline), "--once"]) == 2  # --once is a streaming option
    assert main(["run", str(pipeline), "--stream", "--once", "--quiet"]) == 3
    assert spark.read.format("delta").load(snapshot_path(lake, "public.customers")).count() == 6
    assert not os.path.exists(snapshot_path(lake, "public.orders"))
    (schemas / "public.orders.yaml").unlink()
    assert main(["run", str(pipeline), "--stream", "--once", "--quiet"]) == 0  # the same micro-batch again
    assert spark.read.format("delta").load(snapshot_path(lake, "public.orders")).count() == 3
    assert run_pipeline(spark, str(pipeline)).files_new == 0  # and it is in the ledger
