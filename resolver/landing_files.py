"""Landing files as ``resolver capture`` writes them: each whole or not at all (a hidden temporary name in
the landing folder, flushed to disk, renamed, the folder's entry flushed), and a slot's changes cut into a
file each time one holds enough bytes, always at the end of a transaction. No Spark, no PostgreSQL."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO

__all__ = ["LandingParts", "sync_folder", "write_durably"]


def write_durably(path: Path, lines: Iterable[str]) -> None:
    """``lines`` into ``path`` as a whole or not at all: a reader never sees half a file, and once this
    returns the file survives a crash of the machine."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for line in lines:
            out.write(line + "\n")
        _durable_rename(out, tmp, path)


def _durable_rename(out: IO[str], tmp: Path, path: Path) -> None:
    out.flush()
    os.fsync(out.fileno())
    os.replace(tmp, path)
    sync_folder(path.parent)


def sync_folder(folder: Path) -> None:
    """Flush a folder's entries (files created, renamed or moved into it) to disk."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


class LandingParts:
    """A stream of lines cut into landing files ``<prefix>-<commit LSN>.json``: a file is closed at the end
    of the first transaction that brings it to ``limit`` bytes (and at ``finish``), named by the commit LSN
    of its last transaction, so names sort in the stream's order and a part written again after a crash
    has the same name and content. Each part is written under a hidden name and renamed once durable."""

    def __init__(self, folder: Path, prefix: str, limit: int) -> None:
        self.folder, self.prefix, self.limit = folder, prefix, limit
        self.files: list[Path] = []
        self._out: IO[str] | None = None
        self._tmp = folder / f".{prefix}-drain-0.json.tmp"
        self._size = 0
        self._last: int | None = None  # the commit LSN of the part's last complete transaction
        self._opened = 0.0  # when the open part got its first line (time.monotonic)

    @property
    def is_open(self) -> bool:
        """Whether a part holds lines not yet in a landing file."""
        return self._out is not None

    def open_seconds(self) -> float:
        """How long the open part has been open (0 when none is)."""
        return time.monotonic() - self._opened if self._out is not None else 0.0

    def write(self, line: str) -> None:
        if self._out is None:
            self._tmp = self.folder / f".{self.prefix}-drain-{len(self.files)}.json.tmp"
            self._out = open(self._tmp, "w", encoding="utf-8")  # noqa: SIM115 (closed by _close)
            self._size = 0
            self._opened = time.monotonic()
        self._out.write(line + "\n")
        self._size += len(line) + 1

    def transaction_ended(self, commit_lsn: int) -> None:
        """The line just written ended a transaction committed at ``commit_lsn``: a cut may follow. The
        transaction is handed to the operating system (not yet flushed to disk, still under a hidden name)."""
        self._last = commit_lsn
        if self._size >= self.limit:
            self._close()
        elif self._out is not None:
            self._out.flush()

    def cut(self) -> Path | None:
        """Close the open part now (between transactions), as a file; ``None`` when none is open."""
        if self._out is None:
            return None
        self._close()
        return self.files[-1]

    def finish(self) -> list[Path]:
        """Close the last part (the stream must end at a transaction's end); every file written."""
        if self._out is not None:
            self._close()
        return self.files

    def _close(self) -> None:
        assert self._out is not None and self._last is not None, "a landing part must end a transaction"
        path = self.folder / f"{self.prefix}-{self._last:016X}.json"
        with self._out as out:
            _durable_rename(out, self._tmp, path)
        self.files.append(path)
        self._out, self._last = None, None
