"""Ingestion end to end: a real PostgreSQL 15 + wal2json produces the input, real Delta tables come out.
One workload is captured in both formats; each test ingests (parts of) it into its own lake.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from resolver import ingest, run_pipeline
from resolver.formats.wal2json import parse_lsn
from resolver.lake.folders import snapshot_path
from tests.harness.postgres import PgDatabase, PgServer, write_lines

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

SCHEMA = """
CREATE TABLE vals (
    id int PRIMARY KEY, n numeric, n60 numeric, f8 float8, i8 bigint, arr int[], tarr text[], j json,
    jb jsonb, b bytea, big text, ts timestamptz, u uuid, flag boolean, note text);
ALTER TABLE vals ALTER COLUMN big SET STORAGE EXTERNAL;
CREATE TABLE pairs (a int, b text, v text, PRIMARY KEY (a, b));
CREATE TABLE scratch (id int PRIMARY KEY);
"""

WORKLOAD = """
INSERT INTO vals VALUES (1, 3.540, 123456789012345678901234567890.123456789012345678901234567890, 'NaN',
    9223372036854775807, '{1,NULL,3}', '{"a b","c,d","e\\"f",NULL}', '{"a": [1, 2.50, "x"]}',
    '{"b": 1.50, "a": null}', '\\x00ff10', repeat('é', 6000), '2024-02-29 13:14:15.123456+00',
    'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true, '');
INSERT INTO vals (id, f8, n, note) VALUES (2, 'Infinity', 'NaN', NULL), (3, 1e300, 0.000001, 'ünï ☃ 🚀');
BEGIN; INSERT INTO pairs VALUES (1, 'x', 'first'), (1, 'y', 'second');
UPDATE pairs SET v = 'changed' WHERE a = 1 AND b = 'x';
UPDATE pairs SET v = 'again' WHERE a = 1 AND b = 'x';
COMMIT;
UPDATE vals SET note = 'toast untouched' WHERE id = 1;
UPDATE vals SET id = 10 WHERE id = 2;
UPDATE pairs SET b = 'z' WHERE a = 1 AND b = 'y';
DELETE FROM vals WHERE id = 3;
BEGIN;
CREATE INDEX vals_note ON vals (note);
COMMIT;
SELECT pg_logical_emit_message(true, 'app', 'hello');
INSERT INTO scratch VALUES (1), (2);
INSERT INTO vals (id, note) VALUES (3, 're-inserted');
TRUNCATE scratch;
"""


@pytest.fixture(scope="module")
def captured(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The workload above, decoded by wal2json in format 1 and 2, plus PostgreSQL's own text of vals."""
    db = pg_server.create_database("ingest_workload")
    try:
        db.execute(SCHEMA)
        db.create_slot("s")
        db.execute(WORKLOAD)
        out = tmp_path_factory.mktemp("captured")
        v1, v2 = db.capture("s", 1), db.capture("s", 2)
        write_lines(out / "v1.json", v1)
        write_lines(out / "v2.json", v2)
        text = _table_text(db, "vals")
        db.drop_slot("s")
    finally:
        pg_server.drop_database("ingest_workload")
    return {"dir": out, "v1": v1, "v2": v2, "vals": text}


def _table_text(db: PgDatabase, table: str) -> dict[str, dict[str, str | None]]:
    cols = [
        r[0]
        for r in db.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "ORDER BY ordinal_position",
            (table,),
        )
    ]
    rows = db.query(f"SELECT {', '.join(f'{c}::text' for c in cols)} FROM {table}")
    return {r[0]: dict(zip(cols, r, strict=True)) for r in rows}


def _bronze(spark: SparkSession, lake: Path) -> list[dict[str, Any]]:
    df = spark.read.format("delta").load(str(lake / "bronze/change_events"))
    return [r.asDict() for r in df.orderBy("commit_lsn", "position").collect()]


def _identity(e: dict[str, Any]) -> tuple[Any, ...]:
    return (
        e["table"],
        e["operation"],
        e["commit_lsn"],
        e["position"],
        e["column_names"],
        e["column_values"],
        e["old_key_names"],
        e["old_key_values"],
    )


def _data_records(rows: list[str]) -> list[dict[str, Any]]:
    return [r for r in map(json.loads, rows) if r["action"] in "IUDT"]


def test_every_event_once_in_bronze_in_commit_order(
    spark: SparkSession, captured: dict[str, Any], tmp_path: Path
) -> None:
    summary = ingest(spark, [str(captured["dir"] / "v2.json")], str(tmp_path), "wal2json-v2")
    records = _data_records(captured["v2"])
    bronze = _bronze(spark, tmp_path)
    assert summary.events_read == summary.accepted == len(records) == len(bronze)
    assert summary.quarantined == 0 and summary.messages == 1
    # file order is commit order: bronze ordered by (commit_lsn, position) replays the stream exactly
    assert [(e["table"].split(".")[1], e["operation"][0].upper()) for e in bronze] == [
        (r["table"], r["action"]) for r in records
    ]
    keys = [(e["commit_lsn"], e["position"]) for e in bronze]
    assert len(set(keys)) == len(keys)
    commits = [parse_lsn(r["nextlsn"]) for r in map(json.loads, captured["v2"]) if r["action"] == "C"]
    assert {e["commit_lsn"] for e in bronze} <= set(commits)
    # three changes to one row in one transaction keep their order inside it
    pairs = [e for e in bronze if e["table"] == "public.pairs" and e["commit_lsn"] == bronze[3]["commit_lsn"]]
    assert [e["position"] for e in pairs] == [0, 1, 2, 3]


def test_v1_and_v2_give_the_same_events_and_order(
    spark: SparkSession, captured: dict[str, Any], tmp_path: Path
) -> None:
    ingest(spark, [str(captured["dir"] / "v2.json")], str(tmp_path / "a"), "wal2json-v2")
    ingest(spark, [str(captured["dir"] / "v1.json")], str(tmp_path / "b"), "wal2json-v1")
    v2 = [_identity(e) for e in _bronze(spark, tmp_path / "a") if e["operation"] != "truncate"]
    v1 = [_identity(e) for e in _bronze(spark, tmp_path / "b")]
    assert v1 == v2  # format 1 cannot show the truncate (spec 2.6); everything else is identical


def test_replay_and_overlapping_files_add_nothing(
    spark: SparkSession, captured: dict[str, Any], tmp_path: Path
) -> None:
    whole = str(captured["dir"] / "v2.json")
    rows = captured["v2"]
    commits = [i for i, r in enumerate(rows) if json.loads(r)["action"] == "C"]
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    write_lines(first, rows[: commits[len(commits) * 2 // 3] + 1])  # overlapping at transaction borders
    write_lines(second, rows[commits[len(commits) // 3] + 1 :])
    lake = tmp_path / "lake"
    ingest(spark, [str(first), str(second)], str(lake), "wal2json-v2")
    once = _bronze(spark, lake)
    assert len(once) == len(_data_records(rows))
    again = ingest(spark, [whole], str(lake), "wal2json-v2")
    assert again.accepted == 0 and again.duplicates == again.events_read == len(once)
    assert [_identity(e) for e in _bronze(spark, lake)] == [_identity(e) for e in once]


def test_values_come_through_exact(spark: SparkSession, captured: dict[str, Any], tmp_path: Path) -> None:
    ingest(spark, [str(captured["dir"] / "v2.json")], str(tmp_path), "wal2json-v2")
    inserts: dict[str, dict[str, str | None]] = {}
    for e in _bronze(spark, tmp_path):
        if e["table"] == "public.vals" and e["operation"] == "insert":  # first insert of each id
            inserts.setdefault(
                e["column_values"][0], dict(zip(e["column_names"], e["column_values"], strict=True))
            )
    pg = captured["vals"]["1"]
    got = inserts["1"]
    for col in ("n", "n60", "i8", "arr", "tarr", "j", "jb", "big", "ts", "u", "flag"):  # note changes later
        assert got[col] == pg[col], col
    assert got["n60"] == "123456789012345678901234567890.123456789012345678901234567890"
    assert got["n"] == "3.540" and got["note"] == ""  # scale kept; empty string is not NULL
    assert len(got["big"]) == 6000
    assert "\\x" + got["b"] == pg["b"]  # bytea arrives as hex without the \x prefix (spec 5)
    assert got["f8"] is None and inserts["2"]["f8"] is None  # NaN / Infinity arrive as null (spec 5)
    assert inserts["3"]["f8"] == "1e+300" and inserts["3"]["n"] == "0.000001"
    assert inserts["3"]["note"] == "ünï ☃ 🚀"
    # the update that left the TOASTed column alone does not carry it (absent, not NULL)
    toast = next(
        e
        for e in _bronze(spark, tmp_path)
        if e["operation"] == "update"
        and e["table"] == "public.vals"
        and "toast untouched" in e["column_values"]
    )
    assert "big" not in toast["column_names"]


def test_dirty_file_quarantines_every_bad_line_and_applies_every_good_one(
    spark: SparkSession, tmp_path: Path
) -> None:
    dirty, clean = SAMPLES / "dirty/0001.json", SAMPLES / "wal2json-v2/0001.json"
    summary = ingest(spark, [str(dirty)], str(tmp_path / "dirty"), "wal2json-v2")
    ingest(spark, [str(clean)], str(tmp_path / "clean"), "wal2json-v2")
    strip = lambda es: [_identity(e)[:-4] + (e["column_values"],) for e in es]  # noqa: E731
    assert strip(_bronze(spark, tmp_path / "dirty")) == strip(_bronze(spark, tmp_path / "clean"))
    q = spark.read.format("delta").load(str(tmp_path / "dirty/quarantine")).orderBy("source_line").collect()
    assert summary.quarantined == len(q) == 4
    raw_lines = dirty.read_bytes().split(b"\n")
    assert [r["source_line"] for r in q] == [4, 21, 22, 56]
    for r in q:
        assert r["source_file"] == str(dirty) and r["format"] == "wal2json-v2"
        assert "(rule: " in r["reason"]
        exact = raw_lines[r["source_line"] - 1]
        assert (r["raw_bytes"] or r["raw"].encode()) == exact
    reasons = sorted(r["reason"].split(":")[0] for r in q)
    assert reasons == ["data", "data.action", "not JSON", "not UTF-8"]
    assert "data: must contain ['columns'] properties (rule: required)" in [r["reason"] for r in q]
    again = ingest(spark, [str(dirty)], str(tmp_path / "dirty"), "wal2json-v2")
    assert again.quarantined == 0 and again.accepted == 0  # quarantine is not doubled by a replay


def test_transaction_cut_between_files_is_stitched_and_a_truncated_end_is_not_applied(
    spark: SparkSession, captured: dict[str, Any], tmp_path: Path
) -> None:
    rows = captured["v2"]
    begin = next(
        i
        for i, r in enumerate(rows)
        if json.loads(r)["action"] == "B" and json.loads(rows[i + 3])["action"] in "IU"
    )  # a transaction with several changes
    cut = begin + 2
    head, tail = tmp_path / "0001.json", tmp_path / "0002.json"
    write_lines(head, rows[:cut])
    write_lines(tail, rows[cut:])
    lake = tmp_path / "lake"
    first = ingest(spark, [str(head)], str(lake), "wal2json-v2")  # ends inside a transaction
    assert first.quarantined == 2
    q = spark.read.format("delta").load(str(lake / "quarantine")).collect()
    assert all(r["reason"].startswith("incomplete transaction") for r in q)
    assert len(_bronze(spark, lake)) == len(_data_records(rows[:begin]))  # nothing of it applied
    ingest(spark, [str(head), str(tail)], str(lake), "wal2json-v2")  # the rest arrives; replay the cut file
    ingest(spark, [str(captured["dir"] / "v2.json")], str(tmp_path / "whole"), "wal2json-v2")
    assert [_identity(e) for e in _bronze(spark, lake)] == [
        _identity(e) for e in _bronze(spark, tmp_path / "whole")
    ]


def test_a_transaction_across_four_files_is_stitched_in_one_batch_and_by_runs_of_one_file(
    spark: SparkSession, captured: dict[str, Any], tmp_path: Path
) -> None:
    rows = captured["v2"]
    actions = [json.loads(r)["action"] for r in rows]
    begin = next(
        i for i, a in enumerate(actions) if a == "B" and all(x in "IUDT" for x in actions[i + 1 : i + 4])
    )  # a transaction with at least three changes: B | change | change | change … C
    cuts = [begin + 1, begin + 2, begin + 3]
    bounds = list(zip([0, *cuts], [*cuts, len(rows)], strict=True))
    landing = tmp_path / "landing"
    landing.mkdir()
    paths = []
    for n, (a, b) in enumerate(bounds):
        paths.append(landing / f"{n:04d}.json")
        write_lines(paths[-1], rows[a:b])
    assert not any(a in "BC" for a in actions[begin + 1 : begin + 3])  # files 0001 and 0002: no B or C
    ingest(spark, [str(captured["dir"] / "v2.json")], str(tmp_path / "whole"), "wal2json-v2")
    whole = [_identity(e) for e in _bronze(spark, tmp_path / "whole")]

    batch = ingest(spark, [str(p) for p in paths], str(tmp_path / "batch"), "wal2json-v2")
    assert batch.quarantined == 0 and batch.events_read == len(whole)
    assert batch.transactions == actions.count("C")
    assert [_identity(e) for e in _bronze(spark, tmp_path / "batch")] == whole

    # a run applying one file per batch: the file the transaction begins in waits until its commit lands
    (tmp_path / "pipeline.yaml").write_text(
        "source: {path: landing/, format: wal2json-v2}\nlake: runs/\nmax_files_per_batch: 1\n"
    )
    held = run_pipeline(spark, str(tmp_path / "pipeline.yaml"))
    # 0000 alone, 0000-0001 and 0000-0003 (read again with twice the files until the commit is in it)
    assert held.files_applied == 4 and len(held.batches) == 3
    assert sum(b.quarantined for b in held.batches) == 0
    assert [_identity(e) for e in _bronze(spark, tmp_path / "runs")] == whole
    for table in ("public.vals", "public.pairs"):
        a, b = (
            spark.read.format("delta").load(snapshot_path(str(tmp_path / x), table))
            for x in ("whole", "runs")
        )
        assert sorted(map(repr, a.collect())) == sorted(map(repr, b.collect()))


def test_bronze_is_append_only_with_change_data_feed(
    spark: SparkSession, captured: dict[str, Any], tmp_path: Path
) -> None:
    ingest(spark, [str(captured["dir"] / "v2.json")], str(tmp_path), "wal2json-v2")
    props = {
        r["key"]: r["value"]
        for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{tmp_path / 'bronze/change_events'}`").collect()
    }
    assert props["delta.appendOnly"] == "true" and props["delta.enableChangeDataFeed"] == "true"
    with pytest.raises(Exception, match="(?i)append"):
        spark.sql(f"DELETE FROM delta.`{tmp_path / 'bronze/change_events'}`")


def test_streams_without_lsn_xid_or_timestamp_dedupe_by_provenance(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_db.create_slot("s")
    pg_db.execute(
        "INSERT INTO t VALUES (1, 'a'), (2, 'b');\n"
        "UPDATE t SET v = 'c' WHERE id = 1;\nDELETE FROM t WHERE id = 2;"
    )
    bare = {"include_xids": None, "include_timestamp": None, "include_lsn": None}
    for fmt in (1, 2):
        path = tmp_path / f"v{fmt}.json"
        write_lines(path, pg_db.capture("s", fmt, **bare))
        assert "lsn" not in path.read_text() and "xid" not in path.read_text()
        lake = tmp_path / f"lake{fmt}"
        first = ingest(spark, [str(path)], str(lake), f"wal2json-v{fmt}")
        again = ingest(spark, [str(path)], str(lake), f"wal2json-v{fmt}")
        assert (first.accepted, again.accepted, again.duplicates) == (4, 0, 4)
        bronze = _bronze(spark, lake)
        assert all(e["commit_lsn"] is None and e["xid"] is None and e["commit_time"] is None for e in bronze)
        ordered = sorted(bronze, key=lambda e: (e["source_line"], e["position"]))  # the stream position
        assert [e["operation"] for e in ordered] == ["insert", "insert", "update", "delete"]


def test_replica_identity_full_and_using_index_carry_their_old_values(
    spark: SparkSession, pg_db: PgDatabase, tmp_path: Path
) -> None:
    pg_db.execute(
        "CREATE TABLE full_t (a int, b text, v text, PRIMARY KEY (a, b));\n"
        "ALTER TABLE full_t REPLICA IDENTITY FULL;\n"
        "CREATE TABLE idx_t (id int PRIMARY KEY, code text NOT NULL, v text);\n"
        "CREATE UNIQUE INDEX idx_t_code ON idx_t (code);\n"
        "ALTER TABLE idx_t REPLICA IDENTITY USING INDEX idx_t_code;\n"
        "CREATE TABLE nokey (x int, y text);"
    )
    pg_db.create_slot("s")
    pg_db.execute(
        "INSERT INTO full_t VALUES (1, 'k', NULL);\nUPDATE full_t SET v = 'new' WHERE a = 1;\n"
        "INSERT INTO idx_t VALUES (1, 'c1', 'x');\nUPDATE idx_t SET code = 'c2' WHERE id = 1;\n"
        "DELETE FROM idx_t WHERE id = 1;\n"
        "INSERT INTO nokey VALUES (1, 'y');\nUPDATE nokey SET y = 'z';\nDELETE FROM full_t;"
    )
    lakes = {}
    for fmt in (1, 2):
        path = tmp_path / f"v{fmt}.json"
        write_lines(path, pg_db.capture("s", fmt))
        ingest(spark, [str(path)], str(tmp_path / f"lake{fmt}"), f"wal2json-v{fmt}")
        lakes[fmt] = {
            (e["table"], e["operation"], e["position"], e["commit_lsn"]): e
            for e in _bronze(spark, tmp_path / f"lake{fmt}")
        }
    v2 = lakes[2]
    full_update = next(e for e in v2.values() if e["table"] == "public.full_t" and e["operation"] == "update")
    assert full_update["old_key_names"] == ["a", "b", "v"] and full_update["old_key_values"] == [
        "1",
        "k",
        None,
    ]
    full_delete = next(e for e in v2.values() if e["table"] == "public.full_t" and e["operation"] == "delete")
    assert full_delete["old_key_values"] == ["1", "k", "new"]  # the whole old row
    moved = next(e for e in v2.values() if e["table"] == "public.idx_t" and e["operation"] == "update")
    assert moved["old_key_names"] == ["code"] and moved["old_key_values"] == ["c1"]  # the index, old value
    assert moved["primary_key"] == ["id"]
    assert not [e for e in v2.values() if e["table"] == "public.nokey" and e["operation"] != "insert"]
    # format 1 leaves NULL old values out of oldkeys (spec 2.2); format 2 keeps them
    v1_update = next(
        e for e in lakes[1].values() if e["table"] == "public.full_t" and e["operation"] == "update"
    )
    assert v1_update["old_key_names"] == ["a", "b"] and v1_update["old_key_values"] == ["1", "k"]
