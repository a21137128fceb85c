"""What a local session's driver prints (``local_session``): only what a user can act on (issue 69's first
screen). Two sources of noise are cut:

- Spark's log: the driver logs with this package's ``log4j2.properties`` (errors only, on stderr) instead of
  Spark's default profile, which logs warnings and says so on every start (``Using Spark's default log4j
  profile``, ``Setting default log level``, a loopback host name, no native Hadoop library). A user's own
  ``-Dlog4j2.configurationFile`` in ``spark.driver.extraJavaOptions`` wins.
- The JVM's own line ``WARNING: Using incubator modules: jdk.incubator.vector`` (Spark's launcher always
  resolves that module, and Java prints the line whatever its options), and the two lines Spark prints for
  an interactive shell on how to change the log level (the session sets it). The driver's standard error
  is a pipe that a thread forwards to this process's, every line but those (``quiet_launch``).

No Spark here: a path and file descriptors.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["LOG4J_CONFIG", "log4j_option", "quiet_launch"]

#: the driver's log configuration (shipped in the package)
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
#: how long a failed start waits for what its launcher printed
_DRAIN_SECONDS = 10.0
#: lines the JVM prints that no user acts on: the incubator modules, and Spark telling an interactive shell
#: how to change its log level (the session sets it: ``local_session``)
_NOISE = re.compile(
    rb"^(WARNING: Using incubator modules: |Setting default log level to |To adjust logging level use )"
)


def log4j_option(driver_options: str) -> str:
    """The driver option that gives its log this package's configuration; none when the driver's options
    (``spark.driver.extraJavaOptions``) give one already."""
    if "log4j2.configurationFile" in driver_options or "log4j.configuration" in driver_options:
        return ""
    return f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}"


@contextmanager
def quiet_launch() -> Iterator[None]:
    """Start the driver inside this block: the processes started here write their standard error into a
    pipe, which a daemon thread forwards to this process's standard error line by line, leaving out
    ``_NOISE``. This process's own standard error is as it was once the block ends. Where standard error
    cannot be redirected (no file descriptor 2), the block runs as it is."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    read, write = os.pipe()
    failed = False
    try:
        sys.stderr.flush()
        os.dup2(write, 2)
        yield
    except BaseException:
        failed = True
        raise
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(write)  # the children keep their own copy: the pipe ends when the last of them does
        forward = threading.Thread(target=_forward, args=(read, saved), name="driver-stderr", daemon=True)
        forward.start()
        if failed:  # the launcher ended: what it said comes before the one line that says why
            forward.join(_DRAIN_SECONDS)


def _forward(read: int, target: int) -> None:
    """Copy lines from ``read`` to ``target`` until the pipe ends, leaving out ``_NOISE``."""
    with os.fdopen(read, "rb", buffering=0) as pipe:
        pending = b""
        while True:
            try:
                chunk = pipe.read(65536)
            except OSError:
                return
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            _write(target, [line + b"\n" for line in lines if not _NOISE.match(line)])
        if pending and not _NOISE.match(pending):
            _write(target, [pending])
    os.close(target)


def _write(target: int, lines: list[bytes]) -> None:
    for line in lines:
        try:
            os.write(target, line)
        except OSError:
            return
