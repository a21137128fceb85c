"""The Debezium harness (tests/harness/debezium.py) against a real Debezium 3.6.1.Final and PostgreSQL 15.

One workload, in separate transactions: an insert, an update setting a TOASTed ``big``, an update of
``name`` only (``big`` unchanged), a primary-key update, a delete and two inserts. What Debezium really
writes for them is asserted, with the JSON converter's envelope (``schemas=True``) and without it, and with
and without transaction metadata; then two interleaved transactions, and the harness's failure report.
The marker table's records (``sync()``) and their transactions are filtered out first. Each capture
starts one JVM (about 3 s once the jars are cached).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.harness.debezium import (
    MARKER_TOPIC,
    TRANSACTION_TOPIC,
    DebeziumCapture,
    DebeziumHarnessError,
    debezium_classpath,
    payload,
)
from tests.harness.postgres import PgDatabase

pytestmark = pytest.mark.postgres

UNAVAILABLE = "__debezium_unavailable_value"
RANDOM_20K = "(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 700))"  # 22400 chars
WORKLOAD = [
    ["INSERT INTO public.items VALUES (1, 'first', NULL)"],
    [f"UPDATE public.items SET big = {RANDOM_20K} WHERE id = 1"],
    ["UPDATE public.items SET name = 'second' WHERE id = 1"],
    ["UPDATE public.items SET id = 2 WHERE id = 1"],
    ["DELETE FROM public.items WHERE id = 2"],
    [
        "INSERT INTO public.items VALUES (10, 'ten', NULL)",
        "INSERT INTO public.items VALUES (11, 'eleven', 'x')",
    ],
]


def _wal_lsn(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT (pg_current_wal_lsn() - '0/0')::bigint").fetchone()
    assert row is not None
    return int(row[0])


def run_transactions(dsn: str, transactions: list[list[str]]) -> list[dict[str, int]]:
    """Run each list of statements as one transaction; per transaction: its ``xid`` and the WAL insert
    position just ``before`` it began and just ``after`` it committed."""
    seen = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statements in transactions:
            before = _wal_lsn(conn)
            with conn.transaction():
                for sql in statements:
                    conn.execute(sql.encode())
                row = conn.execute("SELECT txid_current()").fetchone()
                assert row is not None
            seen.append({"xid": int(row[0]), "before": before, "after": _wal_lsn(conn)})
    return seen


def make_items(db: PgDatabase) -> None:
    db.execute(
        "CREATE TABLE public.items (id int PRIMARY KEY, name text, big text);"
        "ALTER TABLE public.items REPLICA IDENTITY DEFAULT"
    )


def is_toasted(db: PgDatabase) -> bool:
    """``big`` of id 1 is stored out of line, uncompressed to over 2 kB: its TOAST table has chunks."""
    toast = db.query("SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'items'")
    chunks = db.query(f"SELECT count(*) FROM {toast[0][0]}")[0][0]
    size = db.query("SELECT pg_column_size(big) FROM public.items WHERE id = 1")[0][0]
    return bool(chunks > 0 and size > 2000)


Records = list[dict[str, Any]]


def capture_workload(db: PgDatabase, out: Path, **options: Any) -> tuple[Records, list[dict[str, int]]]:
    """Start a capture, run WORKLOAD (checking that ``big`` is TOASTed), sync; the records other than the
    marker table's, and what run_transactions saw."""
    make_items(db)
    with DebeziumCapture(db.dsn, out, ["public.items"], **options) as capture:
        seen = run_transactions(db.dsn, WORKLOAD[:2])
        assert is_toasted(db)
        seen += run_transactions(db.dsn, WORKLOAD[2:])
        capture.sync()
        records = capture.lines()
    assert capture.exit_status == 143, capture.exit_log  # SIGTERM, handled by the shutdown hook
    assert db.query("SELECT slot_name FROM pg_replication_slots WHERE slot_name = %s", (capture.slot,)) == []
    assert db.query("SELECT pubname FROM pg_publication WHERE pubname = %s", (capture.publication,)) == []
    marker_txids = {payload(r["value"])["source"]["txId"] for r in records if r["topic"] == MARKER_TOPIC}
    return [r for r in records if r["topic"] != MARKER_TOPIC and not _marker_tx(r, marker_txids)], seen


def _marker_tx(record: dict[str, Any], marker_txids: set[int]) -> bool:
    value = payload(record["value"])
    return record["topic"] == TRANSACTION_TOPIC and int(value["id"].split(":")[0]) in marker_txids


def check_events(events: list[dict[str, Any]], seen: list[dict[str, int]]) -> None:
    """What Debezium writes for WORKLOAD on public.items (any envelope)."""
    keys = [payload(e["key"]) for e in events]
    values = [payload(e["value"]) for e in events]
    ops = [v and v["op"] for v in values]
    assert ops == ["c", "u", "u", "d", None, "c", "d", None, "c", "c"]  # a delete is followed by a tombstone
    assert keys == [{"id": 1}] * 5 + [{"id": 2}] * 3 + [{"id": 10}, {"id": 11}]
    assert values[0]["after"] == {"id": 1, "name": "first", "big": None}
    assert len(values[1]["after"]["big"]) == 22400
    # REPLICA IDENTITY DEFAULT: no old row on an update, only the key on a delete
    assert values[1]["before"] is None and values[2]["before"] is None
    # the TOASTed value the update did not touch is not in the WAL
    assert values[2]["after"] == {"id": 1, "name": "second", "big": UNAVAILABLE}
    # the primary-key update: delete of the old key + tombstone, then create of the new key
    headers = [{k: payload(v) for k, v in e["headers"].items()} for e in events]
    assert values[3]["before"] == {"id": 1, "name": None, "big": None} and values[3]["after"] is None
    assert headers[3]["__debezium.newkey"] == {"id": 2} and headers[4]["__debezium.newkey"] == {"id": 2}
    assert values[5]["before"] is None
    assert values[5]["after"] == {"id": 2, "name": "second", "big": UNAVAILABLE}
    assert headers[5]["__debezium.oldkey"] == {"id": 1}
    assert not any(k.endswith("key") for h in headers[:3] + headers[6:] for k in h)
    assert values[6]["before"] == {"id": 2, "name": None, "big": None}
    assert values[9]["after"] == {"id": 11, "name": "eleven", "big": "x"}
    # source: the transaction's xid, the change's LSN, and sequence = [previous commit's LSN, this LSN]
    tx_of_event = [0, 1, 2, 3, 3, 4, 5, 5]
    for value, tx in zip([v for v in values if v], tx_of_event, strict=True):
        source = value["source"]
        assert source["txId"] == seen[tx]["xid"]
        # a change's WAL record can start right at the insert position seen before its transaction
        assert seen[tx]["before"] <= source["lsn"] < seen[tx]["after"]
        last_commit, lsn = json.loads(source["sequence"])
        assert lsn == str(source["lsn"])
        assert last_commit is None or int(last_commit) <= seen[tx]["before"]


def check_transactions(records: list[dict[str, Any]], seen: list[dict[str, int]]) -> None:
    """BEGIN and END records around each transaction's events, and the ``transaction`` block on events."""
    by_tx: list[list[dict[str, Any]]] = []
    for record in records:
        value = payload(record["value"])
        if record["topic"] == TRANSACTION_TOPIC and value["status"] == "BEGIN":
            by_tx.append([])
        by_tx[-1].append(record)
    assert len(by_tx) == len(seen)
    previous_end: int | None = None
    for group, observed in zip(by_tx, seen, strict=True):
        begin, *events, end = (payload(r["value"]) for r in group)
        assert (begin["status"], end["status"]) == ("BEGIN", "END")
        assert payload(group[0]["key"]) == {"id": begin["id"]}
        xid, begin_lsn = (int(part) for part in begin["id"].split(":"))
        end_xid, end_lsn = (int(part) for part in end["id"].split(":"))
        assert xid == end_xid == observed["xid"]
        # the ids are "xid:LSN" with the LSN Debezium last saw: BEGIN's is the first change's, END's the
        # end of the commit record (so BEGIN's and END's ids differ)
        assert begin_lsn == events[0]["source"]["lsn"]
        assert observed["before"] < end_lsn <= observed["after"]
        real = [e for e in events if e]  # tombstones are not counted
        assert end["event_count"] == len(real)
        assert end["data_collections"] == [{"data_collection": "public.items", "event_count": len(real)}]
        for order, event in enumerate(real, start=1):
            assert event["transaction"] == {  # the event's id has the event's own LSN
                "id": f"{xid}:{event['source']['lsn']}",
                "total_order": order,
                "data_collection_order": order,
            }
            if previous_end is not None:
                assert json.loads(event["source"]["sequence"])[0] == str(previous_end)
        previous_end = end_lsn


def test_debezium_with_the_json_envelope(pg_db: PgDatabase, tmp_path: Path) -> None:
    records, seen = capture_workload(pg_db, tmp_path / "out.jsonl", schemas=True)
    check_transactions(records, seen)
    check_events([r for r in records if r["topic"] == "dbz.public.items"], seen)
    first = next(r for r in records if r["topic"] == "dbz.public.items")
    assert set(first["key"]) == set(first["value"]) == {"schema", "payload"}
    assert first["value"]["schema"]["name"] == "dbz.public.items.Envelope"
    pk_create = [r for r in records if r["headers"].get("__debezium.oldkey")][0]
    assert set(pk_create["headers"]["__debezium.oldkey"]) == {"schema", "payload"}


def test_debezium_without_the_envelope(pg_db: PgDatabase, tmp_path: Path) -> None:
    records, seen = capture_workload(pg_db, tmp_path / "out.jsonl", schemas=False)
    check_transactions(records, seen)
    check_events([r for r in records if r["topic"] == "dbz.public.items"], seen)
    first = next(r for r in records if r["topic"] == "dbz.public.items")
    assert first["key"] == {"id": 1} and "schema" not in first["value"] and first["value"]["op"] == "c"


def test_debezium_without_transaction_metadata(pg_db: PgDatabase, tmp_path: Path) -> None:
    records, seen = capture_workload(pg_db, tmp_path / "out.jsonl", schemas=False, transaction_metadata=False)
    assert {r["topic"] for r in records} == {"dbz.public.items"}
    check_events(records, seen)
    assert all(r["value"] is None or r["value"]["transaction"] is None for r in records)


def test_transactions_arrive_in_commit_order_with_growing_sequences(
    pg_db: PgDatabase, tmp_path: Path
) -> None:
    make_items(pg_db)
    with DebeziumCapture(pg_db.dsn, tmp_path / "out.jsonl", ["public.items"], schemas=False) as capture:
        with psycopg.connect(pg_db.dsn) as first, psycopg.connect(pg_db.dsn) as second:
            first.execute("INSERT INTO public.items VALUES (1, 'first began first', NULL)")
            second.execute("INSERT INTO public.items VALUES (2, 'second began second', NULL)")
            first.execute("INSERT INTO public.items VALUES (3, 'first again', NULL)")
            second.commit()
            first.commit()
        capture.sync()
        events = [r["value"] for r in capture.lines() if r["topic"] == "dbz.public.items"]
    assert [e["after"]["id"] for e in events] == [2, 1, 3]  # the second transaction committed first
    lsns = [e["source"]["lsn"] for e in events]
    assert lsns[1] < lsns[0] < lsns[2]  # the first transaction's changes were written around the second's
    # [last commit's LSN (null before the first commit the capture saw), change's LSN] grows in stream order
    sequences = [[-1 if p is None else int(p) for p in json.loads(e["source"]["sequence"])] for e in events]
    assert sequences == sorted(sequences)
    assert sequences[1][0] > sequences[0][0] and sequences[1][1] < sequences[0][1]


def test_an_engine_failure_is_reported_with_the_programs_last_line(pg_db: PgDatabase, tmp_path: Path) -> None:
    wrong_port = {"database.port": "1"}
    capture = DebeziumCapture(pg_db.dsn, tmp_path / "out.jsonl", ["public.items"], extra=wrong_port)
    expected = "exited with status 1 while starting.*CaptureToFile: engine failed: .*refused"
    with pytest.raises(DebeziumHarnessError, match=expected):
        capture.start()
    assert capture.exit_status == 1
    assert "CaptureToFile: engine failed" in (capture.workdir / "capture.log").read_text()  # kept
    shutil.rmtree(capture.workdir)


def test_the_build_is_cached_by_the_hash_of_its_inputs() -> None:
    cache = debezium_classpath()
    assert debezium_classpath() == cache
    assert (cache / "classes" / "CaptureToFile.class").is_file()
    jars = {p.name for p in (cache / "lib").glob("*.jar")}
    assert {"debezium-embedded-3.6.1.Final.jar", "debezium-connector-postgres-3.6.1.Final.jar"} <= jars
    assert len((cache / "inputs.sha256").read_text().strip()) == 64
