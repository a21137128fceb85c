"""The ``resolver`` command line: a thin layer over the library calls.

Exit codes (the same for every command):

* 0: done; every valid record was applied (quarantined records are reported, not fatal), or nothing new;
* 1: an unexpected failure (one line on stderr; ``--debug`` shows the traceback);
* 2: a misconfiguration or a batch refused before anything was written (one line on stderr saying what
  was found and what was expected);
* 3: ``resolver run``: some tables failed and were named, the other tables were applied; the next run
  applies the failed tables' batches again;
* 4: the lake is locked by another run (``--wait SECONDS`` to wait for it).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence

from resolver.cli.spark_options import add_spark_arguments, session
from resolver.errors import ResolverError
from resolver.models import Format

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_PARTIAL, EXIT_BUSY = 0, 1, 2, 3, 4


Handler = Callable[[argparse.Namespace], int]


def _parser() -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    """The program's parser and each command's handler."""
    from resolver.cli.capture_command import add_capture, capture
    from resolver.cli.changes_command import add_changes, changes_command
    from resolver.cli.commands import register
    from resolver.cli.run_command import add_run, run

    parser = argparse.ArgumentParser(
        prog="resolver",
        description="Resolve PostgreSQL change streams (wal2json, Debezium) into Delta Lake tables.",
    )
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_ingest(commands)
    add_run(commands)
    add_capture(commands)
    _add_schemas(commands)
    add_changes(commands)
    handlers: dict[str, Handler] = {
        "ingest": _ingest,
        "run": run,
        "capture": capture,
        "schemas": _schemas,
        "changes": changes_command,
    }
    handlers.update(register(commands))
    return parser, handlers


def _add_ingest(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ingest = commands.add_parser(
        "ingest",
        help="ingest change-stream files (wal2json, Debezium JSON) as one batch into a lake",
        description="Read wal2json or Debezium files (one batch, in the order given), validate every "
        "record, append new change events to <lake>/bronze/change_events and bad records to "
        "<lake>/quarantine, then bring each table's snapshot <lake>/silver/<schema>.<table> and history "
        "<lake>/silver/<schema>.<table>__history up to date. Running a batch again, or batches in any "
        "order, gives the same tables.",
        epilog="examples:\n"
        "  resolver ingest samples/wal2json-v2 --lake lake\n"
        "  resolver ingest landing/0001.json landing/0002.json --lake lake --format wal2json-v1 "
        "--schemas schemas/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ingest.add_argument(
        "files", nargs="+", metavar="FILE", help="wal2json or Debezium files, or folders of them"
    )
    ingest.add_argument("--lake", required=True, metavar="DIR", help="lake folder (created if missing)")
    ingest.add_argument(
        "--format",
        choices=[f.value for f in Format],
        help="format of the files (default: detected from each file's first record)",
    )
    ingest.add_argument("--schemas", metavar="DIR", help="folder of per-table schema YAML files (optional)")
    ingest.add_argument(
        "--catalog",
        metavar="CATALOG.SCHEMA",
        help="register every table of the lake by name there (spark_catalog.cdc; docs/cluster.md)",
    )
    ingest.add_argument(
        "--freshness",
        type=float,
        metavar="SECONDS",
        help="let a table with fewer than 10,000 events waiting leave them in bronze, its silver tables "
        "unwritten, until the oldest have waited this long (docs/silver.md, Tables that wait); without it, "
        "every table is brought up to date, those that waited included",
    )
    ingest.add_argument("--json", action="store_true", help="print the summary as JSON (stdout)")
    _policy_arguments(ingest)
    add_spark_arguments(ingest)


def _add_schemas(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    schemas = commands.add_parser(
        "schemas",
        help="write and check per-table schema files (the schema registry)",
        description="The schema registry: one <schema>.<table>.yaml per table (docs/schema-evolution.md).",
    )
    sub = schemas.add_subparsers(dest="action", required=True)
    infer = sub.add_parser(
        "infer",
        help="write a schema file per table from wal2json or Debezium files",
        description="Read wal2json or Debezium files (no Spark) and write one <schema>.<table>.yaml per"
        " table: columns in the order they first appear, their PostgreSQL and Spark types, and the "
        "primary key the stream reports (or the replica identity). Edit them, keep them in version "
        "control, and pass the folder to 'resolver ingest --schemas'. A type written there is pinned: "
        "remove it to let the column follow the stream.",
        epilog="examples:\n"
        "  resolver schemas infer samples/wal2json-v2 --out schemas/\n"
        "  resolver schemas infer landing/*.json --format wal2json-v1 --out schemas/ --overwrite",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    infer.add_argument(
        "files", nargs="+", metavar="FILE", help="wal2json or Debezium files, or folders of them"
    )
    infer.add_argument(
        "--format",
        choices=[f.value for f in Format],
        help="format of the files (default: detected from each file's first record)",
    )
    infer.add_argument("--out", required=True, metavar="DIR", help="folder to write the files to")
    infer.add_argument("--overwrite", action="store_true", help="replace files that exist")
    check = sub.add_parser(
        "check",
        help="validate a folder of schema files",
        description="Validate every schema file of a folder: YAML, keys (with 'did you mean'), Spark types, "
        "primary_key and renamed_from consistency. With --lake, also that the key and renamed_from names are "
        "columns of the lake's tables.",
        epilog="examples:\n  resolver schemas check schemas/\n  resolver schemas check schemas/ --lake lake",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("folder", metavar="DIR")
    check.add_argument("--lake", metavar="DIR", help="also check names against this lake's tables")


def _policy_arguments(parser: argparse.ArgumentParser) -> None:
    from resolver.config.policy import Policy

    values = [p.value for p in Policy]
    parser.add_argument(
        "--unknown-tables",
        choices=values,
        default="evolve",
        help="a table without a schema file in --schemas: evolve (take it, the default), fail the batch, "
        "or quarantine its events",
    )
    parser.add_argument(
        "--unknown-columns",
        choices=values,
        default="evolve",
        help="a column a table's schema file does not list (default evolve; a file's unknown_columns wins)",
    )
    parser.add_argument(
        "--unsafe-type-changes",
        choices=[Policy.FAIL.value, Policy.QUARANTINE.value],
        default="fail",
        help="a column type the lake cannot widen to (default fail; a file's unsafe_type_change wins)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    from resolver.lake.lock import LakeBusy

    parser, handlers = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command not in ("schemas", "capture") or getattr(args, "lake", None):  # these run Spark
            from resolver.spark.runtime import check_local_spark

            check_local_spark()
        try:
            return handlers[args.command](args)
        finally:
            if "pyspark" in sys.modules:  # a JVM that makes the class archive writes it as it ends
                from resolver.spark.driver_jvm import finish_driver

                finish_driver()
    except LakeBusy as e:
        print(f"resolver: busy: {e}", file=sys.stderr)
        return EXIT_BUSY
    except ResolverError as e:
        print(f"resolver: error: {e}", file=sys.stderr)
        return EXIT_CONFIG
    except Exception as e:  # one clear line, not a JVM stack trace
        if args.debug:
            raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(
            f"resolver: failed: {type(e).__name__}: {first} (rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return EXIT_FAILED


def _ingest(args: argparse.Namespace) -> int:
    from resolver.batch.ingest import ingest
    from resolver.config.batch_options import BatchOptions
    from resolver.files.input_files import list_files, resolve_format
    from resolver.paths import is_uri

    remote = any(is_uri(f) for f in args.files)  # listed through Spark's file systems, once it runs
    if not remote:  # fail fast on bad input or schema files, before starting Spark
        files = list_files(args.files)
        fmt = resolve_format(files, args.format)
    from resolver.catalog_target import Catalog

    catalog = Catalog.parse(args.catalog) if args.catalog else None
    from resolver.config.batch_options import Freshness

    freshness = Freshness(args.freshness) if args.freshness is not None else None  # fails fast: one line
    schemas = None
    if args.schemas is not None:
        from resolver.config.tableschema import load_schemas

        schemas = load_schemas(args.schemas)
        print(f"resolver: {len(schemas)} table schema file(s) valid in {args.schemas}", file=sys.stderr)
    started = time.monotonic()
    from resolver.spark.driver_jvm import DriverJvm

    spark = session(args, jvm=DriverJvm.for_input(args.files), lake=args.lake)
    if remote:
        from resolver.files.hadoop_files import input_of

        _, files, fmt = input_of(spark, args.files, args.format)
    how = "" if args.format else " (detected)"
    print(f"resolver: ingesting {len(files)} file(s) as {fmt.value}{how} into {args.lake}", file=sys.stderr)
    from resolver.config.policy import Policies

    policies = Policies(
        unknown_table=args.unknown_tables,
        unknown_columns=args.unknown_columns,
        unsafe_type_change=args.unsafe_type_changes,
    )
    from resolver.lake.lock import Taker, lake_lock

    with lake_lock(args.lake, Taker.of_session(f"ingest-{os.getpid()}", spark)):
        options = BatchOptions(policies=policies, catalog=catalog, freshness=freshness)
        summary = ingest(spark, files, args.lake, fmt, schemas, options)
    unapplied = [t for t in summary.tables if t.error]
    for t in unapplied:  # their events are in bronze: the same files ingested again after the fix apply them
        print(f"resolver: table {t.table} not applied: {t.error}", file=sys.stderr)
    status = EXIT_PARTIAL if unapplied else EXIT_OK
    if args.json:
        print(summary.model_dump_json(indent=2))
        return status
    for line in summary.lines():
        print(line)
    print(f"elapsed              {time.monotonic() - started:.1f} s")
    return status


def _schemas(args: argparse.Namespace) -> int:
    from resolver.config import registry

    if args.action == "infer":
        found = registry.infer_schemas(args.files, args.format)
        for path in registry.write_schemas(found, args.out, overwrite=args.overwrite):
            print(path)
        print(f"resolver: wrote {len(found)} schema file(s) to {args.out}", file=sys.stderr)
        return 0
    lake_columns = _lake_columns(args.lake) if args.lake else None
    schemas = registry.check_schemas(args.folder, lake_columns)
    print(f"{len(schemas)} schema file(s) valid in {args.folder}")
    return 0


def _lake_columns(lake: str) -> dict[str, list[str]]:
    """Each silver table's source columns (its technical ones left out)."""
    from resolver.lake.folders import HISTORY, inside, silver_tables

    tables = {name: table for name, table in silver_tables(lake).items() if not name.endswith(HISTORY)}
    if not tables:
        return {}
    from resolver.spark.session import local_session

    spark = local_session()
    out = {}
    for name, table in tables.items():
        cols = spark.read.format("delta").load(inside(lake, "silver", name)).columns
        out[table] = [c for c in cols if not c.startswith("__")]
    return out
