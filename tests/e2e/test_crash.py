"""A batch cut short between its writes is completed by applying it again.

``ingest`` writes, per table, the change store, then the history and the snapshot (their MERGEs at once,
on two threads), and tables are applied on parallel threads; after the last table, one commit of the lake's
markers (``resolver.lake.markers``: each table's marker; a table whose batch changed its schema version or
drop points has its marker on its store instead, its last commit). So a crash can leave any table with the
store written and either silver table, both or neither, and every table's marker as it was. The state is
built from real lakes: one lake after batch 1 ("before") and one after batches 1 and 2 ("after"); the
crashed lake is the "after" lake with some of each table's silver tables taken from "before", its markers
taken from "before" and any store's last commit that was its marker taken off, each table cut at a
different point. Applying batch 2 again must give exactly the "after" lake,
row for row, and what PostgreSQL had.
(``tests/e2e/test_run.py`` kills real runs; this test reaches each state deterministically.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver import ingest
from tests import difftest as d
from tests.harness.fixtures import Captures
from tests.harness.postgres import write_lines

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

#: one table per crash state (CRASHES): a composite key with key changes and TOAST, a bigint key with TOAST
#: and key changes, truncates. The replayed workload's other tables are left out of its files.
TABLES = (d.BY_NAME["accounts"], d.BY_NAME["items"], d.BY_NAME["scratch"])
#: silver tables a crash left unwritten: the history's MERGE only, the snapshot's only, or both
CRASHES = {
    "history written, snapshot not": ("",),
    "snapshot written, history not": ("__history",),
    "change store written, neither silver table": ("", "__history"),
}


def test_a_batch_cut_short_between_its_writes_is_completed_by_applying_it_again(
    spark: SparkSession, captures: Captures, tmp_path: Path
) -> None:
    cap = captures.get(d.REPLAY_SEED, d.REPLAY_TRANSACTIONS)
    tables = TABLES
    frames = cap.frames[2]
    half = len(frames) // 2
    batches = []
    for i, part in enumerate((frames[:half], frames[half:])):
        path = tmp_path / f"batch{i}.json"
        write_lines(path, d.only_tables([line for f in part for line in f.lines], tables))
        batches.append([str(path)])
    before, after = tmp_path / "before", tmp_path / "after"
    ingest(spark, batches[0], str(before), "wal2json-v2")
    shutil.copytree(before, after)
    ingest(spark, batches[1], str(after), "wal2json-v2")
    expected = d.collect_silver(spark, after, tables)
    assert not d.check_lake(expected, cap.timeline[2], tables)  # the reference lake itself is right
    crashed = tmp_path / "crashed"  # a fresh path: Delta caches a table's log by its path
    shutil.copytree(after, crashed)
    states = list(CRASHES.items())
    cut = {t.name: states[i % len(states)] for i, t in enumerate(tables)}
    for t in tables:
        for suffix in cut[t.name][1]:
            target = crashed / "silver" / f"{t.qualified}{suffix}"
            shutil.rmtree(target)
            shutil.copytree(before / "silver" / f"{t.qualified}{suffix}", target)
        _drop_store_marker(crashed / "_resolver" / "changes" / t.qualified)
    markers = crashed / "_resolver" / "markers"
    assert markers.is_dir(), "the lake's markers were not written"
    shutil.rmtree(markers)  # the lake's markers as batch 1 left them: batch 2's commit never happened
    if (before / "_resolver" / "markers").is_dir():  # a first batch marks its new tables on their stores
        shutil.copytree(before / "_resolver" / "markers", markers)
    torn = d.collect_silver(spark, crashed, tables)
    for t in tables:  # each table really is behind
        assert d.diff_silver(expected, torn, [t], "crashed"), f"{t.qualified}: batch 2 changed nothing"
    summary = ingest(spark, batches[1], str(crashed), "wal2json-v2")
    assert summary.accepted == 0  # the store and bronze already held every event
    got = d.collect_silver(spark, crashed, tables)
    problems = d.diff_silver(expected, got, tables, "completed") + d.check_lake(got, cap.timeline[2], tables)
    labels = "; ".join(f"{t.qualified}: {cut[t.name][0]}" for t in tables)
    assert not problems, f"{labels}:\n" + "\n".join(problems[:20])


def _drop_store_marker(store: Path) -> None:
    """Take the store's last commit off when it is the batch's marker (one that changed the store's other
    properties too), written after its silver tables, which a crash before them never wrote."""
    log = store / "_delta_log"
    last = max(log.glob("*.json"), key=lambda p: int(p.stem))
    commit = [json.loads(line) for line in last.read_text().splitlines()]
    info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
    if info["operation"] != "SET TBLPROPERTIES" or "resolver.appliedVersion" not in json.dumps(commit):
        return  # the table's marker is among the lake's markers
    assert not list(log.glob(f"{last.stem}.checkpoint*")), f"{last}: a checkpoint was written at the marker"
    delta_crc = log / f"{last.stem}.crc"
    for path in (last, delta_crc):  # with the local file system's hidden checksums of each
        path.unlink(missing_ok=True)
        (log / f".{path.name}.crc").unlink(missing_ok=True)
