"""Keep a lake's Delta tables fast and small: ``optimize`` (compaction, Z-order) and ``vacuum``.
 Every batch adds a few small files to each table it touches; reads and MERGEs slow down with the number of
files. ``optimize`` rewrites the small files of every table of the lake into large ones, sorted by the key
for the tables that are read by key; ``vacuum`` deletes the files no Delta version younger than the
retention uses any more. Neither changes a row of any table, and neither changes what
``resolver.ops.timetravel.as_of`` returns (it reads the history table, not Delta time travel).
When to run them and what they cost: ``docs/operations.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import Row, SparkSession
from pyspark.sql import types as T

from resolver.errors import ConfigError
from resolver.files.hadoop_files import lake_folders
from resolver.lake import delta
from resolver.lake.folders import (
    KEY_PROPERTY,
    TABLE_PROPERTY,
    Lake,
    inside,
)
from resolver.lake.lake_tables import select_tables
from resolver.lake.markers import marker_of, read_markers, write_markers
from resolver.lake.sidecars import drop_stale_sidecars
from resolver.ops.upgrades import partition_history, rewrite_timestamps
from resolver.spark import sql
from resolver.spark.session_settings import restore_settings, set_settings
from resolver.tablestate import Marker

__all__ = ["DEFAULT_RETAIN_HOURS", "check_retention", "optimize", "vacuum"]

DEFAULT_RETAIN_HOURS = 168.0
"""Delta's default ``delta.deletedFileRetentionDuration`` (7 days), the shortest retention allowed without
``force``."""
_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
_LISTING = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
_DEFAULT_LISTING = "10000"
_NO_STATS = "DELTA_ZORDERING_ON_COLUMN_WITHOUT_STATS"
_PARALLEL_TABLES = 4
_RECENT = 10
"""Commits of a table's history read to find its last Z-order."""


#: where the lake keeps its change stores (a table name of ``select_tables``)
_CHANGES = "_resolver/changes/"


def optimize(spark: SparkSession, lake: str, tables: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Compact the lake's Delta tables (all of them, or those ``tables`` names; see ``select_tables``).

    Each table's small files are rewritten into files of up to 1 GB (Delta's
    ``spark.databricks.delta.optimize.maxFileSize``), in one Delta commit per table that changes no row:

    * a table with liquid clustering (``cluster_by_key``) is clustered by its clustering columns;
    * a snapshot or history table is Z-ordered by its key (the table property ``resolver.key``), and a
      change store by its ``__key`` fields, so reads and MERGEs by key skip most files. Z-order rewrites
      every file of the table (``docs/operations.md``), so a table nothing was written to since its last
      Z-order is left alone; a key column Delta keeps no statistics for (past the first 32 columns) gets
      plain compaction instead. Both say so in ``note``;
    * the other tables (``bronze/change_events``, ``quarantine``, ``_resolver/...``) are compacted.

    Returns one dict per table, sorted by table: ``table`` (path in the lake), ``layout`` (``clustering``,
    ``z-order`` or ``compaction``), ``columns`` (clustering or Z-order columns), ``files_before``,
    ``files_removed``, ``files_added``, ``files_after`` (from the OPTIMIZE result) and ``note``.
    Run it when no batch is being applied (``resolver optimize`` takes the lake's lock): a MERGE that
    commits during the rewrite of its files makes one of the two fail.

    Example::

        from resolver import local_session
        from resolver.ops.maintenance import optimize
        for t in optimize(local_session(), "lake"):
            print(t["table"], t["layout"], t["files_before"], "->", t["files_after"])
    """
    chosen = select_tables(lake, tables, lake_folders(spark, lake))
    return _kept_fresh(spark, lake, chosen, _optimize)


def _optimize(spark: SparkSession, path: str, name: str) -> dict[str, Any]:
    table = DeltaTable.forPath(spark, path)
    stamped = rewrite_timestamps(spark, table, path)
    detail = table.detail().select("clusteringColumns", "properties", "numFiles").first()
    assert detail is not None
    clustering = list(detail["clusteringColumns"] or [])
    before = int(detail["numFiles"])
    partitioned = "" if clustering else partition_history(spark, table, path)
    start = before  # the files the OPTIMIZE finds: after a rewrite that partitioned the history, its own
    if partitioned:
        start = int(table.detail().select("numFiles").first()[0])  # type: ignore[index]
    rewritten = "; ".join(n for n in (stamped, partitioned) if n)
    zorder = [] if clustering else _zorder_columns(table, detail["properties"] or {})
    note = ""
    if clustering:
        layout, columns = "clustering", clustering
    elif zorder:
        layout, columns = "z-order", _shown(zorder)
    else:
        layout, columns = "compaction", []
    if zorder and _zordered(table, zorder):
        metrics: Row | tuple[int, int] = (0, 0)
        note = "nothing written since its last Z-order: left as it is"
    else:
        try:
            metrics = _run_optimize(table, zorder)
        except AnalysisException as e:
            if e.getCondition() != _NO_STATS:
                raise
            note = f"no statistics for {', '.join(_shown(zorder))}: compacted without Z-order"
            layout, columns = "compaction", []
            metrics = _run_optimize(table, [])
    added, removed = int(metrics[0] or 0), int(metrics[1] or 0)
    return {
        "table": name,
        "layout": layout,
        "columns": columns,
        "files_before": before,
        "files_removed": removed,
        "files_added": added,
        "files_after": start - removed + added,
        "note": "; ".join(n for n in (rewritten, note) if n),
    }


def _run_optimize(table: DeltaTable, zorder: list[str]) -> Row:
    """One OPTIMIZE (Z-ordered by ``zorder`` when given; clustering tables cluster on a plain OPTIMIZE):
    its files added and removed."""
    builder = table.optimize()
    result = builder.executeZOrderBy(*zorder) if zorder else builder.executeCompaction()
    metrics = result.select("metrics.numFilesAdded", "metrics.numFilesRemoved").first()
    assert metrics is not None
    return metrics


def _zordered(table: DeltaTable, zorder: list[str]) -> bool:
    """Whether the table's last commit that wrote data is an OPTIMIZE Z-ordered by ``zorder`` (vacuum's
    and table-property commits write none, e.g. a change store's ``resolver.appliedVersion`` marker):
    Z-ordering it again would rewrite every file for nothing."""
    recent = table.history(_RECENT).select("operation", "operationParameters").collect()
    for commit in recent:
        if commit["operation"] not in ("VACUUM START", "VACUUM END", "SET TBLPROPERTIES"):
            by = (commit["operationParameters"] or {}).get("zOrderBy", "[]")
            # Delta records a name quoted only where it has a dot: compare the names without quotes
            return bool(commit["operation"] == "OPTIMIZE" and _shown(json.loads(by)) == _shown(zorder))
    return False


def _shown(columns: list[str]) -> list[str]:
    """Z-order columns as a report shows them: without quotes (``__key.id``)."""
    return [c.replace("`", "") for c in columns]


def _zorder_columns(table: DeltaTable, properties: dict[str, str]) -> list[str]:
    """The key columns to Z-order a resolver table by: top-level in a snapshot or history, the ``__key``
    struct's fields in a change store; none for a table without a key (or whose key columns are gone).
    Names are quoted (``sql.ident``); a key column with a backtick in its name is left out (Delta 4.0's
    Z-order cannot parse it back)."""
    if KEY_PROPERTY not in properties:
        return []
    key = [k for k in json.loads(properties[KEY_PROPERTY]) if "`" not in k]
    fields = {f.name: f.dataType for f in table.toDF().schema.fields}
    store = fields.get("__key")
    if isinstance(store, T.StructType):
        return [f"__key.{sql.ident(k)}" for k in key if k in store.names]
    return [sql.ident(k) for k in key if k in fields]


def check_retention(retain_hours: float, force: bool = False) -> None:
    """Refuse (``ConfigError``, one line) a negative retention, or one shorter than Delta's default of 168
    hours without ``force``. No Spark."""
    if retain_hours < 0:
        raise ConfigError(f"vacuum: found a retention of {retain_hours:g} hours, expected 0 or more")
    if retain_hours < DEFAULT_RETAIN_HOURS and not force:
        raise ConfigError(
            f"vacuum: found a retention of {retain_hours:g} hours, expected at least "
            f"{DEFAULT_RETAIN_HOURS:g} (Delta's delta.deletedFileRetentionDuration default): a shorter one "
            "deletes files that running queries and Delta time travel to recent versions still read, and "
            "breaks them; pass force=True (--force) only when nothing reads or writes the lake"
        )


def vacuum(
    spark: SparkSession,
    lake: str,
    retain_hours: float = DEFAULT_RETAIN_HOURS,
    tables: Sequence[str] | None = None,
    dry_run: bool = False,
    force: bool = False,
) -> list[dict[str, Any]]:
    """Delete the files of the lake's Delta tables (all, or those ``tables`` names; see ``select_tables``)
    that no table version of the last ``retain_hours`` uses: files that ``optimize``, MERGEs and deletes
    replaced. Rows are never changed; Delta time travel (``VERSION AS OF``) to versions older than the
    retention stops working. ``resolver.ops.timetravel.as_of`` reads the history table's current version, so
    what it returns never changes.

    A retention under 168 hours (Delta's ``delta.deletedFileRetentionDuration`` default) is refused with
    ``ConfigError`` unless ``force=True``: it would delete files that a running query, a concurrent writer
    or a time-travel read still needs. A table whose own ``delta.deletedFileRetentionDuration`` is longer
    than ``retain_hours`` is refused by Delta itself unless ``force=True``.

    ``dry_run`` deletes nothing and lists the files that would be deleted. Returns one dict per table,
    sorted by table: ``table``, ``retain_hours``, ``dry_run``, ``files_deleted`` (0 on a dry run; None
    when Delta's vacuum logging is off) and ``files_to_delete`` (absolute paths, on a dry run).

    Example::

        from resolver import local_session
        from resolver.ops.maintenance import vacuum
        spark = local_session()
        for t in vacuum(spark, "lake", dry_run=True):
            print(t["table"], len(t["files_to_delete"]))
        vacuum(spark, "lake")                       # keeps 7 days of Delta versions
    """
    check_retention(retain_hours, force)
    chosen = select_tables(lake, tables, lake_folders(spark, lake))
    settings = {_LISTING: str(_listing_parallelism(spark))}
    if force:
        settings[_CHECK] = "false"
    with _session_conf(spark, settings):
        if dry_run:
            return _each(
                chosen, lambda name: _vacuum(spark, inside(lake, *name.split("/")), name, retain_hours, True)
            )

        def vacuum_one(spark: SparkSession, path: str, name: str) -> dict[str, Any]:
            return _vacuum(spark, path, name, retain_hours, False)

        return _kept_fresh(spark, lake, chosen, vacuum_one)


def _listing_parallelism(spark: SparkSession) -> int:
    """Partitions for VACUUM's file listing: Delta repartitions it into
    ``spark.sql.sources.parallelPartitionDiscovery.parallelism`` (10,000 by default), thousands of tasks per
    table that keep a small session busy for minutes. Four per core is plenty; a lower setting is kept."""
    current = int(spark.conf.get(_LISTING) or _DEFAULT_LISTING)
    return min(current, 4 * max(1, spark.sparkContext.defaultParallelism))


@contextmanager
def _session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Set session settings for the block, then put back what the session had."""
    had = set_settings(spark, settings)
    try:
        yield
    finally:
        restore_settings(spark, had)


def _vacuum(spark: SparkSession, path: str, name: str, retain_hours: float, dry_run: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"table": name, "retain_hours": retain_hours, "dry_run": dry_run}
    if dry_run:
        rows = spark.sql(f"VACUUM {sql.delta_path(path)} RETAIN {retain_hours:.6f} HOURS DRY RUN").collect()
        files = sorted(str(r["path"]).removeprefix("file:") for r in rows)
        return {**out, "files_deleted": 0, "files_to_delete": files}
    table = DeltaTable.forPath(spark, path)
    table.vacuum(retain_hours)
    last = table.history(1).select("operation", "operationMetrics").first()
    deleted = None
    if last is not None and last["operation"] == "VACUUM END":
        deleted = int((last["operationMetrics"] or {}).get("numDeletedFiles", 0))
    return {**out, "files_deleted": deleted, "files_to_delete": []}


def _kept_fresh(
    spark: SparkSession,
    lake: str,
    chosen: list[str],
    work: Callable[[SparkSession, str, str], dict[str, Any]],
) -> list[dict[str, Any]]:
    """``work(spark, path, name)`` on each of the lake's tables ``chosen`` (``_each``), whose commits change
    no row (OPTIMIZE, VACUUM); a source table whose marker was fresh before (its silver tables held all its
    change store held) keeps it fresh: the lake's markers name its store's version after ``work``, and the
    silver versions it recorded move with them (``Marker.silver``: a later batch tells from them that no
    batch wrote the silver tables since). Otherwise the next batch would find the marker stale and resolve
    the table from its held changes in full. One commit of the lake's markers, after every table."""
    by_source = _sources(spark, lake, chosen)
    before = {t: _state(spark, lake, t) for t in sorted(set(by_source.values()))}
    out = _each(chosen, lambda name: work(spark, inside(lake, *name.split("/")), name))
    moved = {}
    for table, was in before.items():
        if was is None:
            continue
        marker, versions = was
        after, _ = _versions(spark, lake, table)
        silver = marker.silver
        if silver is not None:  # a version recorded before the work moves with it
            silver = (
                after[1] if silver[0] == versions[1] else silver[0],
                after[2] if silver[1] == versions[2] else silver[1],
            )
        kept = replace(marker, applied=after[0], on_store=False, silver=silver)
        if kept != replace(marker, on_store=False) or after[0] != versions[0]:
            moved[table] = kept
    write_markers(spark, Lake.at(lake).markers, moved)
    drop_stale_sidecars(Lake.at(lake).root)  # OPTIMIZE and VACUUM commit, and may write a checkpoint
    return out


def _sources(spark: SparkSession, lake: str, chosen: list[str]) -> dict[str, str]:
    """The chosen tables that are a source table's (its change store, history or snapshot): path -> the
    source table (``TABLE_PROPERTY``)."""
    out = {}
    for name in chosen:
        if not (name.startswith(_CHANGES) or name.startswith("silver/")):
            continue
        props, _ = delta.properties_and_size(DeltaTable.forPath(spark, inside(lake, *name.split("/"))))
        if props.get(TABLE_PROPERTY):
            out[name] = props[TABLE_PROPERTY]
    return out


def _state(spark: SparkSession, lake: str, table: str) -> tuple[Marker, tuple[int, int, int]] | None:
    """A source table's marker, when fresh, and its tables' versions (``_versions``); None otherwise."""
    versions, props = _versions(spark, lake, table)
    if versions[0] < 0:
        return None
    marker = marker_of(props, read_markers(spark, Lake.at(lake).markers).get(table))
    return (marker, versions) if marker.fresh(versions[0]) else None


def _versions(spark: SparkSession, lake: str, table: str) -> tuple[tuple[int, int, int], dict[str, str]]:
    """A source table's change store's, history's and snapshot's latest versions (-1: none), and its
    store's properties."""
    paths = Lake.at(lake).table(table)
    versions = []
    props: dict[str, str] = {}
    for i, path in enumerate((paths.changes, paths.history, paths.snapshot)):
        if not DeltaTable.isDeltaTable(spark, path):
            versions.append(-1)
            continue
        found, _ = delta.properties_and_size(DeltaTable.forPath(spark, path))  # its log's latest commit
        props = found if i == 0 else props
        versions.append(delta.version(DeltaTable.forPath(spark, path)))
    return (versions[0], versions[1], versions[2]), props


def _each(names: list[str], work: Callable[[str], dict[str, Any]]) -> list[dict[str, Any]]:
    """``work`` on every table, a few at a time: tables are independent, their jobs overlap on the session."""
    with ThreadPoolExecutor(max_workers=max(1, min(_PARALLEL_TABLES, len(names)))) as pool:
        return list(pool.map(work, names))
