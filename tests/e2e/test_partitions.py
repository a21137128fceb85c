"""A partitioned PostgreSQL table lands as one lake table named for its root (issue 67): range and list
partitioning, two levels, DEFAULT partitions, a partition created and one attached after the slot, rows
moved across partitions by updates of their partition key, a partition truncated and one detached; the
root's table equals ``SELECT * FROM root`` at the copy's consistent point and after every commit the lake
can follow, and says in one line which table to copy again where it cannot."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from resolver import run_pipeline
from resolver.capture.options import Partitions
from resolver.capture.snapshot import CaptureOptions, capture_once, resnapshot
from resolver.formats.partition_routes import RoutesFile
from tests import difftest as d
from tests.harness.postgres import SESSION_SETTINGS, PgDatabase
from tests.pipelines import pipeline_file

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

_M = (("id", "integer"), ("at", "date"), ("v", "text"), ("rid", "integer"))
M = d.Table("m", _M, ("id", "at"))
L = d.Table("l", (("code", "text"), ("id", "integer"), ("v", "text"), ("rid", "integer")), ("code", "id"))
TABLES = (M, L)

SCHEMA = """
CREATE TABLE m (id int, at date, v text, rid int NOT NULL, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
CREATE TABLE m_2024 PARTITION OF m FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE m_2025 PARTITION OF m FOR VALUES FROM ('2025-01-01') TO ('2026-01-01') PARTITION BY RANGE (id);
CREATE TABLE m_2025_lo PARTITION OF m_2025 FOR VALUES FROM (MINVALUE) TO (100);
CREATE TABLE m_2025_rest PARTITION OF m_2025 DEFAULT;
CREATE TABLE m_default PARTITION OF m DEFAULT;
CREATE TABLE l (code text, id int, v text, rid int NOT NULL, PRIMARY KEY (code, id)) PARTITION BY LIST (code);
CREATE TABLE l_eu PARTITION OF l FOR VALUES IN ('eu');
CREATE TABLE l_us PARTITION OF l FOR VALUES IN ('us');
CREATE TABLE l_rest PARTITION OF l DEFAULT;
CREATE TABLE plain (id int PRIMARY KEY, v text);
INSERT INTO m VALUES (1, '2024-03-01', 'a', 1), (2, '2025-03-01', 'b', 2), (200, '2025-04-01', 'c', 3),
  (4, '2030-01-01', 'd', 4), (5, '2024-06-01', 'e', 5);
INSERT INTO l VALUES ('eu', 1, 'x', 1), ('us', 1, 'y', 2), ('zz', 1, 'z', 3);
INSERT INTO plain VALUES (1, 'p');
"""

#: after the copy, each a transaction the lake follows
FOLLOWED = [
    [
        "INSERT INTO m VALUES (6, '2024-07-01', 'f', 6), (300, '2025-05-01', 'g', 7)",
        "INSERT INTO l VALUES ('eu', 2, 'w', 4), ('qq', 2, 'q', 5)",
    ],
    ["UPDATE m SET v = 'a2' WHERE id = 1", "UPDATE l SET v = 'x2' WHERE code = 'eu' AND id = 1"],
    # rows moved across partitions (a key change of the root's key): 2024 -> 2025 (two levels down),
    # 2025_lo -> DEFAULT, DEFAULT -> 2024; eu -> us; us -> DEFAULT
    [
        "UPDATE m SET at = '2025-02-01' WHERE id = 1",
        "UPDATE m SET at = '2031-01-01' WHERE id = 2",
        "UPDATE m SET at = '2024-12-31' WHERE id = 4",
    ],
    [
        "UPDATE l SET code = 'us', v = 'moved' WHERE code = 'eu' AND id = 2",
        "UPDATE l SET code = 'xx' WHERE rid = 2",
    ],
    # a partition created after the slot, and one attached (made, filled, then attached before the next
    # capture: every change it had is the root's)
    [
        "CREATE TABLE m_2026 PARTITION OF m FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')",
        "INSERT INTO m VALUES (7, '2026-05-01', 'h', 8)",
    ],
    [
        "CREATE TABLE m_2027 (id int, at date, v text, rid int NOT NULL, PRIMARY KEY (id, at))",
        "INSERT INTO m_2027 VALUES (8, '2027-05-01', 'i', 9)",
        "ALTER TABLE m ATTACH PARTITION m_2027 FOR VALUES FROM ('2027-01-01') TO ('2028-01-01')",
    ],
    [
        "UPDATE m SET v = 'i2' WHERE id = 8",
        "UPDATE m SET at = '2027-06-01' WHERE id = 7",
        "DELETE FROM m WHERE id = 5",
        "DELETE FROM l WHERE code = 'zz'",
    ],
]
#: then what moves rows without a change event for each: one partition truncated, one detached
UNFOLLOWED = [
    ["TRUNCATE m_2024"],
    ["INSERT INTO l VALUES ('eu', 3, 'after', 6)", "ALTER TABLE m DETACH PARTITION m_default"],
]


def _state(db: PgDatabase) -> d.State:
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        for name, value in SESSION_SETTINGS.items():
            conn.execute(f"SET {name} = '{value}'".encode())
        return d.read_state(conn, TABLES)


def test_a_partitioned_table_lands_as_its_root(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    pg_db.execute(SCHEMA)
    landing = tmp_path / "landing"
    include = ("public.m", "public.l")  # patterns match the root's name; public.plain is left out
    options = CaptureOptions(pg_db.dsn, str(landing), "shop", include)
    first = capture_once(options)
    assert sorted(first.snapshot_rows.items()) == [("public.l", 3), ("public.m", 5)], first.lines()
    copied = _state(pg_db)
    followed = d.run_workload(pg_db, [d.Transaction(t) for t in FOLLOWED], TABLES)
    capture_once(options)
    routes = RoutesFile.parse((landing / "_capture" / "shop.partitions.json").read_text())
    by_relation = {r.relation: (r.root, r.start, r.end) for r in routes.routes}
    assert by_relation["public.m_2025_rest"] == ("public.m", 0, None)  # two levels down
    assert by_relation["public.m_2026"] == ("public.m", 0, None)  # created after the slot
    assert by_relation["public.m_2027"] == ("public.m", 0, None)  # made and attached since the last look
    assert not routes.copy_again, routes.copy_again

    pipeline = pipeline_file(tmp_path, max_files_per_batch=100)
    summary = run_pipeline(spark, str(pipeline))
    assert not summary.failed_tables and not summary.warnings, summary.lines()
    assert sum(b.quarantined for b in summary.batches) == 0, summary.lines()
    lake = tmp_path / "lake"
    assert sorted(p.name for p in (lake / "silver").iterdir()) == [
        "public.l", "public.l__history", "public.m", "public.m__history"
    ]  # fmt: skip
    snapshot_file = next(landing.glob("*-snapshot-*.parquet"))
    taken = pq.read_table(snapshot_file).slice(0, 1).to_pylist()[0]
    frames = [
        f for p in sorted(landing.glob("shop-*.json")) for f in d.read_frames(p.read_text().splitlines(), 2)
    ]
    start = d.Frame(0, taken["commit_lsn"], taken["commit_time"], [])
    timeline = d.map_commits([d.Commit(-1, 0, copied), *followed], [start, *frames], TABLES)
    problems = d.check_lake(d.collect_silver(spark, lake, TABLES), timeline, TABLES)
    assert not problems, "\n".join(problems[:30])

    # a partition truncated alone, one detached: the run says which table to copy again, and the
    # truncate is quarantined, never applied to the whole root
    d.run_workload(pg_db, [d.Transaction(t) for t in UNFOLLOWED], TABLES)
    capture_once(options)
    summary = run_pipeline(spark, str(pipeline))
    lines = "\n".join(summary.lines())
    assert "warning: table public.m: partition public.m_2024 was truncated at" in lines, lines
    assert "warning: table public.m: partition public.m_default was detached or dropped at" in lines, lines
    assert "copy it again (resolver capture --resnapshot 'public.m')" in lines, lines
    assert sum(b.quarantined for b in summary.batches) == 1, lines
    reasons = [r.reason for r in spark.read.format("delta").load(str(lake / "quarantine")).collect()]
    assert len(reasons) == 1 and "a TRUNCATE of public.m_2024, a partition of public.m" in reasons[0]
    silver = d.collect_silver(spark, lake, TABLES)
    now = _state(pg_db)
    assert not d.diff_table(L, now["l"], silver.snapshot["l"], "l now")  # l follows every commit
    assert d.diff_table(M, now["m"], silver.snapshot["m"], "m now"), "m cannot follow these by itself"

    # copied again: equal again, and the warnings settled
    resnapshot(options, ["public.m"])
    summary = run_pipeline(spark, str(pipeline))
    assert not summary.warnings, summary.lines()
    silver = d.collect_silver(spark, lake, TABLES)
    problems = [p for t in TABLES for p in d.diff_table(t, now[t.name], silver.snapshot[t.name], "now")]
    assert not problems, "\n".join(problems)


def test_a_capture_can_keep_each_partition_as_a_table(pg_db: PgDatabase, tmp_path: Path) -> None:
    """``partitions: leaves``: every leaf partition a table of its own, as wal2json names them, with no
    routes for the readers."""
    pg_db.execute(SCHEMA)
    landing = tmp_path / "landing"
    summary = capture_once(CaptureOptions(pg_db.dsn, str(landing), "leaves", partitions=Partitions.LEAVES))
    assert sorted(summary.snapshot_rows.items()) == [
        ("public.l_eu", 1), ("public.l_rest", 1), ("public.l_us", 1), ("public.m_2024", 2),
        ("public.m_2025_lo", 1), ("public.m_2025_rest", 1), ("public.m_default", 1), ("public.plain", 1),
    ]  # fmt: skip
    assert not (landing / "_capture" / "leaves.partitions.json").exists()
