"""Resolve PostgreSQL wal2json change streams into Delta Lake tables with PySpark.

This module is the whole public surface. Spark-dependent functions are imported lazily, so parsing and
validation work (and import quickly) without Spark.
"""

from __future__ import annotations

from typing import Any

from resolver.config.policy import Policies, Policy
from resolver.errors import ConfigError, InputError, ResolverError
from resolver.formats.wal2json import format_lsn, parse_lsn, read_lines
from resolver.models import (
    ChangeEvent,
    Format,
    IngestSummary,
    Operation,
    QuarantineRecord,
    RunSummary,
    TableSummary,
)

__all__ = [
    "BatchOptions",
    "CaptureOptions",
    "CaptureSummary",
    "ChangeEvent",
    "ConfigError",
    "Format",
    "Freshness",
    "IngestSummary",
    "InputError",
    "Operation",
    "Policies",
    "Policy",
    "QuarantineRecord",
    "ReadWindow",
    "ResolverError",
    "RunSummary",
    "TableSummary",
    "apply_changes",
    "as_of",
    "capture_once",
    "format_lsn",
    "ingest",
    "local_session",
    "optimize",
    "parse_lsn",
    "plan_changes",
    "read_lines",
    "load_pipeline",
    "read_wal2json",
    "run_pipeline",
    "stream_pipeline",
    "vacuum",
]

_LAZY = {
    "CaptureOptions": "resolver.capture.options",
    "CaptureSummary": "resolver.capture.options",
    "capture_once": "resolver.capture.snapshot",
    "apply_changes": "resolver.batch.silver",
    "BatchOptions": "resolver.config.batch_options",
    "Freshness": "resolver.config.batch_options",
    "ReadWindow": "resolver.formats.stitch_plan",
    "ingest": "resolver.batch.ingest",
    "local_session": "resolver.spark.session",
    "plan_changes": "resolver.plan.batch_plan",
    "read_wal2json": "resolver.batch.read",
    "run_pipeline": "resolver.pipelines.run",
    "stream_pipeline": "resolver.pipelines.stream",
    "load_pipeline": "resolver.config.pipeline",
    "as_of": "resolver.ops.timetravel",
    "optimize": "resolver.ops.maintenance",
    "vacuum": "resolver.ops.maintenance",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        from resolver.spark.runtime import check_runtime

        check_runtime()  # pyarrow and pandas: one clear line rather than an import error

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'resolver' has no attribute {name!r}")
