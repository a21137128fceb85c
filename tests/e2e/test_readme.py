"""The README's quickstart command runs as written and prints the summary it shows."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.harness import jvm

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.spark


def _quickstart() -> str:
    readme = (ROOT / "README.md").read_text("utf-8")
    block = readme.split("Install and ingest the sample stream", 1)[1]
    return re.search(r"```bash\n(.+?)\n```", block, re.S).group(1)  # type: ignore[union-attr]


def _shown_output() -> str:
    readme = (ROOT / "README.md").read_text("utf-8")
    block = readme.split(_quickstart(), 1)[1]
    return re.search(r"```text\n(.+?)\n```", block, re.S).group(1)  # type: ignore[union-attr]


def _as_of_example() -> tuple[str, str]:
    """The README's ``resolver as-of`` command and the output it shows."""
    block = (ROOT / "README.md").read_text("utf-8").split("<!-- as-of-example -->", 1)[1]
    command = re.search(r"```console\n\$ (.+?)\n```", block, re.S).group(1)  # type: ignore[union-attr]
    shown = re.search(r"```text\n(.+?)\n```", block, re.S).group(1)  # type: ignore[union-attr]
    return command, shown


def test_quickstart_command_ingests_the_samples(tmp_path: Path) -> None:
    """As a user runs it: compiled expressions (the other child processes of the tests interpret them)."""
    env = {**os.environ, "SPARK_SUBMIT_OPTS": jvm.compiled_options()}
    command = _quickstart()
    assert "resolver ingest samples/wal2json-v2 --lake lake" in command
    lake = ROOT / "lake"
    saved = tmp_path / "saved-lake"
    if lake.exists():  # a lake of the developer's own is set aside and put back
        shutil.move(lake, saved)
    try:
        result = subprocess.run(
            ["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env
        )
        assert result.returncode == 0, result.stderr[-2000:]
        shown = [ln for ln in _shown_output().splitlines() if not ln.startswith(("elapsed", "resolver:"))]
        printed = [ln for ln in result.stdout.splitlines() if not ln.startswith("elapsed")]
        assert printed[-len(shown) :] == shown  # pip's own output comes first
        assert (lake / "bronze/change_events/_delta_log").is_dir()
        # the walkthrough's next step: the table as it was at a commit
        command, shown_rows = _as_of_example()
        assert command.startswith("resolver as-of --lake lake ")
        result = subprocess.run(
            ["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.strip().splitlines() == shown_rows.splitlines()
    finally:
        shutil.rmtree(lake, ignore_errors=True)
        if saved.exists():
            shutil.move(saved, lake)
