"""The initial copy prints every value as wal2json streams it (issue 67), over the type matrix of
``tests.typematrix``: each type's output function, through domains (nested), for built-in types, enums,
arrays holding NULLs, quotes and braces, ranges, multiranges, composite types and extension types; and a
lake made of a copy and the stream after it equals ``SELECT * FROM`` each table."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from resolver import run_pipeline
from resolver.capture.snapshot import CaptureOptions, capture_once
from resolver.formats.wal2json import Event, read_lines
from resolver.models import Format
from tests import difftest as d
from tests import typematrix as m
from tests.harness.postgres import SESSION_SETTINGS, PgDatabase
from tests.pipelines import pipeline_file

pytestmark = [pytest.mark.postgres]


def _inserts(events: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[Any, ...]]:
    """Each insert as (table, its rid) -> its column names, types and value texts, and its key."""
    out = {}
    for e in events:
        if e["operation"] == "insert":
            row = dict(zip(e["column_names"], e["column_values"], strict=True))
            columns = (tuple(e["column_names"]), tuple(e["column_types"]), tuple(e["column_values"]))
            out[(e["table"], row["rid"])] = (*columns, tuple(e["primary_key"] or ()))
    return out


def _streamed(lines: list[str]) -> list[dict[str, Any]]:
    read = read_lines(io.BytesIO("".join(f"{x}\n" for x in lines).encode()), "stream", Format.WAL2JSON_V2)
    return [item.row for item in read if isinstance(item, Event)]


def test_the_copy_prints_every_value_as_wal2json_streams_it(pg_db: PgDatabase, tmp_path: Path) -> None:
    """The matrix's rows, inserted while a slot streams them, then copied by a capture's snapshot: for every
    row, the copy's event and the stream's hold the same column names, types, value texts and key."""
    pg_db.execute(m.SCHEMA_SQL)
    pg_db.create_slot("stream")
    for statement in m.ROWS:
        pg_db.execute(statement)
    streamed = _inserts(_streamed(pg_db.capture("stream", 2)))
    summary = capture_once(CaptureOptions(pg_db.dsn, str(tmp_path / "landing"), "snap"))
    copied = _inserts([row for f in summary.files for row in pq.read_table(f).to_pylist()])
    assert set(copied) == set(streamed) and len(copied) == m.ROW_COUNT, sorted(set(copied) ^ set(streamed))
    differences = []
    for where in sorted(streamed):
        names, types, values, key = streamed[where]
        got_names, got_types, got_values, got_key = copied[where]
        assert (got_names, got_key) == (names, key), where
        for name, *pairs in zip(names, types, got_types, values, got_values, strict=True):
            for what, want, got in zip(("type", "value"), pairs[::2], pairs[1::2], strict=True):
                if want != got:
                    found = f"{what} streamed {want!r}, copied {got!r}"
                    differences.append(f"{where[0]} rid {where[1]} {name}: {found}")
    assert not differences, "\n".join(differences)


def _state(dsn: str) -> d.State:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, value in SESSION_SETTINGS.items():
            conn.execute(f"SET {name} = '{value}'".encode())
        return d.read_state(conn, m.TABLES)


@pytest.mark.spark
def test_a_lake_of_the_copy_and_the_stream_equals_the_database(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    """The matrix's rows copied by ``resolver capture``, then a workload of updates (one leaving a TOASTed
    value out), key changes (padded ``character(n)``, ``inet`` and domain keys among them), deletes and
    inserts streamed, then ``resolver run``: every table's snapshot equals ``SELECT * FROM`` it, value for
    value (each column's text as its type prints it, or its typed value)."""
    pg_db.execute(m.SCHEMA_SQL)
    for statement in m.ROWS:
        pg_db.execute(statement)
    landing = tmp_path / "landing"
    first = capture_once(CaptureOptions(pg_db.dsn, str(landing), "shop"))
    assert first.snapshot_lsn is not None, first.lines()
    for transaction in m.WORKLOAD:
        pg_db.execute("BEGIN;\n" + ";\n".join(transaction) + ";\nCOMMIT;")
    capture_once(CaptureOptions(pg_db.dsn, str(landing), "shop"))
    summary = run_pipeline(spark, str(pipeline_file(tmp_path, max_files_per_batch=100)))
    assert not summary.failed_tables, summary.lines()
    assert sum(b.quarantined for b in summary.batches) == 0, summary.lines()
    silver = d.collect_silver(spark, tmp_path / "lake", m.TABLES)
    expected = _state(pg_db.dsn)
    problems = []
    for t in m.TABLES:
        problems += d.diff_table(t, expected[t.name], silver.snapshot[t.name], "snapshot vs PostgreSQL")
        current = [r for r in silver.history[t.name] if r["__is_current"] and not r["__is_deleted"]]
        problems += d.diff_table(t, expected[t.name], current, "history's current versions vs PostgreSQL")
    assert not problems, "\n".join(problems)
