"""The lake's markers: each table's change-store marker (``resolver.tablestate.Marker``: the store version its
silver tables hold, and what the store held then), written for every table of a batch in **one** Delta commit
after the batch's last table, as properties of one lake-level table (``_resolver/markers``, no rows), and
read back with no Spark job at the next batch's start (``resolver.plan.batch_plan``).

A table's marker used to be a commit of its own change store's properties, the last write of its batch: a
Delta commit per table and batch (0.1-0.3 s each on 2 cores; bench/README.md). A batch that changes a
table's schema version, drop points or deletion-vector flag still writes that table's marker there, with
those properties, in the same commit (``resolver.table.batch_tables.mark_applied``); of the two, the newer
is the table's marker (``Marker.newer_than``). A run cut short before the lake's commit leaves every table of
the batch with its previous marker, which applying the batch again completes, as it completes a table cut
short before its own marker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from resolver.lake.delta import properties_and_size, set_properties
from resolver.lake.folders import APPLIED_PROPERTY, HOLDS_PROPERTY
from resolver.spark import sql
from resolver.tablestate import Marker, Waiting

__all__ = ["MARKER_PREFIX", "WAITING_PREFIX", "LakeMarkers", "marker_of", "read_lake_markers", "read_markers",
           "write_markers"]  # fmt: skip

log = logging.getLogger(__name__)

#: a table's entry among the lake's markers: ``resolver.marker.<schema.table>``
MARKER_PREFIX = "resolver.marker."
#: a table's events waiting in bronze (``resolver.batch.deferral``): ``resolver.waiting.<schema.table>``, its
#: ``Waiting``'s text (empty: nothing waits)
WAITING_PREFIX = "resolver.waiting."
#: how many times a commit of the markers is tried when another writer's commit came between
_ATTEMPTS = 5


def marker_of(store_props: dict[str, str], in_lake: Marker | None) -> Marker:
    """A table's marker: its change store's (from the store's properties ``store_props``), or its entry in
    the lake's markers (``in_lake``) when that is the newer (``Marker.newer_than``)."""
    store = Marker.parse(store_props.get(APPLIED_PROPERTY, ""), store_props.get(HOLDS_PROPERTY, ""))
    return in_lake if in_lake is not None and in_lake.newer_than(store) else store


@dataclass(frozen=True)
class LakeMarkers:
    """What the lake's markers hold: each table's marker, and the events of tables that wait in bronze."""

    markers: dict[str, Marker] = field(default_factory=dict)
    waiting: dict[str, Waiting] = field(default_factory=dict)


def read_lake_markers(spark: SparkSession, path: str) -> LakeMarkers:
    """The lake's markers at ``path`` (nothing before the lake's first batch), read from the table's log: no
    Spark job."""
    if not DeltaTable.isDeltaTable(spark, path):
        return LakeMarkers()
    props, _ = properties_and_size(DeltaTable.forPath(spark, path))
    markers = {
        k[len(MARKER_PREFIX) :]: Marker.parse_lake(v) for k, v in props.items() if k.startswith(MARKER_PREFIX)
    }
    waiting = {
        k[len(WAITING_PREFIX) :]: Waiting.parse(v) for k, v in props.items() if k.startswith(WAITING_PREFIX)
    }
    return LakeMarkers(markers, {t: w for t, w in waiting.items() if w is not None})


def read_markers(spark: SparkSession, path: str) -> dict[str, Marker]:
    """Every table's marker in the lake's markers at ``path`` (``read_lake_markers``)."""
    return read_lake_markers(spark, path).markers


def write_markers(
    spark: SparkSession,
    path: str,
    markers: dict[str, Marker],
    waiting: Mapping[str, Waiting | None] | None = None,
) -> None:
    """Set the markers of ``markers``' tables, and the waiting events of ``waiting``'s (None: nothing waits
    any more), in the lake's markers at ``path`` (created by the first): one Delta commit; the other
    tables' entries stay. A commit of another writer in between (two batches of different tables on one
    lake) is retried on the table's new version."""
    props = {MARKER_PREFIX + table: marker.lake_text() for table, marker in sorted(markers.items())}
    props.update({WAITING_PREFIX + t: w.text() if w else "" for t, w in sorted((waiting or {}).items())})
    if not props:
        return
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            if DeltaTable.isDeltaTable(spark, path):
                set_properties(spark, path, props)
            else:
                spec = ", ".join(f"{sql.string(k)} = {sql.string(v)}" for k, v in props.items())
                spark.sql(
                    f"CREATE TABLE IF NOT EXISTS {sql.delta_path(path)} (`table` STRING) USING delta "
                    f"TBLPROPERTIES ({spec})"
                )
                if not _holds(spark, path, props):  # another writer created it first
                    set_properties(spark, path, props)
            return
        except Exception as e:  # noqa: BLE001 (Delta's conflicts come through Py4J as several classes)
            if attempt == _ATTEMPTS or "concurrent" not in (type(e).__name__ + str(e)[:500]).lower():
                raise
            log.info("the lake's markers: another commit came first (%s); trying again", type(e).__name__)
            time.sleep(0.1 * attempt)


def _holds(spark: SparkSession, path: str, props: dict[str, str]) -> bool:
    """Whether the table at ``path`` holds every property of ``props`` as given."""
    held, _ = properties_and_size(DeltaTable.forPath(spark, path))
    return all(held.get(k) == v for k, v in props.items())
