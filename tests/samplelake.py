"""The sample stream for tests: its events and commits, a lake built from it once per session (shared by the
time-travel and maintenance tests), and the CI's own check of a lake made from it
(``.ci/check_sample_lake.py``): every table of ``samples/expected`` holds exactly the rows PostgreSQL had at
the end of the workload."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from resolver import ingest
from resolver.formats.wal2json import Event, read_lines
from resolver.models import Format

ROOT = Path(__file__).resolve().parents[1]

SAMPLE = ROOT / "samples/wal2json-v2/0001.json"
TABLES = ("public.audit_log", "public.customers", "public.orders")


@functools.cache
def sample_events() -> list[dict[str, Any]]:
    """The sample's change events, in commit order."""
    with SAMPLE.open("rb") as f:
        events = [e.row for e in read_lines(f, SAMPLE.name, Format.WAL2JSON_V2) if isinstance(e, Event)]
    return sorted(events, key=lambda e: (e["commit_lsn"], e["position"]))


COMMITS = sorted({(e["commit_lsn"], e["commit_time"]) for e in sample_events()})
"""(commit LSN, commit time) of every transaction of the sample that changed a row."""
MOVE = next(
    e["commit_lsn"]
    for e in sample_events()
    if e["operation"] == "update" and e.get("old_key_values") == ["2"]
)
"""The commit that moved customer 2 to 20 (and its order (2, 1) to (20, 1))."""


@functools.cache
def sample_lake(spark: SparkSession, base: Path) -> Path:
    """The sample ingested in two batches (its first eight transactions, then the rest), built once per test
    session and shared by the time-travel and maintenance tests (which work on a copy)."""
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    commits = [i for i, line in enumerate(lines) if b'"action":"C"' in line]
    cut = commits[7] + 1
    lake = base / "sample-lake"
    for n, part in enumerate((lines[:cut], lines[cut:]), 1):
        batch = base / f"batch-{n}.json"
        batch.write_bytes(b"".join(part))
        ingest(spark, [str(batch)], str(lake), "wal2json-v2")
    return lake


def sample_lake_problems(lake: Path | str) -> int:
    """0 when the lake's silver tables equal ``samples/expected``; 1, with a line per difference printed."""
    spec = importlib.util.spec_from_file_location("check_sample_lake", ROOT / ".ci/check_sample_lake.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return int(module.main(str(lake), str(ROOT / "samples/expected")))
