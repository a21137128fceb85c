"""The typed decoding of format-2 records (``resolver.formats.wal2json_typed``) against the full way it
stands in for (Python's decoder and the JSON Schema, ``parse_record``): for every line, the same record or
the same quarantine reason. The lines: every line of the fuzzer's mutated streams (``tests/unit/test_fuzz``:
the samples and the wal2json test vectors, with bit flips, swapped quotes, 70-digit numbers, truncations,
deep nesting, invalid UTF-8), and hostile lines written for what a typed decoder could get wrong (duplicate
keys, ``NaN``, lone surrogates, ``-0``, exponents, control characters, closed objects, ranges)."""

from __future__ import annotations

import io

import pytest

from resolver.formats.wal2json_record import BadRecord, parse_record
from resolver.formats.wal2json_typed import Columns, _from_dict, parse_v2, typed_record
from resolver.models import Format
from tests.unit.test_fuzz import SEED, V2, corpus, stream

_HEAD = '"action":"I","xid":7,"timestamp":"2026-11-28 03:00:00+00","lsn":"0/16B3748","schema":"s","table":"t"'
HOSTILE = [
    "{"
    + _HEAD
    + ',"columns":[{"name":"a","type":"integer","value":-0}],"pk":[{"name":"a","type":"integer"}]}',
    "{" + _HEAD + ',"columns":[{"name":"a","type":"float8","value":1E+400},{"name":"b","value":3.540}]}',
    "{" + _HEAD + ',"columns":[{"name":"a","value":123456789012345678901234567890123456789012}]}',
    "{" + _HEAD + ',"columns":[{"name":"a","value":NaN}]}',
    "{" + _HEAD + ',"columns":[{"name":"a","value":"\\ud800"}]}',
    "{" + _HEAD + ',"columns":[{"name":"a","value":"\\ud83d\\ude00 \\u00e9 é \\u0000"}]}',
    "{" + _HEAD + ',"columns":[{"name":"a","value":"tab\there"}]}',
    "{" + _HEAD + ',"columns":[{"name":"a","value":{"x":1}}]}',
    "{" + _HEAD + ',"columns":[{"name":"a","value":[1]}]}',
    "{"
    + _HEAD
    + ',"columns":[{"name":"a","value":true},{"name":"b","value":false},{"name":"c","value":null}]}',
    "{" + _HEAD + ',"columns":[{"name":"a","value":1,"extra":1}]}',
    "{" + _HEAD + ',"columns":[{"name":"a","value":1,"position":0}]}',
    "{" + _HEAD + ',"columns":[{"name":"a","value":1,"optional":1}]}',
    "{" + _HEAD + ',"columns":[{"name":"a","value":1,"typeoid":23,"position":1,"default":null}]}',
    "{" + _HEAD + ',"columns":[{"name":"a"}]}',
    "{" + _HEAD + ',"columns":[{"name":"a","value":1}],"table":"u"}',
    "{" + _HEAD + ',"columns":[],"action":"B"}',
    "{" + _HEAD + ',"columns":[],"unknown":1}',
    "{" + _HEAD + "}",
    '{"action":"B","xid":4294967296,"lsn":"0/1","nextlsn":"0/2"}',
    '{"action":"B","xid":1.0,"lsn":"0/1","nextlsn":"0/2"}',
    '{"action":"B","xid":true}',
    '{"action":"B","xid":-0,"timestamp":"x","origin":0}',
    '{"action":"C","lsn":"0/1a","nextlsn":"0/2"}',
    '{"action":"C","lsn":"0/1\\n","nextlsn":"0/2"}',
    '{"action":"C","lsn":"100000000/1","nextlsn":"0/2"}',
    '{"action":"C","lsn":"80000000/0"}',
    '{"action":"B"} trailing',
    '\ufeff{"action":"B"}',
    '  {"action" : "C" , "nextlsn" : "0/2" }  ',
    '{"action":"T","xid":1,"schema":"s","table":"t"}',
    '{"action":"M","xid":null,"transactional":false,"prefix":"p","content":"c"}',
    '{"action":"U","table":"t","columns":[{"name":"a","value":2}],"identity":[{"name":"a","value":1}]}',
    '{"action":"U","table":"t","columns":[{"name":"a","value":2}]}',
    '{"action":"D","table":"t","identity":[{"name":"a","type":"integer","value":1}],"pk":[]}',
    '{"action":"D","table":"t","identity":[{"name":"a","value":1,"position":1}]}',
    '{"action":"X"}',
    "[1]",
    '{"action":"I","table":"t","columns":' + "[" * 80 + "]" * 80 + "}",
    '{"action":"I","table":"t","columns":[{"name":"a","value":' + "[" * 70 + "]" * 70 + "}]}",
    '{"action":"I","table":"t","columns":[{"name":"a","value":' + "[" * 100_000 + "]" * 100_000 + "}]}",
    '{"action":"I","table":"t","columns":[],"x":' + '{"a":' * 100_000 + "1" + "}" * 100_000 + "}",
    "[" * 100_000 + "]" * 100_000,
]


def outcome(read: object) -> object:
    try:
        return read()  # type: ignore[operator]
    except BadRecord as e:
        return ("bad", str(e))


def full_way(text: str) -> object:
    return outcome(lambda: _from_dict(parse_record(text, Format.WAL2JSON_V2)))


@pytest.mark.parametrize("text", HOSTILE, ids=[f"{i}:{h[:50]}" for i, h in enumerate(HOSTILE)])
def test_a_hostile_line_reads_as_the_full_way_reads_it(text: str) -> None:
    assert outcome(lambda: parse_v2(text)) == full_way(text)


def test_the_common_records_are_read_by_the_structs_and_the_rest_the_full_way() -> None:
    insert = typed_record(HOSTILE[0])
    assert insert == {
        "action": "I",
        "xid": 7,
        "timestamp": "2026-11-28 03:00:00+00",
        "lsn": "0/16B3748",
        "schema": "s",
        "table": "t",
        "columns": Columns(["a"], ["integer"], ["-0"]),
        "pk": ["a"],
    }
    assert typed_record(HOSTILE[1])["columns"] == Columns(["a", "b"], None, ["1E+400", "3.540"])  # type: ignore[index]
    assert typed_record(HOSTILE[5])["columns"].values == ["\U0001f600 é é \x00"]  # type: ignore[index]
    assert typed_record(HOSTILE[9])["columns"].values == ["true", "false", None]  # type: ignore[index]
    for refused in (3, 4, 7, 8, 10, 11, 30, 31):  # NaN, a lone surrogate, non-scalars, closed objects, T, M
        assert typed_record(HOSTILE[refused]) is None, HOSTILE[refused]


def test_every_line_of_the_mutated_streams_reads_as_the_full_way_reads_it() -> None:
    inputs = [(fmt, lines) for fmt, lines in corpus() if fmt is V2]
    assert inputs, "no format-2 input"
    typed = lines_seen = 0
    for i in range(1500):
        fmt, data, _ = stream(SEED, i, inputs)
        for raw in io.BytesIO(data):
            try:
                text = raw.rstrip(b"\r\n").decode("utf-8")
            except UnicodeDecodeError:
                continue  # never decoded: quarantined as not UTF-8 before either way
            if not text.strip():
                continue
            lines_seen += 1
            typed += typed_record(text) is not None
            assert outcome(lambda line=text: parse_v2(line)) == full_way(text), (
                f"stream {i} ({fmt.value}): {text[:200]!r}"
            )
    # the comparison means something only if the structs read most lines themselves
    assert lines_seen > 10_000 and typed > lines_seen // 2, (typed, lines_seen)
