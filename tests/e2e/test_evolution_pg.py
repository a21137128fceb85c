"""Column types that change mid-stream, from a real PostgreSQL: widened in place, or refused in one line."""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from resolver import ingest
from resolver.errors import ConfigError
from resolver.formats.wal2json import Event, format_lsn, read_lines
from resolver.lake.delta import partition_columns
from resolver.lake.folders import changes_path, history_path, schema_log_path, snapshot_path
from resolver.lake.tables import REWRITE_COMMIT
from resolver.models import Format
from tests.harness.postgres import PgDatabase, write_lines

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

WIDENINGS = """
BEGIN;
UPDATE evo SET n = 3 WHERE id = 1;
ALTER TABLE evo ALTER COLUMN n TYPE bigint;
UPDATE evo SET n = 9000000000 WHERE id = 2;
COMMIT;
ALTER TABLE evo ALTER COLUMN amount TYPE numeric(14,4);
UPDATE evo SET amount = 123456.7891 WHERE id = 1;
ALTER TABLE evo ALTER COLUMN ratio TYPE double precision;
UPDATE evo SET ratio = 0.1 WHERE id = 2;
ALTER TABLE evo ALTER COLUMN d TYPE timestamp;
UPDATE evo SET d = '2024-05-06 07:08:09' WHERE id = 1;
ALTER TABLE evo ALTER COLUMN id TYPE bigint;
UPDATE evo SET id = 5000000000 WHERE id = 2;
INSERT INTO evo VALUES (7, 1, 1, 1, '2024-01-01', 'seven');
"""


def _capture(pg_db: PgDatabase, path: Path) -> str:
    write_lines(path, pg_db.capture("s", 2, consume=True))
    return str(path)


def test_widened_columns_keep_every_value_in_any_delivery_order(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    pg_db.execute(
        "CREATE TABLE evo (id int PRIMARY KEY, n smallint, amount numeric(10,2), ratio real, d date, "
        "note text)"
    )
    pg_db.create_slot("s")
    pg_db.execute(
        "INSERT INTO evo VALUES (1, 1, 1.50, 0.5, '2024-01-01', 'a'), (2, 2, 2.25, 1.5, '2024-01-02', 'b')"
    )
    first = _capture(pg_db, tmp_path / "1.json")
    pg_db.execute(WIDENINGS)
    second = _capture(pg_db, tmp_path / "2.json")
    expected = pg_db.query("SELECT id, n, amount, ratio, d, note FROM evo ORDER BY id")
    assert expected[1] == (7, 1, Decimal("1.0000"), 1.0, expected[1][4], "seven")

    lakes = {}
    for name, order in (("in-order", [first, second]), ("reversed", [second, first])):
        lake = str(tmp_path / name)
        for path in order:
            ingest(spark, [path], lake, "wal2json-v2")
        lakes[name] = lake
        snap = spark.read.format("delta").load(snapshot_path(lake, "public.evo"))
        types = dict(snap.dtypes)
        assert {c: types[c] for c in ("id", "n", "amount", "ratio", "d")} == {
            "id": "bigint",
            "n": "bigint",
            "amount": "decimal(14,4)",
            "ratio": "double",
            "d": "timestamp_ntz",
        }
        got = [
            tuple(r) for r in snap.select("id", "n", "amount", "ratio", "d", "note").orderBy("id").collect()
        ]
        assert got == expected, name
        history = spark.read.format("delta").load(history_path(lake, "public.evo"))
        # the values written before each change are still there, widened (1.50 -> 1.5000)
        oldest = history.orderBy("__start_lsn").select("id", "n", "amount", "ratio").limit(2).collect()
        assert sorted(tuple(r) for r in oldest) == [
            (1, 1, Decimal("1.5000"), 0.5),
            (2, 2, Decimal("2.2500"), 1.5),
        ]
        moved = history.filter("__moved_from IS NOT NULL").select("id", "__moved_from.id").collect()
        assert [tuple(r) for r in moved] == [(5000000000, 2)]
    for path in (snapshot_path, history_path):
        a = spark.read.format("delta").load(path(lakes["in-order"], "public.evo"))
        b = spark.read.format("delta").load(path(lakes["reversed"], "public.evo")).select(*a.columns)
        assert a.exceptAll(b).isEmpty() and b.exceptAll(a).isEmpty()
    log = spark.read.format("delta").load(schema_log_path(lakes["in-order"]))
    got = {tuple(r) for r in log.select("version", "change", "column", "old_type", "new_type").collect()}
    added = {
        (1, "added", c, None, t) for c, t in [("id", "int"), ("n", "smallint"), ("amount", "decimal(10,2)")]
    }
    assert added <= got
    assert {r for r in got if r[0] == 2} == {
        (2, "widened", "n", "smallint", "bigint"),
        (2, "widened", "amount", "decimal(10,2)", "decimal(14,4)"),
        (2, "widened", "ratio", "float", "double"),
        (2, "widened", "d", "date", "timestamp_ntz"),
        (2, "widened", "id", "int", "bigint"),
    }
    snap_props = spark.sql(
        f"DESCRIBE DETAIL delta.`{snapshot_path(lakes['in-order'], 'public.evo')}`"
    ).first()
    assert snap_props is not None and snap_props["properties"]["resolver.schemaVersion"] == "2"
    # widening is metadata in the change store (its files from the first batch were not rewritten), and
    # a rewrite of the snapshot and history (plain tables every Delta reader reads: no typeWidening)
    log = Path(changes_path(lakes["in-order"], "public.evo")) / "_delta_log"
    assert any("typeWidening" in p.read_text() for p in log.glob("*.json"))
    for path in (snapshot_path, history_path):
        silver_log = Path(path(lakes["in-order"], "public.evo")) / "_delta_log"
        assert not any("typeWidening" in p.read_text() for p in silver_log.glob("*.json"))
        assert any(REWRITE_COMMIT in p.read_text() for p in silver_log.glob("*.json"))
    rewritten = DeltaTable.forPath(spark, history_path(lakes["in-order"], "public.evo"))
    assert partition_columns(rewritten) == ["__is_current"]  # the rewrite kept open versions apart


def _tree(root: str) -> dict[str, int]:
    out = {}
    for folder, _, files in os.walk(root):
        for f in files:
            p = os.path.join(folder, f)
            out[p] = os.path.getsize(p)
    return out


def test_an_unsafe_type_change_fails_the_batch_and_writes_nothing(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    pg_db.execute(
        "CREATE TABLE codes (id int PRIMARY KEY, code text); CREATE TABLE other (id int PRIMARY KEY)"
    )
    pg_db.create_slot("s")
    pg_db.execute("INSERT INTO codes VALUES (1, '12'); INSERT INTO other VALUES (1)")
    first = _capture(pg_db, tmp_path / "1.json")
    pg_db.execute(
        "INSERT INTO other VALUES (2);\n"
        "ALTER TABLE codes ALTER COLUMN code TYPE integer USING code::integer;\n"
        "UPDATE codes SET code = 13 WHERE id = 1;"
    )
    second = _capture(pg_db, tmp_path / "2.json")
    lake = str(tmp_path / "lake")
    ingest(spark, [first], lake, "wal2json-v2")
    before = _tree(lake)

    update = next(
        e.row
        for e in read_lines(Path(second).read_bytes().splitlines(), second, Format.WAL2JSON_V2)
        if isinstance(e, Event) and e.row["table"] == "public.codes"
    )
    with pytest.raises(ConfigError) as err:
        ingest(spark, [second], lake, "wal2json-v2")
    assert str(err.value) == (
        "table public.codes: column code changes type from string to int (PostgreSQL integer) at commit LSN "
        f"{format_lsn(update['commit_lsn'])} ({second}:{update['source_line']}), which is not a safe "
        "widening; nothing was written. Pin the column's type in public.codes.yaml "
        "(columns: - name: code, type: ...) to keep it"
    )
    assert _tree(lake) == before  # bronze, quarantine and every table of the batch (public.other too)
    snap = spark.read.format("delta").load(snapshot_path(lake, "public.codes"))
    assert [tuple(r) for r in snap.select("id", "code").collect()] == [(1, "12")]
