"""Silver tables from real PostgreSQL streams: key-change chains, TOAST, tables without a key, bad values."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver import ingest
from resolver.lake.folders import history_path, snapshot_path
from resolver.spark.small_graphs import SMALL_GRAPH_SETTING
from tests.harness.postgres import PgDatabase, write_lines
from tests.settings import setting

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

MOVES = 1000
BIG = "repeat('toast-', 2000)"  # 12 kB, stored out of line: wal2json leaves it out of updates


def _split_v2(lines: list[str], parts: int) -> list[list[str]]:
    """A v2 stream cut into ``parts`` batches on transaction boundaries."""
    txns: list[list[str]] = []
    for line in lines:
        if '"action":"B"' in line:
            txns.append([])
        txns[-1].append(line)
    size = -(-len(txns) // parts)
    return [[line for t in txns[i : i + size] for line in t] for i in range(0, len(txns), size)]


def test_a_thousand_key_changes_resolve_in_logarithmic_rounds(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    pg_db.execute(
        "CREATE TABLE chain (id int PRIMARY KEY, big text, note text);\n"
        "ALTER TABLE chain ALTER COLUMN big SET STORAGE EXTERNAL;"
    )
    pg_db.create_slot("s")
    pg_db.execute(f"INSERT INTO chain VALUES (0, {BIG}, 'start');")
    pg_db.execute("\n".join("UPDATE chain SET id = id + 1;" for _ in range(MOVES // 2)))
    pg_db.execute("UPDATE chain SET note = 'halfway';")
    pg_db.execute("\n".join("UPDATE chain SET id = id + 1;" for _ in range(MOVES - MOVES // 2)))
    lines = pg_db.capture("s", 2)
    assert not any('"action":"U"' in line and "toast-" in line for line in lines)  # the TOAST value is absent
    expected_big = pg_db.query("SELECT big FROM chain")[0][0]

    # in order, one batch, its key-change graphs solved by Spark jobs (a graph this small is the driver's)
    one = tmp_path / "one.json"
    write_lines(one, lines)
    lake = str(tmp_path / "lake")
    with setting(spark, SMALL_GRAPH_SETTING, "0"):
        summary = ingest(spark, [str(one)], lake, "wal2json-v2")
    (table,) = summary.tables
    assert table.moved == MOVES
    print(f"rounds for a chain of {MOVES} key changes: {table.rounds}")
    assert 0 < table.rounds <= 30  # two pointer-jumping passes of about log2(1000) = 10 rounds each
    snap = spark.read.format("delta").load(snapshot_path(lake, "public.chain")).collect()
    assert [(r.id, r.big == expected_big, r.note) for r in snap] == [(MOVES, True, "halfway")]
    history = spark.read.format("delta").load(history_path(lake, "public.chain"))
    assert history.count() == MOVES + 2  # every key the row held, plus the note change
    assert history.filter("big IS NULL OR big != repeat('toast-', 2000)").isEmpty()
    moved = history.filter("__moved_to IS NOT NULL").select("id", "__moved_to.id").collect()
    assert sorted((r[0], r[1]) for r in moved) == [(i, i + 1) for i in range(MOVES)]

    # the same stream in three batches, delivered last to first, its graphs solved on the driver: the same
    # rows (the columns may come in another order: a column joins the table when a batch first carries it)
    lake2 = str(tmp_path / "lake2")
    batches = _split_v2(lines, 3)
    moved_per_batch = []
    for i, batch in reversed(list(enumerate(batches))):
        path = tmp_path / f"part{i}.json"
        write_lines(path, batch)
        (part,) = ingest(spark, [str(path)], lake2, "wal2json-v2").tables
        moved_per_batch.append(part.moved)  # the first counted by its checkpoint, the others by their append
        assert part.rounds == 0, "a graph of at most a thousand key changes is solved on the driver"
    assert sum(moved_per_batch) == MOVES and all(moved_per_batch), moved_per_batch
    for path in (snapshot_path, history_path):
        a = spark.read.format("delta").load(path(lake, "public.chain"))
        b = spark.read.format("delta").load(path(lake2, "public.chain")).select(*a.columns)
        assert a.exceptAll(b).isEmpty() and b.exceptAll(a).isEmpty()


def test_tables_without_a_key_and_values_that_do_not_fit(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    pg_db.execute(
        "CREATE TABLE plain (x int, y text);\n"
        "CREATE TABLE fullrow (x int, y text);\nALTER TABLE fullrow REPLICA IDENTITY FULL;\n"
        "CREATE TABLE events (id int PRIMARY KEY, at timestamptz);"
    )
    pg_db.create_slot("s")
    pg_db.execute(
        "INSERT INTO plain VALUES (1, 'a'), (2, NULL);\nUPDATE plain SET y = 'b' WHERE x = 1;\n"
        "INSERT INTO fullrow VALUES (1, 'a'), (2, 'b'), (3, NULL);\n"
        "UPDATE fullrow SET y = 'c' WHERE x = 1;\nDELETE FROM fullrow WHERE x = 2;\n"
        "UPDATE fullrow SET y = 'z' WHERE x = 3;\n"
        "INSERT INTO events VALUES (1, '2024-01-01 00:00:00+00'), (2, 'infinity');"
    )
    for fmt in (1, 2):
        path = tmp_path / f"v{fmt}.json"
        write_lines(path, pg_db.capture("s", fmt))
        lake = str(tmp_path / f"lake{fmt}")
        summary = ingest(spark, [str(path)], lake, f"wal2json-v{fmt}")
        by_table = {t.table: t for t in summary.tables}

        def rows(table: str, lake: str = lake) -> list[tuple[object, ...]]:
            df = spark.read.format("delta").load(snapshot_path(lake, table))
            return sorted((tuple(r) for r in df.select("x", "y").collect()), key=str)

        # no replica identity: wal2json sends the inserts only, so the lake keeps every inserted row
        assert rows("public.plain") == [(1, "a"), (2, None)]
        # REPLICA IDENTITY FULL: rows are found by their whole old image
        assert rows("public.fullrow") == sorted(pg_db.query("SELECT x, y FROM fullrow"), key=str)
        assert by_table["public.fullrow"].deleted == 0  # the batch created the table: all inserts net
        # 'infinity' does not fit a Spark timestamp: NULL in the lake, the value in quarantine
        events = spark.read.format("delta").load(snapshot_path(lake, "public.events"))
        assert sorted(tuple(r) for r in events.select("id", "at").collect())[1] == (2, None)
        assert by_table["public.events"].bad_values == 1
        assert summary.quarantined == 1, summary.lines()  # the header counts it too
        quarantine = spark.read.format("delta").load(f"{lake}/quarantine").collect()
        reason = "public.events.at: value does not fit type timestamp"
        assert [(q.raw, reason in q.reason) for q in quarantine] == [("infinity", True)]
