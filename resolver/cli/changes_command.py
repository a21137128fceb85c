"""The ``resolver changes`` command: a silver table's every change since a Delta version or a source LSN,
across renames and type changes (``resolver.ops.changes``). Checks its arguments before Spark starts,
prints the changes (or writes them with ``--out``) and a one-line count. This module imports no Spark."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from resolver.cli.printing import add_output_arguments, check_output, print_or_write
from resolver.cli.spark_options import add_spark_arguments, session
from resolver.errors import ConfigError
from resolver.lsn import format_lsn, parse_lsn

__all__ = ["add_changes", "changes_command"]


@dataclass(frozen=True)
class Since:
    """Where ``--since`` starts: a Delta version (a whole number) or a source LSN (``0/1932D58``)."""

    version: int | None = None
    lsn: int | None = None

    @classmethod
    def parse(cls, text: str) -> Since:
        if "/" in text:
            try:
                return cls(lsn=parse_lsn(text))
            except ValueError:
                raise ConfigError(
                    f"changes: found --since {text!r}, expected an LSN such as 0/1932D58"
                ) from None
        try:
            version = int(text)
        except ValueError:
            raise ConfigError(
                f"changes: found --since {text!r}, expected a Delta version (0, 12) or an LSN (0/1932D58)"
            ) from None
        if version < 0:
            raise ConfigError(f"changes: found --since {version}, expected a version of 0 or more")
        return cls(version=version)

    def __str__(self) -> str:
        if self.version is not None:
            return f"version {self.version}"
        assert self.lsn is not None
        return f"LSN {format_lsn(self.lsn)}"


def add_changes(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    changes = commands.add_parser(
        "changes",
        help="a silver table's every change since a Delta version or a source LSN",
        description="Print (or write) every change of <lake>/silver/<schema>.<table> since a point, with "
        "the table's current column names and types, across renames and type changes. --since VERSION (a "
        "whole number): the table's Delta change feed from that version on (_change_type, "
        "_commit_version, _commit_timestamp); a commit that only rewrote the table for a schema change is "
        "left out. --since LSN (0/1932D58): every version of a row, from the history table, that began or "
        "ended after that LSN (the same whatever order the events reached the lake).",
        epilog="examples:\n"
        "  resolver changes --lake lake --table public.customers --since 0\n"
        "  resolver changes --lake lake --table public.customers --since 0 --history\n"
        "  resolver changes --lake lake --table public.orders --since 0/1932D58 --out o.csv --out-format csv",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    changes.add_argument("--lake", metavar="DIR", help="lake folder (without it, --table is a catalog name)")
    changes.add_argument(
        "--table", required=True, metavar="T", help='source table as PostgreSQL names it: public."Mixed Case"'
    )
    changes.add_argument("--since", required=True, metavar="VERSION|LSN", help="a Delta version or an LSN")
    changes.add_argument(
        "--history", action="store_true", help="the history table's change feed (with --since VERSION)"
    )
    add_output_arguments(changes, "changes", "in commit order")
    add_spark_arguments(changes)


def changes_command(args: argparse.Namespace) -> int:
    from resolver.ops.changes import changes_since_lsn, changes_since_version
    from resolver.ops.timetravel import history_table

    since = Since.parse(args.since)  # every check first, before Spark starts
    if args.history and since.lsn is not None:
        raise ConfigError(
            "changes: found --history with an LSN, expected it with a version (an LSN reads the history)"
        )
    check_output(args)
    if args.lake is not None and (since.lsn is not None or args.history):
        history_table(args.lake, args.table)  # an unknown table: one line, with the lake's tables
    started = time.monotonic()
    print(f"resolver: changes of {args.table} since {since}", file=sys.stderr)
    spark = session(args)
    lake, table = (args.lake, args.table)
    if lake is None:  # the table's catalog name
        from resolver.lake.catalog import locate

        lake, table = locate(spark, args.table)
    if since.lsn is not None:
        rows = changes_since_lsn(spark, lake, table, since.lsn)
        order = ["__start_lsn", "__end_lsn"]
    else:
        assert since.version is not None
        rows = changes_since_version(spark, lake, table, since.version, history=args.history)
        order = ["_commit_version", "_change_type"]
    what = f"change(s) of {args.table} since {since}"
    print_or_write(rows, args, order, what, what)
    print(f"elapsed {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0
