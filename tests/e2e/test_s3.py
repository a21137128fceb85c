"""The landing folder and the lake on a real S3-compatible server (moto's, one per session: the ``s3_server``
fixture of tests/harness/fixtures.py; this test in a bucket of its own): ``resolver run --stream --once``
in a child process, as a user runs it against S3 (``--packages org.apache.hadoop:hadoop-aws:3.4.1`` and
``--conf spark.hadoop.fs.s3a.*``), its checkpoint in the lake on S3, killed with SIGKILL in the middle of its
first micro-batch (a table written, the other not) and started again. A micro-batch runs the scheduled
run's batch (listing, reading, bronze, the tables, the ledger), so this covers both on S3; a landing folder
that grows between killed runs and streams is test_run's and test_stream's, on a local folder. Ground truth
is a real PostgreSQL: the lake (copied down from the server) equals the database as of every commit (the
differential check of tests/difftest.py), the ledger names the landed objects by their ``s3a://`` URIs, and
the lock the killed process left in the lake's lock table was taken over and released."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests import difftest as d
from tests.harness.fixtures import Captures
from tests.harness.processes import Resolver
from tests.harness.s3 import S3Server

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

FILES = 4


def _killed_at(marker: str, *args: str) -> str:
    """``resolver ARGS`` in a child process, SIGKILLed once a progress line contains ``marker``; what it
    printed."""
    child = Resolver(*args)
    child.until(marker)
    status, _ = child.stop(signal.SIGKILL)
    assert status == -signal.SIGKILL, "it ended before the kill point:\n" + "\n".join(child.seen)
    return "\n".join(child.seen)


def test_a_stream_on_s3_killed_in_a_micro_batch_equals_postgresql(
    spark: SparkSession, captures: Captures, s3_server: S3Server, tmp_path: Path
) -> None:
    cap = captures.get(d.REPLAY_SEED, d.REPLAY_TRANSACTIONS)
    files = d.landed_files(cap, FILES)  # cut inside transactions too
    s3 = s3_server.bucket()
    lake = f"s3a://{s3.name}/lake"
    pipeline = tmp_path / "pipeline.yaml"
    source = f"source: {{path: 's3a://{s3.name}/landing/', format: wal2json-v2}}"
    tables = d.KILL_TABLES
    include = "[" + ", ".join(t.qualified for t in tables) + "]"
    # one micro-batch: what this test adds is S3 (listing, reading, the lake, the checkpoint and the lock
    # table on it); batches of fewer files, their neighbours and held-back transactions are test_run's and
    # test_stream's, on a local folder
    pipeline.write_text(f"{source}\nlake: '{lake}'\nmax_files_per_batch: {FILES}\ninclude: {include}\n")
    for i in range(FILES):
        s3.put(f"landing/{i:04d}.json", files[i])
    stream = ["run", str(pipeline), "--stream", "--once", *s3.conf()]
    _killed_at("done (1)", *stream)  # the stream's 1st micro-batch, cut short after its 1st table
    last = Resolver(*stream, "--wait", "300")
    status, _ = last.finish(900)
    printed = "\n".join(last.seen)
    assert status == 0, printed
    assert "taking over the lock" in printed, printed
    local = tmp_path / "lake"
    s3.download("lake/", local)
    problems = d.check_lake(d.collect_silver(spark, local, tables), cap.timeline[2], tables)
    assert not problems, "\n".join(problems[:30])
    assert not (local / "quarantine").exists(), "a transaction cut by a file boundary was quarantined"
    ledger = spark.read.format("delta").load(str(local / "_resolver" / "ledger")).select("path").collect()
    assert {row["path"] for row in ledger} == {f"s3a://{s3.name}/landing/{i:04d}.json" for i in range(FILES)}
    assert (local / "_resolver" / "stream" / "commits").is_dir()  # the stream's checkpoint, in the lake
    lock = spark.read.format("delta").load(str(local / "_resolver" / "lock")).collect()
    assert [(row["slot"], row["holder"]) for row in lock] == [(0, None)]
