"""The keys a batch affects, and the held changes of those keys: the keys the batch touches, closed under
primary-key changes (connected components of the move graph, ``resolver.table.moves.linked_keys``); a
truncate, a re-key or a dropped column affects every key. Read from the change store in one scan, or, when
the batch only continues what the table held (``current_rows_suffice``), stood in for by the keys' current
rows in the snapshot (``seeded_changes``)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from resolver.plan.tablemeta import TableMeta
from resolver.spark import sql
from resolver.table.explode import is_move
from resolver.table.key_ranges import key_ranges, keys_of, range_sql
from resolver.table.moves import linked_keys
from resolver.table.resolve import Holds, collapse_untracked, resolve_versions
from resolver.table.store import key_hash
from resolver.table.table_steps import Affected, BatchTables, Stored
from resolver.tablelayout import TableLayout

__all__ = ["affected_keys", "current_rows_suffice", "read_changes", "resolve_affected", "seeded_changes"]


def affected_keys(stored: Stored, layout: TableLayout, meta: TableMeta, tables: BatchTables) -> Affected:
    """The batch's affected keys, looked up among the changes the store holds (``stored.held``). When the
    store marker's key-change and truncate flags and its newest keyed LSN still describe the store before
    this batch (``stored.flags_hold``), no scan is needed. Every key is affected when the key columns
    changed or a silver table is new beside the store's rows (``tables.whole``), or the batch brought
    truncates kept from before the table's first rows (``stored.adopted``)."""
    exploded, all_changes, adopted = stored.exploded, stored.held, stored.adopted
    flags_hold, whole = stored.flags_hold, tables.whole
    rows = exploded.rows
    touched = (
        rows.select(key_hash(F.col("__key")).alias("node"))
        .union(rows.select(key_hash(F.col("__old_key")).alias("node")))
        .filter(F.col("node").isNotNull())
        .distinct()
    )
    moves = all_changes.filter(is_move()).select(
        "__lsn", "__pos", key_hash(F.col("__old_key")).alias("u"), key_hash(F.col("__key")).alias("v")
    )
    moves = moves.filter(F.col("u").isNotNull() & F.col("v").isNotNull())
    marker = layout.state.marker
    if flags_hold and marker.flags_known:  # the flags and the batch: no job
        has_moves = bool(marker.moves) or exploded.moves > 0
        has_truncates = bool(marker.truncates or meta.truncates or adopted)
        held_lsn = marker.lsn
        late_possible = held_lsn is not None and (meta.lo is None or int(meta.lo) < int(held_lsn))
        after_held = meta.lo is not None and (held_lsn is None or int(meta.lo) > int(held_lsn))
        newest = max([int(x) for x in (held_lsn, meta.hi) if x is not None], default=None)
    else:
        keyed = F.col("__key").isNotNull() | F.col("__old_key").isNotNull()
        held = all_changes.agg(  # one pass: does the store hold a key change, a truncate; its newest key
            F.count(F.when(is_move(), 1)).alias("moves"),
            F.count(F.when(F.col("__op") == "truncate", 1)).alias("truncates"),
            F.max(F.when(keyed, F.col("__lsn"))).alias("lsn"),
        ).first()
        has_moves = bool(held and held["moves"])
        has_truncates = bool(held and held["truncates"])
        late_possible, newest = True, (int(held["lsn"]) if held and held["lsn"] is not None else None)
        after_held = False
    found = Affected(
        None,
        has_moves,
        has_truncates,
        late_possible=late_possible,
        after_held=after_held,
        newest=newest,
        newest_known=True,
    )
    dropped = any(e["change"] == "dropped" for e in layout.schema_log)  # rows held then lose the column
    if meta.truncates or whole or adopted or dropped:
        return found  # a truncate touches every key; a new key, too
    if not has_moves:  # the affected keys are the batch's own
        found.nodes, found.ranges = touched, list(exploded.ranges)
        return found
    comps, found.rounds = linked_keys(moves)
    hit = comps.join(touched, "node", "left_semi").select("comp").distinct()
    linked = comps.join(hit, "comp", "left_semi").select("node")
    found.nodes = touched.union(linked).distinct().localCheckpoint(eager=True)
    return found


def read_changes(all_changes: DataFrame, affected: Affected, layout: TableLayout) -> DataFrame:
    """Every held change of the affected keys (and every held truncate), materialized; with key changes,
    ``affected.ranges`` is set from them (every affected key is named by one of its changes)."""
    if affected.nodes is None:
        changes = all_changes
    else:  # one scan: each change under its keys, kept once if either is affected
        held_changes = all_changes
        if affected.ranges:  # no key changes: a change of an affected key names it under __key or __old_key
            held_changes = held_changes.filter(
                " OR ".join(
                    "(" + " AND ".join(range_sql(affected.ranges, prefix)) + ")"
                    for prefix in ("`__key`.", "`__old_key`.")
                )
            )
        new, old = key_hash(F.col("__key")), key_hash(F.col("__old_key"))
        if affected.has_moves:  # under both keys, so a key change is found from either end
            nodes = F.explode(F.array(new, old))
        else:  # a change names one key (under __key, __old_key or both): one row each, nothing to dedup
            nodes = F.coalesce(new, old)
        changes = held_changes.withColumn("node", nodes).join(
            F.broadcast(affected.nodes), "node", "left_semi"
        )
        changes = changes.drop("node")
        if affected.has_moves:  # a key change whose two ends are both affected was found twice
            changes = changes.dropDuplicates(["__lsn", "__pos"])
        if affected.has_truncates:  # a held truncate ends the versions of every key before it
            changes = changes.union(all_changes.filter(F.col("__op") == "truncate"))
    changes = changes.localCheckpoint(eager=True)
    if affected.nodes is not None and affected.has_moves:
        affected.ranges = key_ranges(keys_of(changes, layout.key), layout.key)
    return changes


def current_rows_suffice(affected: Affected, layout: TableLayout, tables: BatchTables) -> bool:
    """Whether the affected keys' held changes can be stood in for by their current rows in the snapshot
    (``seeded_changes``): every event of the batch is newer than every keyed change the table held
    (``affected.after_held``), the table holds no key change or truncate and the batch brings none, no column
    was dropped (``layout.drops``, ``layout.rescan``: a drop point voids a carried value) and the table keeps
    a snapshot. Then each affected key's held changes only ever lead to its current row (or to none, when
    it is deleted), and the batch's events continue from there."""
    return (
        affected.after_held
        and affected.nodes is not None
        and not affected.has_moves
        and not affected.has_truncates
        and not layout.drops
        and not layout.rescan
        and tables.snapshot is not None
    )


def seeded_changes(
    rows: DataFrame, snapshot: DataFrame, affected: Affected, layout: TableLayout
) -> DataFrame:
    """The batch's change rows (``rows``, exploded) with, before them, each affected key's current row in
    the snapshot as an insert at its version's start (commit LSN and time; every column present),
    materialized: what ``resolve_versions`` needs when ``current_rows_suffice``. Resolved, they give every
    version of those keys that ends at or after the batch's first commit, as the held changes would: a
    key's state before the batch is its current row, and every column absent from a later update carries
    that row's value, as it carried the value of the event that set it. The read costs the affected keys'
    rows of the snapshot (bounded by ``affected.ranges``), not every change they ever had."""
    key_t = layout.key_struct_type()
    current = snapshot
    for bound in range_sql(affected.ranges, ""):
        current = current.filter(bound)
    key = F.struct(*[sql.col(k) for k in layout.key])
    current = current.withColumn("node", key_hash(key)).join(F.broadcast(affected.nodes), "node", "left_semi")
    seeds = current.select(
        F.col("__start_lsn").alias("__lsn"),
        F.lit(-1).alias("__pos"),
        F.lit("insert").alias("__op"),
        F.col("__start_time").alias("__time"),
        key.cast(key_t).alias("__key"),
        F.lit(None).cast(key_t).alias("__old_key"),
        F.array(*[F.lit(c) for c in layout.names]).alias("__present"),
        *[sql.col(c) for c in layout.names],
    )
    kept = ["__lsn", "__pos", "__op", "__time", "__key", "__old_key", "__present"]
    batch = rows.select(*kept, *[sql.col(c) for c in layout.names])
    return seeds.unionByName(batch).localCheckpoint(eager=True)


def resolve_affected(changes: DataFrame, layout: TableLayout, affected: Affected) -> DataFrame:
    """The affected keys' versions, with their key hash (``__kh``), materialized."""
    holds = Holds(affected.has_moves, affected.has_truncates, affected.moves, affected.has_updates)
    versions, jump_rounds = resolve_versions(changes, layout, holds)
    affected.rounds += jump_rounds
    if layout.track:
        versions = collapse_untracked(versions, layout)
    return versions.withColumn("__kh", key_hash(F.struct(*[sql.col(k) for k in layout.key]))).localCheckpoint(
        eager=True
    )
