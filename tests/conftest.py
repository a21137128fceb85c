"""Shared fixtures: one SparkSession with Delta for the whole run, and a real PostgreSQL + wal2json."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator

import pytest
from pyspark.sql import SparkSession

from tests.conftest_pg import pg_db, pg_server  # noqa: F401  (re-exported fixtures)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from resolver.session import local_session

    session = local_session(
        "resolver-tests",
        spark__sql__shuffle__partitions="2",
        spark__default__parallelism="2",
        spark__driver__memory="2g",
    )
    yield session
    session.stop()


@pytest.fixture
def cli(spark: SparkSession) -> Iterator[Callable[..., int]]:
    """Run a command of ``resolver.commands`` in this process (its session is the tests' own), putting back
    the session settings ``local_session`` changes."""
    saved = {k: v for k, v in spark.conf.getAll.items() if spark.conf.isModifiable(k)}
    parser = argparse.ArgumentParser(prog="resolver")
    from resolver.commands import register

    handlers = register(parser.add_subparsers(dest="command", required=True))

    def run(*argv: str) -> int:
        args = parser.parse_args(argv)
        return handlers[args.command](args)

    yield run
    for key, value in saved.items():
        spark.conf.set(key, value)
