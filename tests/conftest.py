"""Shared fixtures: one SparkSession with Delta for the whole run, and a real PostgreSQL + wal2json."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator

import pytest
from pyspark.sql import SparkSession

from tests.conftest_kafka import kafka_broker  # noqa: F401  (re-exported fixture)
from tests.conftest_pg import pg_db, pg_server  # noqa: F401  (re-exported fixtures)

#: The slow tier: whole modules and single tests that build many lakes or replay real PostgreSQL workloads
#: (together about three quarters of the suite's time). ``python -m pytest -m "not slow"`` leaves them out
#: for a quick check while developing; CI runs everything. Measured on the 2-core development machine.
SLOW = (
    "tests/test_bench.py",
    "tests/test_crash.py",
    "tests/test_debezium_differential.py",
    "tests/test_differential.py",
    "tests/test_evolution_differential.py",
    "tests/test_ingest.py",
    "tests/test_kafka_stream.py",
    "tests/test_maintenance.py",
    "tests/test_names_pg.py",
    "tests/test_readme.py",
    "tests/test_resolve_properties.py",
    "tests/test_run.py",
    "tests/test_vectors_evolution.py",
    "tests/test_cli.py::test_ingest_detects_the_format",
    "tests/test_cli.py::test_run_detects_a_format_2_stream_and_reads_the_neighbours_of_each_batch",
    "tests/test_silver_pg.py::test_a_thousand_key_changes_resolve_in_logarithmic_rounds",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)


#: The tests' session interprets expressions instead of compiling them to Java. On test-sized data (a few
#: hundred rows) compiling each new query's code costs more than running it: the same seed000 batches took
#: about 18% less time this way. These are the modes Spark's own test suites run in; the product's sessions
#: (``local_session``, and every test that runs the ``resolver`` command in a child process) keep compiling,
#: so both paths are exercised.
_INTERPRETED = {
    "spark__sql__codegen__wholeStage": "false",
    "spark__sql__codegen__factoryMode": "NO_CODEGEN",
}


#: Every Spark driver JVM the tests start (their session, and each ``resolver`` command they run in a child
#: process, which inherits the environment) compiles with C1 only and collects with the serial collector.
#: Test batches are tiny: C2's optimised code never pays back the CPU it takes to make on 2 cores (C2 alone
#: took a third of a measured ingest's CPU), and one GC thread leaves the cores to Spark's tasks. Spark's
#: launcher adds SPARK_SUBMIT_OPTS to the driver's command line. ``RESOLVER_TEST_JIT=full`` keeps the JVM's
#: defaults (for comparing); the product's own sessions never set these.
if os.environ.get("RESOLVER_TEST_JIT") != "full":
    os.environ.setdefault(
        "SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m -XX:+UseSerialGC"
    )


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from resolver.kafka_config import KAFKA_PACKAGE
    from resolver.session import local_session

    session = local_session(
        "resolver-tests",
        packages=[KAFKA_PACKAGE],  # Spark's Kafka source, for tests/test_kafka_stream.py
        spark__sql__shuffle__partitions="2",
        spark__default__parallelism="2",
        spark__driver__memory="4g",
        **_INTERPRETED,
    )
    yield session
    session.stop()


@pytest.fixture(autouse=True, scope="module")
def _release_spark_memory() -> Iterator[None]:
    """After each test module, drop what a long run would otherwise pile up in the one driver JVM: Delta's
    cached logs and snapshots of every table the module made (thousands over the suite), cached data, and
    the blocks of the local checkpoints the module's applies made (no DataFrame outlives its module: the
    session-scoped fixtures hold none). With a 2g driver and none of this, the full suite ran the driver
    into garbage-collection thrash near its end."""
    yield
    session = SparkSession.getActiveSession()
    if session is not None:
        session._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]  # noqa: SLF001
        session.catalog.clearCache()
        for rdd in list(session.sparkContext._jsc.getPersistentRDDs().values()):  # noqa: SLF001
            rdd.unpersist(False)


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
