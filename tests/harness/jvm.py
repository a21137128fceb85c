"""The JVM options of every Spark driver the tests start: their session, and each ``resolver`` command they
run in a child process (which inherits the environment). Spark's launcher adds ``SPARK_SUBMIT_OPTS`` to the
driver's command line, and a driver's settings start from the ``spark.*`` system properties it is given.

- C1 only and the serial collector (``BASE_OPTIONS``): test batches are tiny, C2's optimised code never pays
  back the CPU it takes to make on 2 cores (C2 alone took a third of a measured ingest's CPU), and one GC
  thread leaves the cores to Spark's tasks.
- Interpreted expressions (``INTERPRETED``, as ``-Dspark.…`` properties): on a few hundred rows compiling
  each query's code costs more than running it; the sample stream's ingest in a child took 0.87x the wall
  time (median of 3 runs, side by side). These are the modes Spark's own test suites run in.
- Class-data sharing (``use_archive``): the classes a ``resolver ingest`` loads are dumped once into a
  dynamic CDS archive (``-XX:ArchiveClassesAtExit``) and every later driver maps them instead of loading and
  verifying them again. A session start plus a small Delta write and read took 9.4 s instead of 14.0 s (two
  runs each, side by side); nearly every ``resolver`` child the e2e tests start is that short.

The archive is only valid for the class path it was made with (a ``SPARK_CONF_DIR`` of the developer's own
changes it: such drivers silently load their classes as usual; a JVM cannot archive with a folder holding
files on its class path, which is why the settings are properties and not a ``spark-defaults.conf``). The
archive is kept between runs under ``~/.cache/resolver-tests``, keyed by the Java, the Spark install and the
options. The first run on a machine makes it in a child process of its own (``make_archive``, about 40 s)
while the tests go on; the drivers started after it is there use it. ``RESOLVER_TEST_CDS=off`` makes none, for
a run that starts few drivers and no ``resolver`` children (CI's Spark-tier tests of the oldest pair), where
making it would cost more than it saves.
``RESOLVER_TEST_JIT=full`` keeps the JVM's defaults, compiled expressions and no archive (for comparing);
the README's quickstart (tests/e2e/test_readme.py) compiles its expressions as a user's run does
(``compiled_options``); the product's own sessions never set any of these.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from tests.harness.processes import ROOT

#: what the tests' drivers interpret instead of compiling
INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m -XX:+UseSerialGC"
BASE_OPTIONS = " ".join([_JIT, *(f"-D{key}={value}" for key, value in INTERPRETED.items())])
#: a driver that cannot map the archive says so on stdout, where the commands print their tables
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
#: archives of other Java or Spark installs (another virtual environment) are removed after this long unused
_STALE_DAYS = 7


#: the sample stream's ingest with the driver JVM dumping its classes as it exits, then ended and waited for
#: (a JVM left to end after its Python would write the archive after the child returned); the archive is
#: put in place whole, and the claim on making it is given up however the ingest ends
_DUMP = """
import os, sys
from pyspark import SparkContext
from resolver.cli import main
samples, lake, staged, archive, claim = sys.argv[1:]
try:
    code = main(["ingest", samples, "--lake", lake])
    jvm = SparkContext._gateway.proc
    SparkContext._active_spark_context.stop()
    jvm.stdin.close()
    jvm.wait(timeout=600)
    if code == 0 and os.path.isfile(staged):
        os.replace(staged, archive)
finally:
    if os.path.isfile(staged):
        os.unlink(staged)
    os.unlink(claim)
"""
#: a claim older than this is from a run that was killed while making the archive
_CLAIM_MINUTES = 20


def full_jit() -> bool:
    """``RESOLVER_TEST_JIT=full``: the JVM's own defaults, for comparing."""
    return os.environ.get("RESOLVER_TEST_JIT") == "full"


def _archive_off() -> bool:
    return os.environ.get("RESOLVER_TEST_CDS") == "off"


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "resolver-tests"


@functools.cache
def _folder() -> Path:
    """This Java's, Spark install's and options' folder in the cache."""
    identity = "\n".join(
        [
            os.environ.get("JAVA_HOME", ""),  # Spark's launcher runs its java, or the first on PATH
            os.path.realpath(shutil.which("java") or "java"),
            sys.prefix,
            metadata.version("pyspark"),
            metadata.version("delta-spark"),
            BASE_OPTIONS,
        ]
    )
    return _cache_root() / hashlib.sha256(identity.encode()).hexdigest()[:16]


def configure() -> None:
    """Set the options every driver started from now on gets (at the tests' start, before any JVM)."""
    if full_jit():
        return
    os.environ.setdefault("SPARK_SUBMIT_OPTS", BASE_OPTIONS)
    use_archive()


def use_archive() -> None:
    """Have every driver started from now on map this install's class archive, if it is there (between
    tests: it may have been made since the last)."""
    if full_jit() or _archive_off() or os.environ.get("SPARK_SUBMIT_OPTS") != BASE_OPTIONS:
        return  # the JVM's defaults, options of the developer's own, or the archive is in use already
    archive = _folder() / "classes.jsa"
    if archive.is_file():
        os.utime(_folder())  # in use: not stale
        os.environ["SPARK_SUBMIT_OPTS"] = f"{BASE_OPTIONS} -XX:SharedArchiveFile={archive} {_QUIET}"


def make_archive(scratch: Path) -> None:
    """Start making this install's class archive in a child process, unless it is there or another test
    process is making it (a claim file beside it); ``scratch``: a folder for the child's lake and output.
    Returns at once: the tests go on, and ``use_archive`` picks the archive up once it is there."""
    if full_jit() or _archive_off() or os.environ.get("SPARK_SUBMIT_OPTS") != BASE_OPTIONS:
        return
    folder = _folder()
    if (folder / "classes.jsa").is_file():
        return
    folder.mkdir(parents=True, exist_ok=True)
    claim = folder / "making"
    with contextlib.suppress(FileNotFoundError):
        if time.time() - claim.stat().st_mtime > _CLAIM_MINUTES * 60:
            claim.unlink()
    try:
        claim.touch(exist_ok=False)
    except FileExistsError:
        return  # another test process is making it
    _prune_stale(folder)
    staged = folder / f"classes.{os.getpid()}.jsa"
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{BASE_OPTIONS} -XX:ArchiveClassesAtExit={staged}"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    paths = [ROOT / "samples/wal2json-v2", scratch / "lake", staged, folder / "classes.jsa", claim]
    with open(scratch / "class-archive.log", "w") as log:  # its output, when an archive does not appear
        subprocess.Popen(
            [sys.executable, "-c", _DUMP, *map(str, paths)], stdout=log, stderr=subprocess.STDOUT, env=env
        )


def compiled_options() -> str:
    """``SPARK_SUBMIT_OPTS`` for a driver that compiles its expressions as a user's run does (the README's
    quickstart): the tests' JVM options without the interpreted modes."""
    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    return " ".join(o for o in options.split() if not o.startswith(tuple(f"-D{k}=" for k in INTERPRETED)))


def _prune_stale(keep: Path) -> None:
    """Remove the folders of other installs made over a week ago (each archive is about 200 MB)."""
    cutoff = time.time() - _STALE_DAYS * 86400
    for other in keep.parent.glob("*"):
        if other != keep and other.is_dir() and other.stat().st_mtime < cutoff:
            shutil.rmtree(other, ignore_errors=True)
