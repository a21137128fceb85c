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


def _run_quickstart(command: str, env: dict[str, str]) -> str:
    """The first command run as written, in the repository; its standard output."""
    result = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_quickstart_command_ingests_the_samples(tmp_path: Path) -> None:
    """As a user runs it: compiled expressions (the other child processes of the tests interpret them).
    Under ``.ci/run``, which has just run the same command as its first phase, in the same checkout, and
    kept its output and lake (``RESOLVER_QUICKSTART_RAN``: a folder holding ``stdout.txt`` and ``lake``),
    those are checked instead of installing and ingesting the samples a second time."""
    env = {**os.environ, "SPARK_SUBMIT_OPTS": jvm.compiled_options()}
    command = _quickstart()
    assert "resolver ingest samples/wal2json-v2 --lake lake" in command
    ran = os.environ.get("RESOLVER_QUICKSTART_RAN")
    if ran:
        _check_quickstart((Path(ran) / "stdout.txt").read_text("utf-8"), Path(ran), env)
        return
    lake = ROOT / "lake"
    saved = tmp_path / "saved-lake"
    if lake.exists():  # a lake of the developer's own is set aside and put back
        shutil.move(lake, saved)
    try:
        _check_quickstart(_run_quickstart(command, env), ROOT, env)
    finally:
        shutil.rmtree(lake, ignore_errors=True)
        if saved.exists():
            shutil.move(saved, lake)


def _check_quickstart(stdout: str, folder: Path, env: dict[str, str]) -> None:
    """The first command printed the summary the README shows, its lake (``folder / "lake"``) has bronze,
    and the walkthrough's next step, ``resolver as-of`` run in ``folder``, prints the README's rows."""
    shown = [ln for ln in _shown_output().splitlines() if not ln.startswith(("elapsed", "resolver:"))]
    printed = [ln for ln in stdout.splitlines() if not ln.startswith("elapsed")]
    assert printed[-len(shown) :] == shown  # pip's own output comes first
    assert (folder / "lake" / "bronze/change_events/_delta_log").is_dir()
    command, shown_rows = _as_of_example()
    assert command.startswith("resolver as-of --lake lake ")
    result = subprocess.run(
        ["bash", "-c", command], cwd=folder, capture_output=True, text=True, timeout=600, env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines() == shown_rows.splitlines()
