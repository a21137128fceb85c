"""wal2json test vectors 16 (ADD/DROP COLUMN) and 21 (RENAME COLUMN mid-transaction, FULL identity) as golden
cases: their SQL runs on our PostgreSQL, the stream is captured in both formats (with commit LSNs, which the
vectors' own calls leave out) and the lake must equal the database. The captured column lists must be the
vector's, so the golden output and our capture show the same schema changes."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from resolver import ingest
from resolver.formats.wal2json import Event, format_lsn, read_lines
from resolver.lake.folders import history_path, snapshot_path
from resolver.models import Format
from tests.harness.postgres import PgDatabase, split_sql, write_lines

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

VECTORS = Path(__file__).resolve().parents[3] / "shared" / "reference" / "wal2json_vectors" / "index.json"
HINTS = "columns:\n  - name: g\n    renamed_from: [a]\n  - name: f\n    renamed_from: [d]\n"


def _vector(prefix: str) -> dict[str, Any]:
    return next(v for v in json.loads(VECTORS.read_text("utf-8")) if v["name"].startswith(prefix))


def _run_workload(pg_db: PgDatabase, vector: dict[str, Any]) -> None:
    """The vector's SQL without psql commands, its own decoding calls and its final DROPs."""
    script = "\n".join(line for line in vector["sql"].splitlines() if not line.startswith("\\"))
    keep = [
        s
        for s in split_sql(script)
        if "pg_logical_slot_peek_changes" not in s
        and "pg_drop_replication_slot" not in s
        and not s.upper().startswith("DROP TABLE")
    ]
    pg_db.execute(";\n".join(keep) + ";")


def _columns_v2(rows: list[str]) -> list[list[str]]:
    out = []
    for row in rows:
        rec = json.loads(row)
        if rec.get("action") in ("I", "U"):
            out.append([c["name"] for c in rec["columns"]])
    return out


def _snapshot(spark: SparkSession, lake: str, table: str, columns: str) -> list[tuple[Any, ...]]:
    df = spark.read.format("delta").load(snapshot_path(lake, table))
    return sorted(tuple(r) for r in df.select(*columns.split(",")).collect())


def test_vector_16_added_and_dropped_columns(spark: SparkSession, pg_db: PgDatabase, tmp_path: Path) -> None:
    vector = _vector("16_")
    _run_workload(pg_db, vector)
    v2 = pg_db.capture("regression_slot", 2)
    golden = next(o for o in vector["outputs"] if o["options"] == [["format-version", "2"]])
    assert _columns_v2(v2) == _columns_v2(golden["rows"])  # a,b  a,b  a,c  a,c
    for fmt in (1, 2):
        path = tmp_path / f"v{fmt}.json"
        write_lines(path, pg_db.capture("regression_slot", fmt))
        lake = str(tmp_path / f"lake{fmt}")
        ingest(spark, [str(path)], lake, f"wal2json-v{fmt}")
        assert pg_db.query("SELECT a, c FROM w2j_position ORDER BY a") == [(1, None), (5, 7)]
        # b was dropped: it stays in the lake, history keeps row 1's values, and from the first insert
        # without it (row 5's, where the lake learns of the drop) every row holds NULL there
        assert _snapshot(spark, lake, "public.w2j_position", "a,b,c") == [(1, None, None), (5, None, 7)]
        history = spark.read.format("delta").load(history_path(lake, "public.w2j_position"))
        got = sorted([tuple(r) for r in history.select("a", "b", "c", "__is_current").collect()], key=str)
        assert got == [
            (1, 2, None, False),
            (1, 3, None, False),
            (1, None, None, True),
            (5, None, 6, False),
            (5, None, 7, True),
        ]
        row5 = history.filter("a = 5").agg({"__start_lsn": "min"}).first()
        row1 = history.filter("a = 1 AND __is_current").select("__start_lsn").first()
        assert row5 is not None and row1 is not None and row1[0] == row5[0]  # the drop's commit


@pytest.mark.parametrize("hint", ["from-the-start", "added-later"])
def test_vector_21_renamed_columns_keep_their_values(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path, hint: str
) -> None:
    """With ``renamed_from`` hints (g was a, f was d) the lake has the new names and every value; added
    after the lake was created, the hints rename its columns in place (Delta column mapping)."""
    vector = _vector("21_")
    _run_workload(pg_db, vector)
    v2 = pg_db.capture("regression_slot", 2)
    golden = next(o for o in vector["outputs"] if ["format-version", "2"] in o["options"])
    assert _columns_v2(v2) == _columns_v2(golden["rows"])  # a,b,c,d,e ... then g,b,c,f,e
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    for table in ("w2j_rename_pk", "w2j_rename_ri"):
        (schemas / f"public.{table}.yaml").write_text(f"table: public.{table}\n{HINTS}", "utf-8")
    # the first batch ends before the first rename
    txns: list[list[str]] = []
    for line in v2:
        if json.loads(line)["action"] == "B":
            txns.append([])
        txns[-1].append(line)
    first = [line for t in txns[:2] for line in t]
    rest = [line for t in txns[2:] for line in t]
    assert '"name":"f"' not in "".join(first) and '"name":"f"' in "".join(rest)
    lake = str(tmp_path / "lake")
    for i, rows in enumerate((first, rest)):
        path = tmp_path / f"{i}.json"
        write_lines(path, rows)
        use = str(schemas) if hint == "from-the-start" or i == 1 else None
        ingest(spark, [str(path)], lake, "wal2json-v2", use)
    for table in ("w2j_rename_pk", "w2j_rename_ri"):
        expected = sorted(pg_db.query(f"SELECT g, b, c, f, e FROM {table}"))
        assert len(expected) == 4 and expected[0][4] == Decimal("8.760")
        assert _snapshot(spark, lake, f"public.{table}", "g,b,c,f,e") == expected
        snap = spark.read.format("delta").load(snapshot_path(lake, f"public.{table}"))
        assert not {"a", "d"} & set(snap.columns)
        history = spark.read.format("delta").load(history_path(lake, f"public.{table}"))
        # the value written under the old name reads under the new one
        assert history.filter("g = 123 AND NOT __is_current").select("e").collect()[0][0] == Decimal("4.560")


def test_a_rename_without_a_hint_is_reported_with_the_hint_to_add(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    pg_db.execute("CREATE TABLE people (id int PRIMARY KEY, mail text, age int)")
    pg_db.create_slot("s")
    pg_db.execute(
        "INSERT INTO people VALUES (1, 'a@x', 30);\n"
        "BEGIN;\nUPDATE people SET age = 31 WHERE id = 1;\n"
        "ALTER TABLE people RENAME COLUMN mail TO email;\n"
        "INSERT INTO people VALUES (2, 'b@x', 40);\nCOMMIT;"
    )
    path = tmp_path / "1.json"
    write_lines(path, pg_db.capture("s", 2))
    summary = ingest(spark, [str(path)], str(tmp_path / "lake"), "wal2json-v2")
    (table,) = summary.tables
    parsed = read_lines(path.read_bytes().splitlines(), str(path), Format.WAL2JSON_V2)
    rows = [e.row for e in parsed if isinstance(e, Event)]
    lsn = next(e["commit_lsn"] for e in rows if "email" in (e["column_names"] or []))
    assert table.notes == [
        f"column email (string) first appears at commit LSN {format_lsn(lsn)} and mail (string) is no longer "
        "sent: if it was renamed, add to public.people.yaml (columns: - name: email, renamed_from: [mail]) "
        "before the next batch; until then they are two columns"
    ]
    assert f"public.people: {table.notes[0]}" in summary.lines()
    # the unrelated int column did not look renamed; without the hint the rename is a drop plus an add:
    # both columns are kept, mail is NULL from the drop on and its value stays in history
    lake = str(tmp_path / "lake")
    assert _snapshot(spark, lake, "public.people", "id,mail,email,age") == [
        (1, None, None, 31),
        (2, None, "b@x", 40),
    ]
    history = spark.read.format("delta").load(history_path(lake, "public.people"))
    assert [r[0] for r in history.filter("id = 1 AND NOT __is_current").select("mail").collect()] == ["a@x"]


def test_a_renamed_key_column_without_a_hint_fails_with_one_line(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    _run_workload(pg_db, _vector("21_"))
    path = tmp_path / "v2.json"
    write_lines(path, pg_db.capture("regression_slot", 2))
    with pytest.raises(Exception) as err:
        ingest(spark, [str(path)], str(tmp_path / "lake"), "wal2json-v2")
    assert str(err.value) == (
        "table public.w2j_rename_pk: the batch reports different primary keys ['a', 'd'], ['a', 'f'], "
        "['g', 'f']; if a key column was renamed, add renamed_from hints to public.w2j_rename_pk.yaml "
        "(columns: - name: <new name>, renamed_from: [<old name>])"
    )


def test_a_dropped_column_keeps_its_past_and_is_null_from_the_drop_on(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    """DROP COLUMN b, then ADD COLUMN b again: the lake learns of the drop at the first insert without b.
    From there every row holds NULL in b (a new version for the rows that had a value), history keeps the
    values from before, and after the column comes back the snapshot equals PostgreSQL, in any order."""
    pg_db.execute("CREATE TABLE d (id int PRIMARY KEY, a text, b text)")
    pg_db.create_slot("s")
    pg_db.execute("INSERT INTO d VALUES (1, 'x', 'y'), (2, 'p', 'q'), (5, 'untouched', 'old')")
    first = tmp_path / "1.json"
    write_lines(first, pg_db.capture("s", 2, consume=True))
    pg_db.execute(
        "ALTER TABLE d DROP COLUMN b;\nINSERT INTO d VALUES (3, 'z');\nUPDATE d SET a = 'x2' WHERE id = 1;\n"
        "ALTER TABLE d ADD COLUMN b text;\nUPDATE d SET a = 'p2' WHERE id = 2;\n"
        "INSERT INTO d VALUES (4, 'w', 'new');"
    )
    second = tmp_path / "2.json"
    write_lines(second, pg_db.capture("s", 2, consume=True))
    expected = sorted(pg_db.query("SELECT id, a, b FROM d"))
    assert expected[4] == (5, "untouched", None)
    lakes = []
    for name, order in (("in-order", [first, second]), ("reversed", [second, first])):
        lake = str(tmp_path / name)
        for path in order:
            ingest(spark, [str(path)], lake, "wal2json-v2")
        assert _snapshot(spark, lake, "public.d", "id,a,b") == expected, name
        history = spark.read.format("delta").load(history_path(lake, "public.d"))
        kept = {tuple(r) for r in history.filter("NOT __is_current").select("id", "a", "b").collect()}
        assert {(1, "x", "y"), (2, "p", "q"), (5, "untouched", "old")} <= kept
        lakes.append(lake)
        log = spark.read.format("delta").load(f"{lake}/_resolver/schema_log")
        assert [r[0] for r in log.filter("change = 'dropped'").select("column").collect()] == ["b"]
    for path in (snapshot_path, history_path):
        a = spark.read.format("delta").load(path(lakes[0], "public.d"))
        b = spark.read.format("delta").load(path(lakes[1], "public.d")).select(*a.columns)
        assert a.exceptAll(b).isEmpty() and b.exceptAll(a).isEmpty()
