"""Who may write: the lake's lock, taken by every command that writes the lake, and the owner lock of a
pipeline, held for the whole life of a stream or a scheduled run of it.

- **The lake's lock** ``<lake>/_resolver/run.lock``, taken by ``resolver ingest``, ``optimize``, ``vacuum``,
  ``resolver run`` for its whole life and by a streaming query for each micro-batch: one writer at a time,
  and between a stream's micro-batches the others get their turn.
- **The owner lock of a pipeline** ``<checkpoint>.lock`` (beside the streaming query's checkpoint, by default
  ``<lake>/_resolver/stream.lock``), taken before a stream starts its query and held until the query ended,
  and by a scheduled run of the pipeline: two queries on one checkpoint fail each other in Spark
  (``CONCURRENT_STREAM_LOG_UPDATE``), so the second one is refused before it starts any.

A lock is a file created with ``O_CREAT | O_EXCL`` (atomic on local and network POSIX file systems),
holding who took it (``Taker``): run id, host, process id and time. A second run finds it and either waits
(``wait_seconds``) or stops at once with ``LakeBusy`` (``PipelineBusy`` for the owner lock), naming the
holder. A lock left by a process that is gone (same host, neither its process nor its Spark driver JVM
alive: a crash or a kill) is taken over with a warning, so a crashed run never blocks the next one. Where a
file cannot be created atomically (a path named by a URI: S3, ADLS, GCS), the lock is a one-row Delta table
instead, taken by a compare-and-swap commit (``resolver.lake.table_lock``). Both locks are taken, waited for
and taken over by the same loop (``_held``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from resolver.errors import ResolverError
from resolver.lake.folders import Lake
from resolver.lake.sidecars import drop_stale_sidecars
from resolver.paths import is_uri

__all__ = [
    "LakeBusy",
    "PipelineBusy",
    "Taker",
    "lake_lock",
    "lock_path",
    "owner_lock_path",
    "pipeline_lock",
    "run_locks",
    "session_pids",
]

log = logging.getLogger(__name__)

#: how long a lock is waited for, whatever ``wait_seconds`` says, while its holder's process is gone and only
#: its Spark driver JVM still runs: the JVM of a killed process ends by itself within seconds
SETTLE_SECONDS = 60.0


class LakeBusy(ResolverError):
    """Another run holds the lake's lock."""


class PipelineBusy(LakeBusy):
    """Another run owns the pipeline: a stream of it, or a scheduled run."""


def lock_path(lake: str) -> str:
    """The lock file of a lake on a POSIX file system (``Lake.lock``)."""
    return Lake.at(lake).lock


def owner_lock_path(checkpoint: str) -> str:
    """The owner lock of the pipeline whose streaming checkpoint is ``checkpoint``: ``<checkpoint>.lock``, a
    file beside it (a one-row Delta table at that path when it is a URI)."""
    return (checkpoint.rstrip("/") if is_uri(checkpoint) else os.path.abspath(checkpoint)) + ".lock"


class _Lock(Protocol):
    """Where a lock is kept: a lock file (``_FileLock``) or a lock table (``TableLock``)."""

    clear_hint: str

    def take(self, me: dict[str, Any]) -> bool: ...
    def holder(self) -> dict[str, Any] | None: ...
    def take_over(self, was: dict[str, Any], me: dict[str, Any]) -> bool: ...
    def release(self, me: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class Taker:
    """Who takes a lock: the run's id; ``helper_pids``, other processes that write for it (the Spark driver
    JVM of a local session, ``session_pids``): a lock is stale only when they are gone too, since a JVM
    outlives its killed Python process by a few seconds and may still commit a MERGE it had begun; and
    ``spark``, which a lock kept in a Delta table (a lake named by a URI, ``resolver.lake.table_lock``)
    needs."""

    run_id: str
    helper_pids: tuple[int, ...] = ()
    spark: Any = None

    @classmethod
    def of_session(cls, run_id: str, spark: Any) -> Taker:
        """A run that writes through ``spark``, with the session's driver JVM as its helper process."""
        return cls(run_id, session_pids(spark), spark)

    def record(self) -> dict[str, Any]:
        """What the lock file or table holds while this run has it."""
        return {
            "run_id": self.run_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "helper_pids": list(self.helper_pids),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }


@dataclass(frozen=True)
class _Wait:
    """How long to wait for a live holder (``seconds``), how often to look (``poll``), and how long the
    caller waited in all for the message (``waited``: when it tries again itself, as ``run_locks`` does)."""

    seconds: float
    poll: float
    waited: float | None = None


def lake_lock(
    lake: str | Lake, taker: Taker, wait_seconds: float = 0.0, poll_seconds: float = 0.5
) -> AbstractContextManager[None]:
    """Hold the lake's lock for the ``with`` block. Raises ``LakeBusy`` when another live run holds it
    for longer than ``wait_seconds``. A lake named by a URI keeps its lock in a Delta table
    (``resolver.lake.table_lock``), which needs the taker's ``spark``."""
    return _lake_lock(Lake.at(lake), taker.record(), taker.spark, _Wait(wait_seconds, poll_seconds))


def pipeline_lock(
    checkpoint: str, pipeline: str, taker: Taker, wait_seconds: float = 0.0, poll_seconds: float = 0.5
) -> AbstractContextManager[None]:
    """Own the pipeline whose streaming checkpoint is ``checkpoint`` for the ``with`` block: its owner lock
    (``owner_lock_path``). Raises ``PipelineBusy`` when another live run owns it for longer than
    ``wait_seconds``; ``pipeline`` is how the message names it (its file). Stale locks and the taker as for
    ``lake_lock``."""
    wait = _Wait(wait_seconds, poll_seconds)
    return _pipeline_lock(checkpoint, pipeline, taker.record(), taker.spark, wait)


@contextmanager
def run_locks(
    lake: str | Lake,
    checkpoint: str,
    pipeline: str,
    taker: Taker,
    wait_seconds: float = 0.0,
    poll_seconds: float = 0.5,
) -> Iterator[None]:
    """Hold the lake's lock and the pipeline's owner lock for the ``with`` block (a scheduled run). The
    lake's lock first, where two runs of any kind meet; then the pipeline's without waiting, because a
    stream that owns it takes the lake's lock for each micro-batch, and a run waiting for the one while
    holding the other would stall both. A pipeline that a stream owns is tried again, with the lake's lock
    let go in between, until ``wait_seconds`` have passed; then ``PipelineBusy``."""
    me, spark, lake = taker.record(), taker.spark, Lake.at(lake)
    deadline = time.monotonic() + wait_seconds
    while True:
        with ExitStack() as held:
            left = max(0.0, deadline - time.monotonic())
            held.enter_context(_lake_lock(lake, me, spark, _Wait(left, poll_seconds, wait_seconds)))
            owner = _pipeline_lock(checkpoint, pipeline, me, spark, _Wait(0.0, poll_seconds, wait_seconds))
            try:
                held.enter_context(owner)
            except PipelineBusy:
                if time.monotonic() >= deadline:
                    raise
            else:
                yield
                return
        time.sleep(poll_seconds)


@contextmanager
def _lake_lock(lake: Lake, me: dict[str, Any], spark: Any, wait: _Wait) -> Iterator[None]:
    """The lake's lock for the ``with`` block; before letting it go, the checksum sidecars the block's
    Delta writes left stale are removed (``resolver.lake.sidecars``)."""
    root = lake.name
    lock = _table_lock(spark, lake.lock, f"lock of lake {root}") if lake.uri else _FileLock(lake.lock)

    def refused(who: str) -> LakeBusy:
        return LakeBusy(
            f"lake {root} is being written by {who}; expected no other run (pass --wait SECONDS to wait for "
            f"it, or {lock.clear_hint} if that process is gone)"
        )

    with _held(lock, f"lake {root}", refused, me, wait):
        try:
            yield
        finally:
            drop_stale_sidecars(lake.root)


def _pipeline_lock(
    checkpoint: str, pipeline: str, me: dict[str, Any], spark: Any, wait: _Wait
) -> AbstractContextManager[None]:
    path = owner_lock_path(checkpoint)
    if is_uri(path):
        lock = _table_lock(spark, path, f"owner lock of pipeline {pipeline}")
    else:
        lock = _FileLock(path)

    def refused(who: str) -> PipelineBusy:
        return PipelineBusy(
            f"pipeline {pipeline} is being run by {who}: expected no other run of it (pass --wait SECONDS "
            f"to wait for it, or {lock.clear_hint} if that process is gone)"
        )

    return _held(lock, f"pipeline {pipeline}", refused, me, wait)


def _table_lock(spark: Any, path: str, what: str) -> _Lock:
    """The lock table at ``path`` (``resolver.lake.table_lock``)."""
    if spark is None:
        raise ValueError(f"the {what} is a Delta table: pass the SparkSession")
    from resolver.lake.table_lock import TableLock

    return TableLock(spark, path)


@contextmanager
def _held(
    lock: _Lock, what: str, refused: Callable[[str], LakeBusy], me: dict[str, Any], wait: _Wait
) -> Iterator[None]:
    """Take ``lock`` as ``me`` (taking it over from a holder that is gone), waiting up to ``wait.seconds``
    for a live holder (and up to ``SETTLE_SECONDS`` for the Spark driver of one whose process is gone),
    else raise ``refused(<who holds it>)``; hold it for the ``with`` block. ``what`` is what the lock
    guards, for the log."""
    deadline = time.monotonic() + wait.seconds
    settled = time.monotonic() + SETTLE_SECONDS
    told: set[str] = set()  # what the log said already
    while not lock.take(me):
        holder = lock.holder()
        if holder is not None and _dead(holder):
            log.warning(
                "taking over the lock of run %s (process %s on %s is gone): %s",
                holder.get("run_id"),
                holder.get("pid"),
                holder.get("host"),
                what,
            )
            if lock.take_over(holder, me):
                break
            continue
        if holder is not None and _orphaned(holder) and time.monotonic() < settled:
            if "orphaned" not in told:
                told.add("orphaned")
                log.info(
                    "waiting for the Spark driver of run %s to end (its process is gone): %s",
                    holder.get("run_id"),
                    what,
                )
            time.sleep(wait.poll)
            continue
        who = (
            f"run {holder.get('run_id')} (process {holder.get('pid')} on {holder.get('host')}, since "
            f"{holder.get('since')})"
            if holder
            else "another run"
        )
        if time.monotonic() >= deadline:
            waited = wait.seconds if wait.waited is None else wait.waited
            raise refused(who + (f" after waiting {waited:g} s" if waited else ""))
        if "held" not in told:
            told.add("held")
            log.info("waiting up to %g s for %s, held by %s", wait.seconds, what, who)
        time.sleep(wait.poll)
    try:
        yield
    finally:
        lock.release(me)


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


def _orphaned(holder: dict[str, Any]) -> bool:
    """Whether the holder is a process on this host that no longer runs while one of its helpers does."""
    pid, helpers = holder.get("pid"), holder.get("helper_pids", [])
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int) or _alive(pid):
        return False
    return any(isinstance(p, int) and _alive(p) for p in helpers)


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
