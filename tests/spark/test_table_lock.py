"""The lock of a lake named by a URI (``resolver.lake.table_lock``): a one-row Delta table taken by
compare-and-swap commits. Runs on ``file:`` URIs (the same code as on S3), with real Delta commits racing
on threads."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver.lake.folders import Lake
from resolver.lake.lock import LakeBusy, Taker, lake_lock
from resolver.lake.table_lock import TableLock

pytestmark = pytest.mark.spark


def _me(run: str, pid: int = 1) -> dict[str, object]:
    return {"run_id": run, "host": socket.gethostname(), "pid": pid, "helper_pids": [], "since": "now"}


def test_a_second_run_is_refused_while_the_first_holds_it(spark: SparkSession, tmp_path: Path) -> None:
    lake = (tmp_path / "lake").as_uri()
    with lake_lock(lake, Taker("first", spark=spark)):
        with pytest.raises(LakeBusy) as busy:
            with lake_lock(lake, Taker("second", spark=spark)):
                pass
        text = str(busy.value)
        assert text.startswith(f"lake {lake} is being written by run first (process ")
        assert "clear it with UPDATE delta.`" in text and "_resolver/lock` SET holder = NULL" in text
    with lake_lock(lake, Taker("third", spark=spark)):  # released: free again
        assert TableLock(spark, Lake.at(lake).lock).holder()["run_id"] == "third"  # type: ignore[index]
    assert TableLock(spark, Lake.at(lake).lock).holder() is None


def test_the_lock_of_a_process_that_is_gone_is_taken_over(spark: SparkSession, tmp_path: Path) -> None:
    lake = (tmp_path / "lake").as_uri()
    gone = _me("crashed", pid=2**22 + 12345)  # above the kernel's largest pid: no such process
    assert TableLock(spark, Lake.at(lake).lock).take(gone)
    with lake_lock(lake, Taker("next", spark=spark)):
        assert TableLock(spark, Lake.at(lake).lock).holder()["run_id"] == "next"  # type: ignore[index]


def test_of_runs_taking_it_at_once_exactly_one_gets_it(spark: SparkSession, tmp_path: Path) -> None:
    lake = (tmp_path / "lake").as_uri()
    lock = TableLock(spark, Lake.at(lake).lock)
    for attempt in range(3):
        got: dict[str, bool] = {}
        start = threading.Barrier(2)

        def take(run: str, start: threading.Barrier = start, got: dict[str, bool] = got) -> None:
            start.wait()
            got[run] = TableLock(spark, Lake.at(lake).lock).take(_me(run))

        threads = [threading.Thread(target=take, args=(f"r{attempt}-{i}",)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [run for run, ok in got.items() if ok]
        assert len(winners) == 1, got
        holder = lock.holder()
        assert holder is not None and holder["run_id"] == winners[0]
        lock.release(holder)
        assert lock.holder() is None


def test_a_lake_named_by_a_uri_needs_the_session(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a Delta table: pass the SparkSession"):
        with lake_lock((tmp_path / "lake").as_uri(), Taker("x")):
            pass
