"""``resolver.formats.debezium_values``: Debezium's encodings back to PostgreSQL's text (no Spark, no JVM)."""

from __future__ import annotations

import base64

import pytest

from resolver.formats.debezium_values import DEFAULT_PLACEHOLDER, codec_of, is_placeholder, plain_text

_T = "io.debezium.time."


def _b64_int(n: int, size: int) -> str:
    return base64.b64encode(n.to_bytes(size, "big", signed=True)).decode()


@pytest.mark.parametrize(
    ("field", "value", "pg_type", "text"),
    [
        ({"type": "int32"}, 7, "integer", "7"),
        ({"type": "int16"}, -3, "smallint", "-3"),
        ({"type": "boolean"}, True, "boolean", "true"),
        ({"type": "double"}, 1.5, "double precision", "1.5"),
        ({"type": "float"}, float("nan"), "real", None),
        (
            {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
             "parameters": {"scale": "3", "connect.decimal.precision": "12"}},
            _b64_int(-1234567, 4), "numeric(12,3)", "-1234.567",
        ),
        (
            {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}},
            _b64_int(5, 1), "numeric", "0.05",
        ),
        (
            {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"},
            {"scale": 4, "value": _b64_int(1000000, 4)}, "numeric", "100.0000",
        ),
        ({"type": "int32", "name": "io.debezium.time.Date"}, 20000, "date", "2024-10-04"),
        ({"type": "int32", "name": "io.debezium.time.Date"}, -1, "date", "1969-12-31"),
        (
            {"type": "int64", "name": "io.debezium.time.MicroTimestamp"},
            1_790_000_000_123_456, "timestamp", "2026-09-21 14:13:20.123456",
        ),
        ({"type": "int64", "name": f"{_T}MicroTimestamp"}, -1, "timestamp", "1969-12-31 23:59:59.999999"),
        ({"type": "int64", "name": f"{_T}Timestamp"}, 1500, "timestamp", "1970-01-01 00:00:01.500000"),
        (
            {"type": "string", "name": "io.debezium.time.ZonedTimestamp"},
            "2026-11-21T16:30:12.615256Z", "timestamp with time zone", "2026-11-21T16:30:12.615256Z",
        ),
        ({"type": "int64", "name": "io.debezium.time.MicroTime"}, 3_723_000_001, "time", "01:02:03.000001"),
        ({"type": "string", "name": "io.debezium.data.Json"}, '{"a": 1}', "json", '{"a": 1}'),
        ({"type": "string", "name": "io.debezium.data.Uuid"}, "0e1d", "uuid", "0e1d"),
        ({"type": "bytes"}, base64.b64encode(b"\x00\xffA").decode(), "bytea", "00ff41"),
        ({"type": "array", "items": {"type": "int32"}}, [1, None, 3], "integer[]", "{1,NULL,3}"),
        (
            {"type": "array", "items": {"type": "string"}},
            ["a b", "", "NULL", 'q"\\', "plain"], "text[]", '{"a b","","NULL","q\\"\\\\",plain}',
        ),
        (
            {"type": "string", "parameters": {"__debezium.source.column.type": "VARCHAR"}},
            "x", "varchar", "x",
        ),
        (
            {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
             "parameters": {"scale": "1", "__debezium.source.column.type": "NUMERIC",
                            "__debezium.source.column.length": "5", "__debezium.source.column.scale": "1"}},
            _b64_int(123, 2), "numeric(5,1)", "12.3",
        ),
        ({"type": "array", "items": {"type": "int32"},
          "parameters": {"__debezium.source.column.type": "_INT4"}}, [1], "int4[]", "{1}"),
    ],
)  # fmt: skip
def test_codec_gives_the_postgresql_type_and_text(
    field: dict, value: object, pg_type: str, text: str
) -> None:
    codec = codec_of(field)
    assert codec.pg_type == pg_type
    assert codec.text(value) == text
    assert codec.text(None) is None


@pytest.mark.parametrize(
    ("iso", "text"),
    [
        ("P0Y0M0DT0H0M0S", "00:00:00"),
        ("P0Y-1M0DT0H0M0S", "-1 mons"),
        ("P3Y2M0DT0H0M0S", "3 years 2 mons"),
        ("P0Y0M0DT0H0M0.000001S", "00:00:00.000001"),
        ("P0Y0M-1DT2H0M0S", "-1 days +02:00:00"),
        ("P0Y0M1DT0H0M0S", "1 day"),
        ("P0Y0M397DT5H7M9.25S", "397 days 05:07:09.25"),
        ("P0Y0M0DT0H0M-1S", "-00:00:01"),
        ("P1Y0M0DT123H0M0S", "1 year 123:00:00"),
    ],
)
def test_iso_intervals_read_as_postgresql_prints_them(iso: str, text: str) -> None:
    codec = codec_of({"type": "string", "name": "io.debezium.time.Interval"})
    assert (codec.pg_type, codec.text(iso)) == ("interval", text)


def test_the_placeholder_is_recognised_in_every_form_debezium_sends() -> None:
    p = DEFAULT_PLACEHOLDER
    assert is_placeholder(p, p)
    assert is_placeholder(base64.b64encode(p.encode()).decode(), p)  # bytea, precise decimals
    assert is_placeholder([p], p)  # arrays
    assert is_placeholder({"scale": 0, "value": base64.b64encode(p.encode()).decode()}, p)
    assert is_placeholder("__custom__", "__custom__")
    assert not is_placeholder("a real value", p)
    assert not is_placeholder([p, "other"], p)
    assert not is_placeholder(None, p)


def test_plain_values_without_a_schema_keep_their_text() -> None:
    assert plain_text("x") == "x"
    assert plain_text(False) == "false"
    assert plain_text([1, "a b"]) == '{1,"a b"}'
    assert plain_text({"k": [1]}) == '{"k":[1]}'
    assert plain_text(None) is None


def test_decimals_keep_every_digit_and_numerics_sent_as_text_keep_their_scale() -> None:
    variable = codec_of({"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"})
    digits = 123456789012345678901234567890123456789012345678901234567890
    assert variable.text({"scale": 29, "value": base64.b64encode(digits.to_bytes(25, "big")).decode()}) == (
        "1234567890123456789012345678901.23456789012345678901234567890"
    )
    as_text = codec_of(
        {"type": "string", "parameters": {"__debezium.source.column.type": "NUMERIC",
                                          "__debezium.source.column.length": "131089"}}
    )  # fmt: skip
    assert (as_text.pg_type, as_text.text("3.540"), as_text.text("NaN")) == ("numeric", "3.540", None)
    assert codec_of({"type": "double"}).text("-Infinity") is None
