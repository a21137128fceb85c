"""The local session's shuffle partitions follow its master's cores
(``resolver.spark.session.partitions_for``): adaptive execution is off there, so nothing would size them
later."""

from __future__ import annotations

import os

import pytest

from resolver.spark.session import LEAST_PARTITIONS, partitions_for


@pytest.mark.parametrize(
    ("master", "expected"),
    [
        ("local[2]", 4),  # the CLI's and local_session's default: what it always was
        ("local[8]", 16),
        ("local[8,3]", 16),  # with task retries
        (" local[16] ", 32),
        ("local[1]", LEAST_PARTITIONS),
        ("local", LEAST_PARTITIONS),
        ("spark://host:7077", LEAST_PARTITIONS),  # a cluster's cores are not known here
        ("yarn", LEAST_PARTITIONS),
        ("local[x]", LEAST_PARTITIONS),  # not a local master Spark knows: the least
    ],
)
def test_two_partitions_per_core_of_a_local_master(master: str, expected: int) -> None:
    assert partitions_for(master) == expected


def test_local_star_counts_the_machine_s_cores() -> None:
    assert partitions_for("local[*]") == max(LEAST_PARTITIONS, 2 * (os.cpu_count() or 1))
