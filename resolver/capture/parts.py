"""A slot's changes cut into landing files (``LandingParts``), each closed at the end of a transaction once it
holds enough bytes, or when its writer says so, and published whole into the landing place
(``resolver.capture.landing``). No Spark, no PostgreSQL."""

from __future__ import annotations

import time

from resolver.capture.landing import Landing, OpenPart

__all__ = ["LandingParts"]


class LandingParts:
    """A stream of lines cut into landing files ``<prefix>-<commit LSN>.json``: a file is closed at the end
    of the first transaction that brings it to ``limit`` bytes (and at ``cut`` or ``finish``), named by the
    commit LSN of its last transaction, so names sort in the stream's order and a part written again after a
    crash has the same name and content. Until then it is invisible (``Landing.open_part``)."""

    def __init__(self, landing: Landing, prefix: str, limit: int) -> None:
        self.landing, self.prefix, self.limit = landing, prefix, limit
        self.files: list[str] = []  # where each file written is
        self._part: OpenPart | None = None
        self._size = 0
        self._last: int | None = None  # the commit LSN of the part's last complete transaction
        self._opened = 0.0  # when the open part got its first line (time.monotonic)

    @property
    def is_open(self) -> bool:
        """Whether a part holds lines not yet in a landing file."""
        return self._part is not None

    def open_seconds(self) -> float:
        """How long the open part has been open (0 when none is)."""
        return time.monotonic() - self._opened if self._part is not None else 0.0

    def write(self, line: str) -> None:
        if self._part is None:
            self._part = self.landing.open_part(f"{self.prefix}-drain-{len(self.files)}.json")
            self._size = 0
            self._opened = time.monotonic()
        self._part.out.write(line + "\n")
        self._size += len(line) + 1

    def transaction_ended(self, commit_lsn: int) -> None:
        """The line just written ended a transaction committed at ``commit_lsn``: a cut may follow. The
        transaction is handed to the operating system (not yet flushed to disk, still invisible)."""
        self._last = commit_lsn
        if self._size >= self.limit:
            self._close()
        elif self._part is not None:
            self._part.out.flush()

    def cut(self) -> str | None:
        """Close the open part now (between transactions), as a file; ``None`` when none is open."""
        if self._part is None:
            return None
        self._close()
        return self.files[-1]

    def finish(self) -> list[str]:
        """Close the last part (the stream must end at a transaction's end); every file written."""
        if self._part is not None:
            self._close()
        return self.files

    def _close(self) -> None:
        assert self._part is not None and self._last is not None, "a landing part must end a transaction"
        self.files.append(self._part.publish(f"{self.prefix}-{self._last:016X}.json"))
        self._part, self._last = None, None
