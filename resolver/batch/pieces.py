"""A batch's local files as the pieces its parse tasks read (``pieces_of``): a format-2 file larger than
``spark.resolver.readPieceBytes`` (8 MiB unless set) is read in line-aligned pieces of about that size, each
by a task of its own, so one large file (a snapshot's, or a busy minute of a stream) keeps every core busy
instead of one. Every other file is one piece.

The driver finds where each piece begins (the first line beginning at or after its share of the file) and
the number of that line, in one pass over the file's bytes (``mmap``; no parse). A piece is read as a file of
its own, with its lines numbered as in the whole file: a transaction a piece boundary cuts becomes fragments,
stitched back together across pieces exactly as across files (``resolver.batch.stitch``). Format 1 (a
transaction is one JSON object over many lines) and Debezium files are never cut. No Spark."""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from pyspark.sql import SparkSession

from resolver.errors import whole_number_setting
from resolver.models import Format

__all__ = ["PIECE_BYTES", "PIECE_SETTING", "Piece", "piece_bytes", "pieces_of"]

PIECE_SETTING = "spark.resolver.readPieceBytes"
PIECE_BYTES = 8 * 1024 * 1024
"""About 1 s of parsing on one core (about 25 µs a line of 300 bytes)."""


@dataclass(frozen=True)
class Piece:
    """The lines of file ``file`` (its index among the batch's files) from byte ``begin`` (a line's first
    byte, the line numbered ``first_line`` in the file) to byte ``end`` (None: the end of the file)."""

    file: int
    begin: int = 0
    end: int | None = None
    first_line: int = 1

    def lines(self, fh: BinaryIO) -> Iterator[bytes]:
        """The piece's lines, with their line ends, read from ``fh`` (the file, opened in binary)."""
        fh.seek(self.begin)
        at = self.begin
        for line in fh:
            if self.end is not None and at >= self.end:
                return
            at += len(line)
            yield line


def piece_bytes(spark: SparkSession) -> int:
    """The size of a piece (``spark.resolver.readPieceBytes``); ``ConfigError`` (one line) for a setting
    that is not a whole number of bytes of at least 1."""
    text = spark.conf.get(PIECE_SETTING, None)
    value = whole_number_setting(PIECE_SETTING, text, 1, "a whole number of bytes, 1 or more")
    return PIECE_BYTES if value is None else value


def pieces_of(files: Sequence[str], fmt: Format, size: int) -> list[Piece]:
    """The pieces of local ``files`` of format ``fmt``, in stream order: a format-2 file larger than
    ``size`` bytes in pieces of about ``size``, every other file whole."""
    pieces = []
    for index, path in enumerate(files):
        length = os.path.getsize(path) if fmt is Format.WAL2JSON_V2 else 0
        if length <= size:
            pieces.append(Piece(index))
            continue
        cuts = _cuts(path, length, -(-length // size))
        for k, (begin, first) in enumerate(cuts):
            pieces.append(Piece(index, begin, cuts[k + 1][0] if k + 1 < len(cuts) else None, first))
    return pieces


def _cuts(path: str, length: int, count: int) -> list[tuple[int, int]]:
    """Where each of ``count`` pieces of the file begins (the first line beginning at or after its share)
    and the number of that line."""
    cuts = [(0, 1)]
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        begin, first = 0, 1
        for k in range(1, count):
            target = length * k // count
            if begin < target:
                end = data.find(b"\n", target - 1)
                cut = length if end < 0 else end + 1
                first += data[begin:cut].count(b"\n")
                begin = cut
            cuts.append((begin, first))
    return cuts
