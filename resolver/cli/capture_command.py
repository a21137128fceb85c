"""``resolver capture``: the command line of ``resolver.capture.snapshot`` (docs/capture.md). No Spark."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from resolver.capture.options import CaptureOptions

__all__ = ["add_capture", "capture"]


def add_capture(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "capture",
        help="land a PostgreSQL database's rows and then its changes (wal2json), exactly once",
        description="Capture a PostgreSQL database into a landing folder for resolver run / ingest "
        "(docs/capture.md). The first capture of a slot creates it with wal2json, exporting a snapshot, and "
        "copies every included table in that snapshot into snapshot files of its own (cut by --file-mb): "
        "each row an insert at the slot's consistent point (a capture killed during its snapshot keeps the "
        "tables it finished). "
        "Each capture then drains the slot up to the WAL position current when it began into landing files "
        "cut at transaction ends (--file-mb), written whole and flushed to disk before that position is "
        "confirmed to the slot. With --once it does that once and exits (for schedulers); without, it "
        "then stays connected and lands each transaction as it commits (PostgreSQL's replication protocol), "
        "a file at the first transaction end once it is --file-mb large or --interval seconds old, until "
        "SIGINT/SIGTERM, which close the file at a transaction end and confirm it. The database needs "
        "wal_level=logical, the wal2json plugin, a free WAL sender, and a role with REPLICATION.",
        epilog="examples:\n"
        "  resolver capture --dsn 'host=db dbname=shop user=cdc' --landing landing/ --slot shop --once\n"
        "  resolver capture --dsn postgresql://cdc@db/shop --landing landing/ --slot shop --interval 30\n"
        "  resolver capture --dsn ... --landing landing/ --slot shop --tables 'public.*' "
        "--exclude 'public.tmp_*'\n"
        "  resolver capture --dsn ... --landing landing/ --slot shop --status\n"
        "  resolver capture pipeline.yaml --once       # capture: {dsn_env: SHOP_DSN, slot: shop}\n"
        "  resolver capture pipeline.yaml --resnapshot public.orders\n"
        "\nexit status: 0 done, 1 unexpected failure, 2 misconfiguration",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "pipeline",
        nargs="?",
        metavar="PIPELINE.yaml",
        help="a pipeline file with a capture: section: its source folder is the landing folder, its "
        "include/exclude choose the tables (the flags below override its dsn, slot and folder)",
    )
    parser.add_argument("--dsn", help="libpq connection string or URI of the database")
    parser.add_argument(
        "--landing", metavar="DIR", help="the landing folder to write: a path, or s3://bucket/prefix (s3a://)"
    )
    parser.add_argument("--slot", help="the replication slot (created on the first capture)")
    parser.add_argument(
        "--tables",
        action="append",
        metavar="PATTERN",
        help="tables to capture, shell patterns on schema.table (repeatable; default every table)",
    )
    parser.add_argument(
        "--exclude", action="append", metavar="PATTERN", help="tables to leave out (repeatable)"
    )
    parser.add_argument("--once", action="store_true", help="capture once, then exit")
    parser.add_argument(
        "--status",
        action="store_true",
        help="print the slot's lag (bytes and seconds), retained WAL and files landed; capture nothing",
    )
    parser.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help="a running capture's landing file is closed at the first transaction end this long after it "
        "opened: how long a change waits at most before a run can read it (default 10, or the file's)",
    )
    parser.add_argument(
        "--file-mb",
        type=float,
        metavar="MB",
        help="cut landing files at the first transaction end past this size (default 64, or the file's)",
    )
    parser.add_argument(
        "--copy-processes",
        type=int,
        metavar="N",
        help="worker processes copying a large table's chunks at once during a snapshot, each on a "
        "connection of its own (default 2, or the file's)",
    )
    parser.add_argument(
        "--partitions",
        choices=("root", "leaves"),
        help="a partitioned table is one table named for its root (root, the default, or the file's), or "
        "each of its partitions a table of its own (leaves)",
    )
    parser.add_argument(
        "--resnapshot",
        action="append",
        metavar="PATTERN",
        help="copy the captured tables matching PATTERN again (repeatable): each replaced in the lake by "
        "its rows at a new consistent point; nothing else is captured",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines, only warnings and errors")


def _options(args: argparse.Namespace) -> tuple[CaptureOptions, float]:
    """The capture's options and interval: from the flags, or a pipeline file's ``capture:`` section, its
    source folder and its include/exclude (the flags override its dsn, slot, folder and interval)."""
    from dataclasses import replace

    from resolver.capture.landing import check_location
    from resolver.capture.options import CaptureOptions, Partitions
    from resolver.errors import ConfigError

    interval = args.interval
    if args.pipeline is None:
        missing = [f"--{n}" for n in ("dsn", "landing", "slot") if getattr(args, n) is None]
        if missing:
            raise ConfigError(
                f"resolver capture: {', '.join(missing)} missing: expected --dsn, --landing and --slot, or a "
                "pipeline file with a capture: section"
            )
        tables = (tuple(args.tables or ("*",)), tuple(args.exclude or ()))
        options = CaptureOptions(args.dsn, args.landing, args.slot, *tables, _bytes(args.file_mb, 64.0))
        processes = args.copy_processes
        partitions = args.partitions
    else:
        from resolver.config.pipeline import load_pipeline

        pipeline = load_pipeline(args.pipeline)
        where = args.pipeline
        if args.tables or args.exclude:
            raise ConfigError(
                f"{where}: --tables/--exclude given with a pipeline file: expected its include/exclude to "
                "choose the tables (resolver run keeps the same ones)"
            )
        if pipeline.capture is None:
            raise ConfigError(
                f"{where}: no capture: section: expected capture: {{dsn_env: VARIABLE, slot: NAME}} "
                "(docs/capture.md)"
            )
        landing = args.landing or str(pipeline.source.path)
        if args.landing is None and (pipeline.source.kafka is not None or "*" in landing):
            raise ConfigError(
                f"{where}: source {landing!r} is not a folder: expected source.path to be the folder "
                "capture lands files in, local or s3:// (or --landing DIR)"
            )
        dsn = args.dsn or pipeline.capture.connection()
        slot = args.slot or pipeline.capture.slot
        tables = (tuple(pipeline.include), tuple(pipeline.exclude))
        size = _bytes(args.file_mb, pipeline.capture.file_mb)
        options = CaptureOptions(dsn, landing, slot, *tables, size)
        processes = args.copy_processes or pipeline.capture.copy_processes
        partitions = args.partitions or pipeline.capture.partitions
        interval = interval if interval is not None else pipeline.capture.interval_seconds
    check_location(options.landing)
    if processes is not None:
        if processes < 1:
            raise ConfigError(f"--copy-processes {processes}: expected 1 or more")
        options = replace(options, copy_processes=processes)
    if partitions is not None:
        options = replace(options, partitions=Partitions(partitions))
    interval = 10.0 if interval is None else interval
    if interval <= 0:
        raise ConfigError(f"--interval {interval:g}: expected a number of seconds above 0")
    return options, interval


def _bytes(megabytes: float | None, default: float) -> int:
    from resolver.errors import ConfigError

    value = default if megabytes is None else megabytes
    if value <= 0:
        raise ConfigError(f"--file-mb {value:g}: expected a size in megabytes above 0")
    return max(1, int(value * 1024 * 1024))


def capture(args: argparse.Namespace) -> int:
    from resolver.capture.snapshot import capture_once

    options, interval = _options(args)
    if args.status:
        from resolver.capture.status import capture_status

        print("\n".join(capture_status(options.dsn, options.landing, options.slot).lines()), flush=True)
        return 0
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="resolver: %(message)s",
        stream=sys.stderr,
    )
    if args.resnapshot:
        from resolver.capture.snapshot import resnapshot

        print("\n".join(resnapshot(options, args.resnapshot).lines()), flush=True)
        return 0
    stop = threading.Event()
    if not args.once:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    summary = capture_once(options)  # the snapshot if it was never taken, and the slot's backlog
    print("\n".join(summary.lines()), flush=True)
    if args.once or stop.is_set():
        return 0
    from resolver.capture.stream import stream_changes

    print("\n".join(stream_changes(options, interval, stop).lines()), flush=True)
    return 0
