"""Silver snapshot and history: golden cases (seed 000, samples/) through the public ingest call."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from resolver import ingest
from resolver.lake.folders import history_path, snapshot_path

pytestmark = pytest.mark.spark

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
SEED = SAMPLES / "seed000"
TECH = ("__start_lsn", "__end_lsn", "__start_time", "__end_time", "__is_current", "__is_deleted")


def _rows(spark: SparkSession, path: str, columns: list[str]) -> list[dict[str, Any]]:
    out = []
    for row in spark.read.format("delta").load(path).select(*columns).collect():
        d = row.asDict()
        for k, v in d.items():
            if isinstance(v, datetime):
                d[k] = v.isoformat(sep=" ")
        out.append(d)
    return sorted(out, key=lambda d: [str(d[c]) for c in columns])


def _expected(kind: str) -> list[dict[str, Any]]:
    rows = json.loads((SEED / "expected.json").read_text())[kind]
    columns = list(rows[0])
    for d in rows:
        for k, v in d.items():
            if isinstance(v, str) and k.endswith("_time"):
                d[k] = datetime.fromisoformat(v).isoformat(sep=" ")
    return sorted(rows, key=lambda d: [str(d[c]) for c in columns])


VARIANTS = {
    "in order": [["batch1.json"], ["batch2.json"], ["batch3.json"]],
    "duplicate": [["batch1-twice.json"], ["batch2.json"], ["batch3.json"]],
    "same batch": [["batch1.json", "batch2.json"], ["batch3.json"]],
    "reordered": [["batch3.json"], ["batch2.json"], ["batch1.json"], ["batch2.json"]],
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_seed000_history_is_what_the_article_expects(
    spark: SparkSession, tmp_path: Path, variant: str
) -> None:
    lake = str(tmp_path / "lake")
    for files in VARIANTS[variant]:
        ingest(spark, [str(SEED / f) for f in files], lake, "wal2json-v2")
    history = _expected("history")
    got = _rows(spark, history_path(lake, "public.characters"), list(history[0]))
    assert got == history
    snapshot = _expected("snapshot")
    assert _rows(spark, snapshot_path(lake, "public.characters"), list(snapshot[0])) == snapshot
    lineage = spark.read.format("delta").load(history_path(lake, "public.characters"))
    assert lineage.filter("__moved_from IS NOT NULL OR __moved_to IS NOT NULL").isEmpty()


def test_key_ranges_keep_every_key_they_were_taken_from(spark: SparkSession) -> None:
    """The literal bounds the resolver reads and merges with: quotes, backslashes, backticks, accents and
    NULLs in string keys survive as SQL literals, on plain columns and on the fields of ``__key``."""
    from pyspark.sql import functions as F

    from resolver.table.key_ranges import key_ranges, range_sql

    regions = ["a'b", "c\\d", "e`f", "ápac", "", None, "z", "a"]
    df = spark.createDataFrame([(r, i) for i, r in enumerate(regions)], "region string, id int")
    part = df.filter("id IN (0, 1, 2, 3, 5)")
    ranges = key_ranges(part, ["region", "id"])
    assert ranges == [("region", "a'b", "ápac", True), ("id", 0, 5, False)]
    kept = df
    for cond in range_sql(ranges, ""):
        kept = kept.filter(cond)
    assert sorted(r["id"] for r in kept.collect()) == [0, 1, 2, 3, 5]  # "" sorts before "a'b"
    nested = df.select(F.struct("region", "id").alias("__key"))
    for cond in range_sql(ranges, "`__key`."):
        nested = nested.filter(cond)
    assert sorted(r["__key"]["id"] for r in nested.collect()) == [0, 1, 2, 3, 5]
    assert key_ranges(part.filter("id < 0"), ["region", "id"]) == []  # nothing to bound


def test_a_batch_applied_again_is_found_applied_without_resolving(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A re-delivered batch: the store already holds its events and its marker says the silver tables hold
    all the store has, so nothing is resolved or written. ``resolver optimize``'s Z-order, which changes no
    row, keeps the marker fresh; another commit on the store after the marker (here a property set by hand)
    makes it stale, and the batch is then resolved again, to the same rows."""
    from delta.tables import DeltaTable

    from resolver.lake.delta import set_properties
    from resolver.lake.folders import changes_path
    from resolver.ops.maintenance import optimize

    lake = str(tmp_path / "lake")
    files = [str(SEED / "batch1.json"), str(SEED / "batch2.json")]
    first = ingest(spark, files, lake, "wal2json-v2").tables[0]
    assert first.versions_written > 0 and not any("already applied" in n for n in first.notes)
    paths = [history_path(lake, "public.characters"), snapshot_path(lake, "public.characters")]
    versions = [DeltaTable.forPath(spark, p).history(1).first()["version"] for p in paths]
    rows = [_rows(spark, p, ["id", "value", "__start_lsn"]) for p in paths]

    again = ingest(spark, files, lake, "wal2json-v2").tables[0]
    assert any("every event was already applied" in n for n in again.notes), again.notes
    assert (again.events, again.versions_written, again.inserted) == (first.events, 0, 0)
    assert [DeltaTable.forPath(spark, p).history(1).first()["version"] for p in paths] == versions

    (done,) = optimize(spark, lake, ["_resolver/changes/public.characters"])
    assert done["layout"] == "z-order" and done["files_added"] == 1, done
    kept = ingest(spark, files, lake, "wal2json-v2").tables[0]
    assert any("every event was already applied" in n for n in kept.notes), kept.notes
    set_properties(spark, changes_path(lake, "public.characters"), {"someone.else": "was here"})
    stale = ingest(spark, files, lake, "wal2json-v2").tables[0]
    assert not any("already applied" in n for n in stale.notes), stale.notes
    assert [_rows(spark, p, ["id", "value", "__start_lsn"]) for p in paths] == rows
    assert any("already applied" in n for n in ingest(spark, files, lake, "wal2json-v2").tables[0].notes)


def test_deletion_vectors_are_used_once_the_change_store_is_large_enough(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Without ``spark.resolver.deletionVectors.fromBytes`` silver tables are created without the deletion-
    vector feature (it costs every filtered read two Spark jobs) and stay so however large the change
    store is; with it set, a new lake's silver tables have the feature supported but not in use. Once the
    store reaches the setting (0 here: from the second batch), both turn deletion vectors on for good (the
    feature is added to tables created without it), the store records it, and the MERGEs that follow
    (which close versions) write deletion vectors and leave the rows the article expects."""
    from delta.tables import DeltaTable

    from resolver.lake.deletion_vectors import FROM_BYTES_SETTING, turn_on
    from resolver.lake.folders import DELETION_VECTORS_PROPERTY, changes_path
    from resolver.tablelayout import TableLayout
    from resolver.tablestate import TableState

    def properties(path: str) -> dict[str, str]:
        return dict(DeltaTable.forPath(spark, path).detail().select("properties").first()[0])

    def has_feature(path: str) -> bool:
        features = DeltaTable.forPath(spark, path).detail().select("tableFeatures").first()[0]
        return "deletionVectors" in features

    lake = str(tmp_path / "lake")
    table = "public.characters"
    silver = [history_path(lake, table), snapshot_path(lake, table)]
    ingest(spark, [str(SEED / "batch1.json")], lake, "wal2json-v2")
    assert [properties(p).get("delta.enableDeletionVectors") for p in silver] == ["false", "false"]
    assert not any(has_feature(p) for p in silver)
    huge = TableLayout(table, (), ("id",), state=TableState(key='["id"]', store_bytes=1 << 50))
    assert spark.conf.get(FROM_BYTES_SETTING, None) is None
    assert not turn_on(spark, huge, [(p, DeltaTable.forPath(spark, p)) for p in silver])
    assert [properties(p).get("delta.enableDeletionVectors") for p in silver] == ["false", "false"]
    spark.conf.set(FROM_BYTES_SETTING, str(1 << 50))
    try:
        other = str(tmp_path / "other")
        ingest(spark, [str(SEED / "batch1.json")], other, "wal2json-v2")
        made = [history_path(other, table), snapshot_path(other, table)]
        assert [properties(p).get("delta.enableDeletionVectors") for p in made] == ["false", "false"]
        assert all(has_feature(p) for p in made)
        spark.conf.set(FROM_BYTES_SETTING, "0")
        for name in ("batch2.json", "batch3.json", "batch1.json"):
            ingest(spark, [str(SEED / name)], lake, "wal2json-v2")
    finally:
        spark.conf.unset(FROM_BYTES_SETTING)
    assert [properties(p).get("delta.enableDeletionVectors") for p in silver] == ["true", "true"]
    assert all(has_feature(p) for p in silver)
    assert properties(changes_path(lake, table)).get(DELETION_VECTORS_PROPERTY) == "true"
    written = DeltaTable.forPath(spark, silver[0]).history().select("operationMetrics").collect()
    metrics = [m[0] or {} for m in written]
    assert any(int(m.get("numTargetDeletionVectorsAdded", "0")) > 0 for m in metrics), metrics
    history = _expected("history")
    assert _rows(spark, silver[0], list(history[0])) == history
    snapshot = _expected("snapshot")
    assert _rows(spark, silver[1], list(snapshot[0])) == snapshot


def test_a_bad_deletion_vector_setting_fails_with_one_line(spark: SparkSession, tmp_path: Path) -> None:
    from resolver.errors import ConfigError
    from resolver.lake.deletion_vectors import FROM_BYTES_SETTING

    lake = str(tmp_path / "lake")
    ingest(spark, [str(SEED / "batch1.json")], lake, "wal2json-v2")
    spark.conf.set(FROM_BYTES_SETTING, "32MB")
    try:
        summary = ingest(spark, [str(SEED / "batch2.json")], lake, "wal2json-v2")
    except ConfigError as e:
        assert str(e) == f"{FROM_BYTES_SETTING} is '32MB'; expected a whole number of bytes, 0 or more"
    else:
        raise AssertionError(f"a bad setting was taken: {summary}")
    finally:
        spark.conf.unset(FROM_BYTES_SETTING)


def test_the_explode_pass_measures_what_separate_aggregates_count(
    spark: SparkSession, tmp_path: Path
) -> None:
    """What ``explode_batch`` measures on the way (observed metrics, no job of their own) equals what
    separate aggregates over its rows count: key changes, bad values and the key ranges that bound the
    reads and MERGEs, for every table of the sample streams (key changes and bad values among them)."""
    from pyspark.sql import functions as F

    from resolver import read_wal2json
    from resolver.plan.batch_plan import plan_changes
    from resolver.table.explode import is_move
    from resolver.table.exploded import explode_batch, moved_events
    from resolver.table.key_ranges import key_ranges, keys_of

    at = '"timestamp":"2026-11-21 16:30:12+00","lsn":"0/1932960"'
    odd = tmp_path / "odd.json"  # a timestamp Spark cannot hold: a bad value
    odd.write_text(
        f'{{"action":"B","xid":9,{at},"nextlsn":"0/1932990"}}\n'
        f'{{"action":"I","xid":9,{at},"schema":"public","table":"ev","columns":[{{"name":"id","type":"bigint",'
        f'"value":1}},{{"name":"at","type":"timestamp with time zone","value":"infinity"}}],'
        f'"pk":[{{"name":"id","type":"bigint"}}]}}\n'
        f'{{"action":"C","xid":9,{at},"nextlsn":"0/1932990"}}\n'
    )
    seen_moves = seen_bad = 0
    for path in (SAMPLES / "wal2json-v2" / "0001.json", SAMPLES / "dirty" / "0001.json", odd):
        events = read_wal2json(spark, [str(path)]).events
        plan = plan_changes(spark, events, str(tmp_path / "lake"))
        for table, layout in plan.layouts.items():
            if layout is None:
                continue
            got = explode_batch(events, layout)
            rows = got.rows
            assert got.moves == rows.filter(is_move()).count(), table
            assert moved_events(got) == rows.dropDuplicates(["__lsn", "__pos"]).filter(is_move()).count()
            assert got.bad == rows.select(F.explode("__bad")).count(), table
            assert got.ranges == key_ranges(keys_of(rows, layout.key), layout.key), table
            seen_moves, seen_bad = seen_moves + got.moves, seen_bad + got.bad
    assert seen_moves and seen_bad  # the samples hold both, so the comparison means something


def test_one_pass_explodes_every_table_as_its_own_pass_does(spark: SparkSession, tmp_path: Path) -> None:
    """``explode_tables`` explodes every table of a batch in one Spark job, and hands each table the rows
    and measurements its own pass (``explode_batch``) gives: the same columns in the same order, the same
    rows, key changes, updates, bad values, key ranges and drop-point aggregates (samples with three
    tables, key changes, bad values and tables of different keys and columns)."""
    from bench.steps import job_descriptions
    from resolver import read_wal2json
    from resolver.plan.batch_plan import plan_changes
    from resolver.table.exploded import explode_batch, explode_tables

    at = '"timestamp":"2026-11-21 16:30:12+00","lsn":"0/1932960"'
    odd = tmp_path / "odd.json"  # two tables, one with a timestamp Spark cannot hold: a bad value
    odd.write_text(
        f'{{"action":"B","xid":9,{at},"nextlsn":"0/1932990"}}\n'
        + "".join(
            f'{{"action":"I","xid":9,{at},"schema":"public","table":"{t}","columns":[{{"name":"id","type":'
            f'"bigint","value":1}},{{"name":"at","type":"timestamp with time zone","value":"{v}"}}],'
            f'"pk":[{{"name":"id","type":"bigint"}}]}}\n'
            for t, v in (("ev", "infinity"), ("ok", "2026-11-21 16:30:12+00"))
        )
        + f'{{"action":"C","xid":9,{at},"nextlsn":"0/1932990"}}\n'
    )
    checked, moves, bad = 0, 0, 0
    for path in (SAMPLES / "wal2json-v2" / "0001.json", SAMPLES / "dirty" / "0001.json", odd):
        events = read_wal2json(spark, [str(path)]).events
        plan = plan_changes(spark, events, str(tmp_path / "lake"))
        layouts = {t: layout for t, layout in plan.layouts.items() if layout is not None}
        assert len(layouts) >= 2, path  # a pass over one table is the table's own
        before = set(job_descriptions(spark))
        together = explode_tables(events, layouts)
        assert len(set(job_descriptions(spark)) - before) == 1, path  # one job for every table
        assert sorted(together) == sorted(layouts)
        for table, layout in layouts.items():
            got, alone = together[table], explode_batch(events, layout)
            assert got.rows.schema.simpleString() == alone.rows.schema.simpleString(), table
            assert sorted(map(str, got.rows.collect())) == sorted(map(str, alone.rows.collect())), table
            assert got.rows.count() > 0, table
            assert (got.moves, got.updates, got.bad) == (alone.moves, alone.updates, alone.bad), table
            assert (got.ranges, got.rescanned) == (alone.ranges, alone.rescanned), table
            checked, moves, bad = checked + 1, moves + got.moves, bad + got.bad
    assert checked >= 7 and moves and bad  # so the comparisons mean something


def test_new_tables_are_created_beside_bronze_and_a_table_that_cannot_be_fails_alone(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch creates the Delta tables of its tables new to the lake beside bronze's write
    (``open_first_tables``, which says so in the log).
    A table whose tables cannot be created there (a file where its snapshot goes) is left to its own steps,
    which fail the same way: with ``isolate`` the other tables are applied, and once the file is gone the
    next batch completes the table into what a lake that never failed holds."""
    import logging
    import os

    from resolver import BatchOptions

    sample = str(SAMPLES / "wal2json-v2" / "0001.json")
    lake = str(tmp_path / "lake")
    blocked = snapshot_path(lake, "public.orders")
    os.makedirs(os.path.dirname(blocked))
    Path(blocked).write_text("not a folder")
    with caplog.at_level(logging.DEBUG, logger="resolver.table.batch_tables"):
        summary = ingest(spark, [sample], lake, "wal2json-v2", options=BatchOptions(isolate=True))
    assert "public.customers: its tables created beside bronze" in caplog.text
    assert "public.audit_log: its tables created beside bronze" in caplog.text
    assert "public.orders: its tables were not created beside bronze" in caplog.text
    by_table = {t.table: t for t in summary.tables}
    assert by_table["public.orders"].error, by_table["public.orders"]
    assert by_table["public.customers"].error is None and by_table["public.audit_log"].error is None
    clean = str(tmp_path / "clean")
    ingest(spark, [sample], clean, "wal2json-v2")

    def rows(path: str) -> list[str]:
        return sorted(map(str, spark.read.format("delta").load(path).collect()))

    for table in ("public.customers", "public.audit_log"):
        assert rows(snapshot_path(lake, table)) == rows(snapshot_path(clean, table)), table
    os.remove(blocked)
    again = ingest(spark, [sample], lake, "wal2json-v2", options=BatchOptions(isolate=True))
    assert all(t.error is None for t in again.tables), again.tables
    for path in (snapshot_path, history_path):
        got = rows(path(lake, "public.orders"))
        assert got and got == rows(path(clean, "public.orders"))
