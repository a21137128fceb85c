"""The library API's docstring examples run as written (in a folder holding ``landing/0001.json``, a
``pipeline.yaml`` and a ``lake``), one after the other, on the shared SparkSession."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import resolver
from tests.docexamples import example

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]

#: in the order they run: the later ones read the lake the earlier ones wrote
FUNCTIONS = [
    "resolver.spark.session.local_session",
    "resolver.config.pipeline.load_pipeline",
    "resolver.batch.read.read_wal2json",
    "resolver.plan.batch_plan.plan_changes",
    "resolver.batch.silver.apply_changes",
    "resolver.batch.ingest.ingest",
    "resolver.pipelines.run.run_pipeline",
    "resolver.pipelines.stream.stream_pipeline",
    "resolver.ops.timetravel.as_of",
    "resolver.ops.maintenance.optimize",
    "resolver.ops.maintenance.vacuum",
]


def _function(name: str) -> Callable[..., Any]:
    module, attr = name.rsplit(".", 1)
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


def test_every_public_function_has_an_example() -> None:
    public = [n for n in resolver.__all__ if inspect.isfunction(getattr(resolver, n))]
    listed = {n.rsplit(".", 1)[1] for n in FUNCTIONS}
    # capture_once's example needs a database: tests/e2e/test_capture.py runs it
    exempt = ("format_lsn", "parse_lsn", "read_lines", "capture_once")
    missing = [n for n in public if n not in listed and n not in exempt]
    assert not missing, f"public functions without a tested example: {missing}"
    for name in FUNCTIONS:
        assert example(_function(name)).strip()


def test_the_examples_run(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "landing").mkdir()
    shutil.copy(ROOT / "samples" / "wal2json-v2" / "0001.json", tmp_path / "landing" / "0001.json")
    (tmp_path / "pipeline.yaml").write_text(
        "source: {path: landing/, format: wal2json-v2}\nlake: lake/\n"
        "tables: {public.orders: {track_history: [status]}}\n"
    )
    monkeypatch.chdir(tmp_path)
    for name in FUNCTIONS:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(example(_function(name)), f"<example of {name}>", "exec"), {"spark": spark})
        assert out.getvalue().strip(), f"the example of {name} printed nothing"
    assert (tmp_path / "lake" / "silver" / "public.customers" / "_delta_log").is_dir()
