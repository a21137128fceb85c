"""One hostile line does not stop a batch: the sample stream with a line of 5,000 nested ``[`` between two
transactions is ingested by the command, the line is quarantined with its rule, and every table of the
lake equals PostgreSQL's at the end of the sample workload (``samples/expected``, the CI's own check)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver.cli.main import main
from tests.samplelake import sample_lake_problems

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def test_a_line_nested_5000_deep_is_quarantined_and_the_rest_of_its_file_applied(
    spark: SparkSession, tmp_path: Path
) -> None:
    lines = (ROOT / "samples/wal2json-v2/0001.json").read_bytes().splitlines(keepends=True)
    after = next(i for i, line in enumerate(lines) if line.startswith(b'{"action":"C"')) + 1
    deep = b"[" * 5000 + b"\n"
    stream = tmp_path / "0001.json"
    stream.write_bytes(b"".join([*lines[:after], deep, *lines[after:]]))
    lake = tmp_path / "lake"

    assert main(["ingest", str(stream), "--lake", str(lake)]) == 0

    quarantine = spark.read.format("delta").load(str(lake / "quarantine")).collect()
    assert [(r["source_line"], r["reason"], r["raw"]) for r in quarantine] == [
        (after + 1, "JSON nested deeper than 64 levels (rule: json-depth)", "[" * 5000)
    ]
    assert sample_lake_problems(lake) == 0
