"""One writer per lake: ``<lake>/_resolver/run.lock``, taken by ``resolver run`` and ``resolver ingest``.

The lock is a file created with ``O_CREAT | O_EXCL`` (atomic on local and network POSIX file systems),
holding who took it: run id, host, process id and time. A second run finds it and either waits
(``wait_seconds``) or stops at once with ``LakeBusy``, naming the holder. A lock left by a process that is
gone (same host, neither its process nor its Spark driver JVM alive: a crash or a kill) is taken over
with a warning, so a crashed run never blocks the next one. A lake named by a URI (S3, ADLS, GCS), where a
file cannot be created atomically, keeps its lock in a one-row Delta table instead, taken by a
compare-and-swap commit (``resolver.table_lock``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

from resolver.errors import ResolverError
from resolver.paths import is_uri

__all__ = ["LakeBusy", "lake_lock", "lock_path", "session_pids"]

log = logging.getLogger(__name__)


class LakeBusy(ResolverError):
    """Another run holds the lake's lock."""


def lock_path(lake: str) -> str:
    return os.path.join(os.path.abspath(lake), "_resolver", "run.lock")


class _Lock(Protocol):
    """Where a lake's lock is kept: the lock file (``_FileLock``) or the lock table (``TableLock``)."""

    clear_hint: str

    def take(self, me: dict[str, Any]) -> bool: ...
    def holder(self) -> dict[str, Any] | None: ...
    def take_over(self, was: dict[str, Any], me: dict[str, Any]) -> bool: ...
    def release(self, me: dict[str, Any]) -> None: ...


@contextmanager
def lake_lock(
    lake: str,
    run_id: str,
    wait_seconds: float = 0.0,
    poll_seconds: float = 0.5,
    helper_pids: tuple[int, ...] = (),
    spark: Any = None,
) -> Iterator[None]:
    """Hold the lake's lock for the ``with`` block. Raises ``LakeBusy`` when another live run holds it
    for longer than ``wait_seconds``. ``helper_pids`` are other processes that write for this one (the
    Spark driver JVM of a local session): the lock is stale only when they are gone too, since a JVM
    outlives its killed Python process by a few seconds and may still commit a MERGE it had begun. A lake
    named by a URI keeps its lock in a Delta table (``resolver.table_lock``), which needs ``spark``."""
    lock: _Lock
    if is_uri(lake):
        if spark is None:
            raise ValueError(f"the lock of lake {lake} is a Delta table: pass the SparkSession")
        from resolver.table_lock import TableLock

        lock = TableLock(spark, lake)
    else:
        lock = _FileLock(lock_path(lake))
    mine = {
        "run_id": run_id,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "helper_pids": list(helper_pids),
        "since": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    deadline = time.monotonic() + wait_seconds
    while not lock.take(mine):
        holder = lock.holder()
        if holder is not None and _dead(holder):
            log.warning(
                "taking over the lock of run %s (process %s on %s is gone): %s",
                holder.get("run_id"),
                holder.get("pid"),
                holder.get("host"),
                lake,
            )
            if lock.take_over(holder, mine):
                break
            continue
        if time.monotonic() >= deadline:
            who = (
                f"run {holder.get('run_id')} (process {holder.get('pid')} on {holder.get('host')}, since "
                f"{holder.get('since')})"
                if holder
                else "another run"
            )
            waited = f" after waiting {wait_seconds:g} s" if wait_seconds else ""
            raise LakeBusy(
                f"lake {lake} is being written by {who}{waited}; expected no other run (pass --wait SECONDS "
                f"to wait for it, or {lock.clear_hint} if that process is gone)"
            )
        time.sleep(poll_seconds)
    try:
        yield
    finally:
        lock.release(mine)


class _FileLock:
    """The lock file of a lake on a local or network POSIX file system, created with ``O_EXCL``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.clear_hint = f"remove {path}"
        os.makedirs(os.path.dirname(path), exist_ok=True)

    def take(self, me: dict[str, Any]) -> bool:
        return _create(self.path, me)

    def holder(self) -> dict[str, Any] | None:
        return _read(self.path)

    def take_over(self, was: dict[str, Any], me: dict[str, Any]) -> bool:
        _remove_if(self.path, was)
        return False  # the loop takes it like a free lock (or finds a faster run has)

    def release(self, me: dict[str, Any]) -> None:
        _remove_if(self.path, me)


def _create(path: str, content: dict[str, Any]) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as fh:
        json.dump(content, fh)
    return True


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (FileNotFoundError, json.JSONDecodeError):
        return None  # being written or just removed: look again
    return data if isinstance(data, dict) else None


def _dead(holder: dict[str, Any]) -> bool:
    """Whether the holder is a process on this host that no longer runs (nor do its helpers)."""
    pids = [holder.get("pid"), *holder.get("helper_pids", [])]
    if holder.get("host") != socket.gethostname() or not all(isinstance(p, int) for p in pids):
        return False
    return not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def session_pids(spark: Any) -> tuple[int, ...]:
    """The process id of a local session's driver JVM, when this Python process started it."""
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    pid = getattr(proc, "pid", None)
    return (pid,) if isinstance(pid, int) else ()


def _remove_if(path: str, content: dict[str, Any]) -> None:
    """Remove the lock file if it still holds ``content`` (never another run's lock)."""
    if _read(path) == content:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
