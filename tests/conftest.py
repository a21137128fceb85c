"""Shared fixtures: one SparkSession with Delta for the whole run, and a real PostgreSQL + wal2json."""

from __future__ import annotations

from collections.abc import Iterator

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
