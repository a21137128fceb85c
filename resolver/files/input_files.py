"""A batch's input files and their format, on the driver, before anything is parsed (no Spark).
 ``list_files`` expands the paths given (files, or folders whose visible files are taken in name order).
The format is given or detected: ``resolve_format`` reads the head of each file (only as far as its first
recognisable record) and refuses, with one line naming the file, a file of neither format, a batch that
mixes the two, or a file that is not the format given.

Where the files are is a ``FileSystem``: ``LOCAL`` (this machine's files, for plain paths) here, and
Spark's Hadoop file systems for URIs (``resolver.files.hadoop_files``, which needs a SparkSession);
``resolver.paths.is_uri`` tells which a path asks for.
"""

from __future__ import annotations

import glob
import io
import os
from collections.abc import Sequence
from typing import Protocol

from resolver.errors import ConfigError
from resolver.formats.partition_routes import ROUTES_SUFFIX, RoutesFile
from resolver.formats.snapshot_files import is_snapshot_file
from resolver.formats.wal2json_detect import HEAD_LIMIT, FileHead, stream_head
from resolver.models import Format

__all__ = [
    "LOCAL",
    "FileSystem",
    "LocalFiles",
    "head_of",
    "list_files",
    "local_listing",
    "resolve_format",
    "routes_files",
]


class FileSystem(Protocol):
    """Where a batch's input files are, as the driver sees them."""

    def expand(self, path: str) -> list[str] | None:
        """A file: itself; a folder: its visible files (not starting with ``.`` or ``_``) in name order;
        None when nothing is there. Names are given the way the readers will name the files."""
        ...

    def head(self, path: str) -> FileHead:
        """What the head of the file shows (``resolver.formats.wal2json.file_head``)."""
        ...

    def texts(self, folder: str, suffix: str) -> list[str]:
        """The texts of a folder's files whose names end with ``suffix``, in name order (none when there
        is no such folder)."""
        ...


class LocalFiles:
    """This machine's files (plain paths): the executors read them as local paths too."""

    def expand(self, path: str) -> list[str] | None:
        if os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if not n.startswith((".", "_")))
            found = [os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))]
            return [os.path.abspath(f) for f in found]
        return [os.path.abspath(path)] if os.path.isfile(path) else None

    def head(self, path: str) -> FileHead:
        with open(path, "rb") as fh:
            return stream_head(fh)

    def texts(self, folder: str, suffix: str) -> list[str]:
        if not os.path.isdir(folder):
            return []
        names = sorted(n for n in os.listdir(folder) if n.endswith(suffix))
        out = []
        for n in names:
            with open(os.path.join(folder, n), encoding="utf-8") as fh:
                out.append(fh.read())
        return out


LOCAL = LocalFiles()


def local_listing(pattern: str) -> dict[str, tuple[int, int]] | None:
    """The visible files of a local folder or glob, in name order (absolute paths), with their size and
    modification time in nanoseconds; None when ``pattern`` is neither an existing folder nor a glob."""
    if os.path.isdir(pattern):
        found = [os.path.join(pattern, n) for n in sorted(os.listdir(pattern))]
    else:
        found = sorted(glob.glob(pattern))
        if not found and not glob.has_magic(pattern):
            return None
    out = {}
    for f in found:
        if os.path.isfile(f) and not os.path.basename(f).startswith((".", "_")):
            st = os.stat(f)
            out[os.path.abspath(f)] = (st.st_size, st.st_mtime_ns)
    return out


def head_of(data: bytes) -> FileHead:
    """The head of a file whose first bytes (up to ``HEAD_LIMIT``) are ``data``."""
    return stream_head(io.BytesIO(data[:HEAD_LIMIT]))


def routes_files(files: Sequence[str], fs: FileSystem = LOCAL) -> list[RoutesFile]:
    """The partition routes a capture recorded beside the files (``_capture/*.partitions.json`` in the
    folder of each: ``resolver.formats.partition_routes``); one that cannot be read is refused in one
    line."""
    out = []
    for folder in dict.fromkeys(f.rsplit("/", 1)[0] for f in files if "/" in f):
        place = f"{folder}/_capture"
        for text in fs.texts(place, ROUTES_SUFFIX):
            try:
                out.append(RoutesFile.parse(text))
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(
                    f"a partition routes file in {place} could not be read ({exc}): expected what "
                    "resolver capture writes (docs/capture.md, 'Partitioned tables')"
                ) from None
    return out


def list_files(paths: Sequence[str], fs: FileSystem = LOCAL) -> list[str]:
    """Expand the paths given (files, or folders whose visible files are taken in name order)."""
    files: list[str] = []
    for p in paths:
        found = fs.expand(p)
        if found is None:
            raise ConfigError(f"input not found: {p!r} (expected a file or a folder of wal2json files)")
        files.extend(found)
    if not files:
        raise ConfigError(f"no input files in {list(paths)!r}")
    return files


_SHAPES = {
    Format.WAL2JSON_V1: 'a format-1 transaction object ({"change":[...]}, "{" or a chunk header)',
    Format.WAL2JSON_V2: 'a format-2 record (an object with an "action")',
    Format.DEBEZIUM_JSON: 'a Debezium record (an object with "op" and "source", or its schema envelope)',
}


def resolve_format(files: Sequence[str], fmt: Format | str | None = None, fs: FileSystem = LOCAL) -> Format:
    """The format to read ``files`` as: ``fmt`` when given, else the one their first records show.

    Each file's head is read up to its first recognisable record (``resolver.formats.wal2json.file_head``); a
    file without a non-blank line shows nothing and conflicts with nothing. ``ConfigError``, one line naming
    the file: without ``fmt``, a file whose head is none of the formats, or files of several; with ``fmt``, a
    file of another format (one that is none is read as ``fmt``, its records quarantined). When no
    file has a record nothing will be read and the format does not matter: ``fmt``, else format 2. Snapshot
    files (``resolver.formats.snapshot_files``) hold change events of no format and are left out.
    """
    given = _format(fmt) if fmt is not None else None
    first_of: dict[Format, str] = {}
    for path in dict.fromkeys(files):
        if is_snapshot_file(path):  # change events already, read with any format
            continue
        head = fs.head(path)
        if head.first is None:
            continue
        if head.format is None and given is None:
            raise ConfigError(
                f"cannot tell the format of {path!r}: its first record ({_excerpt(head.first)}) is not "
                "wal2json format 1 or 2 or Debezium JSON (give --format)"
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
