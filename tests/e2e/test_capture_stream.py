"""``resolver capture`` left running (PostgreSQL's replication protocol, ``resolver.capture.stream``) on a
real PostgreSQL 15 + wal2json, without Spark: each captured transaction lands once, in file order, within
about ``--interval`` of its commit; the slot follows the database while only uncaptured tables are written;
a change in a file not yet closed is never confirmed, so a capture killed then loses nothing; SIGTERM closes
the open file at a transaction end and confirms it; a second capture of a streaming slot is refused in one
line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from resolver.lsn import parse_lsn
from tests.harness.postgres import PgDatabase
from tests.harness.processes import ROOT, Resolver

pytestmark = [pytest.mark.postgres]

TABLES_SQL = (
    "CREATE TABLE public.kept (id int PRIMARY KEY, v text); CREATE TABLE public.other (id int, v text)"
)


@pytest.fixture
def children() -> Iterator[list[Resolver]]:
    """The captures a test starts: any still running at its end is killed (its slot must be let go before
    the test's database can be dropped)."""
    started: list[Resolver] = []
    yield started
    for child in started:
        if child.proc.poll() is None:
            child.stop(signal.SIGKILL, 60)


def _capture(db: PgDatabase, landing: Path, children: list[Resolver], *args: str) -> Resolver:
    command = ["capture", "--dsn", db.dsn, "--landing", str(landing), "--slot", "live"]
    children.append(Resolver(*command, "--tables", "public.kept", *args))
    return children[-1]


def _confirmed(db: PgDatabase) -> int:
    rows = db.query("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'live'")
    return parse_lsn(rows[0][0])


def _now(db: PgDatabase) -> int:
    return parse_lsn(db.query("SELECT pg_current_wal_lsn()::text")[0][0])


def _landed(landing: Path) -> list[tuple[str, int]]:
    """Every change of public.kept in the landing files that are not snapshots, in file and line order."""
    out = []
    for path in sorted(landing.glob("live-*.json")):
        if "-snapshot-" in path.name:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("table") == "kept":
                values = record.get("columns") or record.get("identity")
                out.append((record["action"], int(values[0]["value"])))
    return out


def _wait(what: str, done: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.2)


def test_a_running_capture_lands_each_commit_once_and_confirms_only_closed_files(
    pg_db: PgDatabase, tmp_path: Path, children: list[Resolver]
) -> None:
    pg_db.execute(TABLES_SQL)
    landing = tmp_path / "landing"
    running = _capture(pg_db, landing, children, "--interval", "1")
    running.until("streaming slot live")
    expected = []
    for i in range(12):  # captured and uncaptured changes interleaved, one transaction each
        pg_db.execute(f"INSERT INTO public.kept VALUES ({i}, 'v{i}')")
        pg_db.execute(f"INSERT INTO public.other VALUES ({i}, 'o')")
        expected.append(("I", i))
    pg_db.execute(
        "BEGIN; UPDATE public.kept SET v = 'w' WHERE id < 3; DELETE FROM public.kept WHERE id = 5; COMMIT"
    )
    expected += [("U", 0), ("U", 1), ("U", 2), ("D", 5)]
    _wait("the changes landed", lambda: len(_landed(landing)) >= len(expected))
    # quiet captured tables, a busy database: the slot follows it (its WAL is not kept for the capture)
    for i in range(40):
        pg_db.execute(f"INSERT INTO public.other VALUES ({i}, '{'x' * 200}')")
    written = _now(pg_db)
    _wait("the slot passed the uncaptured writes", lambda: _confirmed(pg_db) >= written)
    files = sorted(landing.glob("live-*.json"))
    status, printed = running.stop(signal.SIGTERM, 120)
    assert status == 0, "\n".join(running.seen)
    assert _landed(landing) == expected  # each once, in commit order
    assert sorted(landing.glob("live-*.json")) == files, "no file for the uncaptured writes"
    assert "confirmed up to" in printed and not list(landing.glob(".live-*.tmp")), printed

    # a file held open (--interval 600): its changes are written but not confirmed until it closes
    held = _capture(pg_db, landing, children, "--interval", "600")
    held.until("streaming slot live")
    before = _now(pg_db)
    pg_db.execute("INSERT INTO public.kept VALUES (100, 'held')")
    open_part = landing / ".live-drain-0.json.tmp"
    _wait(
        "the change written to the open file",
        lambda: open_part.exists() and b"held" in open_part.read_bytes(),
    )
    time.sleep(1.5)  # a confirmation would follow within the loop's tick
    assert _confirmed(pg_db) <= before, "a change of a file not yet closed was confirmed"
    assert held.stop(signal.SIGKILL, 60)[0] == -signal.SIGKILL
    assert _landed(landing) == expected  # the killed capture's change is in no visible file

    # the next capture gets it again from the slot; SIGTERM closes its open file and confirms it
    again = _capture(pg_db, landing, children, "--interval", "600")
    again.until("streaming slot live")
    pg_db.execute("UPDATE public.kept SET v = 'x' WHERE id = 100")
    _wait(
        "the update written to the open file", lambda: open_part.exists() and b'"x"' in open_part.read_bytes()
    )
    refused = subprocess.run(  # the slot is being streamed: a second capture of it stops in one line
        [sys.executable, "-m", "resolver", "capture", "--dsn", pg_db.dsn, "--landing", str(landing)]
        + ["--slot", "live", "--tables", "public.kept", "--once"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "slot live" in refused.stderr and "expected" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    status, printed = again.stop(signal.SIGTERM, 120)
    assert status == 0, "\n".join(again.seen)
    assert _landed(landing) == [*expected, ("I", 100), ("U", 100)]
    assert _confirmed(pg_db) > before and not list(landing.glob(".live-*.tmp")), printed
