"""A batch's input files and their format, on the driver, before anything is parsed (no Spark).

``list_files`` expands the paths given (files, or folders whose visible files are taken in name order).
The format is given or detected: ``resolve_format`` reads the head of each file (only as far as its first
recognisable record) and refuses, with one line naming the file, a file of neither format, a batch that
mixes the two, or a file that is not the format given.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from resolver.errors import ConfigError
from resolver.models import Format
from resolver.wal2json import file_head

__all__ = ["list_files", "resolve_format"]


def list_files(paths: Sequence[str]) -> list[str]:
    """Expand the paths given (files, or folders whose visible files are taken in name order)."""
    files: list[str] = []
    for p in paths:
        local = p.removeprefix("file://").removeprefix("file:")
        if os.path.isdir(local):
            names = sorted(n for n in os.listdir(local) if not n.startswith((".", "_")))
            files.extend(os.path.join(local, n) for n in names if os.path.isfile(os.path.join(local, n)))
        elif os.path.isfile(local):
            files.append(local)
        else:
            raise ConfigError(f"input not found: {p!r} (expected a file or a folder of wal2json files)")
    if not files:
        raise ConfigError(f"no input files in {list(paths)!r}")
    return [os.path.abspath(f) for f in files]


_SHAPES = {
    Format.WAL2JSON_V1: 'a format-1 transaction object ({"change":[...]}, "{" or a chunk header)',
    Format.WAL2JSON_V2: 'a format-2 record (an object with an "action")',
}


def resolve_format(files: Sequence[str], fmt: Format | str | None = None) -> Format:
    """The format to read ``files`` as: ``fmt`` when given, else the one their first records show.

    Each file's head is read up to its first recognisable record (``resolver.wal2json.file_head``); a file
    without a non-blank line shows nothing and conflicts with nothing. ``ConfigError``, one line naming the
    file: without ``fmt``, a file whose head is neither format, or files of both formats; with ``fmt``, a
    file of the other format (one that is neither is read as ``fmt``, its records quarantined). When no
    file has a record nothing will be read and the format does not matter: ``fmt``, else format 2.
    """
    given = _format(fmt) if fmt is not None else None
    first_of: dict[Format, str] = {}
    for path in dict.fromkeys(files):
        head = file_head(path)
        if head.first is None:
            continue
        if head.format is None and given is None:
            raise ConfigError(
                f"cannot tell the format of {path!r}: its first record ({_excerpt(head.first)}) is neither "
                "wal2json format 1 nor 2 (give --format)"
            )
        if head.format is None:
            continue
        if given is not None and head.format is not given:
            raise ConfigError(
                f"{path!r} is {head.format.value}, not the {given.value} given: its first record is "
                f"{_SHAPES[head.format]}"
            )
        first_of.setdefault(head.format, path)
        if len(first_of) > 1:
            a, b = first_of.items()
            raise ConfigError(
                f"the input mixes formats: {a[1]!r} is {a[0].value}, {b[1]!r} is {b[0].value} "
                "(expected files of one format)"
            )
    return given or next(iter(first_of), Format.WAL2JSON_V2)


def _excerpt(line: bytes) -> str:
    text = line.decode("utf-8", "replace")
    return repr(text if len(text) <= 40 else text[:40] + "…")


def _format(fmt: Format | str) -> Format:
    try:
        return Format(fmt)
    except ValueError:
        raise ConfigError(
            f"unknown format {fmt!r}: expected one of {', '.join(f.value for f in Format)}"
        ) from None
