"""Input named by URIs is read through Spark's Hadoop file systems (``resolver.files.hadoop_files``, the
``binaryFile`` source) and gives exactly what the local reader gives: events, quarantine (line numbers and
raw bytes), counts, format detection and the stitching of a transaction cut by a file boundary. Here the
URIs are ``file:`` ones (the same code path as ``s3a://`` and the others, on the local file system)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver.batch.read import read_wal2json
from resolver.cli.main import main
from resolver.errors import ConfigError
from resolver.files.hadoop_files import HadoopFiles, files_for
from resolver.files.input_files import LOCAL
from resolver.paths import is_uri
from tests.samplelake import sample_lake_problems

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"


def test_is_uri() -> None:
    for uri in ("s3a://bucket/landing", "abfss://c@a.dfs.core.windows.net/x", "file:/tmp/x", "dbfs:/x"):
        assert is_uri(uri), uri
    for path in ("landing/0001.json", "/data/x.json", "C:\\data\\x.json", "./a:b.json"):
        assert not is_uri(path), path


def _read(spark: SparkSession, paths: list[str]) -> tuple[list[str], list[str], dict[str, int]]:
    batch = read_wal2json(spark, paths)
    try:
        # provenance aside (file names differ; line numbers too where a file was cut in two)
        events = sorted(repr(tuple(r)) for r in batch.events.drop("source_file", "source_line").collect())
        bad = sorted(repr(tuple(r)) for r in batch.quarantine.drop("source_file").collect())
        return events, bad, batch.counts()
    finally:
        batch.unpersist()


@pytest.mark.parametrize("folder", ["wal2json-v2", "wal2json-v1", "dirty"])
def test_a_uri_reads_what_the_local_path_reads(spark: SparkSession, folder: str) -> None:
    local = _read(spark, [str(SAMPLES / folder)])
    uri = _read(spark, [(SAMPLES / folder).as_uri()])
    assert uri == local
    assert local[0], "the sample holds events"


def test_files_are_named_by_their_uris_and_listed_in_name_order(spark: SparkSession, tmp_path: Path) -> None:
    src = SAMPLES / "wal2json-v2" / "0001.json"
    for name in ("b[1]{x}.json", "a*?.json", ".hidden.json", "_temporary"):
        shutil.copy(src, tmp_path / name)
    fs = files_for(spark, [tmp_path.as_uri()])
    assert isinstance(fs, HadoopFiles)
    files = fs.expand(tmp_path.as_uri())
    assert files == [f"file:{tmp_path}/a*?.json", f"file:{tmp_path}/b[1]{{x}}.json"]
    batch = read_wal2json(spark, [tmp_path.as_uri()])
    try:
        got = {
            r["source_file"]: r["n"]
            for r in batch.events.groupBy("source_file").count().withColumnRenamed("count", "n").collect()
        }
        assert got == {f: 22 for f in files}  # glob characters in a name are the name, not a pattern
    finally:
        batch.unpersist()
    assert files_for(spark, [str(tmp_path)]) is LOCAL


def test_a_missing_uri_fails_with_one_line(spark: SparkSession, tmp_path: Path) -> None:
    missing = (tmp_path / "nothing-here").as_uri()
    with pytest.raises(
        ConfigError, match=r"^input not found: 'file:/.*nothing-here' \(expected a file or a folder"
    ):
        read_wal2json(spark, [missing])


def test_a_transaction_cut_between_two_uris_is_stitched(spark: SparkSession, tmp_path: Path) -> None:
    lines = (SAMPLES / "wal2json-v2" / "0001.json").read_bytes().splitlines(keepends=True)
    cut = (
        next(i for i, line in enumerate(lines) if b'"action":"I"' in line) + 1
    )  # inside the first transaction
    (tmp_path / "0001.json").write_bytes(b"".join(lines[:cut]))
    (tmp_path / "0002.json").write_bytes(b"".join(lines[cut:]))
    whole = _read(spark, [str(SAMPLES / "wal2json-v2")])
    events, bad, counts = _read(spark, [(tmp_path / "0001.json").as_uri(), (tmp_path / "0002.json").as_uri()])
    assert (events, bad) == whole[:2]
    assert counts["fragment"] > 0 and counts["events"] == whole[2]["events"]


def test_the_cli_ingests_from_a_uri(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    assert main(["ingest", (SAMPLES / "wal2json-v2").as_uri(), "--lake", str(lake)]) == 0
    assert sample_lake_problems(lake) == 0
    assert os.path.isdir(lake / "bronze" / "change_events")
