"""The resolver's own Spark settings (``spark.resolver.*``) in tests: one set for a block of a test on the
shared session and unset after it (``setting``), and the check every such setting owes its users: a bad
value fails the batch before anything is written, with one line (``bad_setting_message``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver import ingest
from resolver.errors import ConfigError

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "wal2json-v2" / "0001.json"


@contextmanager
def setting(spark: SparkSession, key: str, value: str) -> Iterator[SparkSession]:
    """The session with ``key`` set to ``value`` inside the block, unset after it."""
    spark.conf.set(key, value)
    try:
        yield spark
    finally:
        spark.conf.unset(key)


def bad_setting_message(spark: SparkSession, lake: Path, key: str, value: str) -> str:
    """The ``ConfigError`` an ingest of the sample file into ``lake`` raises with ``key`` set to ``value``,
    after checking that it wrote no Delta table."""
    with setting(spark, key, value), pytest.raises(ConfigError) as e:
        ingest(spark, [str(SAMPLE)], str(lake), "wal2json-v2")
    assert not lake.exists() or not any(lake.rglob("_delta_log"))
    return str(e.value)
