"""Streams without column types reach silver, and no table that received events is left out of it unreported.
 Debezium records kept without the schema envelope and without record keys (``value.converter.schemas.enable
=false``, the primary key named in a schema file) give the lake a real Debezium with the envelope gives
(tests/vectors/debezium: the same workload recorded both ways). A table whose events cannot be applied is
named in its summary and on stderr, the exit status is 3, its events stay in bronze, and ingesting the same
files after the fix applies them. (wal2json's ``include-types=0`` against PostgreSQL: test_differential.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from resolver.cli.main import main
from resolver.formats.debezium_values import DEFAULT_PLACEHOLDER

pytestmark = pytest.mark.spark

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "debezium"
ITEMS = "dbz.public.items"


def _records(name: str) -> list[dict[str, Any]]:
    lines = (VECTORS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["topic"] == ITEMS and r["value"] is not None]


def _write(path: Path, lines: list[Any]) -> str:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return str(path)


def _silver(
    spark: SparkSession, lake: Path, table: str, as_text: bool = False
) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
    """A silver table's column types and rows (every value cast to text with ``as_text``)."""
    df = spark.read.format("delta").load(str(lake / "silver" / table))
    types = df.dtypes
    if as_text:
        df = df.select(*[df[c].cast("string").alias(c) for c in df.columns])
    return types, sorted((tuple(r) for r in df.collect()), key=repr)


def _ingest(lake: Path, *argv: str) -> int:
    return main(["ingest", *argv, "--lake", str(lake), "--format", "debezium-json"])


def test_debezium_without_envelope_or_keys_gives_the_lake_the_envelope_gives(
    spark: SparkSession, tmp_path: Path
) -> None:
    with_envelope = tmp_path / "envelope"
    assert _ingest(with_envelope, _write(tmp_path / "envelope.jsonl", _records("envelope"))) == 0
    # the values alone: no schema, no key, no headers; cut between two transactions, out of order, replayed
    values = [r["value"] for r in _records("plain")]
    assert all("schema" not in v for v in values) and sum(v["op"] == "u" for v in values) >= 3
    txids = [v["source"]["txId"] for v in values]
    cut = txids.index(txids[len(txids) // 2])
    first, second = _write(tmp_path / "0001.json", values[:cut]), _write(tmp_path / "0002.json", values[cut:])
    assert any(DEFAULT_PLACEHOLDER in json.dumps(v) for v in values[:cut])
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "public.items.yaml").write_text(
        "table: public.items\nprimary_key: [id]\ncolumns:\n  - {name: id, type: int}\n", encoding="utf-8"
    )
    plain = tmp_path / "plain"
    for f in (second, first, second):
        assert _ingest(plain, f, "--schemas", str(schemas)) == 0
    for table in ("public.items", "public.items__history"):
        assert _silver(spark, plain, table) == _silver(spark, with_envelope, table)
    # without the pinned type: the same rows with the values as the stream's text (the key from the deletes')
    untyped = tmp_path / "untyped"
    assert _ingest(untyped, first, second) == 0
    for table in ("public.items", "public.items__history"):
        types, rows = _silver(spark, untyped, table, as_text=True)
        assert _silver(spark, with_envelope, table, as_text=True)[1] == rows
        assert dict(types)["id"] == "string" and not any(DEFAULT_PLACEHOLDER in repr(r) for r in rows)
    snapshot = spark.read.format("delta").load(str(untyped / "silver" / "public.items"))
    assert dict(snapshot.dtypes)["id"] == "string"
    assert [tuple(r) for r in snapshot.filter("id = '1'").select("id", "name").collect()] == [
        ("1", "one, again")
    ]
    assert snapshot.filter("id = '20'").first()["big"].startswith("4f954a56")  # the TOASTed value, kept


def test_every_way_a_table_can_be_left_out_is_reported_and_applied_after_the_fix(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = [r["value"] for r in _records("plain")]

    def renamed(v: dict[str, Any], table: str) -> dict[str, Any]:
        return {**v, "source": {**v["source"], "table": table}}

    inserts = [v for v in values if v["op"] == "c"][:2]
    keyless_update = next(v for v in values if v["op"] == "u" and v["before"] is None)
    last = values[-1]["source"]
    columnless = {"op": "d", "before": {}, "after": None, "source": {**last, "table": "nocols"}, "ts_ms": 1}
    truncate = {"op": "t", "before": None, "after": None, "source": {**last, "table": "emptied"}, "ts_ms": 1}
    batch = _write(
        tmp_path / "0001.json",
        [*values, *(renamed(v, "nokey") for v in [*inserts, keyless_update]), columnless, truncate],
    )
    lake = tmp_path / "lake"
    assert _ingest(lake, batch, "--json") == 3
    out = capsys.readouterr()
    tables = {t["table"]: t for t in json.loads(out.out)["tables"]}
    assert set(tables) == {"public.items", "public.nokey", "public.nocols", "public.emptied"}
    assert tables["public.items"]["error"] is None and tables["public.items"]["inserted"] == 5
    assert tables["public.nokey"]["error"] == (
        "1 update(s)/delete(s) but no key to find their rows: the stream reports no primary key and they "
        "carry no old key; expected primary_key in its schema file public.nokey.yaml (or REPLICA IDENTITY "
        "FULL on the source table)"
    )
    assert tables["public.nocols"]["error"] == (
        "1 event(s) but no column names in them or in the lake; expected events that carry columns (or "
        "old-key columns), or the columns listed in its schema file public.nocols.yaml"
    )
    held = tables["public.emptied"]
    assert held["error"] is None and held["notes"] == [
        "truncate(s) held until the table's first rows arrive (nothing tells its columns yet)"
    ]
    assert sorted(line for line in out.err.splitlines() if "not applied" in line) == [
        f"resolver: table public.nocols not applied: {tables['public.nocols']['error']}",
        f"resolver: table public.nokey not applied: {tables['public.nokey']['error']}",
    ]
    bronze = spark.read.format("delta").load(str(lake / "bronze" / "change_events"))
    assert bronze.filter("table = 'public.nokey'").count() == 3  # accepted: kept in bronze
    assert (
        not (lake / "silver" / "public.nokey").exists() and not (lake / "silver" / "public.nocols").exists()
    )
    # the fix: a schema file naming the key; the same file again applies the held events once
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "public.nokey.yaml").write_text("table: public.nokey\nprimary_key: [id]\n", encoding="utf-8")
    assert _ingest(lake, batch, "--schemas", str(schemas), "--json") == 3  # nocols is still reported
    tables = {t["table"]: t for t in json.loads(capsys.readouterr().out)["tables"]}
    assert tables["public.nokey"]["error"] is None and tables["public.nokey"]["inserted"] == 2
    _, rows = _silver(spark, lake, "public.nokey")
    assert [r[:2] for r in rows] == [("1", "one"), ("2", "two, renamed")]
