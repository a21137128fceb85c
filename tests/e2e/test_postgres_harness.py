"""The PostgreSQL + wal2json test harness itself (tests/harness/postgres.py, tests/harness/fixtures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.postgres import PgDatabase, PgServer, capture_options, split_sql, write_lines

_seen_databases: list[str] = []


def test_split_sql_like_psql() -> None:
    script = """-- leading comment; not a statement
    INSERT INTO t VALUES ('a;b', E'c\\';d', $$e;f$$, $x$g;h$x$); /* ; */
    BEGIN; SELECT 'it''s; fine'; COMMIT; -- trailing comment ;
    """
    statements = split_sql(script)
    assert len(statements) == 4
    assert statements[0].endswith("$x$g;h$x$)")
    assert statements[1].startswith("/* ; */") and statements[1].endswith("BEGIN")
    assert statements[2:] == ["SELECT 'it''s; fine'", "COMMIT"]


def test_capture_options() -> None:
    assert capture_options(1) == [
        "format-version",
        "1",
        "include-xids",
        "1",
        "include-timestamp",
        "1",
        "include-lsn",
        "1",
        "include-pk",
        "1",
        "include-types",
        "1",
    ]
    v2 = capture_options(2, include_lsn=None, filter_tables="public.x", pretty_print=True)
    assert v2[:2] == ["format-version", "2"] and "include-lsn" not in v2
    assert v2[-6:] == ["include-transaction", "1", "filter-tables", "public.x", "pretty-print", "1"]


@pytest.mark.postgres
def test_server_is_running(pg_server: PgServer) -> None:
    assert pg_server.port > 0 and f"port={pg_server.port}" in pg_server.dsn
    settings = dict(
        pg_server.query(
            "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
            (["wal_level", "max_replication_slots", "fsync"],),
        )
    )
    assert settings == {"wal_level": "logical", "max_replication_slots": "10", "fsync": "off"}
    assert pg_server.query("SELECT current_setting('TimeZone'), current_setting('DateStyle')") == [
        ("UTC", "ISO, MDY")
    ]


@pytest.mark.postgres
def test_insert_is_captured_in_both_formats(pg_db: PgDatabase) -> None:
    pg_db.execute("CREATE TABLE public.items (id int PRIMARY KEY, label text, price numeric(6,2));")
    pg_db.create_slot("harness")
    pg_db.execute("INSERT INTO public.items VALUES (1, 'café; \"x\"', 9.50);")

    v2 = [json.loads(row) for row in pg_db.capture("harness", 2)]
    assert [rec["action"] for rec in v2] == ["B", "I", "C"]
    insert = v2[1]
    assert (insert["schema"], insert["table"]) == ("public", "items")
    assert {c["name"]: c["value"] for c in insert["columns"]} == {"id": 1, "label": 'café; "x"', "price": 9.5}
    assert '"value":9.50' in pg_db.capture("harness", 2)[1]  # the literal keeps the scale
    assert insert["pk"] == [{"name": "id", "type": "integer"}]
    assert {"xid", "timestamp", "lsn"} <= insert.keys() and v2[0]["xid"] == insert["xid"]
    assert v2[0]["timestamp"].endswith("+00")  # TimeZone=UTC in the decoding session

    v1_rows = pg_db.capture("harness", 1)
    assert len(v1_rows) == 1
    v1 = json.loads(v1_rows[0])
    assert v1["xid"] == insert["xid"] and len(v1["change"]) == 1
    change = v1["change"][0]
    assert change["kind"] == "insert" and change["columnnames"] == ["id", "label", "price"]
    assert change["columnvalues"] == [1, 'café; "x"', 9.5]
    assert change["pk"] == {"pknames": ["id"], "pktypes": ["integer"]}

    assert len(pg_db.capture("harness", 2, consume=True)) == 3  # peek did not consume; get does
    assert pg_db.capture("harness", 2) == []
    pg_db.drop_slot("harness")
    assert pg_db.query("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'harness'") == [(0,)]


@pytest.mark.postgres
def test_slot_left_behind_does_not_block_cleanup(pg_db: PgDatabase) -> None:
    pg_db.create_slot("leftover")  # pg_db's teardown drops it together with the database


@pytest.mark.postgres
@pytest.mark.parametrize("run", [1, 2])
def test_each_pg_db_is_a_separate_database(pg_server: PgServer, pg_db: PgDatabase, run: int) -> None:
    assert pg_db.query("SELECT current_database()") == [(pg_db.name,)]
    assert pg_db.name not in _seen_databases
    _seen_databases.append(pg_db.name)
    pg_db.execute("CREATE TABLE only_here (x int);")  # would fail on run 2 if the database were shared
    names = {row[0] for row in pg_server.query("SELECT datname FROM pg_database")}
    assert pg_db.name in names and not (set(_seen_databases[:-1]) & names)


def test_write_lines_is_byte_exact(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.json"
    write_lines(target, ['{"a":"é"}', b"\xff\x00raw", ""])
    assert target.read_bytes() == b'{"a":"\xc3\xa9"}\n\xff\x00raw\n\n'
