"""Small tables' silver writes deferred under a freshness bound (``resolver.batch.deferral``): a batch under
the bound leaves a small table's events in bronze and its silver tables untouched, the lake's markers say
what waits, and the batch that applies them (one without a bound, one that brings the table more than the
bound's events, or any batch once the bound ran out) leaves the same rows, technical columns included, as
every batch applied at once: with key changes, deletes, late events, a file delivered twice, and a batch
cut short after its silver writes and before the lake's markers."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from resolver import BatchOptions, Freshness, ingest
from resolver.lake.folders import Lake, history_path, snapshot_path
from resolver.lake.markers import read_lake_markers
from resolver.ops.timetravel import as_of
from tests.v2_frames import v2_txn

TABLES = ("public.events", "public.items")
WAIT = BatchOptions(freshness=Freshness(3600))  # nothing runs out during a test


#: one file per batch: a seeds both tables; b and c change both (an update, a key change, deletes, an
#: insert of a deleted key); d holds a late update of events' key 1 (before b) and items only after;
#: e changes items only, f events only
FILES = {
    "a": v2_txn(100, ("I", "events", 1, "a1", None), ("I", "events", 2, "a2", None))
    + v2_txn(110, ("I", "items", 1, "i1", None), ("I", "items", 2, "i2", None)),
    "b": v2_txn(200, ("U", "events", 2, "b2", None), ("I", "events", 3, "b3", None))
    + v2_txn(210, ("I", "items", 3, "i3", None)),
    "c": v2_txn(300, ("U", "events", 30, "c30", 3), ("D", "items", 1, None, None))
    + v2_txn(310, ("D", "events", 1, None, None), ("I", "items", 1, "c1", None)),
    "d": v2_txn(150, ("U", "events", 1, "late1", None)) + v2_txn(400, ("U", "items", 2, "d2", None)),
    "e": v2_txn(500, ("I", "items", 5, "e5", None), ("D", "items", 3, None, None)),
    "f": v2_txn(600, ("I", "events", 6, "f6", None)),
}  # fmt: skip


def _write(folder: Path, names: str) -> list[str]:
    paths = []
    for name in names:
        path = folder / f"{name}.json"
        path.write_text("\n".join(FILES[name]) + "\n", encoding="utf-8")
        paths.append(str(path))
    return paths


def _rows(spark: SparkSession, lake: Path) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for table in TABLES:
        for path in (snapshot_path(str(lake), table), history_path(str(lake), table)):
            df = spark.read.format("delta").load(path)
            out[path[len(str(lake)) :]] = sorted(
                (tuple(r) for r in df.select(*sorted(df.columns)).collect()), key=repr
            )
    return out


def _version(spark: SparkSession, path: str) -> int:
    return int(DeltaTable.forPath(spark, path).history(1).first()["version"])


@pytest.fixture(scope="module")
def reference(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The source files, and the lakes two prefixes of them give when applied at once, without a bound."""
    root = tmp_path_factory.mktemp("deferral")
    files = root / "files"
    files.mkdir()
    rows = {}
    for names in ("abcde", "abcdef"):
        lake = root / f"lake-{names}"
        ingest(spark, _write(files, names), str(lake), "wal2json-v2")
        rows[names] = _rows(spark, lake)
    return files, rows


def test_tables_wait_under_the_bound_and_end_as_every_batch_applied_at_once(
    spark: SparkSession,
    tmp_path: Path,
    reference: tuple[Path, dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    files, rows = reference
    lake = Lake.at(str(tmp_path / "lake"))
    ingest(spark, _write(files, "a"), lake.root, "wal2json-v2")  # a table's first batch never waits
    first = _rows(spark, Path(lake.root))
    silver = {t: _version(spark, history_path(lake.root, t)) for t in TABLES}
    for names in ("b", "c", "b", "d"):  # b twice: its events wait once
        summary = ingest(spark, _write(files, names), lake.root, "wal2json-v2", options=WAIT)
        for t in summary.tables:
            assert t.inserted == t.updated == t.deleted == t.versions_written == 0, (names, t)
            assert t.error is None and t.notes and "wait in bronze" in t.notes[0], (names, t)
    assert _rows(spark, Path(lake.root)) == first  # nothing applied to the silver tables
    assert {t: _version(spark, history_path(lake.root, t)) for t in TABLES} == silver
    waiting = read_lake_markers(spark, lake.markers).waiting
    assert sorted(waiting) == list(TABLES)
    events, items = waiting["public.events"], waiting["public.items"]
    # three batches added new events (b's second delivery added none): b, c and d's bronze commits
    assert len(events.versions) == len(items.versions) == 3, waiting
    assert (events.lo, events.hi, items.lo, items.hi) == (150, 310, 210, 400), waiting
    assert (events.events, items.events) == (2 + 2 + 2 + 1, 1 + 2 + 1 + 1), waiting  # b's counted twice
    with caplog.at_level(logging.WARNING, logger="resolver.ops.timetravel"):
        as_of(spark, lake.root, "public.events", lsn=120).collect()  # before what waits: complete
        assert not caplog.records
        as_of(spark, lake.root, "public.events", lsn=320).collect()
    assert "wait in bronze" in caplog.text and "complete before commit LSN 0/96" in caplog.text, caplog.text

    # e holds only items: a batch without a bound applies every table's waiting events, events' included
    summary = ingest(spark, _write(files, "e"), lake.root, "wal2json-v2")
    assert {t.table for t in summary.tables} == set(TABLES)
    assert all(any("waited in bronze" in n for n in t.notes) for t in summary.tables), summary.tables
    assert _rows(spark, Path(lake.root)) == rows["abcde"]
    assert read_lake_markers(spark, lake.markers).waiting == {}


@pytest.mark.parametrize("waited", [True, False], ids=["events that waited", "in order"])
def test_a_batch_cut_short_before_the_markers_is_completed_by_applying_it_again(
    spark: SparkSession, tmp_path: Path, reference: tuple[Path, dict[str, Any]], waited: bool
) -> None:
    """A batch writes the silver tables, then is cut short before the lake's markers take its commit: its
    tables keep their markers from before, and applying the batch again (``resolver run`` reads its files
    again) completes the lake. With events that waited, they are read back again. In order (no bound),
    the batch's tables took the way that leaves the change store behind, and the batch's keys 1 (deleted,
    then inserted again) and 3 (inserted, then deleted) are in the silver tables already: the batch applied
    again must not resolve from its own rows alone, which would close their current versions again."""
    files, rows = reference
    lake = Lake.at(str(tmp_path / "lake"))
    ingest(spark, _write(files, "a"), lake.root, "wal2json-v2")
    for names in ("bc", "d") if waited else ("b",):
        ingest(spark, _write(files, names), lake.root, "wal2json-v2", options=WAIT if waited else None)
    last = "e" if waited else "cde"
    before = tmp_path / "markers-before"
    shutil.copytree(lake.markers, before)
    ingest(spark, _write(files, last), lake.root, "wal2json-v2")
    assert _rows(spark, Path(lake.root)) == rows["abcde"]
    shutil.rmtree(lake.markers)
    shutil.copytree(before, lake.markers)  # as if the markers' commit had not happened
    assert sorted(read_lake_markers(spark, lake.markers).waiting) == (list(TABLES) if waited else [])
    ingest(spark, _write(files, last), lake.root, "wal2json-v2")
    assert _rows(spark, Path(lake.root)) == rows["abcde"]
    assert read_lake_markers(spark, lake.markers).waiting == {}


def test_a_table_applies_what_waited_when_its_events_reach_the_limit_or_the_bound_runs_out(
    spark: SparkSession, tmp_path: Path, reference: tuple[Path, dict[str, Any]]
) -> None:
    files, rows = reference
    lake = Lake.at(str(tmp_path / "lake"))
    ingest(spark, _write(files, "a"), lake.root, "wal2json-v2")
    ingest(spark, _write(files, "bc"), lake.root, "wal2json-v2", options=WAIT)
    # d brings each table one event: events' 4 waiting and 1 new reach 5, and are applied; items' 3 and 1
    # stay below it, and wait
    few = BatchOptions(freshness=Freshness(3600, below_events=5))
    summary = {
        t.table: t for t in ingest(spark, _write(files, "d"), lake.root, "wal2json-v2", options=few).tables
    }
    events, items = summary["public.events"], summary["public.items"]
    assert events.events == 5 and events.notes == [events.notes[0]], events
    assert events.notes[0].startswith("applied with 4 event(s) that waited in bronze since"), events
    assert items.updated == 0 and "4 event(s) wait in bronze" in items.notes[0], items
    assert sorted(read_lake_markers(spark, lake.markers).waiting) == ["public.items"]
    # a bound of 0 has run out at once: f (events only) applies items' waiting events too
    ingest(spark, _write(files, "f"), lake.root, "wal2json-v2", options=BatchOptions(freshness=Freshness(0)))
    assert read_lake_markers(spark, lake.markers).waiting == {}
    ingest(spark, _write(files, "e"), lake.root, "wal2json-v2")
    assert _rows(spark, Path(lake.root)) == rows["abcdef"]


def test_a_run_lets_small_tables_wait_says_so_and_applies_them_once_the_bound_ran_out_with_no_new_file(
    spark: SparkSession,
    tmp_path: Path,
    reference: tuple[Path, dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from resolver.cli.main import main
    from resolver.pipelines.run import run_pipeline
    from tests.pipelines import pipeline_file

    files, rows = reference
    pipeline = pipeline_file(tmp_path, 1, freshness="{seconds: 3600}")
    for i, name in enumerate("abcde"):
        (tmp_path / "landing" / f"{i:04d}.json").write_text((files / f"{name}.json").read_text())
    summary = run_pipeline(spark, str(pipeline))
    assert len(summary.batches) == 5 and not summary.failed_tables
    lake = tmp_path / "lake"
    # the first batch made the tables (a run reads a batch's neighbouring files too: b's events came with
    # it); the later batches' events wait
    assert all("wait in bronze" in t.notes[0] for b in summary.batches[1:] for t in b.tables), summary
    assert _rows(spark, lake) != rows["abcde"]
    assert main(["run", str(pipeline), "--status"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"lake {lake}: freshness 3600 s", out
    assert [line.split(":")[0] for line in out[1:]] == list(TABLES), out
    assert "event(s) wait in bronze" in out[2], out
    assert "silver tables complete before commit LSN" in out[2], out

    pipeline_file(tmp_path, 1, freshness="{seconds: 0}")  # the bound runs out: no new file, and yet
    summary = run_pipeline(spark, str(pipeline))
    assert summary.files_new == 0 and len(summary.batches) == 1
    assert sorted(t.table for t in summary.batches[0].tables) == list(TABLES)
    assert _rows(spark, lake) == rows["abcde"]
    assert read_lake_markers(spark, Lake.at(str(lake)).markers).waiting == {}
