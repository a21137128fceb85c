"""Differential test against real PostgreSQL 15 + wal2json: the silver tables must equal what PostgreSQL held.

For each seed, a random workload (tests/difftest.py: composite keys, primary-key changes and chains, key
swaps, deletes and re-inserts, several changes to a row in one transaction, savepoints, rollbacks, TOASTed
text left out of updates, NULL vs '', unicode, numeric/float/bigint extremes with NaN and ±Infinity, dates,
timestamps, arrays, jsonb, uuid, interval, bytea, TRUNCATE, a REPLICA IDENTITY FULL table without a key)
runs one transaction at a time; the state of every table is recorded after each commit. The wal2json
capture (format 1 and 2) is split on transaction boundaries into batch files (some cut mid-transaction into
two files of one batch) and ingested: all in one call (``whole``), in order, shuffled, shuffled with
replays. Then, for every lake:

* the snapshot equals PostgreSQL's final ``SELECT *`` and the history, as of every commit's LSN and commit
  time, equals the state recorded right after that commit (columns typed by the documented mapping);
* the history keeps its own rules (boundaries on commits, no version that changes nothing, deletions
  flagged, the snapshot = the open versions) and ``__moved_from``/``__moved_to`` follow the rows through
  primary-key changes;
* all lakes of a seed hold exactly the same rows, technical columns included, whatever the delivery and
  the format (format 1 cannot show TRUNCATE, so its truncated table is left out).

CI builds the few lakes in ``CI_PLAN``. Run many more outside CI (every scenario and format for each seed):

    DIFF_SEEDS=50 python -m pytest tests/e2e/test_differential.py        # seeds 1..50
    DIFF_SEEDS=7,19 python -m pytest tests/e2e/test_differential.py      # seeds 7 and 19
    DIFF_TRANSACTIONS=150 DIFF_SEEDS=10 python -m pytest tests/e2e/test_differential.py   # longer workloads

A failure prints the differences (table, commit LSN, key, column, expected vs got) and the path of the
workload's SQL, each transaction labelled with its xid and commit LSN, for reproducing it.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from resolver import ingest
from tests import difftest as d
from tests.harness.fixtures import Captures

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

#: The lakes CI builds, as (seed, wal2json format, scenario): two seeds, both formats, reordered and replayed
#: (late events: the versions are diffed against the history), and a pair of lakes of one seed to compare
#: (v1 whole vs v2 whole): 7 ingest calls. Format 1 is read whole: what differs from format 2 is its reader
#: (a transaction is one object, so no file cuts one), and the order a lake's batches come in is the
#: replayed lake's test, whatever the format (DIFF_SEEDS builds every scenario in both). Batches in order
#: (each newer than all the lake held: the history is MERGEd straight from the versions) are compared with
#: PostgreSQL at every commit for every table by the Kafka lake of tests/e2e/test_debezium_differential.py
#: (micro-batches in offset order), and for the tables of ``d.KILL_TABLES`` from wal2json files by
#: tests/e2e/test_run.py, test_stream.py and test_s3.py, so CI does not build that lake here (DIFF_SEEDS
#: does). The time is nearly all ingest calls (about a minute each on a quiet 2-core machine).
CI_PLAN = ((1, 2, "replayed"), (2, 1, "whole"), (2, 2, "whole"))
#: Streams without types (``include-types=0``) of the last seed's capture, each ingested whole: format 2 with
#: schema files pinning every column's type (must equal the typed lake of that seed, every row), format 1 with
#: none (every column text; typed afterwards by the documented mapping it must equal PostgreSQL).
UNTYPED = ((2, "pinned"), (1, "text"))
BATCHES = 3


def _plan() -> tuple[tuple[int, int, str], ...]:
    """The lakes to build: CI_PLAN, or with DIFF_SEEDS (``N`` = seeds 1..N, or ``7,19``) every scenario in
    both formats for each seed."""
    text = os.environ.get("DIFF_SEEDS", "").strip()
    if not text:
        return CI_PLAN
    seeds = [int(s) for s in text.split(",") if s.strip()] if "," in text else range(1, int(text) + 1)
    return tuple((seed, fmt, scenario) for seed in seeds for fmt in (2, 1) for scenario in d.SCENARIOS)


PLAN = _plan()
SEEDS = tuple(dict.fromkeys(seed for seed, _, _ in PLAN))
TRANSACTIONS = int(os.environ.get("DIFF_TRANSACTIONS", "60"))


def _params(plan: Any) -> list[Any]:
    return [pytest.param(seed, fmt, sc, id=f"seed{seed}-v{fmt}-{sc}") for seed, fmt, sc in plan]


def _same_rows(plan: Any) -> list[Any]:
    """Each lake after the first one of its seed, paired with that first one: all must hold the same rows."""
    first: dict[int, tuple[int, int, str]] = {}
    out = []
    for lake in plan:
        base = first.setdefault(lake[0], lake)
        if base != lake:
            out.append(
                pytest.param(base, lake, id=f"seed{lake[0]}-v{base[1]}-{base[2]}-vs-v{lake[1]}-{lake[2]}")
            )
    return out


# --- shared runs (a module-wide cache: captures and lakes are reused across tests) -------------------
@dataclass
class Lake:
    path: Path
    order: list[list[int]]
    silver: d.Silver
    problems: list[str] = field(default_factory=list)


class Runs:
    def __init__(self, captures: Captures, spark: SparkSession, tmp: pytest.TempPathFactory) -> None:
        self.source, self.spark, self.tmp = captures, spark, tmp
        self.captures: dict[int, d.Capture] = {}
        self.batches: dict[tuple[int, int], list[list[str]]] = {}
        self.sql: dict[int, Path] = {}
        self.lakes: dict[tuple[int, int, str], Lake | BaseException] = {}

    def capture(self, seed: int) -> d.Capture:
        if seed not in self.captures:
            cap = self.source.get(seed, TRANSACTIONS)
            out = self.tmp.mktemp(f"seed{seed}")
            (out / "workload.sql").write_text(cap.sql(), encoding="utf-8")
            self.captures[seed] = cap
            self.batches.update(
                {
                    (seed, fmt): d.write_batches(
                        cap.frames[fmt], BATCHES, random.Random(f"{seed}-{fmt}"), out, f"v{fmt}"
                    )
                    for fmt in (2, 1)
                }
            )
            self.sql[seed] = out / "workload.sql"
        return self.captures[seed]

    def lake(self, seed: int, fmt: int, scenario: str) -> Lake:
        """The lake of a scenario, built once (a failure to build it is kept and raised again)."""
        return self._once((seed, fmt, scenario), lambda: self._build(seed, fmt, scenario))

    def _once(self, key: tuple[int, int, str], build: Callable[[], Lake]) -> Lake:
        if key not in self.lakes:
            try:
                self.lakes[key] = build()
            except Exception as exc:
                self.lakes[key] = exc
        lake = self.lakes[key]
        if isinstance(lake, BaseException):
            raise lake
        return lake

    def _build(self, seed: int, fmt: int, scenario: str) -> Lake:
        self.capture(seed)
        batches = self.batches[(seed, fmt)]
        order = d.batch_order(scenario, len(batches), random.Random(f"{seed}-{fmt}-{scenario}"))
        path = self.tmp.mktemp(f"lake-seed{seed}-v{fmt}-{scenario}")
        problems = []
        for n, group in enumerate(order):
            files = [f for i in group for f in batches[i]]
            try:
                summary = ingest(self.spark, files, str(path), f"wal2json-v{fmt}")
            except Exception as exc:
                raise AssertionError(
                    self.report(seed, fmt, scenario, [f"ingest #{n} (batches {group}) failed: {exc}"], order)
                ) from exc
            if summary.quarantined:
                problems.append(f"ingest #{n} (batches {group}): {summary.quarantined} records quarantined")
            if all([i] in order[:n] for i in group) and summary.accepted:
                problems.append(f"ingest #{n} replays batch {group} but accepted {summary.accepted} events")
        return Lake(path, order, d.collect_silver(self.spark, path, d.tables_for(fmt)), problems)

    def untyped_lake(self, seed: int, fmt: int, kind: str) -> Lake:
        """The lake of the seed's capture decoded without types, ingested whole; ``kind`` "pinned" passes a
        schema file per table pinning every column's type, "text" none."""
        return self._once((seed, fmt, f"untyped-{kind}"), lambda: self._build_untyped(seed, fmt, kind))

    def _build_untyped(self, seed: int, fmt: int, kind: str) -> Lake:
        cap = self.capture(seed)
        out = self.tmp.mktemp(f"untyped-seed{seed}-v{fmt}")
        frames = d.read_frames(cap.untyped[fmt], fmt)
        files = [f for b in d.write_batches(frames, BATCHES, random.Random(seed), out, "in") for f in b]
        tables = d.tables_for(fmt)
        schemas = str(d.write_schema_files(out / "schemas", tables)) if kind == "pinned" else None
        path = out / "lake"
        summary = ingest(self.spark, files, str(path), f"wal2json-v{fmt}", schemas)
        problems = [f"{t.table}: {t.error}" for t in summary.tables if t.error]
        problems += [f"{summary.quarantined} records quarantined"] if summary.quarantined else []
        collect = d.collect_silver if kind == "pinned" else d.collect_silver_typed
        lake = Lake(path, [list(range(BATCHES))], collect(self.spark, path, tables), problems)
        if kind == "text":
            for t in tables:
                df = self.spark.read.format("delta").load(str(path / "silver" / t.qualified))
                lake.problems += [
                    f"{t.qualified}.{c} is {typ}" for c, typ in df.dtypes if c in t.names and typ != "string"
                ]
        return lake

    def report(
        self, seed: int, fmt: int, what: str, problems: list[str], order: list[list[int]] | None = None
    ) -> str:
        shown = "\n".join(f"  {p}" for p in problems[:40])
        more = f"\n  ... and {len(problems) - 40} more" if len(problems) > 40 else ""
        files = "\n".join(f"  batch {i}: {b}" for i, b in enumerate(self.batches[(seed, fmt)]))
        return (
            f"seed {seed}, wal2json format {fmt}, {what}: {len(problems)} difference(s)\n{shown}{more}\n"
            f"workload SQL: {self.sql[seed]}\n"
            f"ingest order: {order}\n{files}"
        )


@pytest.fixture(scope="module")
def runs(captures: Captures, spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return Runs(captures, spark, tmp_path_factory)


# --- the comparator itself (no Spark, no PostgreSQL) -------------------------------------------------
def test_comparator_reports_each_kind_of_difference() -> None:
    t = d.BY_NAME["links"]
    expected = {
        (1, 1): {"a": 1, "b": 1, "rid": 1, "v": "x"},
        (1, 2): {"a": 1, "b": 2, "rid": 2, "v": None},
        (2, 2): {"a": 2, "b": 2, "rid": 3, "v": ""},
    }
    got = [
        {"a": 1, "b": 1, "rid": 1, "v": "x", "__start_lsn": 5},  # technical columns are ignored
        {"a": 1, "b": 2, "rid": 2, "v": ""},  # '' is not NULL
        {"a": 3, "b": 3, "rid": 4, "v": "y"},
        {"a": 3, "b": 3, "rid": 5, "v": "y"},
    ]
    problems = d.diff_table(t, expected, got, "at X")
    assert problems == [
        "public.links at X: key (a=3, b=3) twice: {a: 3, b: 3, rid: 4, v: 'y'} and "
        "{a: 3, b: 3, rid: 5, v: 'y'}",
        "public.links at X: key (a=1, b=2) column v: expected None, got ''",
        "public.links at X: key (a=2, b=2) missing; expected {a: 2, b: 2, rid: 3, v: ''}",
        "public.links at X: key (a=3, b=3) should not exist; got {a: 3, b: 3, rid: 5, v: 'y'}",
    ]
    assert d.diff_table(t, expected, [dict(r) for r in expected.values()], "same") == []
    # values must agree in type too: a decimal is not a float, 1 is not True; long strings are shortened
    acc = d.BY_NAME["items"]
    row = {c: None for c in acc.names} | {"id": 1, "rid": 1, "price": Decimal("1.50")}
    assert d.diff_table(acc, {(1,): row}, [row | {"price": Decimal("1.5")}], "w") == []
    [p] = d.diff_table(acc, {(1,): row}, [row | {"price": 1.5}], "w")
    assert p.endswith("column price: expected Decimal('1.50'), got 1.5")
    [p] = d.diff_table(acc, {(1,): row | {"memo": "é" * 9000}}, [row | {"memo": "é" * 8999}], "w")
    assert "expected <str len=9000 " in p and "got <str len=8999 " in p and len(p) < 300
    # the documented mapping: NaN / Infinity arrive as NULL; timestamptz is an instant
    assert d.from_pg("double precision", float("nan")) is None and d.from_pg("numeric", "-Infinity") is None
    assert d.from_pg("numeric(12,2)", Decimal("NaN")) is None and d.from_pg("text", "NaN") == "NaN"
    assert d.from_spark("double", float("inf")) == "inf"  # never equal to NULL
    assert d.from_spark("timestamp", 1) == datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC)


def test_history_rules_catch_broken_versions() -> None:
    t = d.BY_NAME["links"]

    def commit(i: int, key: tuple[int, int]) -> d.Commit:  # the row rid=1 sits at key after commit i
        state = {"links": {key: {"a": key[0], "b": key[1], "rid": 1, "v": "x"}}}
        return d.Commit(i, 700 + i, state, 100 * (i + 1), datetime(2024, 1, 1 + i, tzinfo=UTC))

    c1, c2, c3 = commit(0, (1, 1)), commit(1, (2, 2)), commit(2, (2, 2))

    def version(a: int, start: d.Commit, end: d.Commit | None, **extra: Any) -> d.Row:
        return {
            "a": a, "b": a, "rid": 1, "v": "x", "__start_lsn": start.lsn, "__start_time": start.time,
            "__end_lsn": end.lsn if end else d.MAX_LSN, "__end_time": end.time if end else d.MAX_TIME,
            "__is_current": end is None, "__is_deleted": False, "__moved_from": None, "__moved_to": None,
        } | extra  # fmt: skip

    snapshot = [{"a": 2, "b": 2, "rid": 1, "v": "x", "__start_lsn": 200, "__start_time": c2.time}]
    good = [
        version(1, c1, c2, __is_deleted=True, __moved_to=(2, 2)),
        version(2, c2, None, __moved_from=(1, 1)),
    ]
    silver = d.Silver({"links": snapshot}, {"links": good})
    assert d.check_versions(t, silver, [c1, c2, c3]) == d.check_lineage(silver, [c1, c2, c3], [t]) == []
    bad = [version(1, c1, c2), version(2, c2, c3), version(2, c3, None)]
    silver = d.Silver({"links": snapshot}, {"links": bad})
    problems = d.check_versions(t, silver, [c1, c2, c3])
    assert any("gone after the commit that ended it but __is_deleted is false" in p for p in problems)
    lineage = d.check_lineage(silver, [c1, c2, c3], [t])
    assert [p.split(": ", 1)[1] for p in lineage] == [
        "version of (a=1, b=1) [0/64, 0/C8): __moved_to is None, expected (2, 2)",
        "version of (a=2, b=2) [0/C8, 0/12C): __moved_from is None, expected (1, 1)",
    ]
    assert any("new version at 0/12C that changes nothing" in p for p in problems)
    assert any("snapshot differs from the history's open versions" in p for p in problems)
    assert d.unique_times([c1, c2, d.Commit(3, 703, {}, 400, c2.time)]) == [c1]


# --- against PostgreSQL ------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_workload_covers_the_cases_and_maps_onto_the_stream(runs: Runs, seed: int) -> None:
    """The captured stream holds what the workload is meant to exercise (a guard against a generator that
    quietly stops producing a case); capture_workload already mapped every transaction to its commit."""
    cap = runs.capture(seed)
    events = cap.events[2]
    toasted = {t.qualified: set(t.toast) for t in d.TABLES}
    counts = {
        "commits": len(cap.timeline[2]),
        "primary-key changes": sum(d.moves_key(e) for e in events),
        "updates leaving a TOASTed column out": sum(
            e["operation"] == "update" and bool(toasted[e["table"]] - set(e["column_names"])) for e in events
        ),
        "deletes": sum(e["operation"] == "delete" for e in events),
        "truncates": sum(e["operation"] == "truncate" for e in events),
        "transactions changing one row twice": sum(
            _touches_a_key_twice(events, c.lsn) for c in cap.timeline[2]
        ),
        "REPLICA IDENTITY FULL updates": sum(
            e["table"] == "public.logs" and e["operation"] == "update" for e in events
        ),
    }
    assert all(n > 0 for n in counts.values()), counts
    assert counts["commits"] >= TRANSACTIONS // 2, counts
    assert len(cap.events[1]) == len(events) - counts["truncates"]


def _touches_a_key_twice(events: list[dict[str, Any]], lsn: int) -> bool:
    """Does a transaction change some primary key's row more than once (by old or new key)?"""
    seen: set[tuple[Any, ...]] = set()
    for e in events:
        if e["commit_lsn"] != lsn or not e.get("primary_key"):
            continue
        images = [dict(zip(e.get("old_key_names") or [], e.get("old_key_values") or [], strict=True))]
        images.append(dict(zip(e.get("column_names") or [], e.get("column_values") or [], strict=True)))
        keys = {(e["table"], *(i[c] for c in e["primary_key"])) for i in images if i}
        if keys & seen:
            return True
        seen |= keys
    return False


@pytest.mark.parametrize(("seed", "fmt", "scenario"), _params(PLAN))
def test_silver_equals_postgres_at_every_commit(runs: Runs, seed: int, fmt: int, scenario: str) -> None:
    """Snapshot = the final state; history as of every commit's LSN and time = the state after it."""
    lake = runs.lake(seed, fmt, scenario)
    problems = lake.problems + d.check_lake(lake.silver, runs.capture(seed).timeline[fmt], d.tables_for(fmt))
    assert not problems, runs.report(seed, fmt, scenario, problems, lake.order)


@pytest.mark.parametrize(("seed", "fmt", "scenario"), _params(PLAN))
def test_key_lineage_follows_the_rows(runs: Runs, seed: int, fmt: int, scenario: str) -> None:
    """``__moved_from``/``__moved_to`` name the keys a row had in committed states, never one it held only
    inside a transaction."""
    lake = runs.lake(seed, fmt, scenario)
    problems = d.check_lineage(lake.silver, runs.capture(seed).timeline[fmt], d.tables_for(fmt))
    assert not problems, runs.report(seed, fmt, f"{scenario}, key lineage", problems, lake.order)


@pytest.mark.parametrize(("fmt", "kind"), UNTYPED, ids=[f"v{f}-{k}" for f, k in UNTYPED])
def test_a_stream_without_types_equals_postgres_at_every_commit(runs: Runs, fmt: int, kind: str) -> None:
    """wal2json with ``include-types=0``: every table applied; with schema files pinning the types, the very
    rows of the typed stream's lake; without them, text that types to what PostgreSQL held."""
    seed = SEEDS[-1]
    lake = runs.untyped_lake(seed, fmt, kind)
    problems = lake.problems + d.check_lake(lake.silver, runs.capture(seed).timeline[fmt], d.tables_for(fmt))
    problems += d.check_lineage(lake.silver, runs.capture(seed).timeline[fmt], d.tables_for(fmt))
    if kind == "pinned":
        typed = runs.lake(seed, fmt, "whole")
        problems += d.diff_silver(typed.silver, lake.silver, d.tables_for(fmt), "typed vs untyped, pinned")
    assert not problems, runs.report(seed, fmt, f"untyped, {kind}", problems)


@pytest.mark.parametrize(("base", "other"), _same_rows(PLAN))
def test_every_delivery_and_format_gives_the_same_rows(
    runs: Runs, base: tuple[int, int, str], other: tuple[int, int, str]
) -> None:
    """Any batch order, any replays, either format: the same rows, technical columns included (format 1
    cannot show the truncated table, which is left out when a format-1 lake takes part)."""
    a, b = runs.lake(*base), runs.lake(*other)
    tables = d.tables_for(min(base[1], other[1]))
    problems = d.diff_silver(a.silver, b.silver, tables, f"v{base[1]} {base[2]} vs v{other[1]} {other[2]}")
    assert not problems, runs.report(other[0], other[1], f"compared with {base}", problems, b.order)
