"""A local session whose packages cannot be fetched (a delta-spark whose jars are not published for this
Spark, a mistyped ``--packages``) ends the command with one line naming what was asked for, after Spark's
launcher's own messages — not with PySpark's JAVA_GATEWAY_EXITED."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.spark


def test_packages_that_cannot_be_fetched_are_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = "org.example:no-such-artifact:0.0.1"
    result = subprocess.run(
        [sys.executable, "-m", "resolver", "ingest", str(ROOT / "samples/wal2json-v2"), "--lake",
         str(tmp_path / "lake"), "--packages", missing],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("resolver: error: Spark's launcher ended before the session started"), last
    assert "io.delta:delta-spark_" in last and f",{missing} on Maven Central or in the Ivy cache" in last
    assert not (tmp_path / "lake").exists()
