"""``resolver.capture.drain.CapturedLines``: the slot's wal2json records into landing files, as a drain and a
running capture read them (no server: the records are wal2json's format-2 lines, fed one at a time)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from resolver.capture.drain import CapturedLines
from resolver.capture.landing import landing_at
from resolver.capture.options import CaptureOptions
from resolver.capture.parts import LandingParts
from resolver.lsn import parse_lsn


def _line(**record: object) -> str:
    return json.dumps(record, separators=(",", ":"))


def _change(action: str, table: str, lsn: str, value: int) -> str:
    schema, name = table.split(".")
    columns = [{"name": "id", "type": "integer", "value": value}, {"name": "t", "type": "text", "value": "x"}]
    return _line(action=action, xid=7, lsn=lsn, schema=schema, table=name, columns=columns)


def _transaction(xid: int, begin: str, end: str, *changes: str) -> list[str]:
    head = _line(action="B", xid=xid, lsn=begin, nextlsn=begin, timestamp="2026-11-29 12:00:00+00")
    tail = _line(action="C", xid=xid, lsn=end, nextlsn=end, timestamp="2026-11-29 12:00:00+00")
    return [head, *changes, tail]


def _lines(tmp_path: Path, include: tuple[str, ...] = ("public.*",)) -> CapturedLines:
    options = CaptureOptions("dbname=unused", str(tmp_path / "landing"), "slot1", include)
    return CapturedLines(options, LandingParts(landing_at(options.landing), options.slot, 1 << 20))


def test_captured_changes_are_landed_framed_and_other_tables_left_out(tmp_path: Path) -> None:
    lines = _lines(tmp_path)
    kept = _transaction(
        1,
        "0/1000",
        "0/1100",
        _change("I", "public.a", "0/1010", 1),
        _change("I", "other.b", "0/1020", 2),  # not captured
        _change("U", "public.a", "0/1030", 1),
    )
    quiet = _transaction(2, "0/1200", "0/1300", _change("D", "other.b", "0/1210", 2))  # no captured change
    ends = [lines.take(record) for record in [*kept, *quiet]]
    assert ends == [None, None, None, None, parse_lsn("0/1100"), None, None, parse_lsn("0/1300")]
    assert (lines.records, lines.kept, lines.inside) == (8, 2, False)
    [landed] = lines.parts.finish()
    assert Path(landed).read_text().splitlines() == [kept[0], kept[1], kept[3], kept[4]]


def test_a_transaction_is_inside_from_its_begin_to_its_commit(tmp_path: Path) -> None:
    lines = _lines(tmp_path)
    head, change, tail = _transaction(3, "0/2000", "0/2100", _change("I", "public.a", "0/2010", 5))
    lines.take(head)
    assert lines.inside
    lines.take(change)
    assert lines.inside and lines.parts.is_open
    assert lines.take(tail) == parse_lsn("0/2100")
    assert not lines.inside


def test_a_frame_without_its_end_lsn_is_refused_in_one_line(tmp_path: Path) -> None:
    lines = _lines(tmp_path)
    with pytest.raises(ValueError, match="B record without nextlsn: expected include-lsn=1"):
        lines.take(_line(action="B", xid=1, timestamp="2026-11-29 12:00:00+00"))
