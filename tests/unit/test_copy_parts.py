"""A snapshot chunk's rows, as PostgreSQL's CSV hands them over, into snapshot files
(``resolver.capture.snapshot_file``): change events in Parquet, cut between rows at about the limit, every row
once and in order, NULL told apart from an empty text, quotes, commas and line ends kept, positions unique in
the table's transaction. No server: the CSV is written as ``COPY ... (FORMAT csv)`` writes it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from resolver.capture.landing import LandingFolder
from resolver.capture.snapshot_file import SnapshotParts, SnapshotRows
from resolver.formats.snapshot_files import FORMAT_KEY, FORMAT_VERSION, SNAPSHOT_SCHEMA, first_events
from resolver.models import ChangeEvent

TAKEN = datetime(2026, 12, 1, 12, 30, 15, 250000, tzinfo=UTC)
ROWS = SnapshotRows("public.t", ("id", "note", "tag"), ("integer", "text", "text"), ("id",), 0x1A2B3C8, TAKEN)
#: (id, note, tag) as PostgreSQL's CSV prints them: NULL unquoted and empty, an empty text quoted
VALUES = [
    (str(i), f'say "{i}", then\nstop' if i % 5 == 0 else "x" * (i % 37), None if i % 3 else "")
    for i in range(400)
]


def _csv(path: Path, rows: list[tuple[str, str, str | None]]) -> Path:
    def field(value: str | None) -> str:
        if value is None:
            return ""
        return (
            '"' + value.replace('"', '""') + '"' if value == "" or any(c in value for c in '",\n') else value
        )

    path.write_text("".join(f"1,{','.join(field(v) for v in row)}\n" for row in rows), encoding="utf-8")
    return path


def _rows(folder: Path, names: list[str]) -> list[dict]:  # type: ignore[type-arg]
    return [row for name in names for row in pq.read_table(folder / name).to_pylist()]


def test_the_file_holds_change_events_with_their_mark() -> None:
    fields = [f for f in ChangeEvent.model_fields if f != "source_file"]
    assert SNAPSHOT_SCHEMA.names == fields  # the reader names each row's file
    assert SNAPSHOT_SCHEMA.metadata == {FORMAT_KEY: FORMAT_VERSION}


@pytest.mark.parametrize("limit", [300, 4000, 1 << 30], ids=["small-files", "some-files", "one-file"])
def test_rows_are_cut_between_rows_at_about_the_limit(tmp_path: Path, limit: int) -> None:
    landing = tmp_path / "landing"
    parts = SnapshotParts(
        LandingFolder(str(landing)), "pending/slot-snapshot-0001-00003", limit, ROWS, 3 * 291
    )
    assert parts.write_csv(_csv(tmp_path / "rows.csv", VALUES)) == len(VALUES)
    names = parts.close()
    assert names == [f"pending/slot-snapshot-0001-00003-{k:04d}.parquet" for k in range(len(names))]
    assert (len(names) == 1) is (limit == 1 << 30), names
    sizes = [
        sum(len(v or "") for r in pq.read_table(landing / n).column("column_values").to_pylist() for v in r)
        for n in names
    ]
    assert all(s <= limit + 200 for s in sizes), sizes  # about the limit: cut between rows
    rows = _rows(landing, names)
    assert [tuple(r["column_values"]) for r in rows] == VALUES  # every row once, in order, exactly
    assert [r["position"] for r in rows] == [3 * 291 + 1 + i for i in range(len(VALUES))]
    for name in names:  # a row's line is its place in its file
        assert pq.read_table(landing / name).column("source_line").to_pylist() == list(
            range(1, pq.read_metadata(landing / name).num_rows + 1)
        )
    shared = {
        (r["table"], r["operation"], r["commit_lsn"], r["change_lsn"], r["xid"], r["commit_time"])
        for r in rows
    }
    assert shared == {("public.t", "insert", 0x1A2B3C8, 0x1A2B3C8, 0, TAKEN)}
    assert {(tuple(r["column_names"]), tuple(r["column_types"]), tuple(r["primary_key"])) for r in rows} == {
        (ROWS.columns, ROWS.types, ROWS.primary_key)
    }
    assert all(r["old_key_names"] is None and r["old_key_values"] is None for r in rows)
    assert sorted(str(p.relative_to(landing)) for p in landing.rglob("*") if p.is_file()) == sorted(names)


def test_a_chunk_of_no_rows_still_lands_one_file(tmp_path: Path) -> None:
    parts = SnapshotParts(LandingFolder(str(tmp_path)), "s-00003", 1000, ROWS, 3)
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    assert parts.write_csv(empty) == 0
    assert parts.close() == ["s-00003-0000.parquet"]
    assert pq.read_metadata(tmp_path / "s-00003-0000.parquet").num_rows == 0
    assert first_events(str(tmp_path / "s-00003-0000.parquet")) == []


def test_a_resnapshot_begins_with_the_tables_truncate(tmp_path: Path) -> None:
    parts = SnapshotParts(LandingFolder(str(tmp_path)), "r-00000", 1 << 20, ROWS, 0)
    parts.truncate()
    parts.write_csv(_csv(tmp_path / "rows.csv", VALUES[:3]))
    (name,) = parts.close()
    rows = _rows(tmp_path, [name])
    assert [(r["operation"], r["position"], r["source_line"]) for r in rows] == [
        ("truncate", 0, 1), ("insert", 1, 2), ("insert", 2, 3), ("insert", 3, 4)
    ]  # fmt: skip
    assert rows[0]["column_names"] is None and rows[0]["column_values"] is None
    assert [e["operation"] for e in first_events(str(tmp_path / name))] == ["truncate", "insert"]


def test_a_table_of_no_columns_copies_its_rows(tmp_path: Path) -> None:
    nothing = SnapshotRows("public.empty", (), (), (), 7, TAKEN)
    parts = SnapshotParts(LandingFolder(str(tmp_path)), "e-00000", 1 << 20, nothing, 0)
    (tmp_path / "rows.csv").write_text("1\n1\n", encoding="utf-8")
    assert parts.write_csv(tmp_path / "rows.csv") == 2
    rows = _rows(tmp_path, parts.close())
    assert [(r["column_names"], r["column_values"], r["primary_key"]) for r in rows] == [([], [], [])] * 2


def test_a_row_longer_than_a_read_block_is_copied_whole(tmp_path: Path) -> None:
    """A value of 9 MiB (a TOASTed document) is longer than the 4 MiB blocks the CSV is read in: the chunk is
    read again in larger blocks, and every row lands once, in order, in files of about the limit."""
    rows = [*VALUES[:50], ("50", "y" * (9 << 20), "big"), *VALUES[51:120]]
    parts = SnapshotParts(LandingFolder(str(tmp_path)), "b-00000", 100_000, ROWS, 0)
    assert parts.write_csv(_csv(tmp_path / "rows.csv", rows)) == len(rows)
    names = parts.close()
    assert [tuple(r["column_values"]) for r in _rows(tmp_path, names)] == rows
    assert [r["position"] for r in _rows(tmp_path, names)] == list(range(1, len(rows) + 1))
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".parquet") == sorted(names)
