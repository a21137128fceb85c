"""The pool of table threads (``resolver.spark.parallelism``, ``spark.resolver.parallelTables``): the sample
stream's three tables applied one at a time give the lake PostgreSQL had, and a bad setting fails before
anything is written, with one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver.cli.main import main
from resolver.spark.parallelism import PARALLEL_TABLES_SETTING
from tests.samplelake import sample_lake_problems
from tests.settings import bad_setting_message, setting

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def test_tables_applied_one_at_a_time_give_postgresql_s_tables(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    with setting(spark, PARALLEL_TABLES_SETTING, "1"):
        assert main(["ingest", str(ROOT / "samples/wal2json-v2"), "--lake", str(lake)]) == 0
    assert sample_lake_problems(lake) == 0


@pytest.mark.parametrize("value", ["0", "four", "-2"])
def test_a_bad_parallel_tables_setting_fails_with_one_line_before_anything_is_written(
    spark: SparkSession, tmp_path: Path, value: str
) -> None:
    assert (
        bad_setting_message(spark, tmp_path / "lake", PARALLEL_TABLES_SETTING, value)
        == f"{PARALLEL_TABLES_SETTING} is {value!r}; expected a whole number of tables, 1 or more"
    )
