"""What every harness is: a server or program a test starts and stops. ``with Harness() as h`` starts it
and stops it after, whatever happened in between; a session fixture calls ``start`` and ``stop`` itself."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Service:
    """Subclasses define ``start`` (waits until the service answers; cleans up after itself when it fails)
    and ``stop`` (idempotent)."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
