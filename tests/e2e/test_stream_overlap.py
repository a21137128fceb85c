"""Runs of one pipeline that overlap (issue 34): a stream owns its pipeline for its whole life, so a second
stream or a scheduled run of it is refused at once (exit status 4, one line naming the holder) before it
starts any streaming query, and the holder's checkpoint is untouched; a stream killed with SIGKILL leaves
nothing that blocks the next one. The owner lock itself (``resolver.lake.lock``: two holders, a holder whose
process is gone taken over once its Spark driver ended too, waiting, a scheduled run's two locks) is
checked without Spark; the runs are real ``resolver`` processes on the sample stream, whose expected tables
are the ground truth."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver.config.pipeline import load_pipeline
from resolver.lake.lock import (
    LakeBusy,
    PipelineBusy,
    Taker,
    lake_lock,
    lock_path,
    owner_lock_path,
    pipeline_lock,
    run_locks,
)
from resolver.pipelines.run import checkpoint_path
from tests.harness.processes import ROOT, Resolver
from tests.samplelake import sample_lake_problems

GONE = 2**22 + 12345  # above the kernel's largest process id: no such process


def _holding(checkpoint: str, run_id: str, seconds: float) -> threading.Thread:
    """Another holder of the pipeline: a thread that owns it for ``seconds``."""
    taken = threading.Event()

    def hold() -> None:
        with pipeline_lock(checkpoint, "p.yaml", Taker(run_id)):
            taken.set()
            time.sleep(seconds)

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(10)
    return thread


def test_the_owner_lock_refuses_a_second_holder_takes_over_a_gone_one_and_waits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lake = str(tmp_path / "lake")
    checkpoint = os.path.join(lake, "_resolver", "stream")
    path = owner_lock_path(checkpoint)
    assert path == os.path.join(lake, "_resolver", "stream.lock")
    with pipeline_lock(checkpoint, "p.yaml", Taker("first")):
        with pytest.raises(PipelineBusy) as busy:
            with pipeline_lock(checkpoint, "p.yaml", Taker("second")):
                pass
        assert isinstance(busy.value, LakeBusy)  # exit status 4, as a busy lake
        text = str(busy.value)
        assert text.startswith(f"pipeline p.yaml is being run by run first (process {os.getpid()} on ")
        assert text.endswith(
            "): expected no other run of it (pass --wait SECONDS to wait for it, or remove "
            f"{path} if that process is gone)"
        )
        # the lake's lock is another one: ingest takes turns with a stream
        with lake_lock(lake, Taker("ingest")):
            pass
        with pytest.raises(PipelineBusy, match="^pipeline p.yaml is being run by run first "):
            with run_locks(lake, checkpoint, "p.yaml", Taker("scheduled")):  # a scheduled run is refused too
                pass
        assert not os.path.exists(lock_path(lake))  # and let the lake's lock go
    assert not os.path.exists(path)

    # a killed holder: its process is gone, its Spark driver (here a process that ends in 1 s) ends soon
    driver = subprocess.Popen(["sleep", "1"])
    threading.Thread(target=driver.wait).start()  # reaped when it ends, as init reaps a killed run's JVM
    killed = {"run_id": "killed", "host": socket.gethostname(), "pid": GONE, "helper_pids": [driver.pid]}
    Path(path).write_text(json.dumps(killed))
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="resolver.lake.lock"):
        with pipeline_lock(checkpoint, "p.yaml", Taker("next"), poll_seconds=0.05):  # no --wait: taken over
            assert json.loads(Path(path).read_text())["run_id"] == "next"
    assert time.monotonic() - started > 0.5
    assert (
        "waiting for the Spark driver of run killed to end (its process is gone): pipeline p.yaml"
        in caplog.text
    )
    assert f"taking over the lock of run killed (process {GONE} on " in caplog.text
    assert caplog.text.rstrip().endswith("is gone): pipeline p.yaml")

    holder = _holding(checkpoint, "stream", 1.5)
    with pytest.raises(
        PipelineBusy, match=r"^pipeline p.yaml is being run by run stream .* after waiting 0.2 s: "
    ):
        with pipeline_lock(checkpoint, "p.yaml", Taker("impatient"), wait_seconds=0.2, poll_seconds=0.05):
            pass
    started = time.monotonic()
    with pipeline_lock(checkpoint, "p.yaml", Taker("patient"), wait_seconds=30, poll_seconds=0.05):
        assert json.loads(Path(path).read_text())["run_id"] == "patient"
    assert time.monotonic() - started > 0.5
    holder.join()

    uri = (tmp_path / "s3" / "_resolver" / "stream").as_uri() + "/"  # the lock is a Delta table beside it
    assert owner_lock_path(uri) == uri[:-1] + ".lock"
    with pytest.raises(
        ValueError, match="^the owner lock of pipeline p.yaml is a Delta table: pass the Spark"
    ):
        with pipeline_lock(uri, "p.yaml", Taker("first")):
            pass

    holder = _holding(checkpoint, "stream", 1.5)  # a scheduled run waits with the lake's lock let go
    with run_locks(lake, checkpoint, "p.yaml", Taker("scheduled"), wait_seconds=30, poll_seconds=0.05):
        assert json.loads(Path(path).read_text())["run_id"] == "scheduled"
        with pytest.raises(LakeBusy, match=f"^lake {re.escape(lake)} is being written by run scheduled "):
            # two scheduled runs meet at the lake
            with run_locks(lake, checkpoint, "p.yaml", Taker("another")):
                pass
    holder.join()


def _pipeline(folder: Path) -> Path:
    path = folder / "pipeline.yaml"
    path.write_text(
        "source: {path: landing/, format: wal2json-v2}\nlake: lake/\nmax_files_per_batch: 3\n"
        "stream: {trigger_seconds: 1}\n"
    )
    (folder / "landing").mkdir()
    return path


def _land(landing: Path, parts: list[list[bytes]]) -> None:
    """Landing files ``0001.json``…, written under hidden names and renamed into place together, oldest first
    (the file source takes files in time order)."""
    now = time.time()
    for i, lines in enumerate(parts):
        hidden = landing / f".{i + 1:04d}.json.tmp"
        hidden.write_bytes(b"\n".join(lines) + b"\n")
        os.utime(hidden, (now - 60 + i, now - 60 + i))
    for i in range(len(parts)):
        os.rename(landing / f".{i + 1:04d}.json.tmp", landing / f"{i + 1:04d}.json")


def _contents(folder: Path) -> dict[str, bytes]:
    """Every file of a folder (a checkpoint: offsets, commits, metadata, and their checksums)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(rival: Resolver, pipeline: Path, owner: str) -> None:
    """The rival ended with exit status 4 and one line naming the pipeline's owner, nothing from Spark."""
    status, _ = rival.finish(timeout=300)
    printed = "\n".join(rival.seen)
    assert status == 4, printed
    said = [line for line in rival.seen if line.startswith("resolver: ")]
    assert len(said) == 1, printed
    assert said[0].startswith(f"resolver: busy: pipeline {pipeline} is being run by run 20"), printed
    assert said[0].endswith(
        f": expected no other run of it (pass --wait SECONDS to wait for it, or remove {owner} if that "
        "process is gone)"
    )
    assert "Exception" not in printed and "Traceback" not in printed, printed


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, f"no {path}"
        time.sleep(0.1)


@pytest.mark.spark
def test_overlapping_runs_of_a_pipeline_are_refused_and_a_killed_stream_blocks_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    sample = (ROOT / "samples/wal2json-v2/0001.json").read_bytes().splitlines()
    pipeline = _pipeline(tmp_path)
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    checkpoint = Path(checkpoint_path(load_pipeline(pipeline)))
    owner = owner_lock_path(str(checkpoint))
    started: list[Resolver] = []

    def start(*args: str) -> Resolver:
        started.append(Resolver("run", str(pipeline), *args))
        return started[-1]

    try:
        # a continuous stream owns the pipeline (idle: nothing has landed): a second stream and a scheduled
        # run of it are refused
        stream = start("--stream")
        stream.until("streaming query started")
        before = _contents(checkpoint)
        rivals = [start("--stream"), start()]  # the run meets the idle stream at the pipeline's lock
        for rival in rivals:
            _refused(rival, pipeline, owner)
        assert _contents(checkpoint) == before

        # files land (three, cut inside transactions: one micro-batch); killed in that micro-batch, which
        # has its files (the checkpoint's offsets) and the lake's lock
        _land(landing, [sample[:9], sample[9:20], sample[20:]])
        stream.until("micro-batch 0: 3 file(s)")
        status, _ = stream.stop(signal.SIGKILL)
        assert status == -signal.SIGKILL
        assert os.path.exists(owner)  # left behind

        # started again (--stream --once, no --wait): it takes the pipeline over at once; while it holds it
        # (its micro-batch kept waiting for the lake's lock, taken here as an ingest would, once the killed
        # one's JVM is gone too), a second one is refused
        with lake_lock(str(lake), Taker("ingest")):
            again = start("--stream", "--once")
            again.until("waiting up to 600 s for lake ")
            took = [line for line in again.seen if "taking over the lock of run " in line]
            assert took and took[0].endswith(f"is gone): pipeline {pipeline}"), "\n".join(again.seen)
            before = _contents(checkpoint)
            _refused(start("--stream", "--once"), pipeline, owner)
            assert _contents(checkpoint) == before
        status, out = again.finish(timeout=600)
        assert status == 0, "\n".join(again.seen)
        assert "status               ok" in out, out
    finally:
        for child in started:
            if child.proc.poll() is None:
                child.proc.kill()
    assert sample_lake_problems(lake) == 0
    assert not os.path.exists(owner) and not os.path.exists(lock_path(str(lake)))
