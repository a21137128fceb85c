"""pgbench's own tables, as a new user meets them (issue 67): ``pgbench -i -s 1`` (100,000 accounts, their
``filler`` a ``character(84)`` of blanks), a pgbench writer busy while ``resolver capture`` copies them, a
second capture after it, then ``resolver run``: every table equals the database, value for value (the
padding of ``character(n)`` too: the copy once wrote ``''`` where PostgreSQL and the stream hold 84
blanks)."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from resolver import run_pipeline
from resolver.capture.snapshot import CaptureOptions, capture_once
from tests.harness.postgres import PgDatabase, find_bindir
from tests.pipelines import pipeline_file

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")


def _pgbench(db: PgDatabase, *args: str) -> subprocess.Popen[str]:
    command = [str(find_bindir() / "pgbench"), *args, db.dsn]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _done(process: subprocess.Popen[str]) -> None:
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-2000:]


def _rows(values: list[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(row) for row in values)


def test_pgbench_tables_captured_while_pgbench_writes_equal_the_database(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    _done(_pgbench(pg_db, "-i", "-s", "1", "-q"))
    landing = tmp_path / "landing"
    options = CaptureOptions(pg_db.dsn, str(landing), "bench", ("public.pgbench_*",))
    writer = _pgbench(pg_db, "-n", "-c", "2", "-j", "2", "-T", "4")  # busy while the copy runs
    try:
        first = capture_once(options)
    finally:
        _done(writer)
    assert first.snapshot_rows["public.pgbench_accounts"] == 100_000, first.lines()
    capture_once(options)  # what the writer committed after the slot, and during the copy
    summary = run_pipeline(spark, str(pipeline_file(tmp_path, max_files_per_batch=100)))
    assert not summary.failed_tables, summary.lines()
    assert sum(b.quarantined for b in summary.batches) == 0, summary.lines()
    assert sum(b.accepted for b in summary.batches) > 100_000, summary.lines()  # the stream's changes too
    differences = []
    for table in TABLES:
        names = [
            str(r[0])
            for r in pg_db.query(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                "ORDER BY ordinal_position",
                (table,),
            )
        ]
        database = pg_db.query(f"SELECT {', '.join(names)} FROM {table}")
        lake = spark.read.format("delta").load(str(tmp_path / "lake" / "silver" / f"public.{table}"))
        got, want = _rows([tuple(r) for r in lake.select(*names).collect()]), _rows(database)
        if got != want:
            missing, extra = want - got, got - want
            differences.append(
                f"{table}: {sum(missing.values())} row(s) of the database missing, {sum(extra.values())} "
                f"not in it; e.g. {list(missing)[:2]} vs {list(extra)[:2]}"
            )
    assert not differences, "\n".join(differences)
