"""A small batch's expressions interpreted (``resolver.spark.expressions``, the setting
``spark.resolver.interpretBelowEvents``): with the setting at 10,000 the sample stream's batch runs
interpreted and the session gets its own settings back after it; by default (0) it runs compiled; both give
PostgreSQL's tables; overlapping batches on one session give the settings back when the last ends; a bad
setting fails before anything is written, in one line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver import BatchOptions, ingest
from resolver.models import TableSummary
from resolver.spark.expressions import INTERPRET_SETTING, INTERPRETED, expressions_for
from resolver.spark.session_settings import restore_settings, set_settings
from tests.samplelake import sample_lake_problems
from tests.settings import SAMPLE, bad_setting_message, setting

pytestmark = pytest.mark.spark

#: what a user's session has: Spark's defaults (the tests' own sessions start interpreted)
COMPILED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}


@contextmanager
def compiled(spark: SparkSession) -> Iterator[SparkSession]:
    """The session with Spark's default settings inside the block; the tests' own values back after it."""
    had = set_settings(spark, COMPILED)
    try:
        yield spark
    finally:
        restore_settings(spark, had)


def _modes(spark: SparkSession) -> dict[str, str | None]:
    return {key: spark.conf.get(key, None) for key in INTERPRETED}


def _ingest_seeing_modes(spark: SparkSession, lake: Path) -> list[dict[str, str | None]]:
    """Ingest the sample batch; the settings each table saw when it was done."""
    seen: list[dict[str, str | None]] = []

    def on_table(_summary: TableSummary) -> None:
        seen.append(_modes(spark))

    summary = ingest(spark, [str(SAMPLE)], str(lake), "wal2json-v2", options=BatchOptions(on_table=on_table))
    assert len(seen) == len(summary.tables) == 3
    return seen


def test_a_small_batch_runs_interpreted_and_gives_the_session_its_settings_back(
    spark: SparkSession, tmp_path: Path
) -> None:
    with compiled(spark), setting(spark, INTERPRET_SETTING, "10000"):
        seen = _ingest_seeing_modes(spark, tmp_path / "lake")
        assert seen == [INTERPRETED] * 3
        assert _modes(spark) == COMPILED
    assert sample_lake_problems(tmp_path / "lake") == 0


def test_by_default_a_batch_runs_compiled(spark: SparkSession, tmp_path: Path) -> None:
    assert spark.conf.get(INTERPRET_SETTING, None) is None
    with compiled(spark):
        seen = _ingest_seeing_modes(spark, tmp_path / "lake")
        assert seen == [COMPILED] * 3
        assert _modes(spark) == COMPILED
    assert sample_lake_problems(tmp_path / "lake") == 0


def test_overlapping_batches_give_the_settings_back_when_the_last_ends(spark: SparkSession) -> None:
    with compiled(spark), setting(spark, INTERPRET_SETTING, "10000"):
        with expressions_for(spark, 10) as first:
            with expressions_for(spark, 10) as second:
                assert first and second and _modes(spark) == INTERPRETED
            assert _modes(spark) == INTERPRETED  # the first batch still runs
            with expressions_for(spark, 10**9) as large:
                assert not large and _modes(spark) == INTERPRETED  # a large batch changes nothing
        assert _modes(spark) == COMPILED


@pytest.mark.parametrize("value", ["-1", "many"])
def test_a_bad_interpret_setting_fails_with_one_line_before_anything_is_written(
    spark: SparkSession, tmp_path: Path, value: str
) -> None:
    assert bad_setting_message(spark, tmp_path / "lake", INTERPRET_SETTING, value) == (
        f"{INTERPRET_SETTING} is {value!r}; expected a whole number of events, 0 or more (0: every batch's "
        "expressions compiled)"
    )
