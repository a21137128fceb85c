"""The README's quickstart command runs as written and prints the summary it shows."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.spark


def _quickstart() -> str:
    readme = (ROOT / "README.md").read_text("utf-8")
    block = readme.split("Install and ingest the sample stream", 1)[1]
    return re.search(r"```bash\n(.+?)\n```", block, re.S).group(1)  # type: ignore[union-attr]


def _shown_output() -> str:
    readme = (ROOT / "README.md").read_text("utf-8")
    block = readme.split(_quickstart(), 1)[1]
    return re.search(r"```text\n(.+?)\n```", block, re.S).group(1)  # type: ignore[union-attr]


def test_quickstart_command_ingests_the_samples(tmp_path: Path) -> None:
    command = _quickstart()
    assert "resolver ingest samples/wal2json-v2 --lake lake" in command
    lake = ROOT / "lake"
    saved = tmp_path / "saved-lake"
    if lake.exists():  # a lake of the developer's own is set aside and put back
        shutil.move(lake, saved)
    try:
        result = subprocess.run(
            ["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0, result.stderr[-2000:]
        shown = [ln for ln in _shown_output().splitlines() if not ln.startswith(("elapsed", "resolver:"))]
        printed = [ln for ln in result.stdout.splitlines() if not ln.startswith("elapsed")]
        assert printed[-len(shown) :] == shown  # pip's own output comes first
        assert (lake / "bronze/change_events/_delta_log").is_dir()
    finally:
        shutil.rmtree(lake, ignore_errors=True)
        if saved.exists():
            shutil.move(saved, lake)
