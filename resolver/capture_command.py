"""``resolver capture``: the command line of ``resolver.capture`` (docs/capture.md). No Spark."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

__all__ = ["add_capture", "capture"]


def add_capture(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "capture",
        help="land a PostgreSQL database's rows and then its changes (wal2json), exactly once",
        description="Capture a PostgreSQL database into a landing folder for resolver run / ingest "
        "(docs/capture.md). The first capture of a slot creates it with wal2json, exporting a snapshot, and "
        "copies every included table in that snapshot into a snapshot file: each row an insert at the slot's "
        "consistent point. Each capture then drains the slot up to the WAL position current when it began "
        "into a landing file, written whole and flushed to disk before that position is confirmed to the "
        "slot. With --once it does that once and exits (for schedulers); without, it does it again every "
        "--interval seconds until SIGINT/SIGTERM, which stop it after the capture under way. The database "
        "needs wal_level=logical, the wal2json plugin, and a role with REPLICATION.",
        epilog="examples:\n"
        "  resolver capture --dsn 'host=db dbname=shop user=cdc' --landing landing/ --slot shop --once\n"
        "  resolver capture --dsn postgresql://cdc@db/shop --landing landing/ --slot shop --interval 30\n"
        "  resolver capture --dsn ... --landing landing/ --slot shop --tables 'public.*' "
        "--exclude 'public.tmp_*'\n"
        "  resolver capture --dsn ... --landing landing/ --slot shop --status\n"
        "\nexit status: 0 done, 1 unexpected failure, 2 misconfiguration",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dsn", required=True, help="libpq connection string or URI of the database")
    parser.add_argument("--landing", required=True, metavar="DIR", help="the landing folder to write")
    parser.add_argument("--slot", required=True, help="the replication slot (created on the first capture)")
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
        "--interval", type=float, default=10.0, metavar="SECONDS", help="between captures (default 10)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines, only warnings and errors")


def capture(args: argparse.Namespace) -> int:
    from resolver.capture import CaptureOptions, capture_once
    from resolver.errors import ConfigError

    if args.status:
        from resolver.capture_status import capture_status

        print("\n".join(capture_status(args.dsn, args.landing, args.slot).lines()), flush=True)
        return 0
    if args.interval <= 0:
        raise ConfigError(f"--interval {args.interval:g}: expected a number of seconds above 0")
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="resolver: %(message)s",
        stream=sys.stderr,
    )
    options = CaptureOptions(
        args.dsn, args.landing, args.slot, tuple(args.tables or ("*",)), tuple(args.exclude or ())
    )
    stop = threading.Event()
    if not args.once:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    while True:
        summary = capture_once(options)
        print("\n".join(summary.lines()), flush=True)
        if args.once or stop.wait(args.interval):
            return 0
