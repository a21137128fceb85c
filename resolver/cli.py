"""The ``resolver`` command line: a thin layer over the library calls.

Exit codes: 0 when every valid record was applied (quarantined records are reported, not fatal); 2 for a
misconfiguration (one line on stderr saying what was found and what was expected); 1 for any other failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from resolver.errors import ResolverError
from resolver.models import Format

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="resolver", description="Resolve PostgreSQL wal2json change streams into Delta Lake tables."
    )
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True)
    ingest = commands.add_parser(
        "ingest",
        help="ingest wal2json files as one batch into a lake",
        description="Read wal2json files (one batch, in the order given), validate every record, append new "
        "change events to <lake>/bronze/change_events and bad records to <lake>/quarantine, then bring each "
        "table's snapshot <lake>/silver/<schema>.<table> and history <lake>/silver/<schema>.<table>__history "
        "up to date. Running a batch again, or batches in any order, gives the same tables.",
        epilog="examples:\n"
        "  resolver ingest samples/wal2json-v2 --lake lake --format wal2json-v2\n"
        "  resolver ingest landing/0001.json landing/0002.json --lake lake --format wal2json-v1 "
        "--schemas schemas/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ingest.add_argument("files", nargs="+", metavar="FILE", help="wal2json files, or folders of them")
    ingest.add_argument("--lake", required=True, metavar="DIR", help="lake folder (created if missing)")
    ingest.add_argument(
        "--format",
        required=True,
        choices=[f.value for f in Format],
        help="wal2json format-version of the files",
    )
    ingest.add_argument("--schemas", metavar="DIR", help="folder of per-table schema YAML files (optional)")
    ingest.add_argument(
        "--master", default="local[2]", help="Spark master for the local session (default local[2])"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _ingest(args)
    except ResolverError as e:
        print(f"resolver: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # one clear line, not a JVM stack trace
        if args.debug:
            raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(
            f"resolver: failed: {type(e).__name__}: {first} (rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


def _ingest(args: argparse.Namespace) -> int:
    from resolver.bronze import ingest
    from resolver.read import list_files
    from resolver.session import local_session

    files = list_files(args.files)  # fail fast on bad input or schema files, before starting Spark
    schemas = None
    if args.schemas is not None:
        from resolver.tableschema import load_schemas

        schemas = load_schemas(args.schemas)
        print(f"resolver: {len(schemas)} table schema file(s) valid in {args.schemas}", file=sys.stderr)
    started = time.monotonic()
    print(f"resolver: ingesting {len(files)} file(s) as {args.format} into {args.lake}", file=sys.stderr)
    spark = local_session(master=args.master)
    summary = ingest(spark, files, args.lake, args.format, schemas)
    for line in summary.lines():
        print(line)
    print(f"elapsed              {time.monotonic() - started:.1f} s")
    return 0
