"""How the driver JVM of a local session starts (``local_session``'s ``jvm``): what a ``resolver`` command
pays before its first event, cut where the work allows (bench/README.md, "A cold call").

- **Short work** (``DriverJvm.short``: a command whose input is small, known before the JVM starts): C1
  only (``-XX:TieredStopAtLevel=1``) and the serial collector. C2's optimised code never pays back the CPU it
  takes to make in a run of seconds, and one GC thread leaves the cores to Spark's tasks: the README's first
  command 0.79x its wall time with them. A large batch keeps the JVM's defaults: C1 only made a 1,000,000-row
  initial load and an 80,000-event batch each 13% slower.
- **Shared classes** (``DriverJvm.share``): the classes a driver loads (Spark's, Delta's, Hadoop's: about
  30,000) are mapped from a class-data-sharing archive made by an earlier driver of the same Java, jars and
  options, instead of being loaded and verified again: with C1, the README's first command 0.61x its wall
  time. The archive is made by the first command that finds none (``DriverJvm.dump``, the command line's
  own): its JVM writes the classes it loaded as it exits (``-XX:ArchiveClassesAtExit``), which
  ``finish_driver`` waits for, and later drivers map it (``-XX:SharedArchiveFile``). It is about 200 MB,
  under ``$XDG_CACHE_HOME/resolver/jvm`` (``~/.cache``), one per Java, Python environment, Spark, Delta,
  packages and options; the archives of environments that are gone, and of any unused for 30 days, are
  removed when a new one is made. ``RESOLVER_CLASS_ARCHIVE=off`` makes and maps
  none. A JVM that cannot map an archive (another class path) loads its classes as usual.

A session whose JVM options are the user's (``spark.driver.extraJavaOptions`` given, or ``SPARK_SUBMIT_OPTS``
with ``-XX:`` options: the tests' harness sets its own) gets none of these. No Spark here: the options are
strings, the archive a file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "SHORT_INPUT_BYTES",
    "SMALL_LAKE_BYTES",
    "DriverJvm",
    "DriverStart",
    "driver_start",
    "finish_driver",
    "input_bytes",
    "java_options",
    "launched",
    "small_lake",
]

#: an input up to this size is short work (``DriverJvm.short``)
SHORT_INPUT_BYTES = 64 << 20
#: a lake whose silver tables hold up to this is small: a short batch into it runs interpreted
#: (``resolver.spark.expressions``), as copying a large table's rows interpreted is slow
SMALL_LAKE_BYTES = 16 << 20
_SHORT = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
#: a JVM that cannot map or write an archive says so on stdout, where the commands print their tables
_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
_STALE_DAYS = 30
#: the file in an archive's folder that names the Python environment it belongs to
_PREFIX = "prefix.txt"
#: how long a command waits at its end for its JVM to write the archive
_DUMP_SECONDS = 120.0


@dataclass(frozen=True)
class DriverJvm:
    """How a local session's driver JVM starts: ``short`` work (C1 only, the serial collector), classes
    mapped from a shared archive (``share``), and making that archive at exit when there is none yet
    (``dump``: a command that calls ``finish_driver`` at its end)."""

    short: bool = False
    share: bool = True
    dump: bool = False

    @classmethod
    def for_input(cls, paths: Sequence[str], dump: bool = True) -> DriverJvm:
        """A command's JVM for the input at ``paths`` (local files and folders; anything else counts as
        large): short work when they hold at most ``SHORT_INPUT_BYTES``."""
        return cls(short=input_bytes(paths) <= SHORT_INPUT_BYTES, dump=dump)


def input_bytes(paths: Sequence[str]) -> int:
    """The bytes of the local files at ``paths`` (a folder: its files); a URI or a missing path counts as
    larger than any short input."""
    total = 0
    for path in paths:
        if "://" in path or path.startswith("dbfs:"):
            return SHORT_INPUT_BYTES + 1
        if os.path.isdir(path):
            names = [os.path.join(path, n) for n in os.listdir(path)]
            total += sum(os.path.getsize(n) for n in names if os.path.isfile(n))
        elif os.path.isfile(path):
            total += os.path.getsize(path)
        else:
            return SHORT_INPUT_BYTES + 1
    return total


def small_lake(lake: str) -> bool:
    """Whether the local lake's silver tables hold at most ``SMALL_LAKE_BYTES`` (a new lake does); a lake
    named by a URI is not known to be small."""
    if "://" in lake or lake.startswith("dbfs:"):
        return False
    total = 0
    for folder, _, names in os.walk(os.path.join(lake, "silver")):
        for name in names:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except OSError:
                continue
            if total > SMALL_LAKE_BYTES:
                return False
    return True


@dataclass(frozen=True)
class _Archive:
    """Where this install's archive is, and where a JVM making it writes it first."""

    path: Path
    staged: Path


@dataclass(frozen=True)
class DriverStart:
    """The driver JVM's options for a ``DriverJvm``, and the archive that JVM writes as it exits (when it
    is the one that makes it)."""

    options: list[str]
    makes: _Archive | None = None


@dataclass(frozen=True)
class _Making:
    """A JVM this process launched that writes the archive as it exits."""

    archive: _Archive
    process: Any  # the JVM's Popen (py4j's gateway.proc)


_making: list[_Making] = []  # the JVM of this process's command that makes the archive, for finish_driver


def java_options(jvm: DriverJvm | None, settings: dict[str, str], packages: str) -> list[str]:
    """The driver's JVM options for ``jvm`` (``driver_start``'s options)."""
    return driver_start(jvm, settings, packages).options


def driver_start(jvm: DriverJvm | None, settings: dict[str, str], packages: str) -> DriverStart:
    """How the driver starts for ``jvm``: none of our options when the user's options decide
    (``settings`` hold the session's settings, ``packages`` its Maven packages). Nothing is recorded
    here: a session that launches its JVM with these options says so with ``launched``."""
    if jvm is None or _users_own(settings):
        return DriverStart([])
    options = list(_SHORT) if jvm.short else []
    if not jvm.share or os.environ.get("RESOLVER_CLASS_ARCHIVE", "").lower() in ("off", "0", "false"):
        return DriverStart(options)
    archive = _archive(options, packages)
    if archive is None:
        return DriverStart(options)
    if archive.path.is_file():
        _touch(archive.path.parent)
        return DriverStart([*options, f"-XX:SharedArchiveFile={archive.path}", *_QUIET])
    if not jvm.dump:
        return DriverStart(options)
    _prune(archive.path.parent)
    return DriverStart([*options, f"-XX:ArchiveClassesAtExit={archive.staged}", *_QUIET], archive)


def launched(start: DriverStart, process: Any) -> None:
    """Record that ``process`` (a JVM just launched with ``start``'s options) writes the archive at exit,
    for ``finish_driver``. A session that found its JVM running launched nothing and records nothing."""
    if start.makes is not None and process is not None:
        _making.append(_Making(start.makes, process))


def finish_driver() -> None:
    """At a command's end: when the JVM it launched makes the class archive, stop the session and wait (at
    most ``_DUMP_SECONDS``) for the JVM to write it as it exits, then put it in place for later drivers. A
    JVM the command did not launch (a caller's session, still in use) is left running."""
    if not _making:
        return
    making = _making.pop()
    from pyspark import SparkContext

    gateway: Any = SparkContext._gateway  # noqa: SLF001
    process: Any = making.process
    running: Any = getattr(gateway, "proc", None)
    if running is None or running is not process:
        making.archive.staged.unlink(missing_ok=True)  # that JVM already ended, or is not ours
        return
    context = SparkContext._active_spark_context  # noqa: SLF001
    if context is not None:
        context.stop()
    try:
        process.stdin.close()  # the JVM ends when its Python's pipe closes
        process.wait(timeout=_DUMP_SECONDS)
    except Exception:  # noqa: BLE001  # no archive this time: the next command makes it
        making.archive.staged.unlink(missing_ok=True)
        return
    if making.archive.staged.is_file():
        making.archive.staged.replace(making.archive.path)


def _users_own(settings: dict[str, str]) -> bool:
    """Whether the JVM's options are the user's: driver options set beyond the session's default, or
    ``-XX:`` options in ``SPARK_SUBMIT_OPTS``."""
    given = settings.get("spark.driver.extraJavaOptions", "")
    return "-XX:" in given or "-XX:" in os.environ.get("SPARK_SUBMIT_OPTS", "")


def _archive(options: list[str], packages: str) -> _Archive | None:
    """This install's archive: one per Java, interpreter, Spark, Delta, packages and options."""
    try:
        versions = [metadata.version("pyspark"), metadata.version("delta-spark")]
    except metadata.PackageNotFoundError:
        return None
    java = shutil.which("java") or "java"
    identity = "\n".join(
        [
            os.environ.get("JAVA_HOME", ""),
            os.path.realpath(java),
            sys.prefix,
            *versions,
            packages,
            " ".join(options),
        ]
    )
    folder = _root() / hashlib.sha256(identity.encode()).hexdigest()[:16]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / _PREFIX).write_text(sys.prefix, encoding="utf-8")  # whose it is: see _prune
    except OSError:
        return None
    return _Archive(folder / "classes.jsa", folder / f"classes.{os.getpid()}.jsa")


def _root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "resolver" / "jvm"


def _touch(folder: Path) -> None:
    try:
        os.utime(folder)  # in use: not stale
    except OSError:
        pass


def _prune(keep: Path) -> None:
    """Remove other installs' archives: of an environment that is gone (a CI run's throw-away one), or
    that nobody used for ``_STALE_DAYS`` days."""
    cutoff = time.time() - _STALE_DAYS * 86400
    for other in keep.parent.glob("*"):
        try:
            if other == keep or not other.is_dir():
                continue
            owner = other / _PREFIX
            gone = owner.is_file() and not Path(owner.read_text(encoding="utf-8")).is_dir()
            if gone or other.stat().st_mtime < cutoff:
                shutil.rmtree(other, ignore_errors=True)
        except OSError:
            pass
