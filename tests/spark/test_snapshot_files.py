"""Snapshot files (``resolver.formats.snapshot_files``) in a batch, read by Spark's Parquet reader beside a
format-2 stream (``resolver.batch.snapshot_read``): a table's copy cut into several files, in two folders
whose files share a name, then a stream transaction after its consistent point. The lake holds the rows the
copy and the stream make; the batch counts the copy as one transaction; bronze names each event's file and
line; the same files again change nothing; a Parquet file that is not a snapshot file is refused in one
line. The files are written by the capture's own writer from CSV as PostgreSQL prints it (no server)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from resolver import ingest
from resolver.capture.landing import LandingFolder
from resolver.capture.snapshot_file import SnapshotParts, SnapshotRows
from resolver.errors import ConfigError
from resolver.lsn import format_lsn

pytestmark = pytest.mark.spark

POINT = 0x1A2B3C8
TAKEN = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ROWS = SnapshotRows("public.t", ("id", "v", "n"), ("integer", "text", "numeric(12,2)"), ("id",), POINT, TAKEN)


def _copy(folder: Path, prefix: str, ids: range, base: int) -> list[str]:
    """A chunk of public.t (rows id, 'v<id>', id/4) into files of about 200 bytes of values."""
    folder.mkdir(exist_ok=True)
    csv = folder / f"{prefix}.csv"
    csv.write_text("".join(f'1,{i},"v{i}, ""q""",{i / 4:.2f}\n' for i in ids), encoding="utf-8")
    parts = SnapshotParts(LandingFolder(str(folder)), prefix, 200, ROWS, base)
    assert parts.write_csv(csv) == len(ids)
    csv.unlink()
    return [str(folder / name) for name in parts.close()]


def _stream(path: Path) -> str:
    """One transaction after the consistent point, as wal2json prints it: id 3 updated, id 5 deleted, id 100
    inserted."""
    lsn, end = format_lsn(POINT + 0x100), format_lsn(POINT + 0x200)
    frame = {"xid": 900, "timestamp": "2026-12-01 12:00:05+00", "lsn": lsn}
    column = [{"name": "id", "type": "integer", "value": 3}, {"name": "v", "type": "text", "value": "new"}]
    column.append({"name": "n", "type": "numeric(12,2)", "value": 9.99})
    key = [{"name": "id", "type": "integer", "value": 5}]
    pk = [{"name": "id", "type": "integer"}]
    change = {**frame, "schema": "public", "table": "t", "pk": pk}
    records = [
        {"action": "B", **frame, "nextlsn": end},
        {"action": "U", **change, "columns": column, "identity": column[:1]},
        {"action": "D", **change, "identity": key},
        {
            "action": "I",
            **change,
            "columns": [
                {**column[0], "value": 100},
                {**column[1], "value": "ins"},
                {**column[2], "value": None},
            ],
        },
        {"action": "C", **frame, "nextlsn": end},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_snapshot_files_and_a_stream_make_one_lake(spark: SparkSession, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    # two chunks, each cut into several files; the second chunk's files in another folder, with the same names
    first = _copy(one, "s-0000000001A2B3C8-snapshot-0000-00000", range(1, 41), 0)
    second = _copy(two, "s-0000000001A2B3C8-snapshot-0000-00000", range(41, 81), 40)
    assert len(first) > 1 and [Path(f).name for f in first][:1] == [Path(f).name for f in second][:1]
    stream = _stream(one / "s-0000000001A2B4C8.json")
    lake = tmp_path / "lake"
    summary = ingest(spark, [*first, *second, stream], str(lake), "wal2json-v2")
    assert (summary.files, summary.events_read, summary.accepted, summary.quarantined) == (
        len(first) + len(second) + 1, 83, 83, 0
    )  # fmt: skip
    assert summary.transactions == 2, summary  # the copy (one, across its files) and the stream's
    (table,) = summary.tables
    assert (table.inserted, table.deleted) == (80, 0), table  # the stream's changes fold into the first rows
    rows = spark.read.format("delta").load(str(lake / "silver" / "public.t")).collect()
    got = {r["id"]: (r["v"], None if r["n"] is None else str(r["n"])) for r in rows}
    expected = {i: (f'v{i}, "q"', f"{i / 4:.2f}") for i in range(1, 81) if i != 5}
    expected[3], expected[100] = ("new", "9.99"), ("ins", None)
    assert got == expected
    bronze = spark.read.format("delta").load(str(lake / "bronze" / "change_events"))
    named = {
        (r["source_file"], r["source_line"], r["position"])
        for r in bronze.collect()
        if r["commit_lsn"] == POINT
    }
    files = {f: pq.read_metadata(f).num_rows for f in [*first, *second]}
    assert {f for f, _, _ in named} == set(files)  # each event named by its own file, as the batch names it
    assert {(f, line) for f, line, _ in named} == {
        (f, n) for f, rows in files.items() for n in range(1, rows + 1)
    }
    assert {p for _, _, p in named} == set(range(1, 41)) | set(range(41, 81))

    again = ingest(spark, [*second, *first], str(lake), "wal2json-v2")
    assert (again.accepted, again.duplicates) == (0, 80), again
    assert spark.read.format("delta").load(str(lake / "silver" / "public.t")).count() == len(expected)


def test_a_load_of_snapshot_files_only_lands_each_event_once(spark: SparkSession, tmp_path: Path) -> None:
    # a load of snapshot files only, each named once: bronze appended to with no look for events held twice
    files = _copy(tmp_path / "one", "s-0000000001A2B3C8-snapshot-0000-00000", range(1, 41), 0)
    files += _copy(tmp_path / "one", "s-0000000001A2B3C8-snapshot-0000-00001", range(41, 61), 40)
    assert len(files) > 2
    lake = tmp_path / "lake"
    summary = ingest(spark, files, str(lake), "wal2json-v2")
    assert (summary.events_read, summary.accepted, summary.duplicates, summary.transactions) == (60, 60, 0, 1)
    bronze = spark.read.format("delta").load(str(lake / "bronze" / "change_events"))
    assert sorted(r["position"] for r in bronze.select("position").collect()) == list(range(1, 61))
    # the same files copied to another folder and given beside their originals: each event still once
    copies = tmp_path / "copies"
    copies.mkdir()
    again = [str(copies / Path(f).name) for f in files]
    for f, c in zip(files, again, strict=True):
        Path(c).write_bytes(Path(f).read_bytes())
    other = tmp_path / "other"
    both = ingest(spark, [*files, *again], str(other), "wal2json-v2")
    assert (both.events_read, both.accepted, both.duplicates) == (120, 60, 60), both
    rows = spark.read.format("delta").load(str(other / "silver" / "public.t"))
    assert sorted(r["id"] for r in rows.select("id").collect()) == list(range(1, 61))


def test_a_parquet_file_that_is_not_a_snapshot_file_is_refused_in_one_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    other = tmp_path / "orders.parquet"
    pq.write_table(pa.table({"id": [1, 2]}), other)
    with pytest.raises(ConfigError) as refused:
        ingest(spark, [str(other)], str(tmp_path / "lake"), "wal2json-v2")
    assert str(refused.value) == (
        f"{str(other)!r} is a Parquet file but not a snapshot file (resolver.snapshot: no such key): "
        "expected one resolver capture wrote (resolver.snapshot=1)"
    )
    assert not (tmp_path / "lake").exists()  # refused before anything was written
    # named by a URI (as a file in object storage is): its footer read through Hadoop's file system
    with pytest.raises(ConfigError) as refused:
        ingest(spark, [f"file://{other}"], str(tmp_path / "lake"), "wal2json-v2")
    assert str(refused.value) == (  # the file as the batch names it (Hadoop's form of a local URI)
        f"'file:{other}' is a Parquet file but not a snapshot file (resolver.snapshot: no such key): "
        "expected one resolver capture wrote (resolver.snapshot=1)"
    )
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    with pytest.raises(ConfigError) as refused:
        ingest(spark, [str(broken)], str(tmp_path / "lake"), "wal2json-v2")
    assert str(refused.value).startswith(f"{str(broken)!r} is not a snapshot file (")
    assert str(refused.value).endswith("): expected one resolver capture wrote")
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "lake").exists()
