"""Java programs of the test harnesses: jar folders built once per machine, and the JVMs run from them.

``cached_build(...)`` fetches the jars a ``pom.xml`` names (``mvn dependency:copy-dependencies``) and
compiles the harness's own ``.java`` files into one cache folder (``lib/*.jar``, ``classes/``), rebuilt only
when the pom or a source changed. ``classpath_of(folder)`` is its ``java -cp``; ``stop_process`` ends a
program (SIGTERM, then SIGKILL). Used by tests/harness/debezium.py and tests/harness/kafka.py.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

_STACK_FRAME = re.compile(r"^\s+(at |\.\.\. \d+ more)")


def tail(text: str, lines: int = 15) -> str:
    """The last lines that are not Java stack frames, on one line."""
    kept = [line.strip() for line in text.splitlines() if line.strip() and not _STACK_FRAME.match(line)]
    return " | ".join(kept[-lines:])


def file_tail(path: Path, lines: int = 30) -> str:
    """:func:`tail` of a log file, or ``(no log)``."""
    return tail(path.read_text(errors="replace"), lines) if path.exists() else "(no log)"


def run(what: str, cmd: list[str], cwd: Path, error: type[Exception]) -> None:
    """Run a build or setup step; on a non-zero exit raise ``error`` with the command and its output."""
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:  # mvn writes its errors to stdout
        output = tail(done.stdout + done.stderr)
        raise error(f"{what} failed (exit {done.returncode}): {' '.join(cmd)}: {output}")


def cache_folder(env_var: str, name: str) -> Path:
    """``$env_var`` if set, else ``~/.cache/pg-change-resolver/<name>``."""
    return Path(os.environ.get(env_var) or Path.home() / ".cache" / "pg-change-resolver" / name)


def inputs_hash(salt: str, sources: Path, names: Sequence[str]) -> str:
    digest = hashlib.sha256(salt.encode())
    for name in names:
        digest.update(name.encode() + b"\0" + (sources / name).read_bytes())
    return digest.hexdigest()


def cached_build(
    cache: Path, sources: Path, java_files: Sequence[str], salt: str, error: type[Exception]
) -> Path:
    """The folder ``cache`` holding ``lib/*.jar`` (from ``sources/pom.xml``) and ``classes/`` (``java_files``
    of ``sources`` compiled against them), built when missing or when the pom or a source changed (their
    hash, with ``salt``, is ``inputs.sha256``).

    It is built beside itself in a temporary folder and renamed into place, so a concurrent process sees the
    old folder, the new one or none, never half of one; the builds of all such folders take turns (a lock file
    beside them: two test workers on a fresh machine would otherwise fetch jars into Maven's repository at
    once). Failures raise ``error`` with the step's output.
    """
    wanted = inputs_hash(salt, sources, ["pom.xml", *java_files])
    stamp = cache / "inputs.sha256"
    if stamp.exists() and stamp.read_text().strip() == wanted:
        return cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text().strip() == wanted:  # built while this one waited
            return cache
        return _build(cache, sources, java_files, wanted, error)


def _build(
    cache: Path, sources: Path, java_files: Sequence[str], wanted: str, error: type[Exception]
) -> Path:
    stamp = cache / "inputs.sha256"
    for tool in ("mvn", "javac"):
        if shutil.which(tool) is None:
            raise error(f"building {cache.name} for the tests needs {tool} on PATH (Java 17+ and Maven)")
    work = Path(tempfile.mkdtemp(prefix=f".{cache.name}.build-", dir=cache.parent))
    try:
        pom = str(sources / "pom.xml")
        run("mvn", ["mvn", "-q", "-B", "-f", pom, "dependency:copy-dependencies",
                    f"-DoutputDirectory={work / 'lib'}"], sources, error)  # fmt: skip
        if java_files:
            run("javac", ["javac", "-cp", str(work / "lib" / "*"), "-d", str(work / "classes"),
                          *(str(sources / name) for name in java_files)], sources, error)  # fmt: skip
        (work / "inputs.sha256").write_text(wanted + "\n")
        if cache.exists():  # stale: move it aside first (a rename onto a non-empty folder fails)
            old = Path(tempfile.mkdtemp(prefix=f".{cache.name}.old-", dir=cache.parent))
            try:
                cache.rename(old / "x")
            except OSError:
                pass  # another process moved it first
        try:
            work.rename(cache)
        except OSError:  # another process renamed its build in first: use that one if it is current
            if not (stamp.exists() and stamp.read_text().strip() == wanted):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for old in cache.parent.glob(f".{cache.name}.old-*"):
            shutil.rmtree(old, ignore_errors=True)
    return cache


def classpath_of(cache: Path) -> str:
    """The ``java -cp`` argument for a folder made by :func:`cached_build`."""
    return f"{cache / 'classes'}{os.pathsep}{cache / 'lib' / '*'}"


def die_with_parent() -> None:
    """For ``Popen(preexec_fn=die_with_parent)``: the child gets SIGTERM when the process that started it
    dies, even by SIGKILL (Linux ``PR_SET_PDEATHSIG``; elsewhere nothing), so no server outlives a killed
    test run."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def stop_process(proc: subprocess.Popen[bytes], grace: float = 30.0) -> int:
    """SIGTERM ``proc`` and wait ``grace`` seconds, then SIGKILL it; its exit status (143 after a SIGTERM
    a JVM handled, -9 after a SIGKILL)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
