"""``resolver capture`` against a real PostgreSQL 15 + wal2json: a database that holds rows before its slot
exists becomes a lake equal to it — the snapshot's rows and the slot's changes after it, with no gap and
nothing twice — and every value a snapshot copies prints exactly what wal2json prints for it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver import ingest
from resolver.capture import CaptureOptions, capture_once
from resolver.lsn import parse_lsn
from tests import difftest as d
from tests.harness.postgres import PgDatabase

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
SEED = 29
#: transactions before the slot exists (rows only a snapshot can bring) and after it (only the stream can)
BEFORE, AFTER = 14, 16
#: the tables the lake test captures (``--tables``): a composite key changed in chains with TOASTed text left
#: out of updates (accounts), no key under REPLICA IDENTITY FULL (logs), truncates (scratch). Every type is
#: the first test's; each table costs the lake's batches their own Spark jobs.
LAKE_TABLES = (d.BY_NAME["accounts"], d.BY_NAME["logs"], d.BY_NAME["scratch"])


def _inserts(lines: list[str]) -> list[tuple[str, str, str]]:
    """Each ``I`` record as (table, its columns, its key), the numbers kept as PostgreSQL printed them."""
    out = []
    for line in lines:
        record = json.loads(line, parse_float=str, parse_int=str)
        if record["action"] == "I":
            columns = json.dumps(record["columns"], ensure_ascii=False)
            out.append((f"{record['schema']}.{record['table']}", columns, json.dumps(record.get("pk"))))
    return sorted(out)


def test_every_value_a_snapshot_copies_prints_what_wal2json_prints(pg_db: PgDatabase, tmp_path: Path) -> None:
    """The workload's first transactions insert rows of every type it has (numerics at their extremes, NaN,
    arrays, jsonb, bytea, intervals, timestamps, TOASTed text, keyless and composite-key tables): as wal2json
    streamed them, and as a snapshot copies them, they are the same records."""
    pg_db.execute(d.SCHEMA_SQL)
    pg_db.create_slot("stream")
    d.run_workload(pg_db, d.Workload(SEED).transactions(3))  # the first three insert into every table
    streamed = _inserts(pg_db.capture("stream", 2))
    summary = capture_once(CaptureOptions(pg_db.dsn, str(tmp_path / "landing"), "snap"))
    assert summary.snapshot_lsn is not None and len(summary.files) == 1, summary.lines()
    copied = _inserts(Path(summary.files[0]).read_text(encoding="utf-8").splitlines())
    assert {t for t, _, _ in copied} == {t.qualified for t in d.TABLES}
    assert copied == streamed


def test_a_database_with_rows_before_its_slot_becomes_an_equal_lake(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    pg_db.execute(d.SCHEMA_SQL)
    transactions = d.Workload(SEED).transactions(BEFORE + AFTER)
    before = d.run_workload(pg_db, transactions[:BEFORE])
    landing = tmp_path / "landing"
    options = CaptureOptions(pg_db.dsn, str(landing), "shop", tuple(t.qualified for t in LAKE_TABLES))
    first = capture_once(options)  # the snapshot; nothing committed after it yet
    assert first.snapshot_lsn is not None and len(first.files) == 1, first.lines()
    assert set(first.snapshot_rows) == {t.qualified for t in LAKE_TABLES}, first.snapshot_rows
    after = d.run_workload(pg_db, transactions[BEFORE:])
    command = [sys.executable, "-m", "resolver", "capture", "--dsn", pg_db.dsn, "--landing", str(landing)]
    command += [a for t in LAKE_TABLES for a in ("--tables", t.qualified)]
    second = subprocess.run(
        [*command, "--slot", "shop", "--once"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert second.returncode == 0, second.stderr
    assert "file written" in second.stdout and "snapshot " not in second.stdout, second.stdout
    third = capture_once(options)  # nothing new: no file, and the slot stays where it was confirmed
    assert third.files == [] and third.snapshot_lsn is None, third.lines()
    slot = pg_db.query("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'shop'")
    assert parse_lsn(slot[0][0]) >= parse_lsn(str(third.confirmed_lsn))

    files = sorted(landing.glob("*.json"))
    assert [f.name.endswith("-snapshot.json") for f in files] == [True, False], files
    lake = tmp_path / "lake"
    summary = ingest(spark, [str(f) for f in files], str(lake), "wal2json-v2")
    assert summary.quarantined == 0
    frames = d.read_frames(files[1].read_text(encoding="utf-8").splitlines(), 2)
    snapshot = d.Commit(-1, 0, before[-1].state)  # the rows as the snapshot saw them, at its LSN
    taken = json.loads(files[0].read_text(encoding="utf-8").splitlines()[0])
    point = d.Frame(0, parse_lsn(taken["nextlsn"]), d.commit_time(taken["timestamp"]), [])
    timeline = d.map_commits([snapshot, *after], [point, *frames], LAKE_TABLES)
    problems = d.check_lake(d.collect_silver(spark, lake, LAKE_TABLES), timeline, LAKE_TABLES)
    assert sorted(p.name for p in (lake / "silver").iterdir()) == sorted(
        n for t in LAKE_TABLES for n in (t.qualified, f"{t.qualified}__history")
    )
    assert not problems, "\n".join(problems[:30])
    again = ingest(spark, [str(f) for f in files], str(lake), "wal2json-v2")
    assert again.accepted == 0  # a capture's files read twice change nothing


def test_a_slot_that_capture_did_not_make_is_refused_in_one_line(pg_db: PgDatabase, tmp_path: Path) -> None:
    pg_db.create_slot("theirs")
    landing = tmp_path / "landing"
    with pytest.raises(Exception, match=r"^slot theirs exists but was not made by resolver capture for "):
        capture_once(CaptureOptions(pg_db.dsn, str(landing), "theirs"))
    with pytest.raises(Exception, match=r"expected a replication slot name"):
        capture_once(CaptureOptions(pg_db.dsn, str(landing), "Not-A-Slot"))


def test_a_snapshot_cut_short_is_taken_again_from_a_new_slot(pg_db: PgDatabase, tmp_path: Path) -> None:
    """Killed while copying: its slot exists, its ``.started`` mark is in the landing folder, no state and
    no snapshot file (the copy was never renamed into place). The next capture drops that slot and takes
    the snapshot again."""
    pg_db.execute(d.SCHEMA_SQL)
    d.run_workload(pg_db, d.Workload(SEED).transactions(3))
    landing = tmp_path / "landing"
    (landing / "_capture").mkdir(parents=True)
    (landing / "_capture" / "cut.started").write_text('{"slot": "cut"}\n')
    pg_db.create_slot("cut")
    (landing / ".cut-0000000000000000-snapshot.json.tmp").write_text('{"action":"B"}\n')  # half a copy
    summary = capture_once(CaptureOptions(pg_db.dsn, str(landing), "cut"))
    assert summary.snapshot_lsn is not None and sum(summary.snapshot_rows.values()) > 0, summary.lines()
    assert not (landing / "_capture" / "cut.started").exists()
    state = json.loads((landing / "_capture" / "cut.json").read_text())
    assert state["snapshot_lsn"] == summary.snapshot_lsn and state["tables"] == summary.snapshot_rows
    assert [p.name for p in landing.glob("*.json")] == [Path(summary.files[0]).name]
