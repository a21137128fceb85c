"""A pipeline over Kafka topics (``source.kafka``): a real Kafka broker (KRaft, tests/harness/kafka.py),
Spark's Kafka source, records landed as files (``resolver.pipelines.kafka_landing``) and applied as landed
files are.

Ground truth: the same records ingested from a file (Debezium's real recordings in tests/vectors/debezium),
and the sample stream's expected tables (wal2json format 2, cut into micro-batches inside transactions).
Exactly once: a micro-batch run again after a crash (its commit removed from the checkpoint, as a crash
between the lake and the commit leaves it) lands the same files and changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver import ingest
from resolver.config.pipeline import Pipeline, load_pipeline
from resolver.lake.folders import snapshot_path
from resolver.pipelines.run import ledger_path
from resolver.pipelines.stream import StreamProgress, checkpoint_path, run_stream, stream_pipeline
from tests.harness.kafka import KafkaBroker
from tests.samplelake import sample_lake_problems

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests/vectors/debezium/envelope.jsonl"


def _pipeline(
    folder: Path, broker: KafkaBroker, topics: str, fmt: str, per_trigger: int | None = None
) -> Pipeline:
    kafka = {"bootstrap_servers": broker.bootstrap, "topic_pattern": topics}
    lines = [
        "source:",
        "  kafka:",
        *[f"    {k}: {json.dumps(v)}" for k, v in kafka.items()],
        *([f"    max_offsets_per_trigger: {per_trigger}"] if per_trigger else []),
        f"  format: {fmt}",
        "lake: lake/",
    ]
    path = folder / "pipeline.yaml"
    path.write_text("\n".join(lines) + "\n")
    return load_pipeline(path)


def _vector_records(prefix: str) -> list[tuple[str, bytes | None, bytes | None]]:
    """The real Debezium recording, each record for its own topic under ``prefix``."""
    out = []
    for line in VECTORS.read_text("utf-8").splitlines():
        r = json.loads(line)
        key = None if r["key"] is None else json.dumps(r["key"]).encode()
        value = None if r["value"] is None else json.dumps(r["value"]).encode()
        out.append((f"{prefix}.{r['topic']}", key, value))
    return out


def _produce(broker: KafkaBroker, records: list[tuple[str, bytes | None, bytes | None]]) -> None:
    by_topic: dict[str, list[tuple[bytes | None, bytes | None]]] = {}
    for topic, key, value in records:
        by_topic.setdefault(topic, []).append((key, value))
    for topic, rows in by_topic.items():
        broker.produce(topic, rows)


def _silver(spark: SparkSession, lake: Path) -> dict[str, list[str]]:
    """Every silver table's rows as sorted JSON text, without the columns that name the input file."""
    out = {}
    for path in sorted((lake / "silver").iterdir()):
        df = spark.read.format("delta").load(str(path))
        kept = [c for c in df.columns if "source_file" not in c and "source_line" not in c]
        out[path.name] = sorted(df.select(*kept).toJSON().collect())
    return out


def test_debezium_topics_give_the_lake_their_records_give_from_a_file(
    spark: SparkSession, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    _produce(kafka_broker, _vector_records("vec"))
    kafka_broker.produce("xvec.dbz.public.items", [(None, b"not read: the pattern matches whole names")])
    pipeline = _pipeline(tmp_path, kafka_broker, r"vec\.dbz\..*", "debezium-json")
    summary = run_stream(spark, pipeline, once=True)
    assert not summary.failed_tables
    assert summary.files_applied >= 1 and sum(b.quarantined for b in summary.batches) == 0

    direct = tmp_path / "direct"
    ingest(spark, [str(VECTORS)], str(direct), "debezium-json")
    got, expected = _silver(spark, tmp_path / "lake"), _silver(spark, direct)
    assert got.keys() == expected.keys() and got, f"tables {sorted(got)} vs {sorted(expected)}"
    for table, rows in expected.items():
        assert got[table] == rows, f"{table}: the lake from Kafka differs from the file's"

    again = run_stream(
        spark, pipeline, once=True
    )  # nothing new in the topics: no micro-batch applies anything
    assert again.files_applied == 0 and not again.batches


def test_wal2json_lines_cut_inside_transactions_by_micro_batches(
    spark: SparkSession, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    lines = (ROOT / "samples/wal2json-v2/0001.json").read_bytes().splitlines()
    kafka_broker.produce("sample-v2", [(None, line) for line in lines if line.strip()])
    pipeline = _pipeline(tmp_path, kafka_broker, r"sample-v2", "wal2json-v2", per_trigger=18)
    progress = StreamProgress()
    query = stream_pipeline(spark, pipeline, once=True, progress=progress)
    query.awaitTermination()
    assert progress.error is None
    assert len(progress.summaries) >= 3, "the records came in micro-batches of at most 18"
    held = [s for s in progress.summaries if s.files_applied < s.files_new]
    assert held, "some micro-batch ended inside a transaction and held its files back"
    assert sample_lake_problems(tmp_path / "lake") == 0


def test_a_micro_batch_run_again_after_a_crash_changes_nothing(
    spark: SparkSession, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    _produce(kafka_broker, _vector_records("crash"))
    # two micro-batches of the recording's 52 records: the second is the one run again
    pipeline = _pipeline(tmp_path, kafka_broker, r"crash\.dbz\..*", "debezium-json", per_trigger=26)
    first = run_stream(spark, pipeline, once=True)
    assert len(first.batches) >= 2 and not first.failed_tables
    lake = tmp_path / "lake"
    before = _silver(spark, lake)
    landed = sorted(p.name for p in (lake / "_resolver/kafka").iterdir() if not p.name.startswith("."))
    times = {n: (lake / "_resolver/kafka" / n).stat().st_mtime_ns for n in landed}

    # a crash after the lake and the ledger were written but before Spark committed the last micro-batch
    commits = Path(checkpoint_path(pipeline)) / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    again = run_stream(spark, pipeline, once=True)
    assert len(again.batches) <= 1 and again.files_applied == 0, "the micro-batch's files are in the ledger"
    assert (
        sorted(p.name for p in (lake / "_resolver/kafka").iterdir() if not p.name.startswith(".")) == landed
    )
    assert {n: (lake / "_resolver/kafka" / n).stat().st_mtime_ns for n in landed} == times, "not landed again"
    assert _silver(spark, lake) == before
    ledger = spark.read.format("delta").load(ledger_path(str(lake)))
    assert ledger.count() == ledger.select("path").distinct().count() == len(landed)


def test_a_bad_record_is_quarantined_with_where_it_came_from(
    spark: SparkSession, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    records = _vector_records("bad")
    topic = records[0][0]
    records.insert(3, (topic, b'{"id": 1}', b'{"payload": {"op": "x"}, "schema": {}}'))
    records.insert(5, (topic, b"\xff\xfe", b'{"not json'))
    _produce(kafka_broker, records)
    pipeline = _pipeline(tmp_path, kafka_broker, r"bad\.dbz\..*", "debezium-json")
    summary = run_stream(spark, pipeline, once=True)
    assert sum(b.quarantined for b in summary.batches) == 2
    lake = tmp_path / "lake"
    rows = spark.read.format("delta").load(str(lake / "quarantine")).collect()
    raws = sorted(r["raw"] for r in rows)
    assert all(f'"topic":"{topic}","partition":0,"offset":' in raw for raw in raws), raws
    assert any('"op": "x"' in raw for raw in raws) and any('{"not json' in raw for raw in raws)
    assert all(r["reason"] for r in rows)
    assert (Path(snapshot_path(str(lake), "public.items")) / "_delta_log").is_dir()


def test_resolver_run_reads_a_kafka_pipeline_with_its_own_session(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    """The command a scheduler runs, in a process of its own: it adds Spark's Kafka source to its session and
    reads what the topics hold (no --stream: as --stream --once), then exits."""
    _produce(kafka_broker, _vector_records("cli"))
    _pipeline(tmp_path, kafka_broker, r"cli\.dbz\..*", "debezium-json")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-m", "resolver", "run", str(tmp_path / "pipeline.yaml"), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "a Kafka source: what its topics hold now" in done.stderr
    summary = json.loads(done.stdout)
    assert sum(b["accepted"] for b in summary["batches"]) == 20  # the recording's 20 changes
    assert sum(b["quarantined"] for b in summary["batches"]) == 0
    landed = [p for p in (tmp_path / "lake/_resolver/kafka").iterdir() if p.suffix == ".jsonl"]
    assert landed and summary["files_applied"] == len(landed)
