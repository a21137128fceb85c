"""The ``resolver`` command: misconfigurations fail fast with one line, before Spark starts; without
``--format`` (or a pipeline's ``source.format``) the format is detected from the files."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver.cli.main import main


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
    sample = Path(__file__).resolve().parents[2] / "samples/wal2json-v2/0001.json"
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
    sample = Path(__file__).resolve().parents[2] / "samples/wal2json-v2/0001.json"
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


# --- the format is detected when --format is left out ------------------------------------------------------
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _folder(path: Path, **files: Path | bytes) -> Path:
    path.mkdir()
    for name, content in files.items():
        (path / name).write_bytes(content if isinstance(content, bytes) else content.read_bytes())
    return path


@pytest.mark.parametrize(
    ("files", "given", "message"),
    [
        (
            {"a.json": SAMPLES / "wal2json-v1/0001.json", "b.json": SAMPLES / "wal2json-v2/0001.json"},
            [],
            "the input mixes formats: '{d}/a.json' is wal2json-v1, '{d}/b.json' is wal2json-v2 "
            "(expected files of one format)",
        ),
        (
            {"a.json": SAMPLES / "wal2json-v2/0001.json", "x.json": b"\n\n# not a change stream\n"},
            [],
            "cannot tell the format of '{d}/x.json': its first record ('# not a change stream') is not "
            "wal2json format 1 or 2 or Debezium JSON (give --format)",
        ),
        (
            {"a.json": b"", "b.json": SAMPLES / "wal2json-v1/0001.json"},
            ["--format", "wal2json-v2"],
            "'{d}/b.json' is wal2json-v1, not the wal2json-v2 given: its first record is a format-1 "
            'transaction object ({{"change":[...]}}, "{{" or a chunk header)',
        ),
    ],
)
def test_a_format_that_cannot_be_told_or_does_not_match_is_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    files: dict[str, Path | bytes],
    given: list[str],
    message: str,
) -> None:
    landing = _folder(tmp_path / "landing", **files)
    assert main(["ingest", str(landing), "--lake", str(tmp_path / "lake"), *given]) == 2
    assert capsys.readouterr().err.splitlines() == ["resolver: error: " + message.format(d=landing)]
    assert not (tmp_path / "lake").exists()


@pytest.mark.spark
def test_ingest_detects_the_format(
    cli: Callable[..., int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ``cli``: the tests' own session, its settings put back afterwards (``main`` reuses the session)
    lake = tmp_path / "lake"
    assert main(["ingest", str(SAMPLES / "wal2json-v1"), "--lake", str(lake)]) == 0
    err = capsys.readouterr().err
    assert f"resolver: ingesting 1 file(s) as wal2json-v1 (detected) into {lake}" in err.splitlines()
    tables = {p.name for p in (lake / "silver").iterdir()}
    assert {"public.audit_log", "public.customers", "public.orders"} <= tables


@pytest.mark.spark
def test_run_detects_a_format_2_stream_and_reads_the_neighbours_of_each_batch(
    cli: Callable[..., int], spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ``cli``: as above. A transaction cut by the rotation (lines 13-15 in one file, 16-19 in the next), one
    # file per batch: only a stream known to be format 2 has each batch read its neighbour, so that the cut
    # transaction is applied and nothing is quarantined.
    lines = (SAMPLES / "wal2json-v2/0001.json").read_bytes().splitlines(keepends=True)
    _folder(tmp_path / "landing", **{"0001.json": b"".join(lines[:15]), "0002.json": b"".join(lines[15:])})
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text("source: {path: landing/}\nlake: lake/\nmax_files_per_batch: 1\n")
    assert main(["run", str(pipeline), "--quiet", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    changes = sum(1 for line in lines if json.loads(line)["action"] in "IUDT")
    assert summary["files_applied"] == 2
    assert [b["quarantined"] for b in summary["batches"]] == [0, 0]
    assert sum(b["accepted"] for b in summary["batches"]) == changes
    expected = json.loads((SAMPLES / "expected/public.customers.json").read_text("utf-8"))
    snapshot = spark.read.format("delta").load(str(tmp_path / "lake/silver/public.customers"))
    assert snapshot.count() == len(expected)
