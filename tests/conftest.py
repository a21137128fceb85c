"""Shared fixtures: one SparkSession with Delta for the run, and the servers of tests/harness/fixtures.py."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.harness import jvm
from tests.harness.fixtures import (  # noqa: F401  (fixtures)
    captures,
    hive_metastore,
    kafka_broker,
    pg_db,
    pg_server,
    s3_server,
)

#: The tiers are folders: tests/unit (no JVM, no server: seconds), tests/spark (the one Spark session of the
#: run; no server, no child process), tests/e2e (real PostgreSQL + wal2json, Debezium, Kafka and S3 servers,
#: ``resolver`` commands in child processes, the README's and docstrings' examples, the bench's checks, the
#: property campaigns, and lakes built whole to compare or maintain). The harnesses that start the servers
#: and children are in tests/harness; the workloads and checks the modules share are tests/difftest.py,
#: tests/reference.py, tests/samplelake.py, tests/pipelines.py and tests/docexamples.py. No test module
#: imports another.


#: Every Spark driver the tests start (their session, and the ``resolver`` commands they run in child
#: processes): the serial collector, interpreted expressions and a shared class archive; C1 only in the
#: children (tests/harness/jvm.py).
jvm.configure()


#: What one pytest-xdist worker needs: its own Spark driver (a 4 GiB heap, and the JVM around it), PostgreSQL
#: server and the ``resolver`` commands it runs in child processes.
_GIB_PER_WORKER = 6


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (the README's test command): one worker per core, as many as the memory holds (each starts
    its own Spark driver, servers and children). On CI's 2 cores and 24 GiB: 2 workers, which ran the whole
    suite in 0.64x the time of one process (2,249 s vs 3,494 s, the same machine, idle)."""
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return max(1, min(os.cpu_count() or 1, int(memory_gib // _GIB_PER_WORKER)))


#: each module's seconds in a CI run (``.ci/durations.py --write``): the order the modules are handed out in
MODULE_SECONDS = Path(__file__).with_name("module_seconds.txt")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules first (``MODULE_SECONDS``; one not listed before them all), each module's tests
    in their own order. ``--dist loadfile --no-loadscope-reorder`` (pyproject.toml) hands the modules to
    the workers in this order: xdist's own order, by number of tests, started the long one-test modules last
    and left a worker idle for minutes at the end of the run (1.87 of 2 workers busy on average)."""
    seconds: dict[str, float] = {}
    for line in MODULE_SECONDS.read_text("utf-8").splitlines():
        if line and not line.startswith("#"):
            value, module = line.split(" ", 1)
            seconds[module] = float(value)
    first: dict[str, int] = {}
    for n, item in enumerate(items):
        first.setdefault(_module(item), n)
    items.sort(key=lambda item: (-seconds.get(_module(item), float("inf")), first[_module(item)]))


def _module(item: pytest.Item) -> str:
    """``tests/e2e/test_run.py`` of ``tests/e2e/test_run.py::test_x[param]``."""
    return item.nodeid.split("::", 1)[0]


@contextlib.contextmanager
def _one_worker_at_a_time(tmp_path_factory: pytest.TempPathFactory, what: str) -> Iterator[None]:
    """Hold a lock the run's xdist workers share (a file beside their temporary folders) while doing
    ``what``; without workers, nothing to wait for."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    with open(tmp_path_factory.getbasetemp().parent / f"{what}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def _session_jvm_options() -> Iterator[None]:
    """The session's driver starts with ``jvm.session_options()`` (C2 kept); the ``resolver`` children started
    later get the tests' options as before."""
    children = os.environ.get("SPARK_SUBMIT_OPTS")
    if children is None:  # RESOLVER_TEST_JIT=full: the JVM's defaults for every driver
        yield
        return
    os.environ["SPARK_SUBMIT_OPTS"] = jvm.session_options()
    try:
        yield
    finally:
        os.environ["SPARK_SUBMIT_OPTS"] = children


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from resolver.config.kafka_config import local_kafka_package
    from resolver.spark.session import local_session

    # one worker at a time fetches Delta's and Kafka's jars into the Ivy cache (on a fresh machine both would
    # download the same files into the same folder at once) and makes the class archive
    with _one_worker_at_a_time(tmp_path_factory, "spark-packages"):
        jvm.share_classes(tmp_path_factory.mktemp("class-archive"))
        with _session_jvm_options():
            session = local_session(
                "resolver-tests",
                packages=[local_kafka_package()],  # Spark's Kafka source, for tests/e2e/test_kafka_stream.py
                spark__sql__shuffle__partitions="2",
                spark__default__parallelism="2",
                spark__driver__memory="4g",
                **{key.replace(".", "__"): value for key, value in jvm.INTERPRETED.items()},
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
    """Run a command of ``resolver.cli.commands`` in this process (its session is the tests' own), putting
    back the session settings ``local_session`` changes."""
    saved = {k: v for k, v in spark.conf.getAll.items() if spark.conf.isModifiable(k)}
    parser = argparse.ArgumentParser(prog="resolver")
    from resolver.cli.commands import register

    handlers = register(parser.add_subparsers(dest="command", required=True))

    def run(*argv: str) -> int:
        args = parser.parse_args(argv)
        return handlers[args.command](args)

    yield run
    for key, value in saved.items():
        spark.conf.set(key, value)
