"""A table's batch exploded against its layout and materialized once, with what the later steps need to
know about it measured in the same pass (Spark's observed metrics ride on the materializing job: no job
of their own): how many rows change their key, how many values did not fit their column, the range of
the keys the rows name, as the literals the reads and MERGEs of the affected keys are bounded by, and the
batch's own inserts that lack a column new to the lake (``resolver.table.store.rescan_aggregates``: all a
table's first batch needs to find its drop points); and what adding it to the change store found
(``Stored``). Every table of a batch is exploded in one pass (``explode_tables``: one Spark job for the
batch, not one per table); a table left out of it explodes its own rows (``explode_batch``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import reduce

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from resolver.spark.observed import counting, observing
from resolver.spark.parallelism import parallel_tables
from resolver.spark.sql import ident, string
from resolver.table.explode import explode_events, is_move
from resolver.table.key_ranges import BOUNDED, KeyRange
from resolver.table.store import rescan_aggregates
from resolver.table.table_steps import BatchEvents, Exploded
from resolver.tablelayout import TableLayout

__all__ = [
    "bad_value_records",
    "counting_moves",
    "each_event_once",
    "explode_batch",
    "explode_tables",
    "moved_events",
    "release",
    "table_rows",
]


def explode_batch(events: DataFrame, layout: TableLayout) -> Exploded:
    """Explode and materialize the batch's rows of ``layout.table``, measuring them on the way."""
    rows, observed = _measured(explode_events(events, layout), layout)
    return _exploded(rows.localCheckpoint(eager=True), observed, layout)


def explode_tables(events: DataFrame, layouts: Mapping[str, TableLayout]) -> dict[str, Exploded]:
    """``explode_batch`` of every table in ``layouts``, all in one Spark job: each table's rows are exploded
    as ``explode_batch`` does them and kept in Spark's cache, and one job over all of them fills every
    table's cache and measures each table's rows on the way (each table's lookups and casts run on its own
    rows only). Each table then reads its own rows alone. The caller lets them go after the batch
    (``release``). One table's rows are exploded as ``explode_batch`` does them (one job either way); the
    caller runs this beside bronze's write, where a table's own explode would come after it."""
    names = sorted(layouts)
    if len(names) < 2:
        return {name: explode_batch(events, layouts[name]) for name in names}
    kept: dict[str, DataFrame] = {}

    def planned(name: str) -> tuple[DataFrame, Observation]:
        rows = kept[name] = explode_events(events, layouts[name]).persist()
        return _measured(rows, layouts[name])

    # each table's projections are planned by the driver (Spark's analysis, a few tens of ms a table): on
    # the pool of table threads, as the tables' own steps are
    workers = max(1, min(parallel_tables(events.sparkSession), len(names)))
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="explode") as pool:
            measured = dict(zip(names, pool.map(planned, names), strict=True))
        every = [rows.select(F.lit(i).alias("table")) for i, (rows, _) in enumerate(measured.values())]
        reduce(DataFrame.union, every).write.format("noop").mode("overwrite").save()
        return {name: _exploded(kept[name], measured[name][1], layouts[name]) for name in names}
    except BaseException:
        release(kept.values())
        raise


def release(rows: Iterable[DataFrame]) -> None:
    """Let go of the cached rows ``explode_tables`` kept (rows it did not keep are left as they are)."""
    for r in rows:
        r.unpersist()


def table_rows(events: BatchEvents, layout: TableLayout) -> Exploded:
    """The batch's rows of ``layout.table``: as the batch's one pass exploded them, or exploded now."""
    found = events.exploded.get(layout.table)
    return found if found is not None else explode_batch(events.rows, layout)


def _measured(rows: DataFrame, layout: TableLayout) -> tuple[DataFrame, Observation]:
    """A table's exploded ``rows`` with what ``Exploded`` holds about them measured by the job that reads
    them next (as Spark SQL text: a few calls into the JVM, not hundreds, as ``explode_events``)."""
    update = "__op = 'update'"
    measures = [
        f"count(CASE WHEN {update} AND NOT (__old_key <=> __key) THEN 1 END) AS moves",
        f"count(CASE WHEN {update} THEN 1 END) AS updates",
        f"count(CASE WHEN {update} AND {_lacking(layout)} THEN 1 END) AS partial",
        "coalesce(sum(size(coalesce(__bad, array()))), 0) AS bad",
        "count(CASE WHEN __key IS NOT NULL OR __old_key IS NOT NULL THEN 1 END) AS named",
        *[agg for i, k in enumerate(_bounded(layout)) for agg in _range_aggs(i, k)],
    ]
    return observing(
        rows, f"exploded {layout.table}", *[F.expr(m) for m in measures], *rescan_aggregates(layout)
    )


def _exploded(rows: DataFrame, observed: Observation, layout: TableLayout) -> Exploded:
    """The ``Exploded`` of a table's materialized ``rows``, from what the job that materialized them
    measured (``_measured``)."""
    got = observed.get
    ranges: list[KeyRange] = []
    if got["named"]:  # no key named at all (truncates only): nothing to bound
        bounded = _bounded(layout)
        ranges = [(k, got[f"lo{i}"], got[f"hi{i}"], bool(got[f"null{i}"])) for i, k in enumerate(bounded)]
    rescanned = {name: value for name, value in got.items() if name.startswith("rescan")}
    return Exploded(
        rows, int(got["moves"]), int(got["bad"]), int(got["updates"]), int(got["partial"]), ranges, rescanned
    )


def _lacking(layout: TableLayout) -> str:
    """Whether a row lacks a column of the layout other than the key's (its ``__present`` does not name
    it), as Spark SQL text."""
    if not layout.value_names:
        return "false"
    wanted = ", ".join(string(c) for c in layout.value_names)
    return f"size(array_except(array({wanted}), __present)) > 0"


def _bounded(layout: TableLayout) -> list[str]:
    """The key columns whose range bounds the reads and MERGEs (integral, string or date)."""
    key_types = {f.name: f.dataType for f in layout.key_struct_type().fields}
    return [k for k in layout.key if isinstance(key_types[k], BOUNDED)]


def _range_aggs(i: int, k: str) -> list[str]:
    """The smallest and largest value of key column ``k`` under ``__key`` or ``__old_key``, and whether a
    key named there has it NULL (Spark SQL text)."""
    named = [f"CASE WHEN {s} IS NOT NULL THEN {s}.{ident(k)} END" for s in ("__key", "__old_key")]
    nulls = [f"({s} IS NOT NULL AND {s}.{ident(k)} IS NULL)" for s in ("__key", "__old_key")]
    return [
        f"least(min({named[0]}), min({named[1]})) AS lo{i}",
        f"greatest(max({named[0]}), max({named[1]})) AS hi{i}",
        f"max({nulls[0]} OR {nulls[1]}) AS null{i}",
    ]


def each_event_once(exploded: Exploded, events: BatchEvents) -> DataFrame:
    """The exploded rows of ``events`` with each event once. When bronze took every event of the batch as
    new (``events.unseen``), no two of them share bronze's key (table, commit LSN, position), and explode
    keeps only events with a commit LSN: the rows are already unique on (``__lsn``, ``__pos``) and come back
    as they are. Otherwise they are deduplicated on it (a shuffle): a file delivered twice in one batch."""
    return exploded.rows if events.unseen else exploded.rows.dropDuplicates(["__lsn", "__pos"])


def counting_moves(rows: DataFrame) -> tuple[DataFrame, Observation]:
    """``rows`` (change rows, each event once) with their key changes counted by whichever job reads them
    next (``resolver.spark.observed.counting``: ``n``, read it after that job)."""
    return counting(rows, "moves", is_move())


def moved_events(exploded: Exploded, counted: int | None = None) -> int:
    """The batch's key changes, each event once: ``counted`` when they were counted on their way into the
    change store (``counting_moves``), else no job when the explode's pass saw none (the common case),
    else one small aggregate."""
    if counted is not None:
        return counted
    if not exploded.moves:
        return 0
    rows = exploded.rows.dropDuplicates(["__lsn", "__pos"]).filter(is_move())
    got = rows.agg(F.count("*").alias("n")).first()
    return int(got["n"]) if got else 0


def bad_value_records(rows: DataFrame, layout: TableLayout) -> DataFrame:
    """Quarantine records for the values that did not fit their column (the event was applied with NULL
    there): which table, column, type, commit LSN and position, and the value's text."""
    bad = rows.select("__file", "__line", "__lsn", "__pos", F.explode("__bad").alias("bad"))
    column = F.substring_index("bad", ": ", 1)
    text = F.expr("substring(bad, length(substring_index(bad, ': ', 1)) + 3)")
    types = F.create_map(*[x for c in layout.columns for x in (F.lit(c.name), F.lit(c.type))])
    return bad.select(
        F.col("__file").alias("source_file"),
        F.col("__line").cast("long").alias("source_line"),
        F.concat(
            F.lit(f"{layout.table}."),
            column,
            F.lit(": value does not fit type "),
            F.coalesce(types[F.regexp_replace(column, r" \(old key\)$", "")], F.lit("?")),
            F.lit(" (commit LSN "),
            F.col("__lsn").cast("string"),
            F.lit(", position "),
            F.col("__pos").cast("string"),
            F.lit("); stored as NULL"),
        ).alias("reason"),
        text.alias("raw"),
        F.lit(None).cast("binary").alias("raw_bytes"),
    )
