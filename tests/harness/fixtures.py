"""The servers the tests share, as pytest fixtures (imported by tests/conftest.py, not a conftest itself):
one of each per session, started on first use on a free loopback port in a temporary folder and stopped at
the end.

- ``pg_server``: a :class:`~tests.harness.postgres.PgServer` (PostgreSQL 15 + wal2json). ``pg_db`` is a
  fresh database on it for one test (``name``, ``dsn``, ``execute``, ``query``, ``create_slot``,
  ``drop_slot``, ``capture``), dropped afterwards with its replication slots.
- ``captures``: the differential workloads of ``tests.difftest`` run on ``pg_server`` and decoded by
  wal2json, each (seed, transactions) once per session (:class:`Captures`); tests copy its lines into
  files of their own and never share a lake.
- ``kafka_broker``: a :class:`~tests.harness.kafka.KafkaBroker` (KRaft, about 8 s to start); tests use
  their own topic names (a broker keeps every topic until it stops).
- ``s3_server``: an :class:`~tests.harness.s3.S3Server` (moto's); tests use their own buckets.
- ``hive_metastore``: a :class:`~tests.harness.metastore.HiveMetastore` (Hive's Thrift server, Derby).

If PostgreSQL or wal2json is missing the fixtures fail with a clear message; ``PGHARNESS_SKIP_MISSING=1``
skips the tests that need them instead.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.harness.kafka import KafkaBroker
from tests.harness.metastore import HiveMetastore
from tests.harness.postgres import PgDatabase, PgHarnessError, PgServer
from tests.harness.s3 import S3Server

if TYPE_CHECKING:
    from tests.difftest import Capture


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    server = PgServer()
    try:
        server.start()
    except PgHarnessError as exc:
        if os.environ.get("PGHARNESS_SKIP_MISSING") == "1":
            pytest.skip(f"PostgreSQL test server unavailable: {exc}")
        raise
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_db(pg_server: PgServer, request: pytest.FixtureRequest) -> Iterator[PgDatabase]:
    base = re.sub(r"[^a-z0-9_]+", "_", request.node.name.lower()).strip("_")[:40]
    name = f"t_{base}_{uuid.uuid4().hex[:8]}"
    database = pg_server.create_database(name)
    try:
        yield database
    finally:
        pg_server.drop_database(name)


class Captures:
    """Each differential workload (seed, transactions) run once on the session's server and decoded by
    wal2json (``tests.difftest.capture_workload``): the run, crash, stream and S3 tests replay one capture,
    each from files of its own."""

    def __init__(self, server: PgServer) -> None:
        self.server = server
        self._done: dict[tuple[int, int], Capture] = {}

    def get(self, seed: int, transactions: int) -> Capture:
        from tests import difftest as d

        key = (seed, transactions)
        if key not in self._done:
            name = f"capture_{seed}_{transactions}"
            db = self.server.create_database(name)
            try:
                self._done[key] = d.capture_workload(db, seed, transactions)
            finally:
                self.server.drop_database(name)
        return self._done[key]


@pytest.fixture(scope="session")
def captures(pg_server: PgServer) -> Captures:
    return Captures(pg_server)


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    broker = KafkaBroker()
    broker.start()  # stops what it started if it fails
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    pytest.importorskip("boto3")  # the [test] extra installs it (with moto[server])
    server = S3Server(tmp_path_factory.mktemp("moto") / "server.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def hive_metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HiveMetastore]:
    server = HiveMetastore(tmp_path_factory.mktemp("metastore"))
    server.start()  # stops what it started if it fails
    try:
        yield server
    finally:
        server.stop()
