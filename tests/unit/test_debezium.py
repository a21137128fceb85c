"""``resolver.formats.debezium`` on real Debezium output (tests/vectors/debezium/, recorded from PostgreSQL
15 by tests/harness/java/debezium/record_vectors.py): what each record becomes, the order, key changes, the
TOAST placeholder, and bad records to quarantine. No Spark, no JVM."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from resolver.formats.debezium_values import DEFAULT_PLACEHOLDER
from resolver.formats.wal2json import Count, Event, Quarantined, detect_format, read_lines
from resolver.models import Format

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "debezium"


def _read(lines: list[bytes]) -> list[Any]:
    return list(read_lines(lines, "f.jsonl", Format.DEBEZIUM_JSON))


def _vector(name: str) -> list[bytes]:
    return (VECTORS / f"{name}.jsonl").read_bytes().splitlines()


def _events(items: list[Any]) -> list[dict[str, Any]]:
    return [i.row for i in items if isinstance(i, Event)]


@pytest.mark.parametrize("name", ["envelope", "plain"])
def test_every_record_is_an_event_or_counted(name: str) -> None:
    items = _read(_vector(name))
    assert not [i for i in items if isinstance(i, Quarantined)]
    counts: Counter[str] = Counter()
    for i in items:
        if isinstance(i, Count):
            counts[i.name] += i.value
    records = [json.loads(line) for line in _vector(name)]
    payloads = [r["value"].get("payload", r["value"]) for r in records if r["value"] is not None]
    ends = [p for p in payloads if p.get("status") == "END"]
    assert counts == {"tombstones": sum(r["value"] is None for r in records), "transactions": len(ends)}
    assert len(_events(items)) == 20


def test_both_envelopes_give_the_same_events_the_envelope_with_types() -> None:
    typed, plain = _events(_read(_vector("envelope"))), _events(_read(_vector("plain")))
    assert len(typed) == len(plain)
    for a, b in zip(typed, plain, strict=True):  # integers and text read the same without a schema ...
        untyped = {k: v for k, v in a.items() if not k.endswith("_types")}
        assert (
            untyped == {k: v for k, v in b.items() if not k.endswith("_types")}
            or a["table"] != "public.items"
        )
    stamp = next(e for e in plain if e["table"] == "public.types_demo")  # ... Debezium's encodings do not
    assert stamp["column_values"][3] == "1709214356123456" and stamp["column_types"] is None
    first = next(e for e in typed if e["table"] == "public.types_demo")
    assert dict(zip(first["column_names"], first["column_values"], strict=True)) == {
        "id": "1", "n12": "12345.678", "n": "3.14159265358979323846264338327950288",
        "ts": "2024-02-29 13:45:56.123456", "tstz": "2024-02-29T11:45:56.123456Z", "d": "2024-02-29",
        "t": "23:59:59.999999", "b": "00ff10",
        "j": '{"a": [1, 2.5, null], "b": {"c": "d"}}', "ia": "{1,2,NULL,-3}", "ta": '{x,"y z",NULL,"q\\"d"}',
        "flag": "true", "dp": "1.5E-10", "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    }  # fmt: skip


def test_a_key_change_is_one_update_and_the_placeholder_is_never_a_value() -> None:
    events = _events(_read(_vector("envelope")))
    moved = [
        e for e in events if e["operation"] == "update" and e["old_key_values"] != [e["column_values"][0]]
    ]
    assert len(moved) == 1
    assert (moved[0]["old_key_names"], moved[0]["old_key_values"]) == (["id"], ["2"])
    assert moved[0]["column_names"] == ["id", "name"]  # the unchanged TOASTed `big` is absent
    assert moved[0]["column_values"] == ["20", "two, renamed"]
    assert all(DEFAULT_PLACEHOLDER not in json.dumps(e, default=str) for e in events)
    kept = [e for e in events if e["table"] == "public.items" and e["operation"] == "update"]
    assert all("big" not in e["column_names"] or e["column_values"][2] != DEFAULT_PLACEHOLDER for e in kept)


def test_commit_order_is_the_previous_commit_and_changes_keep_their_wal_order() -> None:
    events = _events(_read(_vector("envelope")))
    by_xid: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_xid[e["xid"]].append(e)
    streamed = list(by_xid)  # transactions in the order Debezium streamed them: commit order
    commits = [by_xid[x][0]["commit_lsn"] for x in streamed]
    assert commits == sorted(commits) and len(set(commits)) == len(commits)
    for xid, txn in by_xid.items():
        if xid != streamed[0]:  # the first after the connector's first start has no previous commit
            assert {e["commit_lsn"] for e in txn} == {txn[0]["commit_lsn"]}
        assert [e["position"] for e in txn] == sorted({e["position"] for e in txn})
    interleaved = [by_xid[x] for x in streamed[-2:]]  # A began first, B committed first: B streams first
    assert interleaved[0][0]["column_values"][1] == "B first"
    assert interleaved[1][0]["change_lsn"] < interleaved[0][0]["change_lsn"]  # A's change is older ...
    assert interleaved[1][0]["commit_lsn"] > interleaved[0][0]["commit_lsn"]  # ... but its commit later


_T = b'"schema": "public", "table": "t"'


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"op": "x", "source": {' + _T + b', "lsn": 1}}', "data.op: must be one of"),
        (b'{"op": "c", "after": {"id": 1}}', "data: must contain ['source']"),
        (b'{"op": "d", "before": null, "source": {' + _T + b', "lsn": 1}}', "data.before"),
        (b'{"op": "c", "after": {}, "source": {' + _T + b', "lsn": -5}}', "data.source.lsn"),
        (b'{"op": "c", "after": {}, "source": {' + _T + b', "lsn": 1, "sequence": "[x"}}', "source.sequence"),
        (b"{not json", "rule: json-syntax"),
        (b"\xff\xfe", "rule: utf-8"),
    ],
)  # fmt: skip
def test_a_bad_record_goes_to_quarantine_with_its_text_and_why(line: bytes, reason: str) -> None:
    items = _read([b'{"status": "BEGIN", "id": "1", "data_collections": null}', line])
    bad = [i for i in items if isinstance(i, Quarantined)]
    assert len(bad) == 1 and bad[0].line == 2 and reason in bad[0].reason, bad
    assert bad[0].raw == line.decode("utf-8", "replace")


def test_the_format_is_detected_from_the_first_record() -> None:
    assert detect_format(_vector("envelope")) is Format.DEBEZIUM_JSON
    assert detect_format(_vector("plain")) is Format.DEBEZIUM_JSON
    values = [json.dumps(json.loads(line)["value"]).encode() for line in _vector("plain")]
    assert detect_format(values) is Format.DEBEZIUM_JSON  # values alone, as a sink writes them
    assert detect_format([b'{"action": "B"}']) is Format.WAL2JSON_V2


def _as_kafka_lands_headers(line: bytes) -> bytes:
    """A record with its headers as Spark's Kafka source lands them: a list of {key, value as text}."""
    record = json.loads(line)
    headers = record.get("headers") or {}
    record["headers"] = [{"key": k, "value": json.dumps(v)} for k, v in headers.items()]
    return json.dumps(record).encode()


@pytest.mark.parametrize("form", ["object", "kafka-list"])
def test_a_key_change_split_across_files_is_one_update_from_its_headers(form: str) -> None:
    lines = (
        _vector("envelope") if form == "object" else [_as_kafka_lands_headers(x) for x in _vector("envelope")]
    )
    whole = _events(_read(lines))
    create = next(i for i, x in enumerate(lines) if b"__debezium.oldkey" in x)
    first, second = _events(_read(lines[:create])), _events(_read(lines[create:]))  # two files, cut between
    moved = [
        e for e in whole if e.get("old_key_values") == ["2"] and (e.get("column_values") or [0])[0] == "20"
    ]
    assert len(moved) == 1 and moved[0]["operation"] == "update"
    split = [{k: v for k, v in e.items() if k != "source_line"} for e in first + second]
    assert split == [{k: v for k, v in e.items() if k != "source_line"} for e in whole]


def test_without_headers_a_key_change_is_paired_only_inside_one_file() -> None:
    lines = [json.dumps({**json.loads(x), "headers": {}}).encode() for x in _vector("envelope")]
    create = next(i for i, x in enumerate(_vector("envelope")) if b"__debezium.oldkey" in x)
    together = _events(_read(lines))
    ops = [(e["operation"], e.get("old_key_values"), (e.get("column_values") or [None])[0]) for e in together]
    assert ("update", ["2"], "20") in ops and ("insert", None, "20") not in ops
    split = _events(_read(lines[:create])) + _events(_read(lines[create:]))
    ops = [(e["operation"], e.get("old_key_values"), (e.get("column_values") or [None])[0]) for e in split]
    assert ("delete", ["2"], None) in ops and ("insert", None, "20") in ops
