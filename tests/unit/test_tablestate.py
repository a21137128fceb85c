"""The change store's marker as the lake keeps it (``resolver.tablestate.Marker``): on the store's own
properties, a commit after the version it names, or among the lake's markers, which take no commit of the
store (``resolver.lake.markers``). No Spark."""

from __future__ import annotations

from resolver.tablestate import KeyHigh, Marker

HELD = Marker(7, False, True, 123, True, KeyHigh("id", 40), ((200, 210),))


def test_a_marker_among_the_lakes_markers_reads_back_as_written() -> None:
    back = Marker.parse_lake(HELD.lake_text())
    assert (back.applied, back.moves, back.truncates, back.lsn, back.lsn_known) == (7, False, True, 123, True)
    assert back.high == KeyHigh("id", 40) and back.behind == ((200, 210),)
    assert not back.on_store and HELD.on_store


def test_a_marker_is_fresh_while_the_store_took_no_commit_after_it() -> None:
    on_store = Marker.parse("7", HELD.holds_text())  # its own commit is the store's version 8
    in_lake = Marker.parse_lake(HELD.lake_text())  # names the store's version 7, and took no commit of it
    assert on_store.fresh(8) and not on_store.fresh(7) and not on_store.fresh(9)
    assert in_lake.fresh(7) and not in_lake.fresh(8)
    assert not Marker().fresh(0) and not Marker.parse_lake("").fresh(0)


def test_the_newer_of_a_tables_two_markers_is_its_marker() -> None:
    on_store = Marker.parse("7", HELD.holds_text())
    # a later batch that left the store as it was (version 8, the marker's commit) marked it in the lake
    assert Marker.parse_lake(Marker(8).lake_text()).newer_than(on_store)
    # a lake marker of the store's version 7 came before the store's marker of it (its commit, version 8)
    assert not Marker.parse_lake(Marker(7).lake_text()).newer_than(on_store)
    assert not Marker.parse_lake(Marker(5).lake_text()).newer_than(on_store)
    # a lake that had only markers on its stores (before 2026-12-06) or none at all
    assert Marker.parse_lake(Marker(0).lake_text()).newer_than(Marker.parse("", ""))
    assert not Marker.parse_lake("").newer_than(on_store)


def test_falling_behind_joins_ranges_that_meet() -> None:
    assert Marker(behind=((1, 5),)).falling_behind(6, 9) == ((1, 9),)
    assert Marker(behind=((1, 5),)).falling_behind(8, 9) == ((1, 5), (8, 9))
