"""The Spark options of the commands (``--master``, ``--packages``, ``--conf``): parsed without Spark."""

from __future__ import annotations

import argparse

import pytest

from resolver.cli.spark_options import add_spark_arguments, settings


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="resolver ingest")
    add_spark_arguments(parser)
    return parser.parse_args(argv)


def test_settings_become_session_settings() -> None:
    args = _parse(
        "--conf",
        "spark.hadoop.fs.s3a.endpoint=http://127.0.0.1:9000",
        "--conf",
        "spark.sql.shuffle.partitions=8",
        "--packages",
        "org.apache.hadoop:hadoop-aws:3.4.1",
    )
    assert settings(args) == {
        "spark__hadoop__fs__s3a__endpoint": "http://127.0.0.1:9000",
        "spark__sql__shuffle__partitions": "8",
    }
    assert args.packages == "org.apache.hadoop:hadoop-aws:3.4.1" and args.master == "local[2]"


def test_a_setting_without_a_value_is_refused_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parse("--conf", "spark.hadoop.fs.s3a.endpoint")
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        "resolver ingest: error: argument --conf: found 'spark.hadoop.fs.s3a.endpoint', expected KEY=VALUE "
        "(a Spark setting)"
    )
