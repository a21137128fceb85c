"""The CI's own check of a lake made from the sample stream (``.ci/check_sample_lake.py``), for tests:
every table of ``samples/expected`` holds exactly the rows PostgreSQL had at the end of the workload."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sample_lake_problems(lake: Path | str) -> int:
    """0 when the lake's silver tables equal ``samples/expected``; 1, with a line per difference printed."""
    spec = importlib.util.spec_from_file_location("check_sample_lake", ROOT / ".ci/check_sample_lake.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return int(module.main(str(lake), str(ROOT / "samples/expected")))
