"""Bring one table's silver tables up to date with one batch (``apply_table``): store the batch's
changes, find the affected keys, resolve them, diff and MERGE history and snapshot."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver import delta, sql
from resolver.delta import set_properties
from resolver.explode import TableLayout, explode_events
from resolver.lake import (
    APPLIED_PROPERTY,
    DROPS_PROPERTY,
    HOLDS_PROPERTY,
    SCHEMA_VERSION_PROPERTY,
    changes_path,
    history_path,
    snapshot_path,
)
from resolver.merge import KeyRange, batch_counts, diff_rows, key_ranges, keys_of, merge_changes, range_sql
from resolver.models import TableSummary
from resolver.quarantine import bad_value_records
from resolver.resolve import collapse_untracked, linked_keys, resolve_versions
from resolver.schemalog import write_schema_log
from resolver.store import is_move, key_hash, rekey, rescan_drops
from resolver.tables import open_tables
from resolver.truncates import defer_truncates, pending_truncates

log = logging.getLogger(__name__)


@contextmanager
def _step(table: str, name: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    log.debug("%s: %s took %.2f s", table, name, time.perf_counter() - start)


def apply_table(
    spark: SparkSession, events: DataFrame, lake: str, meta: dict[str, Any], layout: TableLayout | None
) -> tuple[TableSummary, DataFrame | None]:
    """Bring one table's silver tables up to date; also returns its quarantine records, if any."""
    name = meta["table"]
    if layout is None:
        defer_truncates(spark, events, lake, name)
        return empty_summary(name, meta, None), None
    with _step(name, "tables"):
        store, history, snapshot = open_tables(spark, lake, layout)
        rekeyed = rekey(spark, lake, layout, store, history, snapshot)
        if rekeyed:  # the tables' schemas changed under these handles
            store = DeltaTable.forPath(spark, changes_path(lake, name))
            history = DeltaTable.forPath(spark, history_path(lake, name)) if history is not None else None
            snapshot = DeltaTable.forPath(spark, snapshot_path(lake, name)) if snapshot is not None else None
    with _step(name, "explode"):
        rows = explode_events(events, layout).localCheckpoint(eager=True)
    seq = ["__lsn", "__pos"]
    store_cols = store.toDF().columns
    batch = rows.dropDuplicates(seq).select(*[sql.col(c) for c in store_cols])
    adopted = False
    if not layout.extra["key"]:  # a new table: truncates that came before its first rows
        pending = pending_truncates(spark, lake, name, store.toDF().schema)
        if pending is not None:
            batch, adopted = batch.unionByName(pending), True
    condition = "t.__lsn = s.__lsn AND t.__pos = s.__pos"
    if meta["lo"] is not None:
        condition = f"t.__lsn BETWEEN {int(meta['lo'])} AND {int(meta['hi'])} AND " + condition
    with _step(name, "store merge"):
        inserted, store_version = delta.insert_new(store, batch, condition)
    applied = layout.extra.get("applied", "")
    # the marker's key-change and truncate flags still describe the store before this batch's rows
    flags_hold = applied.isdigit() and int(applied) + 1 == store_version - (1 if inserted else 0)
    if (
        applied.isdigit()
        and int(applied) + 1 == store_version  # nothing was committed to the store since the marker
        and not (rekeyed or adopted or layout.rescan or layout.schema_log)
    ):  # every event of the batch is in the store, and the silver tables hold all the store has
        return _already_applied(rows, layout, meta, store_version)

    all_changes = store.toDF()
    found = rescan_drops(all_changes, layout) if layout.rescan else {}
    if found:  # drops of columns new to the lake (or sent earlier than it knew) found among held inserts
        layout = replace(
            layout,
            drops={
                c: tuple(tuple(p) for p in d["points"]) for c, d in layout.drop_state.items() if d["points"]
            },
        )
        version = int(layout.extra["version"]) + (0 if layout.schema_log else 1)
        more = [
            {"table": name, "change": "dropped", "column": c, "lsn": p[0], "version": version}
            for c, points in sorted(found.items())
            for p in points
        ]
        write_schema_log(spark, lake, [*layout.schema_log, *more])
        layout = replace(
            layout, schema_log=(*layout.schema_log, *more), extra={**layout.extra, "version": str(version)}
        )
    # affected keys: touched by the batch, closed under key changes
    touched = (
        rows.select(key_hash(F.col("__key")).alias("node"))
        .union(rows.select(key_hash(F.col("__old_key")).alias("node")))
        .filter(F.col("node").isNotNull())
        .distinct()
    )
    rounds = 0
    with _step(name, "affected keys"):
        moves = all_changes.filter(is_move()).select(
            "__lsn", "__pos", key_hash(F.col("__old_key")).alias("u"), key_hash(F.col("__key")).alias("v")
        )
        moves = moves.filter(F.col("u").isNotNull() & F.col("v").isNotNull())
        holds = json.loads(layout.extra.get("holds") or "{}")
        if flags_hold and not found and {"moves", "truncates"} <= holds.keys():  # the flags and the batch
            has_moves = bool(holds["moves"]) or not rows.filter(is_move()).isEmpty()
            has_truncates = bool(holds["truncates"] or meta["truncates"] or adopted)
        else:
            held = all_changes.agg(  # one pass: does the store hold a key change, a truncate?
                F.count(F.when(is_move(), 1)).alias("moves"),
                F.count(F.when(F.col("__op") == "truncate", 1)).alias("truncates"),
            ).first()
            has_moves = bool(held and held["moves"])
            has_truncates = bool(held and held["truncates"])
        dropped = any(e["change"] == "dropped" for e in layout.schema_log)  # rows held then lose the column
        ranges: list[KeyRange] = []  # the affected keys' range, as literals Delta skips files with
        if meta["truncates"] or rekeyed or adopted or dropped:
            affected = None  # a truncate touches every key; a new key changes every key
        elif not has_moves:  # the affected keys are the batch's own
            affected = touched.localCheckpoint(eager=True)
            ranges = key_ranges(keys_of(rows, layout.key), layout.key)
        else:
            comps, rounds = linked_keys(moves)
            hit = comps.join(touched, "node", "left_semi").select("comp").distinct()
            linked = comps.join(hit, "comp", "left_semi").select("node")
            affected = touched.union(linked).distinct().localCheckpoint(eager=True)
    with _step(name, "read changes"):
        if affected is None:
            changes = all_changes
        else:  # one scan: each change under both of its keys, kept once if either is affected
            nodes = F.explode(F.array(key_hash(F.col("__key")), key_hash(F.col("__old_key"))))
            held_changes = all_changes
            if ranges:  # no key changes: a change of an affected key names it under __key or __old_key
                held_changes = held_changes.filter(
                    " OR ".join(
                        "(" + " AND ".join(range_sql(ranges, prefix)) + ")"
                        for prefix in ("`__key`.", "`__old_key`.")
                    )
                )
            changes = held_changes.withColumn("node", nodes).join(F.broadcast(affected), "node", "left_semi")
            changes = changes.drop("node")
            if has_truncates:  # a held truncate ends the versions of every key before it
                changes = changes.union(all_changes.filter(F.col("__op") == "truncate"))
            changes = changes.dropDuplicates(seq)
        changes = changes.localCheckpoint(eager=True)
        if affected is not None and has_moves:  # every affected key is named by one of its changes
            ranges = key_ranges(keys_of(changes, layout.key), layout.key)
    with _step(name, "resolve"):
        versions, jump_rounds = resolve_versions(changes, layout, moves=has_moves, truncates=has_truncates)
        rounds += jump_rounds
        if layout.track:
            versions = collapse_untracked(versions, layout)
        versions = versions.withColumn(
            "__kh", key_hash(F.struct(*[sql.col(k) for k in layout.key]))
        ).localCheckpoint(eager=True)

    def of_affected(table: DeltaTable) -> DataFrame:
        df = table.toDF()
        for bound in range_sql(ranges, ""):
            df = df.filter(bound)
        df = df.withColumn("__kh", key_hash(F.struct(*[sql.col(k) for k in layout.key])))
        if affected is not None:
            df = df.join(affected, F.col("__kh") == F.col("node"), "left_semi")
        return df

    hist_changes = snap_changes = None
    if history is not None:
        with _step(name, "read history"):
            hist = of_affected(history)
        h_cols = list(history.toDF().columns)
        with _step(name, "diff history"):
            hist_changes = diff_rows(
                versions, hist, h_cols, ["__kh", "__start_lsn"], [*layout.key, "__start_lsn"]
            ).localCheckpoint(eager=True)
    if snapshot is not None:
        s_cols = snapshot.toDF().columns
        current = versions.filter("__is_current").select("__kh", *[sql.col(c) for c in s_cols])
        # the snapshot itself, not the history's open versions: a run killed between the two MERGEs
        # leaves them apart, and only a diff against the snapshot's own rows completes it
        with _step(name, "read snapshot"):
            was_current = of_affected(snapshot).select("__kh", *[sql.col(c) for c in s_cols])
        with _step(name, "diff snapshot"):
            snap_changes = diff_rows(
                current, was_current, s_cols, ["__kh"], list(layout.key)
            ).localCheckpoint(eager=True)
    with _step(name, "counts"):
        counts = batch_counts(rows, changes, hist_changes, snap_changes, layout)
    if history is not None and hist_changes is not None and counts.get("h_total"):
        with _step(name, "history merge"):
            merge_changes(history, hist_changes, [*layout.key, "__start_lsn"], h_cols, ranges)
    if snapshot is not None and snap_changes is not None and counts.get("s_total"):
        with _step(name, "snapshot merge"):
            merge_changes(snapshot, snap_changes, list(layout.key), s_cols, ranges)
    bad = bad_value_records(rows, layout) if counts.get("bad") else None
    store_props = {}
    if layout.schema_log and layout.extra["key"]:  # existing tables now have this schema version
        store_props[SCHEMA_VERSION_PROPERTY] = layout.extra["version"]
        for path, kept in (
            (history_path(lake, name), history is not None),
            (snapshot_path(lake, name), snapshot is not None),
        ):
            if kept:
                set_properties(spark, path, {SCHEMA_VERSION_PROPERTY: layout.extra["version"]})
    drops = json.dumps(layout.drop_state, sort_keys=True) if layout.drop_state else ""
    if drops and drops != layout.extra.get("drops_was"):
        store_props[DROPS_PROPERTY] = drops
    # the batch's last write: the silver tables now hold everything the store held at store_version
    # (the store takes no other commit during a batch; a commit by anyone else only makes the marker stale)
    store_props[APPLIED_PROPERTY] = str(store_version)
    store_props[HOLDS_PROPERTY] = json.dumps({"moves": has_moves, "truncates": has_truncates})
    set_properties(spark, changes_path(lake, name), store_props)
    return TableSummary(
        table=layout.table,
        events=meta["events"],
        skipped=meta["skipped"],
        inserted=counts.get("s_insert", 0),
        updated=counts.get("s_update", 0),
        deleted=counts.get("s_delete", 0),
        moved=counts.get("moved", 0),
        late=counts.get("late", 0),
        versions_written=counts.get("h_total", 0),
        bad_values=counts.get("bad", 0),
        rounds=rounds,
        notes=list(layout.notes),
    ), bad


def _already_applied(
    rows: DataFrame, layout: TableLayout, meta: dict[str, Any], store_version: int
) -> tuple[TableSummary, DataFrame | None]:
    """The summary of a batch whose every event the store already held, with silver up to date: the
    batch's own moves and bad values (one small aggregate), nothing resolved or written. Its bad values
    are sent to the quarantine again, which keeps one record per file, line and reason."""
    got = rows.agg(
        F.count_distinct(F.when(is_move(), F.struct("__lsn", "__pos"))).alias("moved"),
        F.sum(F.when(F.col("__bad").isNotNull(), F.size("__bad"))).alias("bad"),
    ).first()
    moved, bad = (int(got["moved"] or 0), int(got["bad"] or 0)) if got else (0, 0)
    note = (
        f"every event was already applied (change store version {store_version}, silver tables up to "
        "date): nothing to resolve"
    )
    return TableSummary(
        table=layout.table,
        events=meta["events"],
        skipped=meta["skipped"],
        inserted=0,
        updated=0,
        deleted=0,
        moved=moved,
        late=0,
        versions_written=0,
        bad_values=bad,
        rounds=0,
        notes=[*layout.notes, note],
    ), (bad_value_records(rows, layout) if bad else None)


def empty_summary(table: str, meta: dict[str, Any] | None, error: str | None) -> TableSummary:
    """A table's summary when nothing was applied to it (columns not known yet, or it failed)."""
    return TableSummary(
        table=table,
        events=meta["events"] if meta else 0,
        skipped=meta["skipped"] if meta else 0,
        inserted=0,
        updated=0,
        deleted=0,
        moved=0,
        late=0,
        versions_written=0,
        bad_values=0,
        rounds=0,
        error=error,
    )
