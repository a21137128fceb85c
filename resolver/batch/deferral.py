"""Small tables' silver writes deferred under a freshness bound (``Freshness``; docs/silver.md, "Tables that
wait"): a batch of ``resolver ingest`` or ``resolver run`` leaves a table's few events in bronze instead of
writing its silver tables, and a later batch applies them with its own, so that many batches' writes of a
small table cost one batch's.

A batch's table waits when the batch has a freshness bound, the table's events waiting and new number fewer
than ``Freshness.below_events``, the oldest of them have waited less than ``Freshness.seconds``, and the
batch changes nothing of the table but rows (no new table, column, type, rename, drop point or key, no
event a policy refused). Its waiting events are then named among the lake's markers (``Waiting``: the
bronze commits that added them, their count and commit-LSN range, since when), written in the batch's one
commit of them (``resolver.lake.markers``). Any other batch that holds the table, and any batch at all once
the bound has run out (or a batch without a bound: ``resolver ingest`` without ``--freshness``), applies its
waiting events: they are read back from bronze's change data feed (exactly the rows those commits added
for the table) and applied with the batch's own (``applied_plan``), as if they had come in this batch. The
lake is a function of the set of events delivered, so the rows are the same as had every batch been
applied at once.

Until then the table's silver tables hold every event delivered for it but the waiting ones: they are
complete up to (not including) the waiting events' first commit LSN, which ``resolver as-of`` and
``resolver run --status`` say."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver.spark.sparkschema import EVENT_SCHEMA
from resolver.tablestate import Waiting

if TYPE_CHECKING:
    from resolver.config.batch_options import Freshness
    from resolver.plan.batch_plan import BatchPlan
    from resolver.plan.tablemeta import TableMeta
    from resolver.tablelayout import TableLayout

__all__ = [
    "Deferral",
    "applied_plan",
    "decide",
    "due_now",
    "leave_waiting",
    "read_waiting",
    "waiting_lines",
    "waiting_note",
]


@dataclass(frozen=True)
class Deferral:
    """What a batch does with waiting: the tables it leaves waiting (``waits``: their events waiting before
    it, or a new entry) and the tables whose waiting events it applies (``due``)."""

    waits: dict[str, Waiting]
    due: dict[str, Waiting]


def decide(plan: BatchPlan, freshness: Freshness | None, now: float) -> Deferral:
    """Which of the batch's tables wait, and whose waiting events the batch applies (the module docstring),
    from the plan alone: no Spark job. ``now``: the batch's start, seconds since the epoch."""
    refused = plan.unapplied
    waits: dict[str, Waiting] = {}
    due: dict[str, Waiting] = {}
    for table, meta in plan.meta.items():
        held = plan.waiting.get(table)
        layout = plan.layouts.get(table)
        if (
            freshness is not None
            and plan.rejected is None
            and table not in refused
            and layout is not None
            and _rows_only(meta, layout)
        ):
            wait = held or Waiting((), 0, None, None, now)
            if wait.events + meta.events < freshness.below_events and not wait.due(freshness.seconds, now):
                waits[table] = wait
                continue
        if held is not None and table not in refused:
            due[table] = held
    absent = {t: w for t, w in plan.waiting.items() if t not in plan.meta and t not in plan.failed}
    due.update(due_now(absent, freshness, now))
    return Deferral(waits, due)


def due_now(waiting: Mapping[str, Waiting], freshness: Freshness | None, now: float) -> dict[str, Waiting]:
    """Of tables whose events wait (and that a batch brings nothing of), those a batch at ``now`` applies:
    every one without a bound, else those whose bound ran out or whose events reached its limit."""
    return {
        t: w
        for t, w in waiting.items()
        if freshness is None or w.due(freshness.seconds, now) or w.events >= freshness.below_events
    }


def _rows_only(meta: TableMeta, layout: TableLayout) -> bool:
    """Whether the batch changes nothing of the table but its rows: the table is held already, and the
    batch brings no column, type, rename, drop point or key of its own (what a waiting batch would
    otherwise have to record before its rows)."""
    state = layout.state
    if state.is_new or layout.schema_log or layout.changes or layout.renames or layout.drops or layout.rescan:
        return False
    return (json.loads(state.key), state.key_source) == (list(layout.key), layout.key_source)


def applied_plan(
    spark: SparkSession,
    plan: BatchPlan,
    deferral: Deferral,
    events: DataFrame,
    replan: Callable[[DataFrame], BatchPlan],
) -> tuple[BatchPlan, DataFrame]:
    """The plan of the tables the batch applies, and their events: the batch's own (``events``) less the
    waiting tables', with the due tables' waiting events read back from bronze (``read_waiting``); the
    batch is planned again over them (``replan``) when there are any, as the plan's metadata counts them
    and their tables may not be in the batch at all."""
    if not deferral.waits and not deferral.due:
        return plan, events
    rows = events.filter(~F.col("table").isin(sorted(deferral.waits))) if deferral.waits else events
    back = read_waiting(spark, plan.lake.bronze, deferral.due)
    if back is not None:
        rows = rows.unionByName(back)
        applied = replan(rows)
    else:
        keep = [t for t in plan.meta if t not in deferral.waits]
        accepted = (
            plan.accepted.filter(~F.col("table").isin(sorted(deferral.waits))) if plan.accepted else None
        )
        applied = replace(
            plan,
            meta={t: plan.meta[t] for t in keep},
            layouts={t: layout for t, layout in plan.layouts.items() if t not in deferral.waits},
            accepted=accepted,
        )
    return replace(applied, due=frozenset(deferral.due)), rows


def leave_waiting(applied: BatchPlan, own: BatchPlan, deferral: Deferral, version: int | None) -> BatchPlan:
    """``applied`` with what the batch leaves waiting: each waiting table's entry joined with this batch's
    events of it (``own``: the batch's plan; ``version``: bronze's commit that added them, None when bronze
    took nothing new)."""
    if not deferral.waits:
        return applied
    waits = {
        t: w.joined(version, own.meta[t].events, own.meta[t].lo, own.meta[t].hi)
        for t, w in deferral.waits.items()
    }
    return replace(applied, waits=waits)


def read_waiting(spark: SparkSession, bronze: str, due: Mapping[str, Waiting]) -> DataFrame | None:
    """The ``due`` tables' waiting events, read back from bronze's change data feed: the rows the commits
    named by each table's entry added for it, nothing else (None: no commit named)."""
    versions = sorted({v for w in due.values() for v in w.versions})
    if not versions:
        return None
    added = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", versions[0])
        .option("endingVersion", versions[-1])
        .load(bronze)
    )
    wanted = [
        (F.col("table") == F.lit(t)) & F.col("_commit_version").isin(list(w.versions))
        for t, w in sorted(due.items())
        if w.versions
    ]
    chosen = wanted[0]
    for w in wanted[1:]:
        chosen = chosen | w
    rows = added.filter(F.col("_change_type") == "insert").filter(chosen)
    return rows.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in EVENT_SCHEMA.fields])


def waiting_lines(waiting: Mapping[str, Waiting], freshness: float | None = None) -> list[str]:
    """Each waiting table's line for people (``waiting_note``), by table name."""
    return [f"{table}: {waiting_note(w, freshness)}" for table, w in sorted(waiting.items())]


def waiting_note(waiting: Waiting, freshness: float | None = None) -> str:
    """What waits of a table, for people: how many events, their commits, since when, when a batch applies
    them (with the bound, ``freshness`` seconds), and up to which commit its silver tables are complete."""
    from datetime import UTC, datetime

    from resolver.lsn import format_lsn

    def at(seconds: float) -> str:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    w = waiting
    span = (
        f"commit LSN {format_lsn(w.lo)} to {format_lsn(w.hi or w.lo)}"
        if w.lo is not None
        else "no commit LSN"
    )
    by = f", applied by the first batch after {at(w.since + freshness)}" if freshness is not None else ""
    complete = f"complete before commit LSN {format_lsn(w.lo)}" if w.lo is not None else "complete"
    return f"{w.events} event(s) wait in bronze ({span}) since {at(w.since)}{by}; silver tables {complete}"
