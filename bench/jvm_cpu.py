"""The CPU seconds the local Spark driver JVM spent, by what its threads do (``python -m bench.steps --cpu``).

In a young driver a small batch on 2 cores is CPU-bound, and most of that CPU is not the batch's own work:
the JIT compiler threads and the collector take their share of the same cores (bench/README.md, "Where
the CPU goes"). Reading each thread's counters from
``/proc/<pid>/task/*/stat`` (Linux) before and after a batch tells how the seconds split, with no agent in
the JVM and nothing to configure.
"""

from __future__ import annotations

import collections
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ENDED", "GROUPS", "OTHER", "JvmCpu", "Reading", "driver_pid"]

#: thread-name patterns (the kernel keeps the first 15 characters of a Java thread's name), first match wins
GROUPS = (
    ("JIT compiler", re.compile(r"^C[12] CompilerThre")),
    # the VM thread runs the serial collector, and the JVM's other stop-the-world work
    ("garbage collector", re.compile(r"^(VM Thread|GC Thread|G1 |Gang worker)")),
    ("Spark tasks", re.compile(r"^Executor task")),
    ("driver (Python's calls)", re.compile(r"^Thread-\d+$")),  # py4j's threads serving Python's calls
)
OTHER = "other JVM threads"
ENDED = "threads that ended during it"


def driver_pid(spark) -> int:  # type: ignore[no-untyped-def]
    """The process id of the session's driver JVM (a local session: on this machine)."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # noqa: SLF001


@dataclass(frozen=True)
class Reading:
    """One look at a JVM's CPU counters: each live thread's group and seconds, and the whole process's
    seconds (which keep those of threads that have ended)."""

    threads: dict[int, tuple[str, float]]
    process: float


class JvmCpu:
    """CPU seconds (user + system) of one JVM's threads by group, read from ``/proc``; ``since`` gives the
    seconds spent since an earlier ``read``. A thread that ended in between (a pool's thread serving
    Python's calls, a task's) is counted under ``ENDED``: the process keeps its seconds, its name is gone."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._ticks = os.sysconf("SC_CLK_TCK")

    def read(self) -> Reading:
        """The counters now."""
        threads: dict[int, tuple[str, float]] = {}
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            try:
                name = (task / "comm").read_text().strip()
                seconds = self._seconds((task / "stat").read_text())
            except OSError:  # the thread ended while being read
                continue
            threads[int(task.name)] = (_group(name), seconds)
        return Reading(threads, self._seconds(Path(f"/proc/{self.pid}/stat").read_text()))

    def since(self, before: Reading) -> dict[str, float]:
        """Each group's CPU seconds since ``before``, largest first."""
        now = self.read()
        spent: collections.Counter[str] = collections.Counter()
        for tid, (group, seconds) in now.threads.items():
            spent[group] += seconds - before.threads.get(tid, (group, 0.0))[1]
        ended = now.process - before.process - sum(spent.values())
        if ended > 0:
            spent[ENDED] += ended
        return dict(sorted(spent.items(), key=lambda item: -item[1]))

    def _seconds(self, stat: str) -> float:
        # after the name in parentheses: utime and stime are the 12th and 13th fields (stat's 14th and 15th)
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self._ticks


def _group(thread_name: str) -> str:
    for group, pattern in GROUPS:
        if pattern.search(thread_name):
            return group
    return OTHER
