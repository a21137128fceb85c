"""Resolve PostgreSQL wal2json change streams into Delta Lake tables with PySpark.

This module is the whole public surface. Spark-dependent functions are imported lazily, so parsing and
validation work (and import quickly) without Spark.
"""

from __future__ import annotations

from typing import Any

from resolver.errors import ConfigError, InputError, ResolverError
from resolver.models import (
    ChangeEvent,
    Format,
    IngestSummary,
    Operation,
    QuarantineRecord,
    RunSummary,
    TableSummary,
)
from resolver.policy import Policies, Policy
from resolver.wal2json import format_lsn, parse_lsn, read_lines

__all__ = [
    "BatchOptions",
    "CaptureOptions",
    "CaptureSummary",
    "ChangeEvent",
    "ConfigError",
    "Format",
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
    "CaptureOptions": "resolver.capture_options",
    "CaptureSummary": "resolver.capture_options",
    "capture_once": "resolver.capture",
    "apply_changes": "resolver.silver",
    "BatchOptions": "resolver.batch_options",
    "ReadWindow": "resolver.stitch_plan",
    "ingest": "resolver.batch",
    "local_session": "resolver.session",
    "plan_changes": "resolver.plan",
    "read_wal2json": "resolver.read",
    "run_pipeline": "resolver.run",
    "stream_pipeline": "resolver.stream",
    "load_pipeline": "resolver.pipeline",
    "as_of": "resolver.timetravel",
    "optimize": "resolver.maintenance",
    "vacuum": "resolver.maintenance",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        from resolver.runtime import check_runtime

        check_runtime()  # pyarrow and pandas: one clear line rather than an import error

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'resolver' has no attribute {name!r}")
