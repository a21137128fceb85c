"""What the resolver needs from the Python environment it runs in, checked before any work starts.

On a laptop the ``[spark]`` extra brings everything. On a cluster (Databricks, EMR, Dataproc) Spark and
Delta are the cluster's own and the resolver is installed without that extra; the cluster must then
already have what Spark's Arrow path needs, because the reader (``resolver.read``) runs as
``mapInArrow``: pyarrow and pandas in the versions below. A missing or old package would otherwise show up
as an import error deep inside a Spark task; here it is one line naming the package, the version found and
the version needed. No Spark.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass

from resolver.errors import ConfigError

__all__ = ["ARROW_PACKAGES", "SPARK_PACKAGES", "Requirement", "check_runtime"]


@dataclass(frozen=True)
class Requirement:
    module: str  # the import name
    package: str  # the name pip knows it by
    minimum: tuple[int, ...]
    maximum: tuple[int, ...] | None = None  # exclusive
    why: str = ""

    def spec(self) -> str:
        low = f">={'.'.join(map(str, self.minimum))}"
        return low + (f",<{'.'.join(map(str, self.maximum))}" if self.maximum else "")


# Spark's Arrow path (mapInArrow, Arrow-based conversions): what a cluster must already have.
ARROW_PACKAGES = (
    Requirement("pyarrow", "pyarrow", (11, 0), why="the reader runs as Spark's mapInArrow"),
    Requirement("pandas", "pandas", (2, 0), why="PySpark's Arrow path requires it"),
)
# What local_session needs besides: Spark and Delta in a compatible pair.
SPARK_PACKAGES = (
    Requirement("pyspark", "pyspark", (4, 0, 1), (4, 1), why="Spark"),
    Requirement("delta", "delta-spark", (4, 0, 1), (4, 1), why="Delta Lake for Spark"),
)


def _version(module: str, package: str) -> tuple[int, ...] | None:
    """The installed version as numbers, or None when the module cannot be imported."""
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None
    text = getattr(mod, "__version__", None)
    if text is None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version(package)
        except PackageNotFoundError:
            return (0,)  # importable but without a version: accept rather than guess
    return tuple(int(n) for n in re.findall(r"\d+", str(text).split("+")[0])[:3]) or (0,)


def _problem(req: Requirement) -> str | None:
    found = _version(req.module, req.package)
    if found is None:
        return f"{req.package} is not installed"
    if found < req.minimum or (req.maximum is not None and found >= req.maximum):
        return f"{req.package} {'.'.join(map(str, found))} is installed"
    return None


def check_runtime(requirements: tuple[Requirement, ...] = ARROW_PACKAGES) -> None:
    """Raise ``ConfigError`` (one line) when a package the resolver needs is missing or too old.

    Example::

        from resolver.runtime import check_runtime, ARROW_PACKAGES, SPARK_PACKAGES
        check_runtime(ARROW_PACKAGES + SPARK_PACKAGES)   # silent when all is well
    """
    for req in requirements:
        problem = _problem(req)
        if problem is not None:
            raise ConfigError(
                f"{problem}, expected {req.package}{req.spec()} ({req.why}): "
                f'pip install "{req.package}{req.spec()}", or install pg-change-resolver[spark] for a local '
                "Spark"
            )
