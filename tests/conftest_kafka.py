"""pytest fixture for a real Kafka broker (not a conftest; import the fixture).

In tests/conftest.py::

    from tests.conftest_kafka import kafka_broker  # noqa: F401  (re-exported fixture)

``kafka_broker`` (session scope) is one started :class:`~tests.kafka_harness.KafkaBroker` for the whole
run, started on first use (about 8 s) and stopped at the end. Tests share it, so each uses its own topic
names (a broker keeps every topic until it stops).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kafka_harness import KafkaBroker


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    broker = KafkaBroker()
    broker.start()  # stops what it started if it fails
    try:
        yield broker
    finally:
        broker.stop()
