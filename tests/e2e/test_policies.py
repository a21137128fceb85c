"""Policies for unknown tables, unknown columns and unsafe type changes (resolver.config.policy), on events
from a real PostgreSQL: evolve takes them, fail refuses the batch in one line and writes nothing, quarantine
sends the events whole to the quarantine table and applies the rest."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resolver import BatchOptions, ingest
from resolver.config.policy import Policies, Policy
from resolver.config.tableschema import parse_schema
from resolver.errors import ConfigError
from resolver.formats.wal2json import Event, format_lsn, read_lines
from resolver.lake.folders import snapshot_path
from resolver.models import Format
from tests.harness.postgres import PgDatabase, write_lines

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

CODES = """
table: public.codes
primary_key: [id]
columns:
  - {name: id}
  - {name: code}
"""


def _options(**policies: Policy) -> BatchOptions:
    return BatchOptions(policies=Policies(**policies))


def _capture(pg_db: PgDatabase, path: Path) -> str:
    write_lines(path, pg_db.capture("s", 2, consume=True))
    return str(path)


def _tree(root: str) -> dict[str, int]:
    return {
        os.path.join(folder, f): os.path.getsize(os.path.join(folder, f))
        for folder, _, files in os.walk(root)
        for f in files
    }


def _first(path: str, table: str) -> dict:
    return next(
        e.row
        for e in read_lines(Path(path).read_bytes().splitlines(), path, Format.WAL2JSON_V2)
        if isinstance(e, Event) and e.row["table"] == table
    )


def _rows(spark: SparkSession, lake: str, table: str, *cols: str) -> list[tuple]:
    df = spark.read.format("delta").load(snapshot_path(lake, table))
    return sorted(tuple(r) for r in df.select(*cols).collect())


def _quarantine(spark: SparkSession, lake: str) -> list[tuple]:
    q = spark.read.format("delta").load(os.path.join(lake, "quarantine"))
    return sorted(tuple(r) for r in q.select("source_line", "reason", "raw").collect())


@pytest.fixture
def stream(pg_db: PgDatabase, tmp_path: Path) -> dict[str, str]:
    """Batch 1: codes and other tables; batch 2: an ADD COLUMN on codes; batch 3: code becomes an integer."""
    pg_db.execute(
        "CREATE TABLE codes (id int PRIMARY KEY, code text); CREATE TABLE other (id int PRIMARY KEY)"
    )
    pg_db.create_slot("s")
    pg_db.execute("INSERT INTO codes VALUES (1, '12'), (2, '20'); INSERT INTO other VALUES (1)")
    first = _capture(pg_db, tmp_path / "1.json")
    pg_db.execute(
        "ALTER TABLE codes ADD COLUMN note text; INSERT INTO codes VALUES (3, '30', 'n');"
        "UPDATE codes SET code = '21' WHERE id = 2; INSERT INTO other VALUES (2)"
    )
    second = _capture(pg_db, tmp_path / "2.json")
    pg_db.execute(
        "ALTER TABLE codes ALTER COLUMN code TYPE integer USING code::integer;"
        "UPDATE codes SET code = 13 WHERE id = 1; INSERT INTO other VALUES (3)"
    )
    third = _capture(pg_db, tmp_path / "3.json")
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "public.codes.yaml").write_text(CODES)
    return {"1": first, "2": second, "3": third, "schemas": str(schemas), "lake": str(tmp_path / "lake")}


def test_unknown_table_fail_names_the_table_and_writes_nothing(
    spark: SparkSession, stream: dict[str, str]
) -> None:
    lake, first = stream["lake"], stream["1"]
    other = _first(first, "public.other")
    with pytest.raises(ConfigError) as err:
        ingest(spark, [first], lake, "wal2json-v2", stream["schemas"], _options(unknown_table=Policy.FAIL))
    assert str(err.value) == (
        f"table public.other has no schema file: found 1 event(s), the first at commit LSN "
        f"{format_lsn(other['commit_lsn'])} ({first}:{other['source_line']}), expected public.other.yaml in "
        "the schemas folder (unknown_table is 'fail'; nothing was written)"
    )
    assert not os.path.exists(lake)


def test_unknown_table_quarantine_keeps_its_events_and_applies_the_rest(
    spark: SparkSession, stream: dict[str, str]
) -> None:
    lake, first = stream["lake"], stream["1"]
    options = _options(unknown_table=Policy.QUARANTINE)
    summary = ingest(spark, [first], lake, "wal2json-v2", stream["schemas"], options)
    assert (summary.events_read, summary.accepted, summary.quarantined, summary.duplicates) == (3, 2, 1, 0)
    assert [t.table for t in summary.tables] == ["public.codes"]
    assert _rows(spark, lake, "public.codes", "id", "code") == [(1, "12"), (2, "20")]
    assert not os.path.exists(snapshot_path(lake, "public.other"))
    other = _first(first, "public.other")
    [(line, reason, raw)] = _quarantine(spark, lake)
    assert line == other["source_line"]
    assert reason == (
        f"public.other insert at commit LSN {format_lsn(other['commit_lsn'])}, change {other['position']} "
        "of its transaction: table public.other has no schema file (unknown_table: quarantine)"
    )
    event = json.loads(raw)  # the whole change event: enough to replay it
    assert (event["table"], event["column_names"], event["column_values"]) == ("public.other", ["id"], ["1"])
    # the same batch again: nothing new anywhere
    again = ingest(spark, [first], lake, "wal2json-v2", stream["schemas"], options)
    assert (again.accepted, again.quarantined) == (0, 0)
    assert len(_quarantine(spark, lake)) == 1


def test_unknown_column_fail_and_quarantine(spark: SparkSession, stream: dict[str, str]) -> None:
    lake, second = stream["lake"], stream["2"]
    ingest(spark, [stream["1"]], lake, "wal2json-v2", stream["schemas"])
    before = _tree(lake)
    insert = _first(second, "public.codes")
    strict = _options(unknown_columns=Policy.FAIL)
    with pytest.raises(ConfigError) as err:
        ingest(spark, [second], lake, "wal2json-v2", stream["schemas"], strict)
    assert str(err.value) == (
        f"table public.codes: column note is not in public.codes.yaml, first at commit LSN "
        f"{format_lsn(insert['commit_lsn'])} ({second}:{insert['source_line']}); expected one of code, id "
        "(add it to the file's columns, or a renamed_from; unknown_columns is 'fail'; nothing was written)"
    )
    assert _tree(lake) == before

    # the schema file's own policy wins over the run's
    Path(stream["schemas"], "public.codes.yaml").write_text(CODES + "unknown_columns: quarantine\n")
    summary = ingest(spark, [second], lake, "wal2json-v2", stream["schemas"], strict)
    assert (summary.accepted, summary.quarantined) == (1, 2)  # other's insert; codes' insert and update
    assert _rows(spark, lake, "public.codes", "id", "code") == [(1, "12"), (2, "20")]
    assert _rows(spark, lake, "public.other", "id") == [(1,), (2,)]
    cols = spark.read.format("delta").load(snapshot_path(lake, "public.codes")).columns
    assert "note" not in cols
    reasons = [r for _, r, _ in _quarantine(spark, lake)]
    assert len(reasons) == 2
    assert all(
        r.endswith(": column note is not in public.codes.yaml (unknown_columns: quarantine)") for r in reasons
    )
    assert {r.split(" at ")[0] for r in reasons} == {"public.codes insert", "public.codes update"}


def test_unsafe_type_change_quarantine_keeps_the_old_type(
    spark: SparkSession, stream: dict[str, str]
) -> None:
    lake, third = stream["lake"], stream["3"]
    evolve = _options(unsafe_type_change=Policy.QUARANTINE)
    ingest(spark, [stream["1"], stream["2"]], lake, "wal2json-v2", None, evolve)
    summary = ingest(spark, [third], lake, "wal2json-v2", None, evolve)
    assert (summary.accepted, summary.quarantined) == (1, 1)
    assert _rows(spark, lake, "public.codes", "id", "code") == [(1, "12"), (2, "21"), (3, "30")]
    assert _rows(spark, lake, "public.other", "id") == [(1,), (2,), (3,)]
    update = _first(third, "public.codes")
    [(line, reason, raw)] = _quarantine(spark, lake)
    assert (line, json.loads(raw)["column_values"][:2]) == (update["source_line"], ["1", "13"])
    assert reason == (
        f"public.codes update at commit LSN {format_lsn(update['commit_lsn'])}, change {update['position']} "
        "of its transaction: column code has type integer, which its lake column (string) cannot be widened "
        "to (unsafe_type_change: quarantine)"
    )


def test_policy_values_are_checked_where_they_are_written() -> None:
    with pytest.raises(ConfigError) as err:
        parse_schema(CODES + "unsafe_type_change: evolve\n", "codes.yaml")
    assert str(err.value) == (
        "codes.yaml: unsafe_type_change: found 'evolve', expected 'fail' or 'quarantine': a type the lake "
        "cannot widen to cannot be taken without a lossy cast (pin the column's type in the schema file to "
        "cast on purpose)"
    )
    with pytest.raises(ConfigError) as err:
        parse_schema("table: public.t\nunknown_columns: fail\n", "t.yaml")
    assert str(err.value) == (
        "t.yaml: (top level): unknown_columns is 'fail' but no columns are listed: list the known columns "
        "under 'columns' (resolver schemas infer writes them)"
    )
    with pytest.raises(ConfigError) as err:
        parse_schema(CODES + "unknown_column: fail\n", "codes.yaml")
    assert "unknown key 'unknown_column' (did you mean 'unknown_columns'?)" in str(err.value)
    assert parse_schema(CODES).known_columns() == {"id", "code"}
    assert parse_schema("table: public.t\n").known_columns() is None
