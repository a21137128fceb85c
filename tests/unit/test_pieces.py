"""A file read in pieces (``resolver.batch.pieces``) is every line of the file once, in order, each under its
own line number, whatever the piece size: lines ending in CRLF, blank lines, lines longer than a piece, a
last line without its end."""

from __future__ import annotations

from pathlib import Path

import pytest

from resolver.batch.pieces import Piece, pieces_of
from resolver.models import Format

LINES = [b'{"a":1}\n', b"\n", b'{"bb":22}\r\n', b"x" * 40 + b"\n", b"\n", b"\n", b'{"c":3}\n', b"last"]


@pytest.mark.parametrize("size", [1, 2, 7, 9, 10, 41, 64, 1000])
def test_pieces_hold_every_line_once_in_order_with_its_number(tmp_path: Path, size: int) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"".join(LINES))
    pieces = pieces_of([str(path)], Format.WAL2JSON_V2, size)
    assert len(pieces) == (1 if path.stat().st_size <= size else -(-path.stat().st_size // size))
    got = []
    with open(path, "rb") as fh:
        for piece in pieces:
            got += list(enumerate(piece.lines(fh), piece.first_line))
    assert got == list(enumerate(LINES, 1))


def test_only_format_2_files_larger_than_a_piece_are_cut_at_line_starts(tmp_path: Path) -> None:
    big, small = tmp_path / "big.json", tmp_path / "small.json"
    big.write_bytes(b'{"a":1}\n' * 100)  # 800 bytes, a line every 8
    small.write_bytes(b'{"a":1}\n')
    files = [str(small), str(big), str(small)]
    assert pieces_of(files, Format.WAL2JSON_V2, 300) == [
        Piece(0),
        Piece(1, 0, 272, 1),  # the share ends at byte 266: the next line begins at 272, line 35
        Piece(1, 272, 536, 35),
        Piece(1, 536, None, 68),
        Piece(2),
    ]
    for fmt in (Format.WAL2JSON_V1, Format.DEBEZIUM_JSON):
        assert pieces_of(files, fmt, 300) == [Piece(0), Piece(1), Piece(2)]
