"""The ``resolver`` command: misconfigurations fail fast with one line, before Spark starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from resolver.cli import main


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "resolver", *args], capture_output=True, text=True, timeout=120
    )


def test_missing_input_is_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    result = _run(
        "ingest", str(tmp_path / "nope.json"), "--lake", str(tmp_path / "lake"), "--format", "wal2json-v2"
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"resolver: error: input not found: '{tmp_path / 'nope.json'}' "
        "(expected a file or a folder of wal2json files)"
    ]
    assert not (tmp_path / "lake").exists()


def test_unknown_format_is_rejected_by_the_parser(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["ingest", "f.json", "--lake", str(tmp_path), "--format", "debezium"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert (
        "argument --format: invalid choice: 'debezium'" in err
        and "wal2json-v1" in err
        and "wal2json-v2" in err
    )


def test_schemas_folder_must_exist(tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parents[1] / "samples/wal2json-v2/0001.json"
    result = _run(
        "ingest",
        str(sample),
        "--lake",
        str(tmp_path),
        "--format",
        "wal2json-v2",
        "--schemas",
        str(tmp_path / "missing"),
    )
    assert result.returncode == 2
    assert "is not a folder (expected a folder of <schema>.<table>.yaml)" in result.stderr


def test_a_bad_schema_file_fails_fast_with_one_line(tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parents[1] / "samples/wal2json-v2/0001.json"
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "public.customers.yaml").write_text(
        "table: public.customers\ncolumns:\n  - name: mail\n    tpye: string\n"
    )
    result = _run(
        "ingest",
        str(sample),
        "--lake",
        str(tmp_path / "lake"),
        "--format",
        "wal2json-v2",
        "--schemas",
        str(schemas),
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"resolver: error: {schemas / 'public.customers.yaml'}: "
        "columns[0].tpye: unknown key 'tpye' (did you mean 'type'?)"
    ]
    assert not (tmp_path / "lake").exists()
