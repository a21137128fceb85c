"""Pipeline files (resolver.config.pipeline): validation with path and hint, settings per table, the source's
files. No Spark."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from resolver.config.pipeline import Output, load_pipeline, parse_pipeline
from resolver.config.policy import Policy
from resolver.errors import ConfigError
from resolver.models import Format

FULL = """
source: {path: landing/, format: wal2json-v2}
lake: lake/
schemas: schemas/
max_files_per_batch: 5
policies: {unknown_table: quarantine}
include: ["public.*", "sales.orders"]
exclude: ["public.tmp_*"]
defaults: {outputs: [snapshot, history]}
tables:
  "public.*": {cluster_by_key: true}
  public.orders: {key: [order_id], track_history: [status], outputs: [history]}
"""


def test_a_full_pipeline_file(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(FULL)
    p = load_pipeline(tmp_path / "p.yaml")
    assert p.source.format == Format.WAL2JSON_V2
    assert (p.source.path, p.lake, p.schemas) == tuple(
        str(tmp_path / name) for name in ("landing", "lake", "schemas")
    )  # relative to the file's folder
    assert p.policies.unknown_table == Policy.QUARANTINE and p.policies.unsafe_type_change == Policy.FAIL
    assert [p.included(t) for t in ("public.a", "public.tmp_1", "sales.orders", "sales.x")] == [
        True,
        False,
        True,
        False,
    ]
    orders = p.settings("public.orders")
    assert (orders.key, orders.track_history, orders.outputs, orders.cluster_by_key) == (
        ["order_id"],
        ["status"],
        [Output.HISTORY],
        True,  # from "public.*": later entries override only what they set
    )
    assert (orders.snapshot, orders.history) == (False, True)
    other = p.settings("public.customers")
    assert (other.key, other.cluster_by_key, other.snapshot, other.history) == (None, True, True, True)
    assert p.settings("sales.orders").cluster_by_key is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lake: x\n", "p.yaml: source: missing, expected a value"),
        (
            "source: {path: a, format: wal2json-v3}\nlake: x\n",
            "p.yaml: source.format: found 'wal2json-v3': Input should be 'wal2json-v1', 'wal2json-v2' or "
            "'debezium-json'",
        ),
        (
            "source: {path: a, format: wal2json-v2}\nlake: x\nmax_file_per_batch: 3\n",
            "p.yaml: max_file_per_batch: unknown key 'max_file_per_batch' "
            "(did you mean 'max_files_per_batch'?)",
        ),
        (
            "source: {path: a, format: wal2json-v2}\nlake: x\ntables: {public.t: {track_histroy: [a]}}\n",
            "p.yaml: tables.public.t.track_histroy: unknown key 'track_histroy' "
            "(did you mean 'track_history'?)",
        ),
        (
            "source: {path: a, format: wal2json-v2}\nlake: x\ndefaults: {outputs: [snapshot, snapshot]}\n",
            "p.yaml: defaults.outputs: found ['snapshot', 'snapshot']: list each output once",
        ),
        (
            "source: {path: a, format: wal2json-v2}\nlake: x\npolicies: {unsafe_type_change: evolve}\n",
            "p.yaml: policies.unsafe_type_change: found 'evolve', expected 'fail' or 'quarantine': a type "
            "the lake cannot widen to cannot be taken without a lossy cast (pin the column's type in the "
            "schema file to cast on purpose)",
        ),
        ("source: {}\nlake: x\n", "p.yaml: source: found neither path nor kafka (expected a folder, a glob"),
        (
            "source: {kafka: {bootstrap_servers: b:9092, topics: [t]}}\nlake: x\n",
            "p.yaml: source: found kafka without format (expected format: debezium-json, wal2json-v1 or "
            "wal2json-v2)",
        ),
        (
            "source: {kafka: {bootstrap_servers: b:9092}, format: debezium-json}\nlake: x\n",
            "p.yaml: source.kafka: found neither of topics and topic_pattern (expected exactly one)",
        ),
        (
            "source: {kafka: {bootstrap_servers: b:9092, topic: [t]}, format: debezium-json}\nlake: x\n",
            "p.yaml: source.kafka.topic: unknown key 'topic' (did you mean 'topics'?)",
        ),
        (
            "source: {kafka: {bootstrap_servers: b:9092, topics: [t], options: {startingOffsets: latest}}, "
            "format: debezium-json}\nlake: x\n",
            "p.yaml: source.kafka: found startingOffsets (use starting_offsets) in options (expected them as "
            "fields of source.kafka)",
        ),
        ("- a\n", "p.yaml: found list, expected a mapping with 'source' and 'lake'"),
        ("source: [\n", "p.yaml: not valid YAML at line 2 column 1: expected the node content"),
    ],
)
def test_errors_name_the_path_what_was_found_and_what_was_expected(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_pipeline(text, "p.yaml")
    assert str(err.value).startswith(message), str(err.value)


def test_source_files_in_name_order(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    for name in ("0002.json", "0001.json", ".partial", "_tmp", "0003.log"):
        (landing / name).write_text("")
    p = parse_pipeline("source: {path: landing, format: wal2json-v1}\nlake: lake\n", "p.yaml", tmp_path)
    assert [os.path.basename(f) for f in p.source_files()] == ["0001.json", "0002.json", "0003.log"]
    glob = parse_pipeline("source: {path: 'landing/*.json', format: wal2json-v1}\nlake: l\n", "p", tmp_path)
    assert [os.path.basename(f) for f in glob.source_files()] == ["0001.json", "0002.json"]
    missing = parse_pipeline("source: {path: nowhere, format: wal2json-v1}\nlake: l\n", "p", tmp_path)
    with pytest.raises(ConfigError) as err:
        missing.source_files()
    assert str(err.value) == (
        f"source path {str(tmp_path / 'nowhere')!r} not found (expected a folder of wal2json files or a glob)"
    )
    with pytest.raises(ConfigError) as err:
        load_pipeline(tmp_path / "none.yaml")
    assert str(err.value).startswith(f"pipeline file {str(tmp_path / 'none.yaml')!r} not found")


def test_the_source_format_is_optional(tmp_path: Path) -> None:
    p = parse_pipeline("source: {path: landing}\nlake: lake\n", "p.yaml", tmp_path)
    assert (
        p.source.format is None
    )  # resolver run detects it from the files (resolver.files.input_files.resolve_format)
    given = parse_pipeline("source: {path: landing, format: wal2json-v1}\nlake: lake\n", "p.yaml", tmp_path)
    assert given.source.format == Format.WAL2JSON_V1


def test_a_kafka_source_lands_its_records_in_the_lake_unless_told_where(tmp_path: Path) -> None:
    text = """
source:
  kafka:
    bootstrap_servers: b1:9092,b2:9092
    topic_pattern: "pg\\\\.public\\\\..*"
    max_offsets_per_trigger: 500
    options: {kafka.security.protocol: SASL_SSL}
  format: debezium-json
lake: lake/
"""
    pipeline = parse_pipeline(text, "p.yaml", tmp_path)
    assert pipeline.source.path == os.path.join(tmp_path, "lake", "_resolver", "kafka")
    assert pipeline.source.kafka is not None
    assert pipeline.source.kafka.reader_options() == {
        "kafka.bootstrap.servers": "b1:9092,b2:9092",
        "startingOffsets": "earliest",
        "subscribePattern": "^(?:pg\\.public\\..*)$",  # whole names: Spark's source matches any part
        "maxOffsetsPerTrigger": "500",
        "kafka.security.protocol": "SASL_SSL",
    }
    elsewhere = parse_pipeline(text.replace("  format:", "  path: landed/\n  format:"), "p.yaml", tmp_path)
    assert elsewhere.source.path == os.path.join(tmp_path, "landed")


def test_schema_changes_are_rewritten_unless_a_table_says_metadata() -> None:
    from resolver.models import SchemaChanges

    p = parse_pipeline(
        "source: {path: l, format: wal2json-v2}\nlake: x\ntables:\n  big.*: {schema_changes: metadata}\n", "p"
    )
    assert p.settings("public.orders").schema_changes is None  # the layout's default: rewrite
    assert p.settings("big.events").schema_changes is SchemaChanges.METADATA
    with pytest.raises(ConfigError) as err:
        parse_pipeline(
            "source: {path: l, format: wal2json-v2}\nlake: x\ndefaults: {schema_changes: inplace}\n", "p"
        )
    assert "defaults.schema_changes" in str(err.value) and "'rewrite' or 'metadata'" in str(err.value), (
        err.value
    )
