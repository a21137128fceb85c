"""A Delta-enabled SparkSession for local use (laptops, tests, the CLI).

On a cluster, pass your own session to the library functions instead: nothing here runs at import time
and no library function creates a session.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from resolver.errors import ConfigError
from resolver.spark.driver_jvm import DriverJvm, driver_start, launched
from resolver.spark.driver_output import log4j_option, quiet_launch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LEAST_PARTITIONS", "local_session", "partitions_for"]

_DEFAULTS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.session.timeZone": "UTC",
    # timestamps in Parquet as microseconds, not INT96 (resolver.spark.session_settings.LAKE_WRITES: every
    # write of the lake sets it on any session; here for the rest of a local session's writes too)
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # (spark.sql.shuffle.partitions and spark.default.parallelism: two per core of the master, partitions_for)
    # Adaptive execution runs each query stage as a job of its own and re-plans between them; with two shuffle
    # partitions a core it has nothing to coalesce on one machine. Off, a table-batch of the common case
    # (seed000 batch 2) runs 24 Spark jobs instead of 45 in the same time, and a 20,000-event batch against
    # a 200,000-row table takes as long or less (bench/README.md, "Jobs per batch"). A cluster session
    # passed to the library keeps its own setting.
    "spark.sql.adaptive.enabled": "false",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # PySpark's DataFrame debugging records the Python call site of every DataFrame and Column call in the
    # JVM (an active-session lookup, a settings read, a stack capture and two more JVM calls each): with it
    # off, building a typical expression and select took 9 ms instead of 22 (bench/README.md, "Python call
    # overhead"); only the call site in the text of an error raised inside Spark is lost.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.databricks.delta.merge.repartitionBeforeWrite.enabled": "true",
    # the resolver's MERGE sources are local checkpoints, or a grouping over one (the snapshot's newest
    # versions): deterministic, so no second copy is needed
    "spark.databricks.delta.merge.materializeSource": "none",
    # Spark keeps the classes it compiled for a query's expressions in a cache of 100 by default; a batch's
    # queries need several hundred (about 40 per table and 150 for the batch; a 20-table batch 840), so in a
    # session that runs batch after batch each batch compiled them all again and the JVM compiled them to
    # machine code again. Kept: G10's 80,000-event batches in one session 22% faster (batches 3-9: 191.7 s
    # against 247.4 s), a third 20-table batch 62.6 s against 72.2 s (bench/README.md, "Compiled code
    # kept"). A cached class is about 6 KB of bytecode. Static: a session you build sets it at its start.
    "spark.sql.codegen.cache.maxEntries": "4000",
    # A Delta table's log on this machine's disk written through Hadoop's raw local ``FileContext``, not its
    # checksum one: Delta's log store writes each commit file and its checksum as a temporary file renamed
    # into place, and the checksum file system doubles every such file with a ``.crc`` sidecar, starting a
    # ``chmod`` process for each new file and two ``readlink`` processes per rename (Hadoop without its
    # native library, as pyspark ships it). The README's first ingest started 606 processes before, fewer
    # after (bench/README.md, "Local lakes without checksum files"). Data files keep their sidecars: the
    # ``FileSystem`` (``fs.file.impl``) stays the checksum one, which Hadoop's own code casts to
    # (``FileSystem.getLocal``: S3A's disk buffers). Delta overwrites two log files in place; the sidecars
    # of those an earlier writer left are removed after each write (resolver.lake.sidecars).
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
    "spark.driver.memory": "4g",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
}


#: the shuffle partitions of a master whose cores are not known here (a cluster's), and the fewest of any
LEAST_PARTITIONS = 4
_LOCAL = re.compile(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?")


def partitions_for(master: str) -> int:
    """The shuffle partitions (and default parallelism) of a local session on ``master``: two per core, at
    least ``LEAST_PARTITIONS``: ``local[2]`` 4, ``local[8]`` 16, ``local[*]`` twice the machine's cores.
    Adaptive execution is off in the session (above), so nothing coalesces or splits them later: the fixed
    4 before left 4 of ``local[8]``'s 8 cores idle in every shuffle stage of one large table. Two per core
    keep a core busy while another task of its stage finishes. A master that is not local (``spark://``,
    ``yarn``) gets ``LEAST_PARTITIONS``; set ``spark__sql__shuffle__partitions`` for its cluster."""
    found = _LOCAL.fullmatch(master.strip())
    if found is None:
        return LEAST_PARTITIONS
    cores = found.group(1)
    count = 1 if cores is None else (os.cpu_count() or 1) if cores == "*" else int(cores)
    return max(LEAST_PARTITIONS, 2 * count)


def local_session(
    app_name: str = "resolver",
    master: str = "local[2]",
    packages: Sequence[str] = (),
    jvm: DriverJvm | None = None,
    **conf: str,
) -> SparkSession:
    """Get or create a local SparkSession with Delta Lake, UTC time zone and small-machine defaults.

    Delta's jars are resolved from Maven Central by ``configure_spark_with_delta_pip`` (cached in ~/.ivy2),
    with any other ``packages`` (Maven coordinates, e.g. ``org.apache.hadoop:hadoop-aws:3.4.1`` for
    ``s3a://``); the jars they resolved to are remembered (``resolver.spark.package_jars``), so later sessions
    with the same packages start without resolving them again. ``jvm`` says how the driver JVM starts
    (``resolver.spark.driver_jvm.DriverJvm``: short work, shared classes; the ``resolver`` commands pass
    theirs); without it, the JVM's defaults. Keyword arguments override settings, with dots written as
    ``__``: ``spark__sql__shuffle__partitions="8"``.

    Example::

        from resolver import local_session
        spark = local_session()   # e.g. local_session(master="local[8]", spark__driver__memory="8g")
        print(spark.conf.get("spark.sql.session.timeZone"))   # UTC
    """
    from resolver.spark.runtime import check_local_spark

    check_local_spark()  # one clear line instead of an import error in a task or a missing Maven artifact
    import pyspark
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    from resolver.spark.package_jars import remember_jars, remembered_jars, reusable

    builder = SparkSession.builder.appName(app_name).master(master)
    partitions = str(partitions_for(master))
    settings = {
        **_DEFAULTS,
        "spark.sql.shuffle.partitions": partitions,
        "spark.default.parallelism": partitions,
    }
    # The workers run this interpreter (the resolver's own environment), not whatever python3 is first on
    # PATH: `venv/bin/resolver` works without activating the venv. PySpark reads the variable when the
    # context starts (the spark.pyspark.python setting is only for spark-submit).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    given = {k.replace("__", "."): v for k, v in conf.items()}
    settings.update(given)
    driver = settings["spark.driver.extraJavaOptions"]
    start = driver_start(jvm, given, ",".join(packages))
    extra = [*start.options, log4j_option(driver)]
    settings["spark.driver.extraJavaOptions"] = " ".join([driver, *[o for o in extra if o]])
    for key, value in settings.items():
        builder = builder.config(key, value)
    builder = configure_spark_with_delta_pip(builder, list(packages))
    wanted = builder._options.get("spark.jars.packages", "")  # noqa: SLF001  # Delta's and the caller's
    jars = remembered_jars(wanted, pyspark.__version__) if wanted and reusable(settings) else None
    if jars is not None:  # resolved by an earlier session: no Ivy resolution at start
        builder = builder.config("spark.jars.packages", "").config("spark.jars", jars)
    from pyspark import SparkContext

    running = SparkContext._gateway  # noqa: SLF001  # a JVM already up: getOrCreate launches none
    try:
        with (
            quiet_launch()
        ):  # nothing on the first screen a user cannot act on (resolver.spark.driver_output)
            session = builder.getOrCreate()
    except Exception as e:  # noqa: BLE001  # PySparkRuntimeError: the launcher's own lines are above
        if "JAVA_GATEWAY_EXITED" not in str(e):
            raise
        raise ConfigError(
            "Spark's launcher ended before the session started (its messages are above): expected Java 17 "
            f"and the packages {wanted} on Maven Central or in the Ivy cache; a delta-spark whose jars are "
            "not published for this Spark fails here (the supported pairs: README, Install on a cluster)"
        ) from None
    if running is None:
        launched(start, getattr(SparkContext._gateway, "proc", None))  # noqa: SLF001
    if jars is None and wanted and reusable(settings):
        remember_jars(wanted, pyspark.__version__, session)
    session.sparkContext.setLogLevel("ERROR")
    return session
