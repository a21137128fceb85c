"""``resolver run PIPELINE.yaml``: the command line of scheduled runs (``resolver.pipelines.run``) and of the
streaming mode (``--stream``, ``resolver.pipelines.stream``). Exit statuses as every command's
(``resolver.cli.main``)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from resolver.cli.spark_options import add_spark_arguments, session

if TYPE_CHECKING:
    from resolver.config.pipeline import Pipeline

__all__ = ["add_run", "run"]

EXIT_OK, EXIT_PARTIAL = 0, 3
#: how long a streaming micro-batch waits for another run's lock unless --wait says otherwise
STREAM_WAIT_SECONDS = 600.0


def add_run(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run_parser = commands.add_parser(
        "run",
        help="apply every new file of a pipeline's source exactly once (scheduled runs, or --stream)",
        description="Read a pipeline file (docs/pipelines.md), take the lake's lock and the pipeline's, and "
        "apply the source files not yet in the lake's ledger (_resolver/ledger), in name order, in batches. "
        "A run killed at any point is completed by the next one, with nothing lost or doubled. Tables are "
        "applied concurrently; a table that fails does not stop the others (exit status 3). Progress goes to "
        "stderr, the summary to stdout. With --stream the pipeline runs as a Structured Streaming query "
        "(docs/streaming.md): a micro-batch every stream.trigger_seconds until stopped (SIGINT/SIGTERM stop "
        "it after the micro-batch under way), or with --once everything landed so far, then exit. A run or "
        "stream of a pipeline that another one is running stops at once (exit status 4) unless --wait.",
        epilog="examples:\n"
        "  resolver run pipeline.yaml\n"
        "  resolver run pipeline.yaml --json > run.json      # for schedulers\n"
        "  resolver run pipeline.yaml --wait 600             # wait up to 10 minutes for another run\n"
        "  resolver run pipeline.yaml --stream               # a streaming query, until stopped\n"
        "  resolver run pipeline.yaml --stream --once        # availableNow: what has landed, then exit\n"
        "  resolver run pipeline.yaml --status               # what waits under the freshness bound\n"
        "\nexit status: 0 done, 1 unexpected failure, 2 misconfiguration, 3 some tables failed, "
        "4 lake or pipeline held by another run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run_parser.add_argument("pipeline", metavar="PIPELINE.yaml", help="the pipeline file")
    run_parser.add_argument("--json", action="store_true", help="print the summary as JSON (stdout)")
    run_parser.add_argument(
        "--wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="wait this long for another run of the lake or the pipeline (default 0; with --stream, each "
        f"micro-batch also waits up to {STREAM_WAIT_SECONDS:.0f} for the lake's lock)",
    )
    run_parser.add_argument(
        "--stream", action="store_true", help="run as a Structured Streaming query over the source"
    )
    run_parser.add_argument(
        "--once", action="store_true", help="with --stream: process what has landed (availableNow), then exit"
    )
    run_parser.add_argument(
        "--quiet", action="store_true", help="no progress lines, only warnings and errors"
    )
    run_parser.add_argument(
        "--status",
        action="store_true",
        help="apply nothing: print which tables' events wait in bronze under the pipeline's freshness bound, "
        "and up to which commit their silver tables are complete (docs/silver.md, Tables that wait)",
    )
    add_spark_arguments(run_parser)


def run(args: argparse.Namespace) -> int:
    from resolver.config.pipeline import load_pipeline
    from resolver.errors import ConfigError

    if args.once and not args.stream:
        raise ConfigError("found --once without --stream (expected --stream --once, or neither)")
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="resolver: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    pipeline = load_pipeline(args.pipeline)  # fail fast, before starting Spark
    if pipeline.schemas:
        from resolver.config.tableschema import load_schemas

        load_schemas(pipeline.schemas)
    if args.status:
        return _status(args, pipeline)
    kafka = pipeline.source.kafka is not None
    from resolver.spark.driver_jvm import SHORT_INPUT_BYTES, DriverJvm

    # a scheduled run over a few new files is short work; a stream, or a large backlog, is not
    short = not (args.stream or kafka) and _new_bytes(pipeline) <= SHORT_INPUT_BYTES
    jvm = DriverJvm(short=short, dump=True)
    if kafka:
        from resolver.config.kafka_config import local_kafka_package

        spark = session(args, extra_packages=[local_kafka_package()], jvm=jvm, lake=pipeline.lake)
    else:
        spark = session(args, jvm=jvm, lake=pipeline.lake)
    if args.stream or kafka:
        from resolver.pipelines.stream import run_stream

        if not args.stream:
            logging.getLogger("resolver.pipelines.run").info(
                "a Kafka source: what its topics hold now (--stream --once)"
            )
        wait = STREAM_WAIT_SECONDS if args.wait is None else args.wait
        once = args.once or not args.stream
        summary = run_stream(
            spark, args.pipeline, once=once, wait_seconds=wait, owner_wait_seconds=args.wait or 0.0
        )
    else:
        from resolver.pipelines.run import run_pipeline

        summary = run_pipeline(spark, args.pipeline, wait_seconds=args.wait or 0.0)
    if args.json:
        print(summary.model_dump_json(indent=2))
    else:
        for line in summary.lines():
            print(line)
    return EXIT_PARTIAL if summary.failed_tables else EXIT_OK


def _status(args: argparse.Namespace, pipeline: Pipeline) -> int:
    """``--status``: each table whose events wait in bronze (``resolver.batch.deferral``), read from the
    lake's markers; nothing is applied."""
    from resolver.batch.deferral import waiting_lines
    from resolver.lake.folders import Lake
    from resolver.lake.markers import read_lake_markers
    from resolver.spark.driver_jvm import DriverJvm

    spark = session(args, jvm=DriverJvm(short=True), lake=pipeline.lake)
    waiting = read_lake_markers(spark, Lake.at(pipeline.lake).markers).waiting
    bound = pipeline.freshness.seconds if pipeline.freshness is not None else None
    print(f"lake {pipeline.lake}: freshness " + (f"{bound:g} s" if bound is not None else "not set"))
    if not waiting:
        print("no events wait in bronze: every table's silver tables hold every event delivered")
    for line in waiting_lines(waiting, bound):
        print(line)
    return EXIT_OK


def _new_bytes(pipeline: Pipeline) -> int:
    """About how many bytes a run of the pipeline reads, known before Spark starts: the source's files
    changed since the ledger's last commit (all of them for a new lake); a source or lake named by a URI
    counts as more than any short work."""
    from pathlib import Path

    from resolver.files.input_files import local_listing
    from resolver.lake.folders import Lake
    from resolver.paths import is_uri
    from resolver.spark.driver_jvm import SHORT_INPUT_BYTES

    source = str(pipeline.source.path)
    if is_uri(source) or is_uri(pipeline.lake):
        return SHORT_INPUT_BYTES + 1
    log = Path(Lake.at(pipeline.lake).ledger) / "_delta_log"
    since = max((p.stat().st_mtime_ns for p in log.glob("*.json")), default=0) if log.is_dir() else 0
    listing = local_listing(source) or {}
    return sum(size for size, modified in listing.values() if modified >= since)
