"""pytest fixtures for a real PostgreSQL + wal2json server (not a conftest; import the fixtures).

In tests/conftest.py::

    from tests.conftest_pg import pg_db, pg_server  # noqa: F401  (re-exported fixtures)

``pg_server`` (session scope) is one started :class:`~tests.pgharness.PgServer` for the whole run.
``pg_db`` (function scope) is a fresh database with a unique name on it, a
:class:`~tests.pgharness.PgDatabase` with ``name``, ``dsn``, ``execute``, ``query``, ``create_slot``,
``drop_slot`` and ``capture``; it is dropped afterwards together with its replication slots.

If PostgreSQL or wal2json is missing the fixtures fail with a clear message; set
``PGHARNESS_SKIP_MISSING=1`` to skip the tests that need them instead.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator

import pytest

from tests.pgharness import PgDatabase, PgHarnessError, PgServer


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
