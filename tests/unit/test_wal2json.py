"""The pure-Python wal2json reader (no Spark): events, exact values, framing, quarantine reasons, the records
that used to raise, and telling the two formats apart.

Inputs are the real wal2json outputs in ../shared/reference/wal2json_vectors/index.json.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from resolver.errors import ConfigError
from resolver.files.input_files import resolve_format
from resolver.formats.wal2json import (
    DETECT_LINES,
    Count,
    Event,
    FileHead,
    Fragment,
    Quarantined,
    detect_format,
    file_head,
    format_lsn,
    parse_lsn,
    read_lines,
)
from resolver.models import ChangeEvent, Format

INDEX = Path(__file__).resolve().parents[3] / "shared/reference/wal2json_vectors/index.json"
V1, V2 = Format.WAL2JSON_V1, Format.WAL2JSON_V2


def _vectors() -> list[dict[str, Any]]:
    return json.loads(INDEX.read_text("utf-8"))  # type: ignore[no-any-return]


def _output(name: str, index: int) -> list[str]:
    vector = next(v for v in _vectors() if v["name"].startswith(name))
    return vector["outputs"][index]["rows"]  # type: ignore[no-any-return]


def _lines(rows: Iterable[str]) -> list[bytes]:
    """Rows as pg_recvlogical writes them: each message followed by a newline (pretty rows span lines)."""
    return "\n".join(rows).encode().split(b"\n")


def _read(rows: Iterable[str], fmt: Format) -> list[Any]:
    return list(read_lines(_lines(rows), "f.json", fmt))


def _events(items: list[Any]) -> list[dict[str, Any]]:
    """The events of one file read alone; a file without B/C framing (``include-transaction=0``) comes as
    middle fragments, which a batch without framed files reads record by record
    (resolver.formats.stitch_plan)."""
    roles = {i.role for i in items if isinstance(i, Fragment)}
    framed = roles - {"middle"} or any(isinstance(i, Count) and i.name == "transactions" for i in items)
    unframed = [i.row for i in items if isinstance(i, Fragment) and i.role == "middle" and not framed]
    return [i.row for i in items if isinstance(i, Event)] + [r for r in unframed if r is not None]


def _quarantined(items: list[Any]) -> list[Quarantined]:
    return [i for i in items if isinstance(i, Quarantined)]


def _format_of(call: str) -> Format | None:
    if "'format-version', '2'" in call or "'format-version','2'" in call:
        return V2
    return V1 if "format-version" in call else None


def test_lsn_round_trip() -> None:
    assert parse_lsn("0/3F68130") == 0x3F68130
    assert parse_lsn("16/B374D848") == (0x16 << 32) | 0xB374D848
    assert format_lsn(parse_lsn("16/B374D848")) == "16/B374D848"


def test_every_v2_vector_record_is_read_and_each_change_is_one_valid_event() -> None:
    checked = 0
    for vector in _vectors():
        for output in vector["outputs"]:
            if _format_of(output["call"]) is not V2 or not output["rows"]:
                continue
            rows = [r for r in output["rows"] if _is_json(r)]
            items = _read(rows, V2)
            changes = [json.loads(r) for r in rows if json.loads(r)["action"] in "IUDT"]
            assert not _quarantined(items), (vector["name"], _quarantined(items)[:1])
            events = _events(items)
            assert [e["operation"][0].upper() for e in events] == [c["action"] for c in changes]
            for e in events:
                ChangeEvent.model_validate(e)  # the dict is exactly a ChangeEvent
            checked += len(events)
    assert checked > 150


def test_every_v1_vector_transaction_is_read_including_pretty_print_and_chunks() -> None:
    transactions = 0
    for vector in _vectors():
        for output in vector["outputs"]:
            if _format_of(output["call"]) is not V1 or not output["rows"]:
                continue
            items = _read(output["rows"], V1)
            for q in _quarantined(
                items
            ):  # only the known invalid-JSON rows (wal2json bugs, spec 2.4 and 5.2)
                assert not _is_json(q.raw) and "(rule: json-syntax)" in q.reason, (vector["name"], q)
            transactions += sum(i.value for i in items if isinstance(i, Count) and i.name == "transactions")
            for e in _events(items):
                ChangeEvent.model_validate(e)
    assert transactions > 200


def test_write_in_chunks_transaction_is_reassembled() -> None:
    rows = _output("local_A", 1)  # format 1, write-in-chunks=1
    items = _read([r for r in rows if "[," not in r], V1)
    chunked = [e for e in _events(items)]
    assert chunked and all(e["source_line"] == chunked[0]["source_line"] for e in chunked[:1])
    assert not _quarantined(items)


def test_numbers_keep_their_exact_text_and_specials_arrive_as_null() -> None:
    rows = _output("local_B", 0)  # format 2, include-transaction=0: records without B/C
    items = _read(
        rows, V2
    )  # a file without B/C is a middle: resolver.formats.stitch_plan reads it as unframed
    assert {i.role for i in items if isinstance(i, Fragment)} == {"middle"}
    events = _events(items)
    by_id = {
        e["column_values"][0]: dict(zip(e["column_names"], e["column_values"], strict=True)) for e in events
    }
    assert by_id["1"]["i8"] == "9223372036854775807"
    assert by_id["1"]["num"] == "12345678901234567890.000000001"
    assert by_id["1"]["num52"] == "1.50"  # scale kept, never through a float
    assert by_id["1"]["b"] == "true"
    assert by_id["1"]["t"] == 'line1\nline2\t"q" \\ é ☃ \x01'
    assert by_id["3"]["f8"] == "1e+300"
    assert by_id["4"]["f8"] == "1.5e-10" and by_id["4"]["num"] == "0.000001"
    assert all(e["commit_lsn"] is None for e in events)  # no LSN, no framing


def test_v1_and_v2_of_the_same_workload_give_the_same_events_in_the_same_order() -> None:
    def key(e: dict[str, Any]) -> tuple[Any, ...]:
        return (
            e["commit_lsn"],
            e["position"],
            e["table"],
            e["operation"],
            e["column_names"],
            e["column_values"],
        )

    v2 = sorted(map(key, _events(_read(_output("local_E", 0), V2))), key=lambda k: (k[0], k[1]))
    v1 = sorted(map(key, _events(_read(_output("local_E", 1), V1))), key=lambda k: (k[0], k[1]))
    assert v2 == v1
    # commit order (nextlsn), not xid order and not the changes' own LSNs
    assert [k[5][0] for k in v2] == ["2", "1", "3"]


def test_key_change_update_carries_old_key_and_new_values() -> None:
    items = _read(_output("15_type_oids", 1), V2)
    updates = [e for e in _events(items) if e["operation"] == "update"]
    assert updates, "vector 15 has a primary-key update"
    moved = [
        u
        for u in updates
        if u["old_key_values"] != [u["column_values"][u["column_names"].index(n)] for n in u["old_key_names"]]
    ]
    assert moved, "one update changes the key: old identity differs from the new values"


def test_truncate_is_an_event_in_v2() -> None:
    events = _events(_read(_output("13_truncate", 1), V2))
    truncates = [e for e in events if e["operation"] == "truncate"]
    assert truncates and all(
        e.get("column_names") is None and e.get("old_key_names") is None for e in truncates
    )


B = '{"action":"B","xid":7,"lsn":"0/10","nextlsn":"0/20"}'
INS = (
    '{"action":"I","xid":7,"lsn":"0/11","schema":"s","table":"t",'
    '"columns":[{"name":"id","type":"integer","value":%d}]}'
)
C = '{"action":"C","xid":7,"lsn":"0/10","nextlsn":"0/20"}'


def test_positions_and_commit_lsn_come_from_the_transaction_frame() -> None:
    items = _read(
        [
            B,
            INS % 1,
            '{"action":"M","xid":7,"lsn":"0/12","transactional":true,"prefix":"p","content":"c"}',
            INS % 2,
            C,
        ],
        V2,
    )
    events = _events(items)
    assert [(e["commit_lsn"], e["position"], e["source_line"]) for e in events] == [
        (0x20, 0, 2),
        (0x20, 1, 4),
    ]
    assert [(c.name, c.value) for c in items if isinstance(c, Count)] == [
        ("transactions", 1),
        ("messages", 1),
    ]


def test_transaction_cut_at_the_end_of_a_file_becomes_a_tail_fragment_and_is_not_applied() -> None:
    items = _read([B, INS % 1, C, B, INS % 2], V2)
    assert len(_events(items)) == 1
    tail = [i for i in items if isinstance(i, Fragment)]
    assert [(f.role, f.line, f.commit_lsn) for f in tail] == [("tail", 4, 0x20), ("tail", 5, 0x20)]
    assert tail[1].row is not None and tail[1].row["position"] == 0


def test_commit_at_the_start_of_a_file_becomes_a_head_fragment() -> None:
    items = _read([INS % 3, C, B, INS % 4, C], V2)
    head = [i for i in items if isinstance(i, Fragment)]
    assert [(f.role, f.line) for f in head] == [("head", 1), ("head", 2)]
    assert len(_events(items)) == 1


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            '{"action":"I","table":"t"',
            "not JSON: Expecting ',' delimiter (line 1, column 26) (rule: json-syntax)",
        ),
        (
            '{"action":"X","table":"t"}',
            "data.action: must be one of ['B', 'C', 'I', 'U', 'D', 'T', 'M'] (rule: enum)",
        ),
        ('{"action":"I","table":"t"}', "data: must contain ['columns'] properties (rule: required)"),
        (
            '{"action":"I","table":"t","columns":[{"name":"a","value":{"x":1}}]}',
            "data.columns[0].value: must be",
        ),
    ],
)
def test_bad_lines_are_quarantined_with_path_and_rule_and_the_rest_is_applied(line: str, reason: str) -> None:
    items = _read([B, INS % 1, line, INS % 2, C], V2)
    (q,) = _quarantined(items)
    assert q.line == 3 and q.raw == line and q.reason.startswith(reason)
    assert [(e["position"], e["source_line"]) for e in _events(items)] == [
        (0, 2),
        (2, 4),
    ]  # positions stay stable


def test_invalid_utf8_keeps_the_exact_bytes() -> None:
    raw = b'{"action":"I","table":"\xff\xfe"}'
    items = list(read_lines([B.encode(), raw, C.encode()], "f", V2))
    (q,) = _quarantined(items)
    assert q.raw_bytes == raw and "not UTF-8: byte 0xff at offset 23 (rule: utf-8)" in q.reason


def test_v1_truncated_object_at_end_of_file_is_quarantined_not_applied() -> None:
    rows = _output("02_update", 0)  # pretty-printed transactions
    text = "\n".join(rows)
    cut = text[: text.rindex('"kind": "update"')]  # drop the end of the last transaction
    items = list(read_lines(cut.encode().split(b"\n"), "f", V1))
    (q,) = _quarantined(items)
    assert q.reason.startswith("incomplete transaction") and "(rule: framing)" in q.reason


def test_v1_invalid_json_from_the_wal2json_25_message_bug_is_quarantined() -> None:
    bad = next(r for r in _output("local_A", 0) if "[," in r)
    (q,) = _quarantined(_read([bad], V1))
    assert "rule: json-syntax" in q.reason and q.raw == bad


def test_v1_timestamp_outside_iso_is_quarantined_with_a_hint() -> None:
    line = '{"xid":1,"timestamp":"Sat Nov 02 17:30:52 2013 PST","change":[]}'
    (q,) = _quarantined(_read([line], V1))
    assert "set DateStyle=ISO" in q.reason


def _is_json(r: str) -> bool:
    try:
        json.loads(r)
    except ValueError:
        return False
    return True


# --- no line stops the reader (issue 14, item 3) -----------------------------------------------------------
def test_a_line_nested_5000_deep_is_quarantined_and_the_transactions_around_it_are_applied() -> None:
    items = _read([B, INS % 1, C, "[" * 5000, B, INS % 2, C], V2)
    (q,) = _quarantined(items)
    assert (q.line, q.reason) == (4, "JSON nested deeper than 64 levels (rule: json-depth)")
    assert [e["column_values"] for e in _events(items)] == [["1"], ["2"]]
    (q1,) = _quarantined(_read(["{" * 5000], V1))
    assert q1.reason == "JSON nested deeper than 64 levels (rule: json-depth)"


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("[" * 61 + "1" + "]" * 61, "(rule: type)"),  # 64 levels with the record's 3: the schema decides
        ("[" * 62 + "1" + "]" * 62, "(rule: json-depth)"),
        ("[1," * 70 + "1" + "]" * 70, "(rule: json-depth)"),
        ('"' + "[" * 500 + '"', None),  # brackets inside a string are text
        ('"\\"' + "[" * 500 + '"', None),  # an escaped quote does not end the string
    ],
)
def test_the_depth_limit_counts_arrays_and_objects_outside_strings(value: str, rule: str | None) -> None:
    line = '{"action":"I","table":"t","columns":[{"name":"a","value":' + value + "}]}"
    items = _read([B, line, C], V2)
    if rule is None:
        assert not _quarantined(items) and len(_events(items)) == 1
    else:
        (q,) = _quarantined(items)
        assert q.reason.endswith(rule), q.reason


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"action":[1]}', "data.action: must be one of"),  # was: TypeError, unhashable list
        ('{"action":"I","xid":%s,"table":"t","columns":[]}' % ("9" * 5000), "data.xid: must be integer"),
        (
            INS.replace('"0/11"', '"FFFFFFFFF/11"') % 1,
            "data.lsn: found 'FFFFFFFFF/11', expected at most 8 hex digits each side of '/' and a value "
            "below 80000000/0 (rule: lsn-range)",
        ),
        (
            '{"action":"I","xid":7,"timestamp":"9999-12-31 23:00:00-05","table":"t","columns":[]}',
            "data.timestamp: found '9999-12-31 23:00:00-05', expected an ISO timestamp",
        ),
    ],
)
def test_records_that_used_to_raise_are_quarantined(line: str, reason: str) -> None:
    items = _read([B, INS % 1, line, INS % 2, C], V2)
    (q,) = _quarantined(items)
    assert q.line == 3 and q.reason.startswith(reason), q.reason
    assert q.reason.endswith(")") and "(rule: " in q.reason
    assert len(_events(items)) == 2


def test_a_numeric_of_5000_digits_keeps_its_text() -> None:
    digits = "9" * 5000 + "." + "1" * 10
    line = '{"action":"I","table":"t","columns":[{"name":"a","value":%s},{"name":"b","value":-%s}]}'
    (event,) = _events(_read([B, line % (digits, "9" * 5000), C], V2))
    assert event["column_values"] == [digits, "-" + "9" * 5000]


def test_a_frame_with_an_lsn_out_of_range_is_its_own_fault_not_the_transactions() -> None:
    bad_c = C.replace('"nextlsn":"0/20"', '"nextlsn":"FFFFFFFFF/20"')
    items = _read([B, INS % 1, bad_c, B, INS % 2, C], V2)
    assert [q.line for q in _quarantined(items)] == [1, 2, 3]  # B … the bad C: no commit, not applied
    assert [e["column_values"] for e in _events(items)] == [["2"]]


def test_v1_parallel_arrays_of_different_lengths_are_quarantined() -> None:
    line = '{"xid":1,"change":[{"kind":"insert","table":"t","columnnames":["a","b"],"columnvalues":[1]}]}'
    (q,) = _quarantined(_read([line], V1))
    assert q.reason == (
        "data.change[0].columnvalues: found 1 items, expected 2 like columnnames (rule: array-lengths)"
    )


def test_v1_object_with_a_line_that_is_not_utf8_is_quarantined_whole() -> None:
    rows = _output("02_update", 0)  # pretty-printed transactions
    lines = _lines(rows[1:2])
    at = next(i for i, b in enumerate(lines) if b"columnvalues" in b)
    lines[at] = lines[at].replace(b'"', b'"\xff', 1)
    items = list(read_lines(lines, "f", V1))
    (q,) = _quarantined(items)
    assert (q.line, q.last) == (1, len(lines)) and not _events(items)
    assert q.reason.startswith(f"line {at + 1}: not UTF-8: byte 0xff") and q.reason.endswith("(rule: utf-8)")
    assert q.raw_bytes is not None and q.raw_bytes.split(b"\n") == lines


def test_counts_name_the_lines_they_stand_for() -> None:
    message = '{"action":"M","xid":7,"lsn":"0/12","transactional":true,"prefix":"p","content":"c"}'
    items = _read([B, message, INS % 1, C], V2)
    assert [(c.name, c.line, c.last) for c in items if isinstance(c, Count)] == [
        ("transactions", 1, 4),
        ("messages", 2, 2),
    ]
    rows = _output("02_update", 0)  # pretty-printed: one transaction over several lines
    items = _read(rows[1:2], V1)
    (txn,) = [c for c in items if isinstance(c, Count) and c.name == "transactions"]
    assert (txn.line, txn.last) == (1, len(_lines(rows[1:2])))


def test_an_unforeseen_failure_on_one_record_quarantines_it_with_the_exception_named() -> None:
    from resolver.formats.wal2json_v2 import _Line, _v2_change

    rec = {"action": "I", "columns": []}  # as no valid record is: validation would have required "table"
    q = _v2_change(_Line(3, "raw", rec, None), rec, "f.json", None, 0)
    reason = "the reader failed on this record: KeyError: 'table' (rule: reader-error)"
    assert q == Quarantined(3, reason, "raw")


# --- which format (issue 14, item 4) ------------------------------------------------------------------------
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.mark.parametrize(
    ("lines", "fmt"),
    [
        ([B], V2),
        (['{"xid":7,"timestamp":"2026-01-01 00:00:00+00","change":[]}'], V1),
        (["{", '\t"change": [', "\t]", "}"], V1),  # pretty-printed
        (['{"xid":7,"nextlsn":"0/20","change":[', '{"kind":"insert"}', "]}"], V1),  # written in chunks
        (['{"change":[,{"kind":"message","transactional":false,"content":"c"}]}'], V1),  # wal2json 2.5 bug
        (['{"xid":7,"action":"C"}'], V2),  # any key order, when the line is a whole object
        (['{"lsn":"0/1","change":[{"kind":"insert"}]}'], V1),
        (["", "  ", "garbage", '{"action":"I","table"', '{"action":"I","table":"t"}'], V2),  # passed over
        ([',{"kind":"insert"}', "]}", '{"xid":9,"change":[]}'], V1),  # the end of a chunked transaction
        (["[" * 5000, "\ufffd\ufffd", B], V2),
        (["hello", '{"a":1}', "[1,2]", '"action"'], None),
        ([], None),
    ],
)
def test_detect_format_takes_the_first_recognisable_record(lines: list[str], fmt: Format | None) -> None:
    assert detect_format(line.encode() for line in lines) is fmt


def test_detect_format_looks_through_a_bounded_head() -> None:
    garbage = ["not json"] * (DETECT_LINES - 1)
    assert detect_format(line.encode() for line in [*garbage, B]) is V2
    assert detect_format(line.encode() for line in [*garbage, "x", B]) is None


def test_file_head_tells_a_huge_first_line_by_its_start(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b'{"xid":1,"change":[' + b'{"kind":"insert"},' * 1_000_000 + b"{}]}\n")
    head = file_head(str(path))
    assert head.format is V1 and head.first is not None and len(head.first) == 200
    (tmp_path / "empty.json").write_bytes(b"\n  \n")
    assert file_head(str(tmp_path / "empty.json")) == FileHead(None, None)


def _files(tmp_path: Path, **contents: bytes) -> list[str]:
    for name, data in contents.items():
        (tmp_path / f"{name}.json").write_bytes(data)
    return [str(tmp_path / f"{name}.json") for name in contents]


V1_LINE = b'{"xid":7,"change":[]}\n'
V2_LINE = B.encode() + b"\n"


def test_resolve_format_detects_and_empty_files_do_not_decide(tmp_path: Path) -> None:
    assert resolve_format(_files(tmp_path, a=b"", b=V1_LINE, c=b"\n")) is V1
    assert resolve_format(_files(tmp_path, a=b"", b=b"\n")) is V2  # nothing to read: any format reads nothing
    assert resolve_format(_files(tmp_path, a=b""), "wal2json-v1") is V1
    assert resolve_format([str(SAMPLES / "wal2json-v1/0001.json")]) is V1
    assert resolve_format([str(SAMPLES / "dirty/0001.json")]) is V2


def test_resolve_format_refuses_mixed_unknown_and_mismatched_files_in_one_line(tmp_path: Path) -> None:
    a, b, junk = _files(tmp_path, a=V1_LINE, b=V2_LINE, junk=b"id,name\n1,x\n")
    with pytest.raises(ConfigError) as err:
        resolve_format([a, b])
    assert str(err.value) == (
        f"the input mixes formats: {a!r} is wal2json-v1, {b!r} is wal2json-v2 (expected files of one format)"
    )
    with pytest.raises(ConfigError) as err:
        resolve_format([a, junk])
    assert str(err.value) == (
        f"cannot tell the format of {junk!r}: its first record ('id,name') is not wal2json format 1 "
        "or 2 or Debezium JSON (give --format)"
    )
    with pytest.raises(ConfigError) as err:
        resolve_format([b, a], "wal2json-v2")
    assert str(err.value) == (
        f"{a!r} is wal2json-v1, not the wal2json-v2 given: its first record is a format-1 transaction object "
        '({"change":[...]}, "{" or a chunk header)'
    )
    assert resolve_format([b, junk], Format.WAL2JSON_V2) is V2  # given: a file of neither is read as it
