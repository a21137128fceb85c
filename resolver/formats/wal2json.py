"""Read wal2json output (format-version 1 and 2) into change events, in pure Python.

One call reads one file as a stream of lines and yields, in file order, what each record became:
an ``Event`` (a ChangeEvent as a dict), a ``Quarantined`` record (raw text + reason), a ``Fragment`` line
(part of a format-2 transaction that starts or ends in another file of the batch, see
``resolver.batch.stitch``),
or a ``Count`` (transactions read, messages skipped). It never raises on bad input (a line nested deeper than
``MAX_JSON_DEPTH`` is quarantined before it is decoded; any other failure on one record quarantines that
record with rule ``reader-error``) and never holds more than one transaction in memory. Every record is
validated against the JSON Schemas in ``schemas/wal2json/``, compiled once per process.

Every non-blank input line ends in exactly one place, and the items say which lines they stand for:
a ``Quarantined`` record lines ``line`` … ``last``; a ``Fragment`` its ``line``; a ``Count`` with a ``line``
lines ``line`` … ``last`` (a transaction read: v1 its object, v2 its B … C; or a message outside any
transaction). An ``Event``'s ``source_line`` is its change's own line in v2 and its transaction's first
line in v1. The ranges of quarantined records, fragments, counted transactions and messages outside them,
and v2 events read without B/C framing, never overlap and cover every non-blank line; inside a v2
transaction's range, each line other than its B and C is exactly one event, quarantined change or message.
 ``detect_format`` tells the two formats apart from the first recognisable record of a file's head
(``file_head`` reads it), for ``resolver.files.input_files.resolve_format``.

Ordering (``../shared/reference/wal2json_spec.md`` section 7): a transaction's commit position is the end
of its commit record: v1 ``nextlsn``, v2 ``nextlsn`` of B and C (the same value in both formats, so the
two formats give the same events in the same order). ``position`` counts the transaction's changes
(insert/update/delete/truncate; messages are not changes). A change's own v2 ``lsn`` is kept as data only.
 The reader is split by concern: ``resolver.formats.wal2json_record`` decodes and validates one record,
``resolver.formats.wal2json_v1`` and ``resolver.formats.wal2json_v2`` read each format,
``resolver.formats.wal2json_items`` holds
what they yield, ``resolver.formats.wal2json_detect`` tells the formats apart, ``resolver.lsn`` converts
LSNs. This module is the entry point and names the public API.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from resolver.formats.debezium import read_debezium
from resolver.formats.wal2json_detect import DETECT_LINES, FileHead, detect_format, file_head
from resolver.formats.wal2json_items import Count, Event, Fragment, Quarantined
from resolver.formats.wal2json_record import MAX_JSON_DEPTH, validator
from resolver.formats.wal2json_v1 import read_v1
from resolver.formats.wal2json_v2 import read_v2
from resolver.lsn import format_lsn, parse_lsn
from resolver.models import Format

__all__ = [
    "DETECT_LINES",
    "MAX_JSON_DEPTH",
    "Count",
    "Event",
    "FileHead",
    "Fragment",
    "Quarantined",
    "detect_format",
    "file_head",
    "format_lsn",
    "parse_lsn",
    "read_lines",
    "validator",
]


def read_lines(
    lines: Iterable[bytes], source_file: str, fmt: Format, first_line: int = 1
) -> Iterator[Event | Quarantined | Fragment | Count]:
    """Read one file's lines (bytes, with or without line ends) as one stream of ``fmt`` (wal2json, or
    Debezium through ``resolver.formats.debezium``). ``first_line``: the number of the first line, when
    ``lines`` is a piece of a format-2 file that begins further in (``resolver.batch.pieces``): a piece is
    read as a file of its own, and a transaction it cuts becomes fragments, stitched as across files."""
    numbered = _decode(lines, first_line)
    if fmt is Format.DEBEZIUM_JSON:
        yield from read_debezium(numbered, source_file)
    elif fmt is Format.WAL2JSON_V1:
        yield from read_v1(numbered, source_file)
    else:
        yield from read_v2(numbered, source_file)


def _decode(lines: Iterable[bytes], first: int = 1) -> Iterator[tuple[int, str, bytes | None]]:
    """(line number, text, raw bytes when not UTF-8) for each non-blank line; the first is line ``first``."""
    for n, b in enumerate(lines, first):
        b = b.rstrip(b"\r\n")
        if not b.strip():
            continue
        try:
            yield n, b.decode("utf-8"), None
        except UnicodeDecodeError:
            yield n, b.decode("utf-8", "replace"), b
