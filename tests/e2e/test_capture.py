"""``resolver capture`` against a real PostgreSQL 15 + wal2json: a database that holds rows before its slot
exists becomes a lake equal to it — the snapshot's rows and the slot's changes after it, with no gap and
nothing twice — and every value a snapshot copies prints exactly what wal2json prints for it."""

from __future__ import annotations

import contextlib
import io
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from resolver import ingest, run_pipeline
from resolver.capture.snapshot import CaptureOptions, capture_once
from resolver.formats.wal2json import Event, read_lines
from resolver.lsn import parse_lsn
from resolver.models import Format
from tests import difftest as d
from tests.docexamples import example
from tests.harness.postgres import SESSION_SETTINGS, PgDatabase, PgServer
from tests.harness.processes import Resolver
from tests.pipelines import pipeline_file

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

SEED = 29
#: transactions before the slot exists (rows only a snapshot can bring) and after it (only the stream can)
BEFORE, AFTER = 14, 16
#: the tables the lake test captures (``--tables``): a composite key changed in chains with TOASTed text left
#: out of updates (accounts), no key under REPLICA IDENTITY FULL (logs), truncates (scratch). Every type is
#: the first test's; each table costs the lake's batches their own Spark jobs.
LAKE_TABLES = (d.BY_NAME["accounts"], d.BY_NAME["logs"], d.BY_NAME["scratch"])
#: tables of tens of thousands of rows before the slot: a composite key with TOASTed text (rows with b < 20),
#: and no key under REPLICA IDENTITY FULL
BIG = (
    d.Table(
        "big",
        (("a", "integer"), ("b", "integer"), ("rid", "integer"), ("body", "text")),
        ("a", "b"),
        ("body",),
    ),
    d.Table("big_log", (("rid", "integer"), ("msg", "text"), ("amt", "numeric(12,2)"))),
)
BIG_ROWS = 10_000
BIG_SQL = (
    "INSERT INTO big SELECT 1 + g / 1000, g % 1000, g, CASE WHEN g % 1000 < 20 THEN repeat(md5(g::text), 80) "
    f"ELSE 'b' || g END FROM generate_series(0, {BIG_ROWS - 1}) g;\n"
    f"INSERT INTO big_log SELECT g, 'm' || g, g / 100.0 FROM generate_series(1, {BIG_ROWS}) g;"
)
#: one transaction committed between the killed capture and the next one
BETWEEN = (
    "UPDATE big SET body = 'between ' || b WHERE a = 5 AND b < 10",
    "UPDATE big_log SET msg = 'between' WHERE rid BETWEEN 200 AND 210",
    "DELETE FROM big_log WHERE rid BETWEEN 300 AND 305",
)
#: one transaction committed while the snapshot is taken
BIG_WRITER = (
    "UPDATE big SET body = 'new ' || b WHERE a = 1 AND b < 30",  # TOASTed values replaced
    "UPDATE big SET b = b + 5000 WHERE a = 2 AND b < 20",  # key changes leaving their TOASTed text out
    "DELETE FROM big WHERE a = 3 AND b < 50",
    "INSERT INTO big SELECT 99, g, 900000 + g, 'late ' || g FROM generate_series(1, 40) g",
    "UPDATE big_log SET msg = 'changed' WHERE rid <= 100",
    "DELETE FROM big_log WHERE rid BETWEEN 101 AND 150",
)


def _values(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each insert event as (table, its columns, types and values' text, its key), as the reader holds it."""
    out = []
    for e in rows:
        if e["operation"] == "insert":
            columns = (tuple(e["column_names"]), tuple(e["column_types"]), tuple(e["column_values"]))
            out.append((e["table"], *columns, tuple(e["primary_key"] or ())))
    return sorted(out)


def _streamed(lines: list[str]) -> list[dict[str, Any]]:
    """The events wal2json's format-2 lines are to the reader (``resolver.formats.wal2json``)."""
    read = read_lines(io.BytesIO("".join(f"{x}\n" for x in lines).encode()), "stream", Format.WAL2JSON_V2)
    return [item.row for item in read if isinstance(item, Event)]


def _copied(files: list[str]) -> list[dict[str, Any]]:
    """The events of snapshot files (``resolver.formats.snapshot_files``), in file and row order."""
    return [row for f in files for row in pq.read_table(f).to_pylist()]


def test_every_value_a_snapshot_copies_is_what_the_reader_makes_of_wal2json(
    pg_db: PgDatabase, tmp_path: Path
) -> None:
    """The workload's first transactions insert rows of every type it has (numerics at their extremes, NaN,
    arrays, jsonb, bytea, intervals, timestamps, TOASTed text, keyless and composite-key tables): the events
    the reader makes of wal2json's stream of them, and the events a snapshot copies of them, are the same:
    the same table names, columns, types, value texts and keys."""
    pg_db.execute(d.SCHEMA_SQL)
    pg_db.create_slot("stream")
    d.run_workload(pg_db, d.Workload(SEED).transactions(3))  # the first three insert into every table
    streamed = _values(_streamed(pg_db.capture("stream", 2)))
    summary = capture_once(CaptureOptions(pg_db.dsn, str(tmp_path / "landing"), "snap"))
    assert summary.snapshot_lsn is not None and len(summary.files) == len(d.TABLES), summary.lines()
    rows = _copied(summary.files)
    point = parse_lsn(summary.snapshot_lsn)
    assert {(e["commit_lsn"], e["change_lsn"], e["xid"]) for e in rows} == {(point, point, 0)}
    copied = _values(rows)
    assert {t for t, *_ in copied} == {t.qualified for t in d.TABLES}
    assert copied == streamed


def _big_state(pg_db: PgDatabase) -> d.State:
    with psycopg.connect(pg_db.dsn, autocommit=True) as conn:
        for name, value in SESSION_SETTINGS.items():
            conn.execute(f"SET {name} = '{value}'".encode())
        return d.read_state(conn, BIG)


def _capture(pg_db: PgDatabase, landing: Path) -> Resolver:
    """``resolver capture --once`` of the lake test's tables, in a child process; the big tables are copied in
    chunks of 256 KiB of heap by two worker processes, into files of about 256 KiB, which ``resolver run``
    stitches back together."""
    tables = [a for t in (*LAKE_TABLES, *BIG) for a in ("--tables", t.qualified)]
    return Resolver(
        *("capture", "--dsn", pg_db.dsn, "--landing", str(landing), "--slot", "shop", *tables),
        *("--file-mb", "0.25", "--copy-processes", "2", "--once"),
    )


def test_a_database_with_rows_before_its_slot_becomes_an_equal_lake(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    """Tables holding tens of thousands of rows (a composite key with TOASTed text, and no key under
    REPLICA IDENTITY FULL) and the workload's (key chains, TOAST left out of updates, truncates). The first
    capture is SIGKILLed while it copies; the second is stopped once its slot exists while a writer commits
    changes to every table (key changes of rows whose TOASTed text only the snapshot holds among them), then
    let go: its copy must not see them, its stream must. A third is SIGKILLed while it reads the slot. Then
    ``resolver run``'s library call over the landing folder: the lake equals PostgreSQL at the snapshot's
    consistent point and after every commit that follows."""
    pg_db.execute(d.SCHEMA_SQL + "\n" + "\n".join(t.ddl() for t in BIG) + "\n" + BIG_SQL)
    transactions = d.Workload(SEED).transactions(BEFORE + AFTER)
    before = d.run_workload(pg_db, transactions[:BEFORE])
    landing = tmp_path / "landing"
    killed = _capture(pg_db, landing)
    killed.until("copied public.big:")  # public.big_log's copy under way
    assert killed.stop(signal.SIGKILL)[0] == -signal.SIGKILL
    assert (landing / "_capture" / "shop.started").exists() and not (
        landing / "_capture" / "shop.json"
    ).exists()
    assert not list(landing.glob("*.json")) + list(landing.glob("*.parquet")), (
        "a copy cut short is never visible"
    )
    big_at_kill = _big_state(pg_db)
    # committed after the slot, before the second capture's copy: the stream brings it to public.big (copied
    # at the slot's point); public.big_log is copied after it, so its copy holds it and the stream must not
    pg_db.execute("BEGIN;\n" + ";\n".join(BETWEEN) + ";\nCOMMIT;")

    second = _capture(pg_db, landing)
    second.until("created at")
    second.proc.send_signal(signal.SIGSTOP)  # the slot and its snapshot exist; nothing copied yet
    big_before = _big_state(pg_db)
    during = d.run_workload(pg_db, transactions[BEFORE : BEFORE + AFTER // 2])
    pg_db.execute("BEGIN;\n" + ";\n".join(BIG_WRITER) + ";\nCOMMIT;")
    second.proc.send_signal(signal.SIGCONT)
    status, printed = second.finish(300)
    assert status == 0, "\n".join(second.seen)
    assert "snapshot " in printed and "file written" in printed, printed
    state = json.loads((landing / "_capture" / "shop.json").read_text())
    rows = state["tables"]
    assert (rows["public.big"], rows["public.big_log"]) == (BIG_ROWS, BIG_ROWS - 6), (
        state
    )  # 6 deleted between

    after = d.run_workload(pg_db, transactions[BEFORE + AFTER // 2 :])
    third = _capture(pg_db, landing)
    third.until("reading slot")
    third.stop(signal.SIGKILL)
    last = capture_once(
        CaptureOptions(pg_db.dsn, str(landing), "shop", tuple(t.qualified for t in LAKE_TABLES + BIG))
    )
    assert last.snapshot_lsn is None, last.lines()
    slot = pg_db.query("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'shop'")
    assert parse_lsn(slot[0][0]) >= parse_lsn(str(last.confirmed_lsn))
    big_after = _big_state(pg_db)

    files = sorted([*landing.glob("*.json"), *landing.glob("*.parquet")])
    copies = {name: [landing / f for f in parts] for name, parts in state["files"].items()}
    for name in ("public.big", "public.big_log"):  # several chunks, copied by two workers at once
        chunks = {f.name.rsplit("-", 2)[1] for f in copies[name]}
        assert len(chunks) > 1 and len(copies[name]) >= len(chunks), copies[name]
    starts = {name: parse_lsn(lsn) for name, lsn in state["starts"].items()}
    # the first capture finished public.accounts and public.big: they start where the slot was made; the
    # second one copied the others, later
    first = min(starts.values())
    assert starts["public.accounts"] == starts["public.big"] == first < starts["public.logs"], starts
    copied = sorted(f for parts in copies.values() for f in parts)
    assert copied == [f for f in files if "-snapshot-" in f.name], files
    pipeline = pipeline_file(tmp_path, max_files_per_batch=100)
    summary = run_pipeline(spark, str(pipeline))
    assert not summary.failed_tables and sum(b.quarantined for b in summary.batches) == 0, summary.lines()
    lake = tmp_path / "lake"
    assert sorted(p.name for p in (lake / "silver").iterdir()) == sorted(
        n for t in (*LAKE_TABLES, *BIG) for n in (t.qualified, f"{t.qualified}__history")
    )
    commits = [*during, *after]
    drained = [p for p in files if "-snapshot-" not in p.name]
    frames = {f.xid: f for p in drained for f in d.read_frames(p.read_text(encoding="utf-8").splitlines(), 2)}
    workload = sorted((f for f in frames.values() if f.xid in {c.xid for c in commits}), key=lambda f: f.lsn)
    silver = d.collect_silver(spark, lake, LAKE_TABLES)
    problems = []
    for t in LAKE_TABLES:  # from each table's own copy: the rows as it saw them, at its point
        taken = pq.read_table(copies[t.qualified][0]).slice(0, 1).to_pylist()[0]
        start = d.Frame(0, taken["commit_lsn"], taken["commit_time"], [])
        snapshot = d.Commit(-1, 0, before[-1].state)  # nothing committed between the two captures' copies
        timeline = d.map_commits([snapshot, *commits], [start, *workload], [t])
        problems += d.check_lake(silver, timeline, [t])
    assert not problems, "\n".join(problems[:30])
    big = d.collect_silver(spark, lake, BIG)
    for t in BIG:
        problems += d.diff_table(t, big_after[t.name], big.snapshot[t.name], "snapshot vs PostgreSQL now")
        point = starts[t.qualified]
        at_start = big_at_kill if point == first else big_before  # the state its copy saw
        problems += d.diff_table(t, at_start[t.name], d.as_of_lsn(big.history[t.name], point), "at its copy")
        problems += d.diff_table(t, {}, d.as_of_lsn(big.history[t.name], point - 1), "before its copy")
    assert not problems, "\n".join(problems[:30])
    assert big_at_kill != big_before != big_after  # the changes reached the lake through the stream


def test_the_library_example_lands_a_database(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``capture_once``'s docstring example, run as written against a database ``shop`` reached through the
    libpq variables it names (tests/e2e/test_docstrings.py runs the examples that need no database)."""
    shop = pg_server.create_database("shop")
    try:
        shop.execute("CREATE TABLE public.orders (id int PRIMARY KEY, status text)")
        shop.execute("INSERT INTO public.orders VALUES (1, 'new'), (2, 'paid')")
        for name, value in (("PGHOST", "127.0.0.1"), ("PGPORT", str(pg_server.port)), ("PGUSER", "postgres")):
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(tmp_path)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(example(capture_once), "<example of capture_once>", "exec"), {})
        printed = out.getvalue()
        assert "snapshot             2 row(s) of 1 table(s)" in printed, printed
        written = [Path(line.split()[-1]) for line in printed.splitlines() if line.startswith("file written")]
        assert len(written) == 1 and written[0].name.startswith("shop-"), printed
        records = pq.read_table(tmp_path / written[0]).to_pylist()
        rows = sorted(tuple(r["column_values"]) for r in records if r["operation"] == "insert")
        assert rows == [("1", "new"), ("2", "paid")], records
    finally:
        pg_server.drop_database("shop")


def test_a_slot_that_capture_did_not_make_is_refused_in_one_line(pg_db: PgDatabase, tmp_path: Path) -> None:
    pg_db.create_slot("theirs")
    landing = tmp_path / "landing"
    with pytest.raises(Exception, match=r"^slot theirs exists but was not made by resolver capture for "):
        capture_once(CaptureOptions(pg_db.dsn, str(landing), "theirs"))
    with pytest.raises(Exception, match=r"expected a replication slot name"):
        capture_once(CaptureOptions(pg_db.dsn, str(landing), "Not-A-Slot"))


def test_a_snapshot_cut_short_is_finished_by_the_next_capture(pg_db: PgDatabase, tmp_path: Path) -> None:
    """Killed while copying, before any table was finished: its slot exists, its ``.started`` record is in
    the landing folder, no state and no snapshot file (a copy is never visible before every table is). The
    next capture keeps that slot streaming and copies the tables in a new snapshot."""
    pg_db.execute(d.SCHEMA_SQL)
    d.run_workload(pg_db, d.Workload(SEED).transactions(3))
    landing = tmp_path / "landing"
    (landing / "_capture").mkdir(parents=True)
    (landing / "_capture" / "cut.started").write_text('{"slot": "cut"}\n')
    pg_db.create_slot("cut")
    (landing / ".cut-0000000000000000-snapshot.parquet.tmp").write_bytes(b"PAR1")  # half a copy
    summary = capture_once(CaptureOptions(pg_db.dsn, str(landing), "cut"))
    assert summary.snapshot_lsn is not None and sum(summary.snapshot_rows.values()) > 0, summary.lines()
    assert not (landing / "_capture" / "cut.started").exists()
    state = json.loads((landing / "_capture" / "cut.json").read_text())
    assert state["snapshot_lsn"] == summary.snapshot_lsn and state["tables"] == summary.snapshot_rows
    landed = [*landing.glob("*.json"), *landing.glob("*.parquet")]
    assert sorted(p.name for p in landed) == sorted(Path(f).name for f in summary.files)
    assert len(summary.files) == len(d.TABLES) and not (landing / "_capture" / "cut.pending").exists()
    assert pg_db.query("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'cut'")  # kept: it streams on


def test_a_table_copied_again_replaces_what_the_lake_lost(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    """A landing file lost before any run read it: the lake misses its changes. ``--resnapshot`` copies the
    table again at a new consistent point (a truncate, then its rows) while the slot keeps streaming, and
    the lake converges to the database in either order of the files: rows deleted in the lost file are
    gone, rows it updated have their values, and changes streamed after the re-snapshot apply over it."""
    pg_db.execute("CREATE TABLE public.t (id int PRIMARY KEY, v text); CREATE TABLE public.s (id int)")
    pg_db.execute("INSERT INTO public.t SELECT g, 'v' || g FROM generate_series(1, 50) g")
    landing = tmp_path / "landing"
    options = CaptureOptions(pg_db.dsn, str(landing), "again", ("public.t",))
    before = capture_once(options).files  # the snapshot
    pg_db.execute(
        "BEGIN; DELETE FROM public.t WHERE id <= 10; "
        "UPDATE public.t SET v = 'lost' WHERE id BETWEEN 11 AND 20; "
        "INSERT INTO public.t SELECT g, 'new' FROM generate_series(51, 60) g; COMMIT"
    )
    for lost in capture_once(options).files:
        Path(lost).unlink()
    pg_db.execute("UPDATE public.t SET v = 'after' WHERE id BETWEEN 15 AND 25")
    before += capture_once(options).files
    command = [sys.executable, "-m", "resolver", "capture", "--dsn", pg_db.dsn, "--landing", str(landing)]
    done = subprocess.run(
        [*command, "--slot", "again", "--tables", "public.t", "--resnapshot", "public.*"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    after = sorted(str(p) for p in landing.glob("again-*-resnapshot-*.parquet"))
    assert len(after) == 1 and "snapshot             50 row(s) of 1 table(s)" in done.stdout, done.stdout
    assert not pg_db.query("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'again_resnap'")  # temporary
    pg_db.execute("UPDATE public.t SET v = 'later' WHERE id = 30")  # only the stream carries this one
    after += capture_once(options).files
    expected = sorted(pg_db.query("SELECT id, v FROM public.t"))

    # the re-snapshot's truncate is first, and the event the reader makes of a truncate wal2json streams
    pg_db.create_slot("probe")
    pg_db.execute("TRUNCATE public.s")
    streamed = next(e for e in _streamed(pg_db.capture("probe", 2)) if e["operation"] == "truncate")
    ours = _copied(after[:1])[0]
    assert (ours["operation"], ours["table"], ours["position"]) == ("truncate", "public.t", 0), ours
    empty = ("column_names", "column_values", "old_key_names", "old_key_values")
    assert all(ours[k] is None and streamed.get(k) is None for k in empty), (ours, streamed)

    # one batch of every file; and the re-snapshot first, the older snapshot (rows it deleted) after it
    for name, batches in (("one batch", [before + after]), ("reversed", [after, before])):
        lake = tmp_path / name
        for files in batches:
            summary = ingest(spark, files, str(lake), "wal2json-v2")
            assert summary.quarantined == 0 and not [t.error for t in summary.tables if t.error], summary
        rows = spark.read.format("delta").load(str(lake / "silver" / "public.t")).select("id", "v")
        got = sorted(tuple(r) for r in rows.collect())
        assert got == expected, (name, [r for r in got if r not in expected][:5])
