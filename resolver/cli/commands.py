"""The ``resolver as-of``, ``resolver optimize`` and ``resolver vacuum`` commands: thin layers over
``resolver.ops.timetravel`` and ``resolver.ops.maintenance``.

``register`` adds them to the ``resolver`` program's subcommands and returns their handlers. Each handler
checks its arguments (raising ``ConfigError``, one line: exit status 2) before it starts Spark, prints a
short summary (progress on stderr, results on stdout) and returns 0. This module imports no Spark: the
handlers import what they need.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from resolver.cli.printing import add_output_arguments, check_output, print_or_write, render
from resolver.cli.spark_options import add_spark_arguments, session
from resolver.errors import ConfigError
from resolver.paths import is_uri

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]

Handler = Callable[[argparse.Namespace], int]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> dict[str, Handler]:
    """Add ``as-of``, ``optimize`` and ``vacuum`` to ``commands`` (the ``resolver`` program's
    ``add_subparsers()``) and return each command's handler by name."""
    _add_as_of(commands)
    _add_optimize(commands)
    _add_vacuum(commands)
    return {"as-of": _as_of, "optimize": _optimize, "vacuum": _vacuum}


def _add_as_of(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    as_of = commands.add_parser(
        "as-of",
        help="a source table as it was at a commit time or LSN",
        description="Print (or write) the source table <schema>.<table> as it was at a commit of the source "
        "database: the rows of <lake>/silver/<schema>.<table>__history current at that point, with the "
        "snapshot's columns (source columns, __start_lsn, __start_time). --lsn is exact; --time is as exact "
        "as PostgreSQL's commit timestamps. A point before the table's first commit gives no rows. Vacuum "
        "never changes the answer: it reads the history table, not Delta time travel.",
        epilog="examples:\n"
        "  resolver as-of --lake lake --table public.customers --lsn 0/1932D58\n"
        "  resolver as-of --lake lake --table public.customers --time '2026-11-21 16:30:12.615'\n"
        "  resolver as-of --lake lake --table public.orders --lsn 26425440 --out orders.csv --out-format csv",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    as_of.add_argument("--lake", metavar="DIR", help="lake folder (without it, --table is a catalog name)")
    as_of.add_argument(
        "--table",
        required=True,
        metavar="T",
        help='source table as PostgreSQL names it: public.orders, public."Mixed Case"; without --lake, its '
        "name in the lake's catalog: spark_catalog.cdc.public__orders",
    )
    when = as_of.add_mutually_exclusive_group(required=True)
    when.add_argument(
        "--time", metavar="TS", help="commit time, ISO; UTC unless it has an offset ('2026-11-21 16:30:12')"
    )
    when.add_argument("--lsn", metavar="LSN", help="commit LSN, '0/1932D58' or a decimal integer")
    add_output_arguments(as_of, "rows", "ordered by key")
    add_spark_arguments(as_of)


def _add_optimize(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    optimize = commands.add_parser(
        "optimize",
        help="compact the lake's Delta tables (Z-order by key, or liquid clustering)",
        description="Rewrite the small files of every Delta table of the lake (or of the tables named) into "
        "large ones: snapshot, history and change-store tables Z-ordered by their key (clustered, for "
        "tables with liquid clustering), the other tables compacted. No row changes. Takes the lake's "
        "lock: run it between batches, e.g. daily or every N runs (docs/operations.md).",
        epilog="examples:\n"
        "  resolver optimize --lake lake\n"
        "  resolver optimize --lake lake --table public.customers --table bronze/change_events",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    optimize.add_argument(
        "--lake", metavar="DIR", help="lake folder (without it, every --table is a catalog name)"
    )
    _tables(optimize)
    _wait(optimize)
    add_spark_arguments(optimize)


def _add_vacuum(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    vacuum = commands.add_parser(
        "vacuum",
        help="delete files older Delta versions used (keeps 7 days by default)",
        description="Delete the files of the lake's Delta tables that no table version of the last "
        "--retain-hours uses (files replaced by optimize and by merges). No row changes; Delta time "
        "travel (VERSION AS OF) to older versions stops working, 'resolver as-of' is not affected. A "
        "retention under 168 hours needs --force. Takes the lake's lock (not with --dry-run).",
        epilog="examples:\n"
        "  resolver vacuum --lake lake --dry-run\n"
        "  resolver vacuum --lake lake                          # weekly, keeps 7 days\n"
        "  resolver vacuum --lake lake --retain-hours 24 --force --table bronze/change_events",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    vacuum.add_argument(
        "--lake", metavar="DIR", help="lake folder (without it, every --table is a catalog name)"
    )
    vacuum.add_argument(
        "--retain-hours",
        type=float,
        default=168.0,
        metavar="H",
        help="keep the files Delta versions of the last H hours use (default 168)",
    )
    vacuum.add_argument("--dry-run", action="store_true", help="list the files that would be deleted")
    vacuum.add_argument(
        "--force", action="store_true", help="allow a retention under 168 hours (nothing may use the lake)"
    )
    _tables(vacuum)
    _wait(vacuum)
    add_spark_arguments(vacuum)


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"found {value}, expected 0 or more")
    return value


def _tables(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--table",
        dest="tables",
        action="extend",
        nargs="+",
        metavar="T",
        help='a source table as PostgreSQL names it (public.orders, public."Mixed Case": its snapshot, '
        "history and change store) or a table's path in the lake, such as bronze/change_events; "
        "repeatable (default: every Delta table of the lake)",
    )


def _wait(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait", type=float, default=0.0, metavar="SECONDS", help="wait this long for another run's lock"
    )


def _as_of(args: argparse.Namespace) -> int:
    from resolver.ops.timetravel import as_of, history_table, point

    at = point(time=args.time, lsn=args.lsn)  # every check first, before Spark starts
    path = history_table(args.lake, args.table) if args.lake is not None else None
    check_output(args)
    started = time.monotonic()
    spark = session(args)
    lake, table = (args.lake, args.table) if path is not None else _located(spark, args.table)
    path = history_table(lake, table, spark)
    print(f"resolver: {table} as of {at} from {path}", file=sys.stderr)
    rows = as_of(spark, lake, table, time=at.time, lsn=at.lsn)
    written, printed = f"row(s) of {args.table} as of {at}", f"row(s) in {args.table} as of {at}"
    print_or_write(rows, args, _key(spark, path, rows.columns), written, printed)
    print(f"elapsed {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


def _located(spark: SparkSession, name: str) -> tuple[str, str]:
    """The lake and source table of a table's catalog name (``resolver.lake.catalog.locate``)."""
    from resolver.lake.catalog import locate

    return locate(spark, name)


def _key(spark: SparkSession, path: str, columns: Sequence[str]) -> list[str]:
    """The table's key columns (its ``resolver.key`` property), to print rows in key order."""
    import json

    from delta.tables import DeltaTable

    from resolver.lake.folders import KEY_PROPERTY

    detail = DeltaTable.forPath(spark, path).detail().select("properties").first()
    key = json.loads((detail["properties"] if detail else {}).get(KEY_PROPERTY, "[]"))
    return [k for k in key if k in columns] or [columns[0]]


def _lake_and_tables(args: argparse.Namespace) -> tuple[SparkSession, list[str]]:
    """The session and the lake's tables the command works on: a local lake's are listed before Spark starts
    (a wrong name fails fast), a URI lake's through Spark's file systems once it runs."""
    from resolver.lake.lake_tables import select_tables

    if args.lake is None:  # the tables by their catalog names: the lake is where they are
        if not args.tables:
            raise ConfigError(
                f"{args.command}: found neither --lake nor --table, expected --lake DIR, or --table with the "
                "tables' catalog names"
            )
        spark = session(args)
        located = [_located(spark, name) for name in args.tables]
        lakes = sorted({lake for lake, _ in located})
        if len(lakes) > 1:
            raise ConfigError(
                f"{args.command}: found tables of {len(lakes)} lakes ({', '.join(lakes)}), expected one"
            )
        args.lake = lakes[0]
        args.tables = [table for _, table in located]
        if not is_uri(args.lake):
            return spark, select_tables(args.lake, args.tables)
    if is_uri(args.lake):
        from resolver.files.hadoop_files import HadoopFiles

        spark = session(args)
        return spark, select_tables(args.lake, args.tables, HadoopFiles(spark))
    tables = select_tables(args.lake, args.tables)
    return session(args), tables


def _optimize(args: argparse.Namespace) -> int:
    from resolver.lake.lock import Taker, lake_lock
    from resolver.ops.maintenance import optimize

    started = time.monotonic()
    spark, tables = _lake_and_tables(args)
    print(f"resolver: optimizing {len(tables)} Delta table(s) of {args.lake}", file=sys.stderr)
    with lake_lock(args.lake, Taker.of_session(f"optimize-{os.getpid()}", spark), args.wait):
        done = optimize(spark, args.lake, tables)
    header = ["table", "layout", "by", "files before", "removed", "added", "files after"]
    lines = [
        [
            t["table"],
            t["layout"],
            ", ".join(t["columns"]) or "-",
            *(str(t[k]) for k in ("files_before", "files_removed", "files_added", "files_after")),
        ]
        for t in done
    ]
    for line in render(header, lines):
        print(line)
    for t in done:
        if t["note"]:
            print(f"resolver: note: {t['table']}: {t['note']}", file=sys.stderr)
    before, after = sum(t["files_before"] for t in done), sum(t["files_after"] for t in done)
    print(f"{len(done)} table(s): {before} file(s) -> {after}")
    print(f"elapsed {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


def _vacuum(args: argparse.Namespace) -> int:
    from contextlib import nullcontext

    from resolver.lake.lock import Taker, lake_lock
    from resolver.ops.maintenance import check_retention, vacuum

    check_retention(args.retain_hours, args.force)  # before Spark starts
    started = time.monotonic()
    spark, tables = _lake_and_tables(args)
    what = "listing the files vacuum would delete in" if args.dry_run else "vacuuming"
    print(
        f"resolver: {what} {len(tables)} Delta table(s) of {args.lake}, keeping {args.retain_hours:g} hours",
        file=sys.stderr,
    )
    lock = (
        nullcontext()
        if args.dry_run
        else lake_lock(args.lake, Taker.of_session(f"vacuum-{os.getpid()}", spark), args.wait)
    )
    with lock:
        done = vacuum(spark, args.lake, args.retain_hours, tables, args.dry_run, args.force)
    if args.dry_run:
        lines = [[t["table"], str(len(t["files_to_delete"]))] for t in done]
        header = ["table", "files to delete"]
    else:
        lines = [[t["table"], "?" if t["files_deleted"] is None else str(t["files_deleted"])] for t in done]
        header = ["table", "files deleted"]
    for line in render(header, lines):
        print(line)
    root = os.path.abspath(args.lake)
    relative = not is_uri(args.lake)
    for t in done:
        for f in t["files_to_delete"]:
            print(f"would delete {os.path.relpath(f, root) if relative and os.path.isabs(f) else f}")
    print(f"elapsed {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0
