"""``resolver capture`` and its slot on a real PostgreSQL 15 + wal2json, without Spark: the slot keeps moving
while only tables it does not capture are written (WAL does not pile up), a landing file that could not be
written whole is never confirmed to the slot, ``--status`` reports the lag, and each misconfiguration is
refused in one line that says what was found and what is expected."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from resolver.capture.snapshot import CaptureOptions, capture_once
from resolver.capture.source import connect, lock_tables, source_tables
from resolver.capture.status import capture_status
from resolver.errors import ConfigError
from resolver.lsn import parse_lsn
from tests.harness.postgres import PgDatabase, PgServer, free_port

pytestmark = [pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
TABLES_SQL = (
    "CREATE TABLE public.kept (id int PRIMARY KEY, v text); CREATE TABLE public.other (id int, v text)"
)


def _confirmed(db: PgDatabase, slot: str) -> int:
    query = "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s"
    rows = db.query(query, (slot,))
    return parse_lsn(rows[0][0])


def _capture_command(db: PgDatabase, landing: Path, slot: str, *args: str) -> list[str]:
    command = [sys.executable, "-m", "resolver", "capture", "--dsn", db.dsn, "--landing", str(landing)]
    return [*command, "--slot", slot, "--tables", "public.kept", *args]


def test_the_slot_moves_while_only_an_uncaptured_table_is_written(pg_db: PgDatabase, tmp_path: Path) -> None:
    """A heartbeat by construction: each capture confirms the WAL position current when it began, whether
    or not a captured table changed, so a busy database with quiet captured tables keeps no WAL for the
    slot. ``--status`` shows the lag before and after (after: from a pipeline file's ``capture:``)."""
    pg_db.execute(TABLES_SQL)
    landing = tmp_path / "landing"
    options = CaptureOptions(pg_db.dsn, str(landing), "quiet", ("public.kept",))
    first = capture_once(options)
    assert first.snapshot_lsn is not None, first.lines()
    for i in range(40):
        pg_db.execute(f"INSERT INTO public.other VALUES ({i}, '{'x' * 200}')")
    written = parse_lsn(pg_db.query("SELECT pg_current_wal_lsn()::text")[0][0])
    behind = capture_status(pg_db.dsn, str(landing), "quiet")
    assert behind.lag_bytes >= written - _confirmed(pg_db, "quiet") > 8000, behind.lines()
    assert behind.lag_seconds is not None and behind.lag_seconds >= 0, behind.lines()
    seen = (behind.files, behind.snapshot_lsn, behind.active)
    assert seen == (1, first.snapshot_lsn, False), behind.lines()

    second = capture_once(options)
    assert second.files == [] and second.changes >= 40, second.lines()  # read, nothing of "kept": no file
    assert _confirmed(pg_db, "quiet") >= written
    pipeline = tmp_path / "pipeline.yaml"  # the same capture, as a pipeline file names it
    pipeline.write_text(
        "source: {path: landing/, format: wal2json-v2}\nlake: lake/\ninclude: [public.kept]\n"
        "capture: {dsn_env: CAPTURE_DSN, slot: quiet}\n"
    )
    env = {**os.environ, "CAPTURE_DSN": pg_db.dsn}
    command = [sys.executable, "-m", "resolver", "capture", str(pipeline), "--status"]
    shown = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert shown.returncode == 0, shown.stderr
    lines = {ln[:21].strip(): ln[21:].strip() for ln in shown.stdout.splitlines()}
    assert int(lines["lag bytes"]) < behind.lag_bytes and float(lines["lag seconds"]) < 60, shown.stdout
    assert lines["files landed"] == "1" and lines["slot"] == "quiet (idle)", shown.stdout


def test_a_landing_file_that_could_not_be_written_whole_is_never_confirmed(
    pg_db: PgDatabase, tmp_path: Path
) -> None:
    """The capture in a child process whose files may not grow past 16 KiB (``RLIMIT_FSIZE``: a full disk,
    as the kernel reports it) fails while writing its landing file: the slot stays where it was, no file is
    visible under its name, and the next capture lands every change the failed one could not."""
    pg_db.execute(TABLES_SQL)
    landing = tmp_path / "landing"
    options = CaptureOptions(pg_db.dsn, str(landing), "full", ("public.kept",))
    capture_once(options)  # the snapshot (an empty table: a small file)
    for n in range(6):
        pg_db.execute(
            "INSERT INTO public.kept SELECT g, repeat('v', 150) "
            f"FROM generate_series({n * 50}, {n * 50 + 49}) g"
        )
    before = _confirmed(pg_db, "full")
    limit = 16 * 1024

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    failed = subprocess.run(
        _capture_command(pg_db, landing, "full", "--once"),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=small_files,
        cwd=ROOT,
    )
    assert failed.returncode != 0, failed.stdout
    assert "File too large" in failed.stderr, failed.stderr[-2000:]
    assert _confirmed(pg_db, "full") == before
    visible = sorted(p.name for p in [*landing.glob("full-*.json"), *landing.glob("full-*.parquet")])
    assert len(visible) == 1 and "-snapshot-" in visible[0], visible
    assert [p.stat().st_size for p in landing.glob(".full-*.tmp")] == [limit]  # cut at the limit, hidden

    again = capture_once(options)
    assert len(again.files) == 1 and _confirmed(pg_db, "full") > before, again.lines()
    records = [json.loads(line) for line in Path(again.files[0]).read_text(encoding="utf-8").splitlines()]
    assert sorted(r["columns"][0]["value"] for r in records if r["action"] == "I") == list(range(300))


def test_a_server_without_logical_decoding_is_refused_in_one_line(tmp_path: Path) -> None:
    server = PgServer(settings={"wal_level": "replica"})
    with server:
        command = [sys.executable, "-m", "resolver", "capture", "--dsn", server.dsn]
        command += ["--landing", str(tmp_path), "--slot", "s", "--once"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "resolver: error: the database's wal_level is replica: expected logical for resolver capture "
        "(ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL)"
    ]


def test_a_server_without_a_free_wal_sender_is_refused_in_one_line(tmp_path: Path) -> None:
    """The slot is created over a replication connection: with no WAL sender to serve it, one line."""
    with PgServer(settings={"max_wal_senders": "0"}) as server:
        refused = r"^could not open a replication connection \(.*max_wal_senders.*\): expected a free WAL"
        with pytest.raises(ConfigError, match=refused):
            capture_once(CaptureOptions(server.dsn, str(tmp_path / "landing"), "s"))


def test_a_role_without_replication_no_plugin_and_no_server_are_refused_in_one_line(
    pg_db: PgDatabase, tmp_path: Path
) -> None:
    landing = str(tmp_path / "landing")
    role = "capture_without_replication"
    pg_db.execute(f"CREATE ROLE {role} LOGIN")
    try:
        dsn = pg_db.dsn.replace("user=postgres", f"user={role}")
        with pytest.raises(ConfigError, match=rf"^role {role} has no REPLICATION privilege: expected it "):
            capture_once(CaptureOptions(dsn, landing, "s"))
    finally:
        pg_db.execute(f"DROP ROLE {role}")
    # where the server looks for wal2json, nothing: as on a server without the package
    hidden = f"{pg_db.dsn} options='-c dynamic_library_path=/nonexistent'"
    no_plugin = r"^the server has no wal2json output plugin \(.*wal2json.*\): expected"
    with pytest.raises(ConfigError, match=no_plugin):
        capture_once(CaptureOptions(hidden, landing, "s"))
    assert not pg_db.query("SELECT 1 FROM pg_replication_slots WHERE slot_name = 's'")
    nobody = f"host=127.0.0.1 port={free_port()} user=postgres dbname=postgres connect_timeout=5"
    with pytest.raises(ConfigError, match=r"^could not connect to the database \(.+\): expected a reachable"):
        capture_once(CaptureOptions(nobody, landing, "s"))
    with pytest.raises(ConfigError, match=r"^slot nothing does not exist: expected the slot of a capture"):
        capture_status(pg_db.dsn, landing, "nothing")


def test_a_table_dropped_while_its_snapshot_is_taken_is_named_in_one_line(pg_db: PgDatabase) -> None:
    """The copy's transaction lists the tables in its snapshot, then locks them before reading: a table
    dropped in between (here by another session, after the listing) is refused by name; one locked first
    makes a ``DROP`` wait for the copy."""
    pg_db.execute(TABLES_SQL)
    import psycopg

    with connect(pg_db.dsn) as conn:
        conn.autocommit = False
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        tables = [t for t in source_tables(conn) if t.schema == "public"]
        assert [t.qualified for t in tables] == ["public.kept", "public.other"]
        lock_tables(conn, tables[:1])
        waiting = pg_db.query("SELECT count(*) FROM pg_locks WHERE relation = 'public.kept'::regclass")
        assert waiting[0][0] >= 1  # held by the copy's transaction
        pg_db.execute("DROP TABLE public.other")
        dropped = r"^table public\.other was dropped while its snapshot was being taken: expected"
        with pytest.raises(ConfigError, match=dropped):
            lock_tables(conn, tables[1:])


def test_a_backlog_lands_in_files_cut_at_transaction_ends(pg_db: PgDatabase, tmp_path: Path) -> None:
    """30 transactions of 10 rows each (and 10 touching only an uncaptured table) drained with files cut
    past 4 KiB: several files, each a run of whole transactions in commit order, every captured row once,
    and no trace of the transactions that changed nothing captured."""
    pg_db.execute(TABLES_SQL)
    landing = tmp_path / "landing"
    options = CaptureOptions(pg_db.dsn, str(landing), "cut", ("public.kept",), file_bytes=4096)
    capture_once(options)
    for n in range(30):
        rows = f"SELECT g, repeat('r', 60) FROM generate_series({n * 10}, {n * 10 + 9}) g"
        pg_db.execute(
            f"BEGIN; INSERT INTO public.kept {rows}; INSERT INTO public.other VALUES ({n}, 'x'); COMMIT"
        )
        if n % 3 == 0:
            pg_db.execute(f"INSERT INTO public.other VALUES ({n}, 'only other')")
    drained = capture_once(options)
    files = [Path(f) for f in drained.files]
    assert len(files) >= 5 and files == sorted(files), files
    seen, commits = [], []
    for path in files:
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert records[0]["action"] == "B" and records[-1]["action"] == "C", path.name
        assert path.name == f"cut-{parse_lsn(records[-1]['nextlsn']):016X}.json"
        for r in records:
            if r["action"] == "I":
                assert r["table"] == "kept", r
                seen.append(r["columns"][0]["value"])
            elif r["action"] == "C":
                commits.append(parse_lsn(r["nextlsn"]))
    assert sorted(seen) == list(range(300)) and len(seen) == 300
    assert len(commits) == 30 and commits == sorted(commits)  # no empty transaction, in commit order
    assert not list(landing.glob(".*.tmp"))
