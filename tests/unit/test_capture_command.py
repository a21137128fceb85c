"""``resolver capture``'s settings: from flags, or a pipeline file's ``capture:`` section, its source folder
and its include/exclude; each mistake one line (exit 2) before any connection is made. No PostgreSQL."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from resolver.cli.capture_command import _options, add_capture
from resolver.cli.main import main


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="resolver")
    add_capture(parser.add_subparsers(dest="command"))
    return parser.parse_args(["capture", *argv])


def _pipeline(folder: Path, text: str) -> str:
    path = folder / "pipeline.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


PIPELINE = (
    "source: {path: landing/, format: wal2json-v2}\nlake: lake/\n"
    "capture: {dsn_env: SHOP_DSN, slot: shop, interval_seconds: 30}\n"
    "include: ['public.*']\nexclude: ['public.tmp_*']\n"
)


def test_a_pipeline_file_gives_the_folder_the_tables_the_slot_and_the_dsn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_DSN", "host=db dbname=shop user=cdc")
    options, interval = _options(_args(_pipeline(tmp_path, PIPELINE)))
    assert (options.dsn, options.slot, interval) == ("host=db dbname=shop user=cdc", "shop", 30.0)
    assert options.landing == str(tmp_path / "landing")
    assert options.included("public.orders") and not options.included("public.tmp_x")
    assert not options.included("audit.log")
    flags = ("--slot", "other", "--landing", "elsewhere", "--dsn", "host=x", "--interval", "5")
    options, interval = _options(_args(_pipeline(tmp_path, PIPELINE), *flags))
    assert (options.dsn, options.slot, options.landing, interval) == ("host=x", "other", "elsewhere", 5.0)


@pytest.mark.parametrize(
    ("text", "argv", "said"),
    [
        (
            None,
            (),
            "resolver capture: --dsn, --landing, --slot missing: expected --dsn, --landing and --slot",
        ),
        (
            "source: {path: landing/}\nlake: lake/\n",
            (),
            "pipeline.yaml: no capture: section: expected capture:",
        ),
        (PIPELINE, ("--tables", "public.x"), "pipeline.yaml: --tables/--exclude given with a pipeline file"),
        (PIPELINE, (), "capture.dsn_env names SHOP_DSN, which is not set: expected the database's DSN in it"),
        (
            PIPELINE.replace("{path: landing/, format: wal2json-v2}", "{path: 'gs://b/landing/'}"),
            ("--dsn", "x"),
            "landing 'gs://b/landing/': expected a local folder or an S3 URI (s3://bucket/prefix or s3a://",
        ),
        (
            PIPELINE.replace("slot: shop", "slot: Shop"),
            (),
            "pipeline.yaml: capture.slot: found 'Shop' (expected a replication slot name (1-63 lower-case",
        ),
        (PIPELINE.replace("dsn_env: SHOP_DSN", "dsn: a, dsn_env: B"), (), "found both dsn and dsn_env"),
        (None, ("--dsn", "x", "--landing", "l", "--slot", "s", "--interval", "0"), "--interval 0: expected"),
    ],
)
def test_each_mistake_is_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    text: str | None,
    argv: tuple[str, ...],
    said: str,
) -> None:
    monkeypatch.delenv("SHOP_DSN", raising=False)
    monkeypatch.chdir(tmp_path)
    files = [_pipeline(tmp_path, text)] if text is not None else []
    assert main(["capture", *[Path(f).name for f in files], *argv]) == 2
    printed = capsys.readouterr().err.splitlines()
    assert len(printed) == 1 and said in printed[0], printed
