"""Differential test for Debezium input: a real Debezium (embedded engine 3.6.1, pgoutput) captures the random
workload of tests/difftest.py from a real PostgreSQL 15, and the lake built from its records must equal what
PostgreSQL held: the snapshot its final state, the history its state as of every commit, primary-key changes
followed, and Debezium's placeholder for unchanged TOASTed values never in a silver table.
 The workload is the wal2json differential test's (composite keys, key changes and chains, deletes and
re-inserts, TOASTed text left out of updates under REPLICA IDENTITY DEFAULT, NULL vs '', numeric and float
extremes, dates, timestamps, arrays, jsonb, uuid, interval, bytea, TRUNCATE, a REPLICA IDENTITY FULL table
without a key). The connector runs with ``interval.handling.mode=string`` (exact intervals) and
``skipped.operations=none`` (truncates); its records are written one per line as Kafka records
(``{"topic", "key", "value", "headers"}``, schema envelope on), cut into batch files between transactions,
and ingested shuffled with replays (in order too with DBZ_SCENARIOS). The same capture also goes to a real
Kafka broker (each batch produced before it is written to the file) into topics of three partitions (so a
key change's delete and create, routed by key, mostly land in different partitions: the create's header
pairs them), and a pipeline over its topics (``source.kafka``) builds another lake in micro-batches cut
anywhere. A commit's LSN in the lake is Debezium's: the end of the previous transaction's commit
(``resolver.formats.debezium``), so the history is compared as of those.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from resolver import ingest
from resolver.config.pipeline import load_pipeline
from resolver.formats.debezium_values import DEFAULT_PLACEHOLDER
from resolver.formats.wal2json import Event, read_lines
from resolver.models import Format, RunSummary
from resolver.pipelines.stream import run_stream
from tests import difftest as d
from tests.harness.debezium import MARKER_TABLE, MARKER_TOPIC, DebeziumCapture
from tests.harness.kafka import KafkaBroker
from tests.harness.postgres import PgServer

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.kafka]

SEED = 4
TRANSACTIONS = 60
#: the files the capture is cut into: "replayed" delivers them in 4 ingests (the later one first, it again,
#: the earlier one, then one of them again), each ingest a batch over the workload's 5 tables
BATCHES = 2
#: the lakes built from the files besides the Kafka one. CI builds "replayed" (batches shuffled, one delivered
#: twice): the Kafka lake is the in-order delivery (micro-batches in offset order), so a file lake in order
#: would test the same path again; DBZ_SCENARIOS=in-order,replayed adds it back.
SCENARIOS = tuple(s.strip() for s in os.environ.get("DBZ_SCENARIOS", "replayed").split(",") if s.strip())
#: partitions of each table's topic in the Kafka lake
PARTITIONS = 3
#: the connector settings README.md's "From Debezium and Kafka" asks for: exact numerics, intervals and types
SETTINGS = {
    "decimal.handling.mode": "string",
    "interval.handling.mode": "string",
    "column.propagate.source.type": ".*",
    "skipped.operations": "none",
}
_TWO_D = "'{{1,2},{3,4}}'"
_INT_ARRAY = d.GENERATORS["integer[]"]


def _int_array_1d(rng: random.Random) -> str:
    """The workload's integer arrays, a two-dimensional one made one-dimensional: Debezium sends a
    multidimensional array as a list of NULLs (its limitation, README.md), so no reader can get it back."""
    value = _INT_ARRAY(rng)
    return "'{1,2,3,4}'" if value == _TWO_D else value


@dataclass
class Captured:
    """The workload's commits as the lake must show them, and the Debezium records cut into batch files."""

    timeline: list[d.Commit]
    batches: list[Path]
    sql: Path
    records: int


def _capture(pg_server: PgServer, out: Path, broker: KafkaBroker) -> Captured:
    db = pg_server.create_database("dbz_diff")
    try:
        db.execute(d.SCHEMA_SQL)
        tables = [t.qualified for t in d.TABLES]
        for (
            table
        ) in tables:  # Debezium sends a key change's delete and create by key: to different partitions
            broker.create_topic(f"dbz.{table}", partitions=PARTITIONS)
        kafka = broker.bootstrap
        with DebeziumCapture(db.dsn, out / "capture.jsonl", tables, extra=SETTINGS, kafka=kafka) as capture:
            capture.sync()  # the marker's transaction streams first: every workload one has a previous commit
            with pytest.MonkeyPatch.context() as patch:
                patch.setitem(d.GENERATORS, "integer[]", _int_array_1d)
                transactions = d.Workload(SEED).transactions(TRANSACTIONS)
            commits = d.run_workload(db, transactions)
            capture.sync()
            records = [r for r in capture.lines() if r["topic"] != MARKER_TOPIC]
    finally:
        pg_server.drop_database("dbz_diff")
    sql = out / "workload.sql"
    sql.write_text(d.SCHEMA_SQL + "\n" + "\n".join(t.sql() for t in transactions), encoding="utf-8")
    lines = [json.dumps(r) for r in records]
    frames = _frames(lines)
    timeline = d.map_commits(commits, frames, d.TABLES)
    return Captured(timeline, _write_batches(lines, out), sql, len(records))


def _frames(lines: list[str]) -> list[d.Frame]:
    """The transactions the reader sees: its events grouped by xid, with the commit LSN and time they carry
    (every event of a transaction must carry the same)."""
    by_xid: dict[int, d.Frame] = {}
    for item in read_lines((line.encode() for line in lines), "capture", Format.DEBEZIUM_JSON):
        assert type(item).__name__ in ("Event", "Count"), f"the reader did not accept the capture: {item}"
        if isinstance(item, Event):
            e = item.row
            frame = by_xid.setdefault(e["xid"], d.Frame(e["xid"], e["commit_lsn"], e["commit_time"], []))
            assert (frame.lsn, frame.time) == (e["commit_lsn"], e["commit_time"]), f"event {e} vs {frame}"
    return sorted(by_xid.values(), key=lambda f: f.lsn)


def _write_batches(lines: list[str], out: Path) -> list[Path]:
    """The records cut into ``BATCHES`` files between transactions (a key change's delete, tombstone and
    create stay in one file: the reader pairs them there)."""
    starts, current = [], None  # lines where a transaction's first change is (tombstones belong to theirs)
    for i, line in enumerate(lines):
        txid = _txid(line)
        if txid is not None and txid != current:
            starts += [i] if i else []
            current = txid
    cuts = sorted(random.Random(SEED).sample(starts, BATCHES - 1))
    paths = []
    for n, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(lines)], strict=True)):
        path = out / f"batch{n}.jsonl"
        path.write_text("\n".join(lines[a:b]) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def _txid(line: str) -> int | None:
    value = json.loads(line)["value"]
    payload = value.get("payload", value) if isinstance(value, dict) else None
    return payload["source"]["txId"] if payload and "source" in payload else None


@pytest.fixture(scope="module")
def captured(
    pg_server: PgServer, kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory
) -> Captured:
    return _capture(pg_server, tmp_path_factory.mktemp("debezium"), kafka_broker)


def _from_kafka(spark: SparkSession, broker: KafkaBroker, records: int, folder: Path) -> RunSummary:
    """The lake a pipeline over the capture's topics builds, in micro-batches of half of the records
    (cut anywhere: inside transactions, between a key change's delete and create)."""
    pipeline = folder / "pipeline.yaml"
    kafka = {"bootstrap_servers": broker.bootstrap, "topic_pattern": r"dbz\.public\..*"}
    kafka["max_offsets_per_trigger"] = records // 2 + 1
    text = {"source": {"kafka": kafka, "format": "debezium-json"}, "lake": "lake", "exclude": [MARKER_TABLE]}
    pipeline.write_text(json.dumps(text), encoding="utf-8")  # JSON is YAML
    return run_stream(spark, load_pipeline(pipeline), once=True)


def _key_changes_across_partitions(broker: KafkaBroker) -> int:
    """How many key changes have their delete and their create in different partitions of their topic."""
    split = 0
    for t in d.TABLES:
        halves: dict[tuple[int, str], set[int]] = {}  # (lsn, which header) -> partitions
        for r in broker.records(f"dbz.{t.qualified}"):
            names = {name for name, _ in r.headers}
            half = next((n for n in ("__debezium.oldkey", "__debezium.newkey") if n in names), None)
            if half is None or r.value is None:
                continue
            lsn = json.loads(r.value)["payload"]["source"]["lsn"]
            halves.setdefault((lsn, half), set()).add(r.partition)
        split += sum(
            1
            for (lsn, half), parts in halves.items()
            if half == "__debezium.oldkey" and parts != halves.get((lsn, "__debezium.newkey"), parts)
        )
    return split


@pytest.fixture(scope="module")
def lakes(
    spark: SparkSession,
    captured: Captured,
    kafka_broker: KafkaBroker,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    out = {}
    for scenario in SCENARIOS:
        order = d.batch_order(scenario, BATCHES, random.Random(f"{SEED}-{scenario}"))
        lake = tmp_path_factory.mktemp(f"lake-{scenario}")
        for n, group in enumerate(order):
            summary = ingest(spark, [str(captured.batches[i]) for i in group], str(lake), "debezium-json")
            assert summary.quarantined == 0, f"{scenario} ingest #{n}: {summary.quarantined} quarantined"
            if [group[0]] in order[:n]:
                assert summary.accepted == 0, f"{scenario} ingest #{n} replays {group} but accepted events"
        out[scenario] = (order, d.collect_silver(spark, lake, d.TABLES))
    split = _key_changes_across_partitions(kafka_broker)
    assert split > 0, "no key change's delete and create landed in different partitions"
    folder = tmp_path_factory.mktemp("lake-kafka")
    summary = _from_kafka(spark, kafka_broker, captured.records, folder)
    assert not summary.failed_tables and sum(b.quarantined for b in summary.batches) == 0, summary.lines()
    assert len(summary.batches) >= 2, f"{len(summary.batches)} micro-batch(es): expected at least 2"
    out["kafka"] = (
        [[n] for n in range(len(summary.batches))],
        d.collect_silver(spark, folder / "lake", d.TABLES),
    )
    return out


@pytest.mark.parametrize("scenario", [*SCENARIOS, "kafka"])
def test_the_lake_from_debezium_equals_postgresql_at_every_commit(
    scenario: str, captured: Captured, lakes: dict[str, Any]
) -> None:
    order, silver = lakes[scenario]
    problems = d.check_lake(silver, captured.timeline, d.TABLES)
    problems += d.check_lineage(silver, captured.timeline, d.TABLES)
    shown = "\n".join(f"  {p}" for p in problems[:40])
    every = captured.sql.with_name(f"problems-{scenario}.txt")
    every.write_text("\n".join(problems) + "\n", encoding="utf-8")
    assert not problems, (
        f"Debezium, {scenario} (ingest order {order}): {len(problems)} difference(s)\n{shown}\n"
        f"all of them: {every}\nworkload SQL: {captured.sql}\nbatches: {captured.batches}"
    )


def test_the_placeholder_never_reaches_a_silver_table(lakes: dict[str, Any]) -> None:
    for scenario, (_, silver) in lakes.items():
        for name, rows in silver_rows(silver).items():
            found = [r for r in rows if DEFAULT_PLACEHOLDER in r]
            assert not found, f"{scenario}: {name} holds the placeholder: {found[:2]}"


@pytest.mark.parametrize("other", [*SCENARIOS[1:], "kafka"])
def test_every_delivery_gives_the_same_rows(other: str, lakes: dict[str, Any]) -> None:
    first = SCENARIOS[0]
    problems = d.diff_silver(lakes[first][1], lakes[other][1], d.TABLES, f"{first} vs {other}")
    assert not problems, "\n".join(problems[:40])


def silver_rows(silver: d.Silver) -> dict[str, list[str]]:
    """Every row of every snapshot and history, as text."""
    return {
        f"{name} {part}": rows
        for name, (snapshot, history) in d.silver_rows(silver, d.TABLES).items()
        for part, rows in (("snapshot", snapshot), ("history", history))
    }
