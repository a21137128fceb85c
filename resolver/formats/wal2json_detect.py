"""Which wal2json format a file is, from its first recognisable record (``detect_format``, ``file_head``),
for ``resolver.files.input_files.resolve_format``. Reads only a file's head; never raises on bad input. No
Spark."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import BinaryIO, NamedTuple

from resolver.formats.debezium_record import is_whole_record
from resolver.formats.wal2json_record import too_deep
from resolver.models import Format

__all__ = ["DETECT_LINES", "HEAD_LIMIT", "FileHead", "detect_format", "file_head", "stream_head"]


DETECT_LINES = 20
"""How many non-blank lines of a file's head ``detect_format`` looks through for a recognisable record (so a
corrupt first line, or the body of a transaction begun in an earlier file, does not decide)."""
_HEAD_BYTES = 64 * 1024  # of one line: a v1 transaction on one line can be huge, its start tells
_V2_START = re.compile(rb'\{\s*"action"\s*:')  # wal2json prints "action" first
_V1_START = re.compile(  # the keys wal2json prints before "change", in its order
    rb'\{\s*(?:"(?:xid|nextlsn|timestamp|origin)"\s*:\s*(?:-?\d+|"[^"\\]*")\s*,\s*)*"change"\s*:\s*\['
)


def detect_format(lines: Iterable[bytes]) -> Format | None:
    """The wal2json format of the first recognisable record among ``lines`` (a file's lines, or the first
    bytes of each), looking through ``DETECT_LINES`` non-blank lines at most; None when none is recognisable.

    Format 2: an object with an ``"action"`` key. Format 1: a transaction object with a ``"change"`` array on
    one line, a line ``{`` (pretty-printed), or a header ending in ``"change":[`` (write-in-chunks). Other
    lines (garbage, a cut record, a write-in-chunks change) are passed over. Never raises on bad input."""
    looked = 0
    for line in lines:
        text = line.strip()
        if not text:
            continue
        fmt = _line_format(text)
        looked += 1
        if fmt is not None or looked >= DETECT_LINES:
            return fmt
    return None


def _line_format(text: bytes) -> Format | None:
    if text == b"{" or _V1_START.match(text):
        return Format.WAL2JSON_V1
    if _V2_START.match(text):
        return Format.WAL2JSON_V2
    decoded = text.decode("utf-8", "replace")
    try:  # other key orders: a whole line that is an object
        obj = None if too_deep(decoded) else json.loads(decoded)
    except (ValueError, RecursionError):
        return None
    if isinstance(obj, dict) and "action" in obj:
        return Format.WAL2JSON_V2
    if _is_debezium(obj):
        return Format.DEBEZIUM_JSON
    if isinstance(obj, dict) and isinstance(obj.get("change"), list):
        return Format.WAL2JSON_V1
    return None


def _is_debezium(obj: object) -> bool:
    """A Debezium record: a change (``op`` and ``source``), a transaction record (``status`` and
    ``data_collections``), either in the schema envelope, or a whole record with such a ``value``."""
    if not isinstance(obj, dict):
        return False
    if is_whole_record(obj):
        return _is_debezium(obj["value"])
    if "payload" in obj and "schema" in obj:
        return _is_debezium(obj["payload"])
    return ("op" in obj and "source" in obj) or ("status" in obj and "data_collections" in obj)


class FileHead(NamedTuple):
    """What the head of one file shows: the format of its first recognisable record (None: none in its first
    ``DETECT_LINES`` non-blank lines), and its first non-blank line, cut short (None: the file has none)."""

    format: Format | None
    first: bytes | None


HEAD_LIMIT = 1 << 20
"""The most of a file's head ``stream_head`` reads (a file system that cannot stream it reads this much)."""


def file_head(path: str) -> FileHead:
    """Read the head of a local file, only as far as its first recognisable record (see ``detect_format``)."""
    with open(path, "rb") as fh:
        return stream_head(fh)


def stream_head(fh: BinaryIO) -> FileHead:
    """``file_head`` of an open binary stream (a local file, or the head of a file read elsewhere)."""
    heads = _line_heads(fh)
    first = next((h for h in heads if h.strip()), None)
    if first is None:
        return FileHead(None, None)
    return FileHead(detect_format(chain([first], heads)), first.strip()[:200])


def _line_heads(fh: BinaryIO) -> Iterator[bytes]:
    """The lines of ``fh``, each cut to its first ``_HEAD_BYTES`` (the rest skipped only if the next line is
    wanted), until ``HEAD_LIMIT`` bytes were read."""
    read = 0
    while read < HEAD_LIMIT:
        line = fh.readline(_HEAD_BYTES)
        if not line:
            return
        read += len(line)
        yield line
        while not line.endswith(b"\n") and read < HEAD_LIMIT:
            line = fh.readline(_HEAD_BYTES)
            if not line:
                return
            read += len(line)
