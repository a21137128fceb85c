"""A batch that only adds rows a table never held is appended (``resolver.table.append_batch``: no MERGE, no
read of anything held, nothing written to the change store, which catches up from bronze when a later batch
needs it), and the lake stays a function of the events: the same rows, technical columns included, as the
general way gives them, in any batch order, with late events and events delivered twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from resolver import ingest
from resolver.lake.folders import history_path, snapshot_path
from tests.v2_frames import v2_txn

TABLE = "public.events"


def _txn(lsn: int, *changes: tuple[str, int, str | None]) -> list[str]:
    """A format-2 transaction committed at ``lsn``: (action, id, text) changes of ``public.events``."""
    return v2_txn(lsn, *[(action, "events", key, text, None) for action, key, text in changes])


#: batches of one file each, in commit order: inserts of new, growing keys (appended), an update and a
#: delete (the general way), inserts again, then a key deleted (f) and inserted again (g): delivered before
#: its delete, g's insert finds its key live in the lake, and only the general way keeps one row of it
FILES = {
    "a": _txn(100, ("I", 1, "a1"), ("I", 2, "a2"), ("I", 3, "a3")),
    "b": _txn(200, ("I", 4, "b4"), ("I", 5, "b5")) + _txn(210, ("I", 6, "b6")),
    "c": _txn(300, ("U", 2, "c2"), ("D", 4, None)),
    "d": _txn(400, ("I", 10, "d10"), ("I", 11, None)),
    "e": _txn(500, ("I", 12, "e12")) + _txn(510, ("I", 13, "e13")),
    "f": _txn(600, ("D", 3, None)),
    "g": _txn(700, ("I", 3, "g3")),
}


def _write(folder: Path, names: str) -> list[str]:
    paths = []
    for name in names:
        path = folder / f"{name}.json"
        path.write_text("\n".join(FILES[name]) + "\n", encoding="utf-8")
        paths.append(str(path))
    return paths


def _rows(spark: SparkSession, lake: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    out = []
    for path in (snapshot_path(str(lake), TABLE), history_path(str(lake), TABLE)):
        df = spark.read.format("delta").load(path)
        out.append(sorted((tuple(r) for r in df.select(*sorted(df.columns)).collect()), key=repr))
    return out[0], out[1]


def _last_operation(spark: SparkSession, path: str) -> str:
    return str(DeltaTable.forPath(spark, path).history(1).first()["operation"])


def test_a_batch_of_new_growing_keys_is_appended_and_the_lake_stays_the_same(
    spark: SparkSession, tmp_path: Path
) -> None:
    files = tmp_path / "files"
    files.mkdir()
    lake = tmp_path / "lake"
    operations = []
    for name in "abcdefg":  # in commit order, one batch each
        summary = ingest(spark, _write(files, name), str(lake), "wal2json-v2")
        table = next(t for t in summary.tables if t.table == TABLE)
        history, snapshot = (
            _last_operation(spark, f(str(lake), TABLE)) for f in (history_path, snapshot_path)
        )
        operations.append((name, history, snapshot, table.inserted, table.updated))
    # a (first batch) and the inserts of new, growing keys (b, d, e) append; c and f merge, and so does g,
    # whose key the table held before
    appended, merged = ("WRITE", "WRITE"), ("MERGE", "MERGE")
    assert operations == [
        ("a", *appended, 3, 0), ("b", *appended, 3, 0), ("c", *merged, 0, 1), ("d", *appended, 2, 0),
        ("e", *appended, 2, 0), ("f", *merged, 0, 0), ("g", *merged, 1, 0),
    ], operations  # fmt: skip
    rows = _rows(spark, lake)

    # the same events in one batch, with late events after appends, and with events delivered twice: every
    # lake holds the same rows, technical columns included
    for label, batches in (
        ("whole", ["abcdefg"]),
        # b, d and e appended (the store left behind), then c late: its delete of b's key 4 re-splits that
        # key's history from the store, which catches up with b, d and e from bronze first
        ("appended, then late", ["a", "bde", "c", "fg"]),
        # b a first batch of inserts (appended, the store left empty), then a's older inserts: the general
        # way, after the store caught up with b from bronze
        ("first appended, then older", ["b", "a", "cdefg"]),
        ("twice", ["ab", "b", "cdefg", "g"]),
    ):
        other = tmp_path / f"lake-{label}"
        for names in batches:
            ingest(spark, _write(files, names), str(other), "wal2json-v2")
        assert _rows(spark, other) == rows, label
    snapshot, history = rows
    assert sorted(r[sorted(["id", "body", "__start_lsn", "__start_time"]).index("id")] for r in snapshot) == [
        1, 2, 3, 5, 6, 10, 11, 12, 13
    ]  # fmt: skip
    assert len(history) == 12  # 9 rows; 2's version before its update, 4's and 3's before their deletes


def test_a_batch_marks_its_tables_in_one_commit_of_the_lakes_markers_and_none_of_their_stores(
    spark: SparkSession, tmp_path: Path
) -> None:
    from resolver.lake.folders import Lake
    from resolver.lake.markers import read_markers
    from resolver.tablestate import KeyHigh

    files = tmp_path / "files"
    files.mkdir()
    lake = Lake.at(str(tmp_path / "lake"))
    ingest(spark, _write(files, "a"), lake.root, "wal2json-v2")  # a first batch marks its store
    store = DeltaTable.forPath(spark, lake.table(TABLE).changes)
    first = store.history(1).first()
    assert first["operation"] == "SET TBLPROPERTIES", first["operation"]
    # a first batch of inserts, each key once, is appended like a later one: the store holds none of it
    assert store.toDF().count() == 0
    markers_before = None
    for name in "bd":  # appended: neither the store nor its properties are written
        ingest(spark, _write(files, name), lake.root, "wal2json-v2")
        assert store.history(1).first()["version"] == first["version"], name
        version = DeltaTable.forPath(spark, lake.markers).history(1).first()["version"]
        assert markers_before is None or version == markers_before + 1, (name, version)  # one commit
        markers_before = version
    marker = read_markers(spark, lake.markers)[TABLE]
    assert not marker.on_store and marker.fresh(first["version"])
    assert marker.behind == ((100, 100), (200, 210), (400, 400)), marker.behind  # a's, b's, d's: in bronze
    assert marker.lsn == 400 and marker.high == KeyHigh("id", 11)


def test_optimize_and_vacuum_keep_a_fresh_marker_fresh(spark: SparkSession, tmp_path: Path) -> None:
    """Their commits change no row: a store whose silver tables held all it held still does, and the next
    in-order batch of new keys is appended, not resolved in full from a marker gone stale."""
    from resolver.lake.folders import Lake
    from resolver.lake.markers import read_markers
    from resolver.ops.maintenance import optimize, vacuum

    files = tmp_path / "files"
    files.mkdir()
    lake = Lake.at(str(tmp_path / "lake"))
    for name in "ac":  # c updates and deletes: appended to the store, two files to compact
        ingest(spark, _write(files, name), lake.root, "wal2json-v2")
    store = lake.table(TABLE).changes
    before = DeltaTable.forPath(spark, store).history(1).first()["version"]
    optimize(spark, lake.root)
    vacuum(spark, lake.root, retain_hours=0, force=True)
    after = DeltaTable.forPath(spark, store).history(1).first()["version"]
    assert after > before  # OPTIMIZE and VACUUM committed to the store
    assert read_markers(spark, lake.markers)[TABLE].fresh(after)
    ingest(spark, _write(files, "d"), lake.root, "wal2json-v2")
    assert _last_operation(spark, history_path(lake.root, TABLE)) == "WRITE"  # appended
