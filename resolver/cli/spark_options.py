"""The Spark options every command that runs Spark takes (``--master``, ``--packages``, ``--conf``), and the
local session they make: what a user needs to reach a lake or landing folder on S3, ADLS or GCS from the
command line (the connector's package and its settings), in the words of ``spark-submit``. No Spark here;
``session`` starts it.

Example::

    resolver ingest s3a://landing/cdc/ --lake s3a://lake/cdc \\
        --packages org.apache.hadoop:hadoop-aws:3.4.1 \\
        --conf spark.hadoop.fs.s3a.endpoint.region=eu-west-1
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from resolver.spark.driver_jvm import DriverJvm

__all__ = ["add_spark_arguments", "session", "settings"]

#: a short command's batches into a small lake run interpreted below this many events
_SHORT_EVENTS = 1_000_000


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--master", default="local[2]", help="Spark master for the local session (default local[2])"
    )
    parser.add_argument(
        "--packages",
        default="",
        metavar="COORDS",
        help="more Maven packages for the session, comma-separated (for s3a://: "
        "org.apache.hadoop:hadoop-aws:3.4.1, the version of Spark's Hadoop)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        type=_setting,
        metavar="KEY=VALUE",
        help="a Spark setting (repeatable), e.g. spark.hadoop.fs.s3a.endpoint=http://localhost:9000",
    )


def settings(args: argparse.Namespace) -> dict[str, str]:
    """The ``--conf`` settings, as ``local_session`` keyword arguments (dots written as ``__``)."""
    return {key.replace(".", "__"): value for key, value in getattr(args, "conf", [])}


def session(
    args: argparse.Namespace,
    extra_packages: Sequence[str] = (),
    jvm: DriverJvm | None = None,
    lake: str | None = None,
) -> SparkSession:
    """The local session the command's options ask for, with ``extra_packages`` (Maven coordinates), its
    driver JVM started as ``jvm`` says (``resolver.spark.driver_jvm``; default: not short work, classes
    shared, the archive made at the command's end when there is none yet). Short work into a small
    ``lake`` (a new one: the README's first command) runs its expressions interpreted
    (``resolver.spark.expressions``), unless ``--conf`` says otherwise."""
    from resolver.spark.driver_jvm import DriverJvm, small_lake
    from resolver.spark.expressions import INTERPRET_SETTING
    from resolver.spark.session import local_session

    packages = [p.strip() for p in getattr(args, "packages", "").split(",") if p.strip()]
    given = {p.rsplit(":", 1)[0] for p in packages}  # a package given with another version is the user's
    packages += [p for p in extra_packages if p.rsplit(":", 1)[0] not in given]
    jvm = jvm if jvm is not None else DriverJvm(dump=True)
    conf = settings(args)
    interpret = INTERPRET_SETTING.replace(".", "__")
    if jvm.short and lake is not None and interpret not in conf and small_lake(lake):
        conf[interpret] = str(_SHORT_EVENTS)
    return local_session(master=args.master, packages=packages, jvm=jvm, **conf)


def _setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"found {text!r}, expected KEY=VALUE (a Spark setting)")
    return key.strip(), value
