"""Property tests (hypothesis) for ``resolver.apply_changes``: silver tables are a function of the event set.
 For random change events of one or two small tables (int key or (int, text) key; inserts, updates that
omit columns, key changes and chains of them, deletes, truncates, re-inserts, updates of unknown keys,
REPLICA IDENTITY FULL images, duplicates), cut into random batches:
* the snapshot and history tables equal those of the pure-Python reference resolver (``tests.reference``);
* applying a batch again changes no row;
* any split into batches, applied in any order, gives exactly the same rows (technical columns included).
 The first tests check the reference itself against hand-computed expectations (milliseconds, no Spark).
``RESOLVER_PROPERTY_EXAMPLES=200 python -m pytest tests/e2e/test_resolve_properties.py`` runs a long
campaign.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from resolver.models import ChangeEvent, Operation
from resolver.spark.sparkschema import spark_schema
from tests.reference import MAX_LSN, MAX_TIME, Resolved, resolve

EXAMPLES = int(os.environ.get("RESOLVER_PROPERTY_EXAMPLES", "4"))
SPARK_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
BASE_TIME = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Table:
    """A generated source table: its key and its columns with their PostgreSQL types."""

    name: str
    key: tuple[str, ...]
    types: dict[str, str]
    key_domain: tuple[tuple[str, ...], ...]

    @property
    def values(self) -> list[str]:
        return [c for c in self.types if c not in self.key]


ONE = Table(
    "public.one",
    ("id",),
    {"id": "integer", "a": "text", "n": "integer"},
    tuple((str(i),) for i in range(1, 6)),
)
TWO = Table(
    "public.two",
    ("k1", "k2"),
    {"k1": "integer", "k2": "text", "v": "text", "w": "text"},
    tuple((str(i), s) for i in range(1, 4) for s in ("a", "b")),
)
LOGS = Table("public.logs", (), {"rid": "integer", "msg": "text", "amt": "integer"}, ())
"""No primary key, REPLICA IDENTITY FULL: every column is the key (format 1 leaves NULL old values out)."""
TABLES = {t.name: t for t in (ONE, TWO)}
KEYS = {t.name: t.key for t in (ONE, TWO)} | {LOGS.name: tuple(LOGS.types)}


def time_at(lsn: int) -> datetime:
    """Commit time of a transaction: increases with its commit LSN."""
    return BASE_TIME + timedelta(seconds=lsn)


def event(
    table: Table,
    operation: str,
    lsn: int,
    position: int,
    new: dict[str, str | None] | None = None,
    old: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """A well-formed ChangeEvent as a dict: types and primary key from ``table``, time from the LSN."""
    checked = ChangeEvent(
        table=table.name,
        operation=Operation(operation),
        commit_lsn=lsn,
        position=position,
        change_lsn=None,
        xid=1000 + lsn % 100_000,
        commit_time=time_at(lsn),
        column_names=None if new is None else list(new),
        column_types=None if new is None else [table.types[c] for c in new],
        column_values=None if new is None else list(new.values()),
        old_key_names=None if old is None else list(old),
        old_key_types=None if old is None else [table.types[c] for c in old],
        old_key_values=None if old is None else list(old.values()),
        primary_key=list(table.key),
        source_file="generated.json",
        source_line=lsn * 100 + position + 1,
    )
    return {**checked.model_dump(), "operation": operation}  # plain str: Spark cannot unpickle the enum


def version(
    row: dict[str, str | None],
    start: int,
    end: int | None = None,
    deleted: bool = False,
    moved_from: dict[str, str] | None = None,
    moved_to: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An expected history row; ``end=None`` is an open version."""
    return {
        **row,
        "__start_lsn": start,
        "__end_lsn": MAX_LSN if end is None else end,
        "__start_time": time_at(start).replace(tzinfo=None),
        "__end_time": MAX_TIME if end is None else time_at(end).replace(tzinfo=None),
        "__is_current": end is None,
        "__is_deleted": deleted,
        "__moved_from": moved_from,
        "__moved_to": moved_to,
    }


def snapshot_row(row: dict[str, str | None], start: int) -> dict[str, Any]:
    """An expected snapshot row."""
    return {**row, "__start_lsn": start, "__start_time": time_at(start).replace(tzinfo=None)}


def one(i: int, a: str | None, n: str | None = None) -> dict[str, str | None]:
    return {"id": str(i), "a": a, "n": n}


# --- the reference against hand-computed expectations ------------------------------------------------------


def test_reference_seed_000_insert_update_delete() -> None:
    events = [
        event(ONE, "insert", 1, 0, one(1, "Elsa")),
        event(ONE, "insert", 1, 1, one(2, "Olaf")),
        event(ONE, "update", 2, 0, one(1, "Anna")),
        event(ONE, "delete", 3, 0, old={"id": "2"}),
    ]
    got = resolve(events, KEYS)["public.one"]
    assert got.history == [
        version(one(1, "Elsa"), 1, 2),
        version(one(1, "Anna"), 2),
        version(one(2, "Olaf"), 1, 3, deleted=True),
    ]
    assert got.snapshot == [snapshot_row(one(1, "Anna"), 2)]


def test_reference_chain_of_moves_carries_absent_columns_across_transactions() -> None:
    events = [
        event(ONE, "insert", 1, 0, one(1, "x", "5")),
        event(ONE, "update", 2, 0, {"id": "2", "n": "6"}, old={"id": "1"}),  # a absent (unchanged TOAST)
        event(ONE, "update", 3, 0, {"id": "3"}, old={"id": "2"}),
    ]
    got = resolve(events, KEYS)["public.one"]
    assert got.history == [
        version(one(1, "x", "5"), 1, 2, deleted=True, moved_to={"id": "2"}),
        version(one(2, "x", "6"), 2, 3, deleted=True, moved_from={"id": "1"}, moved_to={"id": "3"}),
        version(one(3, "x", "6"), 3, moved_from={"id": "2"}),
    ]
    assert got.snapshot == [snapshot_row(one(3, "x", "6"), 3)]


def test_reference_chain_of_moves_in_one_transaction_links_the_visible_keys() -> None:
    events = [
        event(ONE, "insert", 1, 0, one(1, "x", "5")),
        event(ONE, "update", 2, 0, {"id": "2", "n": "6"}, old={"id": "1"}),
        event(ONE, "update", 2, 1, {"id": "3", "a": "y"}, old={"id": "2"}),
        event(ONE, "insert", 2, 2, one(4, "z")),
        event(ONE, "update", 2, 3, {"id": "5"}, old={"id": "4"}),  # created and moved: no lineage
    ]
    got = resolve(events, KEYS)["public.one"]
    assert got.history == [
        version(one(1, "x", "5"), 1, 2, deleted=True, moved_to={"id": "3"}),
        version(one(3, "y", "6"), 2, moved_from={"id": "1"}),
        version(one(5, "z"), 2),
    ]


def test_reference_transactions_collapse_and_no_op_updates_open_no_version() -> None:
    events = [
        event(ONE, "insert", 1, 0, one(1, "x")),
        event(ONE, "update", 1, 1, one(1, "y")),
        event(ONE, "insert", 1, 2, one(2, "gone")),
        event(ONE, "delete", 1, 3, old={"id": "2"}),
        event(ONE, "update", 2, 0, {"id": "1", "n": None}),  # n was NULL already
        event(ONE, "delete", 3, 0, old={"id": "1"}),
        event(ONE, "insert", 3, 1, one(1, "y")),  # delete + same row again: nothing visible changed
        event(ONE, "delete", 4, 0, old={"id": "1"}),
        event(ONE, "insert", 4, 1, one(1, "w")),  # delete + other values: one change, not a deletion
    ]
    got = resolve(events, KEYS)["public.one"]
    assert got.history == [version(one(1, "y"), 1, 4), version(one(1, "w"), 4)]


def test_reference_full_identity_image_fills_absent_columns_and_unknown_keys_get_null() -> None:
    events = [
        event(ONE, "insert", 1, 0, one(1, "x", "5")),
        event(ONE, "update", 2, 0, {"id": "1", "a": "y"}, old=one(1, "x", "7")),  # old image wins
        event(ONE, "update", 3, 0, {"id": "2", "a": "u"}),  # never inserted: n NULL
        event(ONE, "delete", 4, 0, old={"id": "2"}),
        event(ONE, "update", 5, 0, {"id": "2", "a": "v"}),  # deleted row is gone: n NULL again
        event(ONE, "update", 6, 0, {"id": "4", "a": "w"}, old={"id": "3"}),  # the unseen row had key 3
        event(ONE, "insert", 7, 0, one(5, "s")),
        event(ONE, "delete", 7, 1, old={"id": "5"}),
        event(ONE, "update", 7, 2, {"id": "6", "a": "t"}, old={"id": "5"}),  # ... but 5 was removed first
    ]
    got = resolve(events, KEYS)["public.one"]
    assert got.history == [
        version(one(1, "x", "5"), 1, 2),
        version(one(1, "y", "7"), 2),
        version(one(2, "u"), 3, 4, deleted=True),
        version(one(2, "v"), 5),
        version(one(4, "w"), 6, moved_from={"id": "3"}),
        version(one(6, "t"), 7),
    ]


def test_reference_truncate_ends_every_row_and_tables_are_independent() -> None:
    events = [
        event(ONE, "insert", 1, 0, one(1, "x")),
        event(TWO, "insert", 1, 1, {"k1": "1", "k2": "a", "v": "p", "w": "q"}),
        event(ONE, "truncate", 2, 0),
        event(ONE, "insert", 3, 0, one(1, "x")),
    ]
    got = resolve(events, KEYS)
    assert got["public.one"].history == [version(one(1, "x"), 1, 2, deleted=True), version(one(1, "x"), 3)]
    assert got["public.two"].snapshot == [snapshot_row({"k1": "1", "k2": "a", "v": "p", "w": "q"}, 1)]


def test_reference_is_a_function_of_the_event_set() -> None:
    events = [
        event(ONE, "insert", 1, 0, one(1, "x")),
        event(ONE, "update", 1, 1, {"id": "2"}, old={"id": "1"}),
        event(ONE, "update", 2, 0, {"id": "1", "n": "3"}, old={"id": "2"}),
        event(ONE, "delete", 3, 0, old={"id": "1"}),
    ]
    expected = resolve(events, KEYS)
    assert resolve([*reversed(events), events[1], events[2]], KEYS) == expected
    assert expected["public.one"].history == [
        version(one(1, "x", "3"), 2, 3, deleted=True, moved_from={"id": "2"}),
        version(one(2, "x"), 1, 2, deleted=True, moved_to={"id": "1"}),
    ]


def _in_one_transaction() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Key changes inside one transaction (LSN 2) and the history other sessions could see."""
    events = [
        event(ONE, "insert", 1, 0, one(1, "chain")),
        event(ONE, "insert", 1, 1, one(10, "p")),
        event(ONE, "insert", 1, 2, one(20, "q")),
        event(ONE, "insert", 1, 3, one(30, "back")),
        event(ONE, "insert", 1, 4, one(40, "a")),
        event(ONE, "update", 2, 0, {"id": "2"}, old={"id": "1"}),  # chain 1 -> 2 -> 3
        event(ONE, "update", 2, 1, {"id": "3"}, old={"id": "2"}),
        event(ONE, "update", 2, 2, {"id": "99"}, old={"id": "10"}),  # swap 10 <-> 20 through 99
        event(ONE, "update", 2, 3, {"id": "10"}, old={"id": "20"}),
        event(ONE, "update", 2, 4, {"id": "20"}, old={"id": "99"}),
        event(ONE, "update", 2, 5, {"id": "31", "n": "1"}, old={"id": "30"}),  # away and back
        event(ONE, "update", 2, 6, {"id": "30"}, old={"id": "31"}),
        event(ONE, "update", 2, 7, {"id": "41"}, old={"id": "40"}),  # move, then a new row takes the key
        event(ONE, "insert", 2, 8, one(40, "b")),
        event(ONE, "insert", 2, 9, one(50, "new")),  # created and moved: no lineage
        event(ONE, "update", 2, 10, {"id": "51"}, old={"id": "50"}),
    ]
    history = [
        version(one(1, "chain"), 1, 2, deleted=True, moved_to={"id": "3"}),
        version(one(3, "chain"), 2, moved_from={"id": "1"}),
        version(one(10, "p"), 1, 2, moved_to={"id": "20"}),
        version(one(10, "q"), 2, moved_from={"id": "20"}),
        version(one(20, "q"), 1, 2, moved_to={"id": "10"}),
        version(one(20, "p"), 2, moved_from={"id": "10"}),
        version(one(30, "back"), 1, 2),
        version(one(30, "back", "1"), 2),
        version(one(40, "a"), 1, 2, moved_to={"id": "41"}),
        version(one(40, "b"), 2),
        version(one(41, "a"), 2, moved_from={"id": "40"}),
        version(one(51, "new"), 2),
    ]
    return events, history


def test_reference_lineage_inside_one_transaction_names_only_committed_keys() -> None:
    events, history = _in_one_transaction()
    got = resolve(events, KEYS)["public.one"]
    assert got.history == sorted(history, key=lambda v: (v["id"], v["__start_lsn"]))


@pytest.mark.spark
def test_lineage_inside_one_transaction(spark: SparkSession, tmp_path: Path) -> None:
    """Chains, a swap through a temporary key, a row moved away and back, a key reused after a move and a
    row created then moved, all in one transaction: lineage names the keys before and after it, in one
    batch and with the transaction cut across two batches delivered in reverse."""
    events, _ = _in_one_transaction()
    expected = resolve(events, KEYS)
    _apply(spark, [events], tmp_path / "one")
    _check(spark, tmp_path / "one", expected)
    _apply(spark, [events[8:], events[:8]], tmp_path / "two")
    _check(spark, tmp_path / "two", expected)


@pytest.mark.spark
def test_a_row_moved_onto_a_key_an_insert_then_takes_is_gone(spark: SparkSession, tmp_path: Path) -> None:
    """Found by hypothesis (seed 205186155632092883945608636474803709391): in one transaction, row 2 moves
    to key 4, then inserts take key 4. After it, key 4 holds the inserted row, so row 2's version ends as
    a deletion that names no key it moved to (as key 4's version names no key it came from); Spark said
    ``__moved_to = 4``. One batch, and split in two (late events, a transaction cut across batches)."""
    events = [
        event(ONE, "update", 10, 0, {"id": "2"}, {"id": "1", "a": "x", "n": "0"}),
        event(ONE, "insert", 10, 1, {"id": "1", "a": "x", "n": "1"}),
        event(ONE, "update", 10, 2, {"id": "3", "a": "x"}, {"id": "1", "a": "x", "n": "0"}),
        event(ONE, "update", 20, 0, {"id": "1"}, {"id": "3", "a": "x", "n": "0"}),
        event(ONE, "update", 20, 1, {"id": "3", "a": "x"}, {"id": "1", "a": "x", "n": "-2"}),
        event(ONE, "delete", 30, 0, None, {"id": "1", "a": "x", "n": "0"}),
        event(ONE, "update", 40, 0, {"id": "4"}, {"id": "2", "a": "x", "n": "-1"}),
        event(ONE, "insert", 40, 1, {"id": "4", "a": "é ☃", "n": None}),
        event(ONE, "insert", 40, 2, {"id": "4", "a": None, "n": None}),
        event(ONE, "truncate", 50, 0),
        event(ONE, "truncate", 50, 1),
    ]
    expected = resolve(events, KEYS)
    moved = [v for v in expected["public.one"].history if v["id"] == "2"]
    assert [(v["__is_deleted"], v["__moved_to"]) for v in moved] == [(True, None)]
    _apply(spark, [events], tmp_path / "one")
    _check(spark, tmp_path / "one", expected)
    first = {4, 9}
    batches = [
        [e for i, e in enumerate(events) if i in first],
        [e for i, e in enumerate(events) if i not in first],
    ]
    _apply(spark, batches, tmp_path / "two")
    _check(spark, tmp_path / "two", expected)


@pytest.mark.spark
def test_a_first_batch_without_updates_gives_each_insert_its_own_row(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A table's first batch of inserts and deletes only is resolved without carrying columns from event to
    event (each insert's image is its own row): re-inserts after deletes, a key inserted, deleted and
    inserted again in one transaction, and an event delivered twice. Alone, and followed by a batch that
    updates a re-inserted row (its absent column carried from the insert). Every insert carries every
    column: an insert that lacks one says the column was dropped (docs/schema-evolution.md)."""
    events = [
        event(ONE, "insert", 10, 0, one(1, "x", "1")),
        event(ONE, "insert", 10, 1, one(2, "y")),
        event(ONE, "delete", 20, 0, None, {"id": "1"}),
        event(ONE, "insert", 20, 1, one(1, "z", "2")),
        event(ONE, "delete", 20, 2, None, {"id": "1"}),
        event(ONE, "insert", 20, 3, one(1, "w", None)),
        event(ONE, "delete", 30, 0, None, {"id": "2"}),
        event(ONE, "insert", 40, 0, one(2, None, "5")),
    ]
    later = [event(ONE, "update", 50, 0, {"id": "2", "a": "v"})]
    _apply(spark, [events + events[2:4]], tmp_path / "one")
    _check(spark, tmp_path / "one", resolve(events, KEYS))
    _apply(spark, [later], tmp_path / "one")
    expected = resolve(events + later, KEYS)
    assert [(v["a"], v["n"]) for v in expected[ONE.name].snapshot] == [("w", None), ("v", "5")]
    _check(spark, tmp_path / "one", expected)


def two(k1: int, k2: str, **values: str | None) -> dict[str, str | None]:
    return {"k1": str(k1), "k2": k2, **values}


def _said(caplog: pytest.LogCaptureFixture, ending: str) -> set[str]:
    """The tables whose route ``LaterBatch.changes`` logged with a message ending in ``ending``."""
    said = [r.getMessage() for r in caplog.records if r.name == "resolver.table.later_batch"]
    return {m.split(":")[0] for m in said if m.endswith(ending)}


def _seeded(caplog: pytest.LogCaptureFixture) -> set[str]:
    """The tables whose affected keys were read from the snapshot's current rows (``LaterBatch.changes``)."""
    return _said(caplog, "read from the snapshot")


@pytest.mark.spark
def test_a_batch_that_continues_the_table_is_resolved_from_its_current_rows(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch whose events all come after everything the table holds, without key changes or truncates, is
    resolved from the affected keys' current rows in the snapshot instead of every change they ever had
    (``resolver.table.affected.seeded_changes``), and gives the reference's rows: updates that omit columns
    (carried from the current row), an update to the values the row has (no new version), a hot key with a
    version per transaction and two updates in one, a delete and a re-insert in one transaction, an update
    of a deleted key (its absent column NULL), a composite text key. (The same events delivered out of order
    take the store's path, which the property tests below check against the same reference.)"""
    first = [
        event(ONE, "insert", 10, 0, one(1, "x", "1")),
        event(ONE, "insert", 10, 1, one(2, "y", "2")),
        event(ONE, "insert", 10, 2, one(3, "z", "3")),
        event(TWO, "insert", 10, 3, two(1, "a", v="p", w="q")),
        event(ONE, "update", 20, 0, {"id": "1", "a": "x2"}),
        event(TWO, "insert", 20, 1, two(2, "b", v="r", w=None)),
        event(ONE, "delete", 30, 0, None, {"id": "3"}),
    ]
    second = [
        event(ONE, "update", 50, 0, {"id": "1", "n": "5"}),
        event(ONE, "update", 60, 0, one(2, "y", "2")),
        event(TWO, "update", 60, 1, two(1, "a", w="q2")),
        *[event(ONE, "update", lsn, 0, {"id": "1", "a": f"h{lsn}"}) for lsn in (70, 80, 90)],
        event(TWO, "delete", 70, 1, None, {"k1": "2", "k2": "b"}),
        event(ONE, "update", 100, 0, {"id": "1", "a": "t1"}),
        event(ONE, "update", 100, 1, {"id": "1", "n": "6"}),
        event(ONE, "delete", 110, 0, None, {"id": "2"}),
        event(ONE, "insert", 110, 1, one(2, "again", None)),
        event(ONE, "update", 120, 0, {"id": "3", "a": "back"}),
        event(ONE, "insert", 130, 0, one(4, "new", "4")),
    ]
    third = [
        event(ONE, "update", 140, 0, {"id": "4", "n": "44"}),
        event(TWO, "update", 140, 1, two(1, "a", v="p")),
    ]
    caplog.set_level(logging.DEBUG, logger="resolver.table.later_batch")
    lake = tmp_path / "in-order"
    _apply(spark, [first], lake)
    _check(spark, lake, resolve(first, KEYS))
    for batch in (second, third):  # each continues what the lake holds: both tables read their current rows
        caplog.clear()
        _apply(spark, [batch], lake)
        assert _seeded(caplog) == {ONE.name, TWO.name}
    expected = resolve(first + second + third, KEYS)
    assert [(v["id"], v["a"], v["n"]) for v in expected[ONE.name].snapshot] == [
        ("1", "t1", "6"), ("2", "again", None), ("3", "back", None), ("4", "new", "44"),
    ]  # fmt: skip
    assert sum(v["id"] == "1" for v in expected[ONE.name].history) == 7
    _check(spark, lake, expected)


def _alone(caplog: pytest.LogCaptureFixture) -> set[str]:
    """The tables resolved from the batch's own rows alone (``resolver.table.continuation``)."""
    return _said(caplog, "the batch's own rows alone")


@pytest.mark.spark
def test_a_batch_of_whole_rows_that_continues_the_table_is_resolved_from_its_own_rows(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch that continues what the table holds and whose updates carry every column is resolved from
    its own rows alone, the held rows continued by the MERGEs (``resolver.table.continuation``), and gives
    the reference's rows: an update to the values the row has (the held version extended, no new one), in
    a transaction of its own and followed by a change; a hot key with a version per transaction and two
    updates in one; a key only deleted; a delete and a re-insert in one transaction; a delete and a
    re-insert of the same values in two; an update of a deleted key; NULL values; a composite text key."""
    first = [
        event(ONE, "insert", 10, 0, one(1, "x", "1")),
        event(ONE, "insert", 10, 1, one(2, "y", None)),
        event(ONE, "insert", 10, 2, one(3, "z", "3")),
        event(ONE, "insert", 10, 3, one(5, "e", "5")),
        event(ONE, "insert", 10, 4, one(6, "f", "6")),
        event(TWO, "insert", 10, 5, two(1, "a", v="p", w="q")),
        event(TWO, "insert", 20, 1, two(2, "b", v="r", w=None)),
        event(ONE, "delete", 30, 0, None, {"id": "3"}),
    ]
    second = [
        event(ONE, "update", 50, 0, one(2, "y", None)),  # the values it has: the version goes on
        event(ONE, "update", 60, 0, one(5, "e", "5")),  # the values it has, then a change
        event(ONE, "update", 65, 0, one(5, "e2", "5")),
        event(TWO, "update", 60, 1, two(1, "a", v="p", w="q2")),
        *[event(ONE, "update", lsn, 0, one(1, f"h{lsn}", "1")) for lsn in (70, 80, 90)],
        event(TWO, "delete", 70, 1, None, {"k1": "2", "k2": "b"}),
        event(ONE, "update", 100, 0, one(1, "t1", "1")),
        event(ONE, "update", 100, 1, one(1, "t1", "6")),
        event(ONE, "delete", 110, 0, None, {"id": "2"}),
        event(ONE, "insert", 110, 1, one(2, "again", None)),
        event(ONE, "update", 120, 0, one(3, "back", None)),
        event(ONE, "insert", 130, 0, one(4, "new", "4")),
        event(ONE, "delete", 130, 1, None, {"id": "6"}),
    ]
    third = [
        event(ONE, "delete", 140, 0, None, {"id": "4"}),
        event(ONE, "insert", 150, 0, one(4, "new", "4")),  # what it was before the delete
        event(TWO, "update", 140, 1, two(1, "a", v="p", w="q2")),
    ]
    caplog.set_level(logging.DEBUG, logger="resolver.table.later_batch")
    lake = tmp_path / "in-order"
    _apply(spark, [first], lake)
    for batch in (second, third):
        caplog.clear()
        _apply(spark, [batch], lake)
        assert _alone(caplog) == {ONE.name, TWO.name}
    expected = resolve(first + second + third, KEYS)
    assert [(v["id"], v["a"], v["n"]) for v in expected[ONE.name].snapshot] == [
        ("1", "t1", "6"), ("2", "again", None), ("3", "back", None), ("4", "new", "4"), ("5", "e2", "5"),
    ]  # fmt: skip
    assert sum(v["id"] == "2" for v in expected[ONE.name].history) == 2  # one kept on, one re-inserted
    assert sum(v["id"] == "5" for v in expected[ONE.name].history) == 2
    assert sum(v["id"] == "1" for v in expected[ONE.name].history) == 5
    _check(spark, lake, expected)


@pytest.mark.spark
def test_a_version_that_a_move_continued_after_a_truncate_says_where_the_row_went(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A row whose key a truncate ends and a move brings back with the values it had, in one transaction,
    keeps its version (two equal states in a row collapse); when the row later moves on, the version's
    ``__moved_to`` names where it went: the lineage of the version's last state, not its first one's
    (hypothesis found the history saying NULL, one batch or two, cut in the middle of the transaction)."""
    events = [
        event(TWO, "insert", 223, 0, two(1, "a", v="x", w="x")),
        event(TWO, "update", 223, 1, two(3, "a", v="")),
        event(TWO, "delete", 478, 0, None, {"k1": "1", "k2": "a"}),
        event(TWO, "truncate", 478, 1, None, None),
        event(TWO, "update", 478, 2, two(3, "a", v=""), {"k1": "3", "k2": "b"}),
        event(TWO, "update", 640, 0, two(1, "a", w="x"), {"k1": "3", "k2": "a"}),
        event(TWO, "update", 640, 1, two(3, "b"), {"k1": "1", "k2": "a"}),
        event(TWO, "update", 988, 0, two(2, "b", v="z", w="x"), {"k1": "3", "k2": "b"}),
    ]
    expected = resolve(events, KEYS)
    moved = [(v["__start_lsn"], v["__moved_to"]) for v in expected[TWO.name].history if v["k1"] == "3"]
    assert (223, {"k1": "3", "k2": "b"}) in moved
    for name, batches in (("one", [events]), ("cut", [events[:5], events[5:]])):
        _apply(spark, batches, tmp_path / name)
        _check(spark, tmp_path / name, expected)


@pytest.mark.spark
def test_a_snapshot_kept_from_a_later_batch_on_holds_every_row(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A table kept as a history only (``outputs: [history]``), then with both silver tables: the snapshot,
    created by that batch, is filled from every change the store held (every key affected), not only from
    the keys the batch touches; the batch after it, read from the snapshot's current rows, gives the
    reference's rows too."""
    from resolver import BatchOptions
    from resolver.config.pipeline import Output, TableSettings

    first = [
        *[event(ONE, "insert", 10, i, one(i, f"x{i}", str(i))) for i in (1, 2, 3)],
        event(ONE, "update", 20, 0, {"id": "1", "a": "y"}),
    ]
    second = [event(ONE, "update", 30, 0, {"id": "2", "n": "20"})]
    third = [
        event(ONE, "update", 40, 0, {"id": "1", "n": "10"}),
        event(ONE, "update", 40, 1, {"id": "3", "a": "z"}),
    ]
    history_only = BatchOptions(settings=lambda _table: TableSettings(outputs=[Output.HISTORY]))
    lake = tmp_path / "lake"
    _apply(spark, [first], lake, history_only)
    assert not (lake / "silver" / ONE.name).exists()
    _apply(spark, [second], lake)
    _check(spark, lake, resolve(first + second, KEYS))
    caplog.set_level(logging.DEBUG, logger="resolver.table.later_batch")
    _apply(spark, [third], lake)
    assert _seeded(caplog) == {ONE.name}
    _check(spark, lake, resolve(first + second + third, KEYS))


@pytest.mark.spark
def test_a_first_batch_without_updates_carries_columns_past_a_drop_point(
    spark: SparkSession, tmp_path: Path
) -> None:
    """An insert that lacks a column the batch sent before is where the lake learns the column was dropped
    (docs/schema-evolution.md): every row held then gets a new version there, its other columns carried and
    the dropped one NULL. The reference resolver does not model drops, so the rows are written out."""
    events = [
        event(ONE, "insert", 10, 0, one(1, "x", "1")),
        event(ONE, "insert", 20, 0, {"id": "2", "a": "y"}),  # lacks n: n was dropped before it
    ]
    _apply(spark, [events], tmp_path)
    got = _read(spark, tmp_path, ONE.name, ONE.key)
    assert got.snapshot == [snapshot_row(one(1, "x"), 20), snapshot_row(one(2, "y"), 20)]
    assert got.history == [
        version(one(1, "x", "1"), 10, 20),
        version(one(1, "x"), 20),
        version(one(2, "y"), 20),
    ]


def _keyless_full() -> list[list[dict[str, Any]]]:
    """Batches of a table without a primary key under REPLICA IDENTITY FULL in format 1: the first batch's
    identities all lack ``msg`` (it was NULL), which looks like an index identity on (rid, amt)."""

    def log(rid: int, msg: str | None, amt: int) -> dict[str, str | None]:
        return {"rid": str(rid), "msg": msg, "amt": str(amt)}

    def full(rid: int, msg: str | None, amt: int) -> dict[str, str | None]:
        return {k: v for k, v in log(rid, msg, amt).items() if v is not None}

    return [
        [
            event(LOGS, "insert", 1, 0, log(1, None, 5)),
            event(LOGS, "insert", 1, 1, log(2, "m", 6)),
            event(LOGS, "update", 2, 0, log(1, None, 7), old=full(1, None, 5)),
        ],
        [
            event(LOGS, "update", 3, 0, log(2, "n", 6), old=full(2, "m", 6)),
            event(LOGS, "delete", 4, 0, old=full(1, None, 7)),
            event(LOGS, "insert", 4, 1, log(3, "k", 1)),
        ],
    ]


@pytest.mark.spark
def test_keyless_full_identity_gives_the_same_rows_in_any_order(spark: SparkSession, tmp_path: Path) -> None:
    """The lake first takes (rid, amt) for an index identity; the next batch shows FULL and re-keys it on
    every column. Delivered the other way round, FULL is known first. Both equal the reference."""
    first, second = _keyless_full()
    expected = resolve(first + second, KEYS)
    assert [v["rid"] for v in expected[LOGS.name].snapshot] == ["2", "3"]
    _apply(spark, [first, second], tmp_path / "in-order")
    _check(spark, tmp_path / "in-order", expected)
    _apply(spark, [second, first], tmp_path / "reversed")
    _check(spark, tmp_path / "reversed", expected)
    props = spark.sql(f"DESCRIBE DETAIL delta.`{tmp_path / 'in-order' / 'silver' / LOGS.name}`").first()
    assert props is not None
    assert props["properties"]["resolver.keySource"] == "identity_full"


@pytest.mark.spark
def test_a_first_batch_holding_only_a_truncate_is_kept_for_the_rows_that_come_later(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The truncate (LSN 5) arrives before any row of its table; the older inserts, delivered next, end
    at it, and the newer one stays."""
    events = [
        event(ONE, "insert", 1, 0, one(1, "x")),
        event(ONE, "truncate", 5, 0),
        event(ONE, "insert", 6, 0, one(2, "y")),
    ]
    _apply(spark, [[events[1]], [events[1]], [events[0], events[2]]], tmp_path)
    got = _check(spark, tmp_path, resolve(events, KEYS))
    assert got[ONE.name].history[0]["__is_deleted"] and got[ONE.name].history[0]["__end_lsn"] == 5


# --- generated workloads ----------------------------------------------------------------------------------

TEXT = st.sampled_from(["x", "y", None, "", "é ☃"])
INT = st.one_of(st.integers(-2, 2).map(str), st.none())


def _value(table: Table, column: str) -> st.SearchStrategy[str | None]:
    return INT if table.types[column] == "integer" else TEXT


class Workload:
    """Generated events. Its repr is the ``event(...)`` calls that build them, ready to paste into a test."""

    def __init__(self, calls: list[tuple[Any, ...]]) -> None:
        self.calls = calls
        self.events = [event(*c) for c in calls]

    def __repr__(self) -> str:
        names = {ONE.name: "ONE", TWO.name: "TWO"}
        lines = [
            f"    event({names[t.name]}, {op!r}, {lsn}, {pos}, {new!r}, {old!r}),"
            for t, op, lsn, pos, new, old in self.calls
        ]
        return "\n".join(["[", *lines, "]"])


@st.composite
def workloads(draw: st.DrawFn, max_changes: int = 14) -> Workload:
    """Committed transactions of well-formed change events of one or two tables, with some duplicates."""
    tables = draw(st.sampled_from([[ONE], [TWO], [ONE, TWO]]))
    full = {t.name: draw(st.booleans()) for t in tables}  # REPLICA IDENTITY FULL
    live: dict[str, list[tuple[str, ...]]] = {t.name: [] for t in tables}  # roughly: keys that exist

    def image(t: Table, key: tuple[str, ...], partial: bool) -> dict[str, str | None]:
        row: dict[str, str | None] = dict(zip(t.key, key, strict=True))
        for c in t.values:
            if not partial or draw(st.booleans()):
                row[c] = draw(_value(t, c))
        return row

    def old_image(t: Table, key: tuple[str, ...]) -> dict[str, str | None]:
        return image(t, key, partial=False) if full[t.name] else dict(zip(t.key, key, strict=True))

    def some_key(t: Table, existing: bool) -> tuple[str, ...]:
        keys = live[t.name] if existing and live[t.name] and draw(st.integers(0, 4)) else t.key_domain
        return draw(st.sampled_from(keys))

    def move(t: Table, frm: tuple[str, ...], to: tuple[str, ...]) -> tuple[Any, ...]:
        if frm in live[t.name]:
            live[t.name].remove(frm)
        live[t.name].append(to)
        old = old_image(t, frm) if frm != to or full[t.name] else None
        return (t, "update", image(t, to, partial=True), old)

    changes: list[tuple[Any, ...]] = []  # (table, operation, new image, old image)
    size = draw(st.integers(1, max_changes))
    while len(changes) < size:
        t = draw(st.sampled_from(tables))
        kind = draw(st.sampled_from(["insert", "update", "move", "delete", "chain", "truncate"]))
        if kind == "insert":
            key = some_key(t, existing=False)
            live[t.name].append(key)
            changes.append((t, "insert", image(t, key, partial=False), None))
        elif kind == "update":
            changes.append(move(t, *[some_key(t, existing=True)] * 2))
        elif kind in ("move", "chain"):
            key = some_key(t, existing=True)
            for _ in range(1 if kind == "move" else draw(st.integers(2, 4))):
                free = [k for k in t.key_domain if k != key and k not in live[t.name]]
                to = draw(st.sampled_from(free or [k for k in t.key_domain if k != key]))
                changes.append(move(t, key, to))
                key = to
        elif kind == "delete":
            key = some_key(t, existing=True)
            live[t.name] = [k for k in live[t.name] if k != key]
            changes.append((t, "delete", None, old_image(t, key)))
        else:
            live[t.name] = []
            changes.append((t, "truncate", None, None))

    calls: list[tuple[Any, ...]] = []
    lsn, position = 0x16B3700, 0
    for i, (t, op, new, old) in enumerate(changes):
        if i == 0 or draw(st.booleans()):  # the next transaction begins
            lsn, position = lsn + draw(st.integers(1, 0x300)), 0
        calls.append((t, op, lsn, position, new, old))
        position += 1
    again = draw(st.lists(st.integers(0, len(calls) - 1), max_size=3))  # the same change read twice
    return Workload(calls + [calls[i] for i in again])


@settings(max_examples=200, deadline=None)
@given(workload=workloads(max_changes=30), data=st.data())
def test_reference_history_is_consistent_and_order_free(workload: Workload, data: st.DataObject) -> None:
    """The reference on generated workloads: one open version per live key, versions of a key tile time
    without overlap, the snapshot is the open versions, and shuffling or repeating events changes nothing."""
    events = workload.events
    resolved = resolve(events, KEYS)
    assert resolve(data.draw(st.permutations(events + events[:3])), KEYS) == resolved
    for table, got in resolved.items():
        key = KEYS[table]
        current = [v for v in got.history if v["__is_current"]]
        assert got.snapshot == [
            {c: v[c] for c in [*got.columns, "__start_lsn", "__start_time"]} for v in current
        ]
        for v in got.history:
            assert v["__start_lsn"] < v["__end_lsn"] and v["__start_time"] < v["__end_time"]
            assert v["__is_current"] == (v["__end_lsn"] == MAX_LSN)
            assert not (v["__is_current"] and (v["__is_deleted"] or v["__moved_to"]))
        for a, b in zip(got.history, got.history[1:], strict=False):
            if [a[c] for c in key] != [b[c] for c in key]:
                continue
            assert a["__end_lsn"] <= b["__start_lsn"]
            if not a["__is_deleted"]:  # a change of values: the next version starts where this one ended
                assert a["__end_lsn"] == b["__start_lsn"]
                assert [a[c] for c in got.columns] != [b[c] for c in got.columns]


def _apply(spark: SparkSession, batches: list[list[dict[str, Any]]], lake: Path, options: Any = None) -> None:
    from resolver import apply_changes

    schema = spark_schema(ChangeEvent)
    for batch in batches:
        rows = [tuple(e[f] for f in schema.names) for e in batch]
        apply_changes(spark, spark.createDataFrame(rows, schema), str(lake), options=options)


def _technical(column: str) -> bool:
    """Compared as Spark returns them: LSNs, times and flags (source values and key structs become text)."""
    return column.startswith("__") and not column.startswith("__moved")


def _text(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _text(v) for k, v in value.items()}
    return None if value is None else str(value)


def _read(spark: SparkSession, lake: Path, table: str, key: tuple[str, ...]) -> Resolved:
    """The silver tables of ``table`` as the reference gives them: source values as text, sorted alike."""

    def rows(path: Path) -> list[dict[str, Any]]:
        if not path.exists():
            return []
        out = []
        for r in spark.read.format("delta").load(str(path)).collect():
            d = r.asDict(recursive=True)
            out.append({k: v if _technical(k) else _text(v) for k, v in d.items()})
        return out

    snapshot, history = rows(lake / "silver" / table), rows(lake / "silver" / f"{table}__history")
    columns = [c for c in (snapshot or history or [{}])[0] if not c.startswith("__")]
    return Resolved(columns, _sorted(snapshot, key), _sorted(history, key))


def _sorted(rows: list[dict[str, Any]], key: tuple[str, ...]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (*[(r[c] is not None, r[c] or "") for c in key], r["__start_lsn"]))


def _same(got: list[dict[str, Any]], expected: list[dict[str, Any]], what: str) -> None:
    missing = [r for r in expected if r not in got]
    extra = [r for r in got if r not in expected]
    detail = "\n".join([f"  missing {r}" for r in missing] + [f"  extra   {r}" for r in extra])
    assert got == expected, f"{what} differs from the reference:\n{detail}"


def _check(spark: SparkSession, lake: Path, expected: dict[str, Resolved]) -> dict[str, Resolved]:
    got = {t: _read(spark, lake, t, KEYS[t]) for t in expected}
    for table, ref in expected.items():
        _same(got[table].snapshot, _sorted(ref.snapshot, KEYS[table]), f"{table} snapshot")
        _same(got[table].history, _sorted(ref.history, KEYS[table]), f"{table} history")
    return got


@pytest.mark.spark
@SPARK_SETTINGS
@given(workload=workloads(), data=st.data())
def test_batches_in_commit_order_give_the_reference_rows_and_a_replay_changes_nothing(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, workload: Workload, data: st.DataObject
) -> None:
    """Two batches cut in commit order give the reference's rows; applying one of them again changes none."""
    events = sorted(workload.events, key=lambda e: (e["commit_lsn"], e["position"]))
    cut = data.draw(st.integers(0, len(events) - 1), label="cut")
    batches = [b for b in (events[:cut], events[cut:]) if b]
    lake = tmp_path_factory.mktemp("lake")
    _apply(spark, batches, lake)
    before = _check(spark, lake, resolve(events, KEYS))
    _apply(spark, [data.draw(st.sampled_from(batches), label="replayed")], lake)
    assert {t: _read(spark, lake, t, KEYS[t]) for t in before} == before


@pytest.mark.spark
@SPARK_SETTINGS
@given(workload=workloads(), data=st.data())
def test_any_split_in_any_order_gives_the_same_rows(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, workload: Workload, data: st.DataObject
) -> None:
    """Any subset of the events first (late events, transactions cut in two), then the rest: the same rows,
    technical columns included, as the reference, which is itself independent of order (test above)."""
    events = workload.events
    first = data.draw(st.sets(st.sampled_from(range(len(events))), min_size=1), label="first batch")
    batches = [
        [e for i, e in enumerate(events) if i in first],
        [e for i, e in enumerate(events) if i not in first],
    ]
    lake = tmp_path_factory.mktemp("lake")
    _apply(spark, [b for b in batches if b], lake)
    _check(spark, lake, resolve(events, KEYS))
