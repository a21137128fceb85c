"""The lake's own small tables written once per batch (the schema log, ``resolver run``'s ledger of applied
files) take one file per commit, however many rows the batch brings and cores the session has: a year of
minute-by-minute batches is then a year of files, not four times as many, for every later read of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver.lake.ledger import record_files
from resolver.plan.schemalog import write_schema_log

pytestmark = pytest.mark.spark


def _files_added(path: Path, version: int) -> int:
    """The data files commit ``version`` of the Delta table at ``path`` added."""
    log = path / "_delta_log" / f"{version:020d}.json"
    return sum("add" in json.loads(line) for line in log.read_text().splitlines())


def test_the_schema_log_and_the_ledger_take_one_file_per_commit(spark: SparkSession, tmp_path: Path) -> None:
    assert spark.sparkContext.defaultParallelism > 1  # a driver's rows would be split: the case at hand
    changes = [
        {"table": f"public.t{i % 3}", "version": 1, "change": "added", "column": f"c{i}", "new_type": "int",
         "pg_type": "integer", "lsn": 100 + i}
        for i in range(11)
    ]  # fmt: skip
    log = tmp_path / "schema_log"
    write_schema_log(spark, str(log), changes)  # appended: the log held nothing yet
    write_schema_log(spark, str(log), [{**c, "version": 2} for c in changes])  # looked up, then inserted
    assert [_files_added(log, v) for v in (1, 2)] == [1, 1]
    assert spark.read.format("delta").load(str(log)).count() == 22

    ledger = tmp_path / "ledger"
    files = [f"/landing/{n:04d}.json" for n in range(9)]
    record_files(spark, str(ledger), files, {f: (100, 7) for f in files}, "run", 1)
    more = [*files, "/landing/0009.json"]  # the nine again and one new
    record_files(spark, str(ledger), more, {f: (100, 7) for f in more}, "run", 2)
    assert [_files_added(ledger, v) for v in (1, 2)] == [1, 1]
    assert spark.read.format("delta").load(str(ledger)).count() == 10  # the nine held were not added twice
