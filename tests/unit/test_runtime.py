"""The start-up check of what the environment must have (no Spark needed)."""

from __future__ import annotations

import pytest

from resolver.errors import ConfigError
from resolver.runtime import ARROW_PACKAGES, SPARK_PACKAGES, Requirement, check_runtime


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
