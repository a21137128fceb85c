"""The CPU seconds the local Spark driver JVM spent, by what its threads do (``python -m bench.steps --cpu``).

A small batch on 2 cores is CPU-bound, and most of that CPU is not the batch's own work: the JIT compiler
threads and the collector take their share of the same cores. Reading each thread's counters from
``/proc/<pid>/task/*/stat`` (Linux) before and after a batch tells how the seconds split, with no agent in
the JVM and nothing to configure.
"""

from __future__ import annotations

import collections
import os
import re
from pathlib import Path

__all__ = ["GROUPS", "OTHER", "JvmCpu", "driver_pid"]

#: thread-name patterns (the kernel keeps the first 15 characters of a Java thread's name), first match wins
GROUPS = (
    ("JIT compiler", re.compile(r"^C[12] CompilerThre")),
    ("garbage collector", re.compile(r"^(VM Thread|GC Thread|G1 |Gang worker)")),
    ("Spark tasks", re.compile(r"^Executor task")),
    ("driver (Python's calls)", re.compile(r"^Thread-\d+$")),  # py4j's threads serving Python's calls
)
OTHER = "other JVM threads"


def driver_pid(spark) -> int:  # type: ignore[no-untyped-def]
    """The process id of the session's driver JVM (a local session: on this machine)."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # noqa: SLF001


class JvmCpu:
    """CPU seconds (user + system) of one JVM's threads by group, read from ``/proc``; ``since`` gives the
    seconds spent since an earlier reading (threads that ended in between are not counted)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._ticks = os.sysconf("SC_CLK_TCK")

    def read(self) -> dict[str, float]:
        """Each group's CPU seconds so far, over the threads alive now."""
        seconds: collections.Counter[str] = collections.Counter()
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            try:
                name = (task / "comm").read_text().strip()
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # the thread ended while being read
                continue
            # fields[11], fields[12]: utime and stime (stat's 14th and 15th fields; the first two are cut off)
            seconds[_group(name)] += (int(fields[11]) + int(fields[12])) / self._ticks
        return dict(seconds)

    def since(self, before: dict[str, float]) -> dict[str, float]:
        """Each group's CPU seconds since ``before`` (a ``read``), largest first."""
        now = self.read()
        spent = {group: now[group] - before.get(group, 0.0) for group in now}
        return dict(sorted(spent.items(), key=lambda item: -item[1]))


def _group(thread_name: str) -> str:
    for group, pattern in GROUPS:
        if pattern.search(thread_name):
            return group
    return OTHER
