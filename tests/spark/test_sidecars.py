"""A local lake's Delta logs written through the resolver's sessions have no Hadoop checksum sidecars
(``.<name>.crc`` beside each file: ``resolver.spark.session`` writes them through the raw local
``FileContext``; data files keep theirs), and the sidecars of the two log
files Delta overwrites in place, left by an earlier writer, are removed after every batch and command that
writes the lake (``resolver.lake.sidecars``): by the library's ``ingest``, by ``resolver ingest`` under
the lake's lock, and for a lake named by a ``file:`` URI.
Delta's own checksum files (``<version>.crc``) are not sidecars and stay too."""

from __future__ import annotations

import re
from pathlib import Path

from pyspark.sql import SparkSession

from resolver import ingest
from resolver.cli.main import main
from resolver.lake.folders import Lake
from resolver.lake.sidecars import OVERWRITTEN, drop_stale_sidecars

SEED = Path(__file__).resolve().parents[2] / "samples" / "seed000"
TABLE = "public.characters"


def _logs(lake: Lake) -> list[Path]:
    paths = lake.table(TABLE)
    return [Path(p) / "_delta_log" for p in (lake.bronze, lake.schema_log, paths.snapshot, paths.history)]


def _plant(logs: list[Path]) -> None:
    for log in logs:
        for name in OVERWRITTEN:
            (log / name).write_bytes(b"crc\x00stale")


def _stale(logs: list[Path]) -> list[str]:
    return [str(log / name) for log in logs for name in OVERWRITTEN if (log / name).exists()]


def test_a_local_lake_has_no_sidecars_and_stale_ones_are_removed(spark: SparkSession, tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    ingest(spark, [str(SEED / "batch1.json")], lake.root, "wal2json-v2")
    crcs = [p.name for p in Path(lake.root).rglob("_delta_log/*.crc")]
    assert crcs and all(re.fullmatch(r"\d{20}\.crc", name) for name in crcs), crcs  # Delta's own only
    assert list(Path(lake.root).rglob(".part-*.crc"))  # data files keep theirs (the checksum FileSystem)
    logs = _logs(lake)
    assert all(log.is_dir() for log in logs), logs

    _plant(logs)
    ingest(spark, [str(SEED / "batch2.json")], lake.root, "wal2json-v2")
    assert _stale(logs) == []

    _plant(logs)
    assert main(["ingest", str(SEED / "batch3.json"), "--lake", lake.root, "--json"]) == 0
    assert _stale(logs) == []

    _plant(logs)
    assert drop_stale_sidecars("file://" + lake.root) == len(logs) * len(OVERWRITTEN)
    assert _stale(logs) == []
    assert drop_stale_sidecars("s3a://bucket/lake") == 0  # another file system: nothing of this machine's
