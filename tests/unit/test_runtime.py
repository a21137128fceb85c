"""The start-up check of what the environment must have (no Spark needed)."""

from __future__ import annotations

import pytest

from resolver.errors import ConfigError
from resolver.spark.runtime import (
    ARROW_PACKAGES,
    SPARK_PACKAGES,
    Requirement,
    check_local_spark,
    check_runtime,
    check_spark_pair,
)


def test_the_installed_environment_passes() -> None:
    check_runtime(ARROW_PACKAGES + SPARK_PACKAGES)  # the test environment is what pyproject declares


def test_a_missing_package_is_one_line_naming_it_and_the_version_needed() -> None:
    missing = Requirement("no_such_module_xyz", "no-such-package", (11, 0), why="a reason")
    with pytest.raises(ConfigError) as e:
        check_runtime((missing,))
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith("no-such-package is not installed, expected no-such-package>=11.0 (a reason)")
    assert 'pip install "no-such-package>=11.0"' in text


def test_a_too_old_and_a_too_new_package_name_the_version_found() -> None:
    import pydantic

    found = ".".join(pydantic.VERSION.split(".")[:3])
    too_old = Requirement("pydantic", "pydantic", (99, 0))
    with pytest.raises(ConfigError, match=rf"^pydantic {found} is installed, expected pydantic>=99.0 "):
        check_runtime((too_old,))
    too_new = Requirement("pydantic", "pydantic", (1, 0), (2, 0))
    with pytest.raises(ConfigError, match=r"expected pydantic>=1.0,<2.0"):
        check_runtime((too_new,))


def test_the_installed_pair_is_one_delta_builds_for() -> None:
    check_local_spark()  # the test environment is a supported pair (CI: the newest, and the oldest)


@pytest.mark.parametrize(
    ("spark", "delta"),
    [((4, 0, 1), (4, 0, 1)), ((4, 0, 5), (4, 0, 1)), ((4, 1, 1), (4, 3, 1)), ((4, 2, 0), (4, 4, 0))],
)
def test_pairs_that_work_pass(spark: tuple[int, ...], delta: tuple[int, ...]) -> None:
    check_spark_pair(spark, delta)


def test_a_pair_that_does_not_work_names_the_delta_to_install() -> None:
    with pytest.raises(ConfigError) as e:
        check_spark_pair((4, 2, 0), (4, 0, 1))
    assert str(e.value) == (
        "delta-spark 4.0.1 is installed with pyspark 4.2.0, but Delta 4.0 is not built for Spark 4.2: "
        'expected delta-spark 4.4.x for it (pip install "delta-spark>=4.4,<4.5")'
    )
    with pytest.raises(ConfigError, match=r"expected delta-spark 4\.4\.x"):
        check_spark_pair((4, 1, 1), (4, 0, 1))
    with pytest.raises(
        ConfigError, match=r"no delta-spark is built for Spark 4\.3; expected pyspark 4\.0–4\.2"
    ):
        check_spark_pair((4, 3, 0), (4, 4, 0))
