"""What the resolver needs from the Python environment it runs in, checked before any work starts.
 On a laptop the ``[spark]`` extra brings everything. On a cluster (Databricks, EMR, Dataproc) Spark and
Delta are the cluster's own and the resolver is installed without that extra; the cluster must then
already have what Spark's Arrow path needs, because the reader (``resolver.batch.read``) runs as
``mapInArrow``: pyarrow and pandas in the versions below. A missing or old package would otherwise show up
as an import error deep inside a Spark task; here it is one line naming the package, the version found and
the version needed. No Spark.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass

from resolver.errors import ConfigError

__all__ = [
    "ARROW_PACKAGES",
    "DELTA_SPARK_LINES",
    "SPARK_PACKAGES",
    "Requirement",
    "check_local_spark",
    "check_runtime",
    "check_spark_pair",
]


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
# What local_session needs besides: Spark and Delta, each in the range the resolver is tested on, and in a
# pair that works (DELTA_SPARK_LINES).
SPARK_PACKAGES = (
    Requirement("pyspark", "pyspark", (4, 0, 1), (4, 3), why="Spark"),
    Requirement("delta", "delta-spark", (4, 0, 1), (4, 5), why="Delta Lake for Spark"),
)
#: Each Delta line and the Spark lines it is built for: the Maven artifacts it publishes
#: (``io.delta:delta-spark_<Spark line>_2.13`` from 4.1 on, ``delta-spark_2.13`` for Spark 4.0 before) and
#: the pyspark its pip package declares (4.2 and 4.3: ``pyspark<=4.1.1``; 4.4: ``pyspark<=4.2.0``).
#: ``configure_spark_with_delta_pip`` asks Maven for the artifact of the installed Spark's line.
DELTA_SPARK_LINES: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {
    (4, 0): ((4, 0),),
    (4, 1): ((4, 0), (4, 1)),
    (4, 2): ((4, 0), (4, 1)),
    (4, 3): ((4, 0), (4, 1)),
    (4, 4): ((4, 0), (4, 1), (4, 2)),
}


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

        from resolver.spark.runtime import check_runtime, ARROW_PACKAGES, SPARK_PACKAGES
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


def _pair(version: tuple[int, ...]) -> tuple[int, int]:
    """A version's release line: (major, minor)."""
    padded = (*version, 0, 0)
    return padded[0], padded[1]


def _line(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version[:2]))


def check_spark_pair(spark: tuple[int, ...], delta: tuple[int, ...]) -> None:
    """Raise ``ConfigError`` (one line) unless Delta ``delta`` is built for Spark ``spark``'s line
    (``DELTA_SPARK_LINES``), naming the Delta line to install for that Spark.

    Example::

        check_spark_pair((4, 2, 0), (4, 4, 0))   # silent: Delta 4.4 is built for Spark 4.2
    """
    spark_line, delta_line = _pair(spark), _pair(delta)
    if spark_line in DELTA_SPARK_LINES.get(delta_line, ()):
        return
    found = f"delta-spark {'.'.join(map(str, delta))} is installed with pyspark {'.'.join(map(str, spark))}"
    fitting = [d for d, lines in DELTA_SPARK_LINES.items() if spark_line in lines]
    if not fitting:
        spark_lines = sorted({line for lines in DELTA_SPARK_LINES.values() for line in lines})
        raise ConfigError(
            f"{found}: no delta-spark is built for Spark {_line(spark)}; expected pyspark "
            f"{_line(spark_lines[0])}–{_line(spark_lines[-1])}"
        )
    major, minor = max(fitting)
    raise ConfigError(
        f"{found}, but Delta {_line(delta)} is not built for Spark {_line(spark)}: expected delta-spark "
        f'{major}.{minor}.x for it (pip install "delta-spark>={major}.{minor},<{major}.{minor + 1}")'
    )


def check_local_spark() -> None:
    """What a local session (``resolver.local_session``, the ``resolver`` command) needs: the Arrow
    packages, pyspark and delta-spark in range, and a pair that works. Raises ``ConfigError`` (one line)."""
    check_runtime(SPARK_PACKAGES + ARROW_PACKAGES)
    spark = _version("pyspark", "pyspark")
    delta = _version("delta", "delta-spark")
    assert spark is not None and delta is not None  # check_runtime said so
    check_spark_pair(spark, delta)
