"""The JVM options of every Spark driver the tests start: their session, and each ``resolver`` command they
run in a child process (which inherits the environment). Spark's launcher adds ``SPARK_SUBMIT_OPTS`` to the
driver's command line, and a driver's settings start from the ``spark.*`` system properties it is given.

- C1 only and the serial collector (``BASE_OPTIONS``): test batches are tiny, C2's optimised code never pays
  back the CPU it takes to make on 2 cores in a short ``resolver`` child (C2 alone took a third of a
  measured ingest's CPU), and one GC thread leaves the cores to Spark's tasks. The exception is the one
  long-lived session of each pytest process (``session_options``): it plans thousands of queries over the
  whole suite, so it keeps C2. Side by side (five Spark-heavy modules, ``-n 2``, 2026-11-28): 683 s against
  697 s for an 11-minute run; one module alone, 280 s against 303 s; the calls after the first minutes took
  15-35% less time, the first ones more (C2 compiling). The whole suite in a clean-clone CI run: 2,482 s
  against 2,898 s the day before on the same machine.
- Interpreted expressions (``INTERPRETED``, as ``-Dspark.…`` properties): on a few hundred rows compiling
  each query's code costs more than running it; the sample stream's ingest in a child took 0.87x the wall
  time (median of 3 runs, side by side). These are the modes Spark's own test suites run in.
- Class-data sharing (``share_classes``): the classes a ``resolver ingest`` loads are dumped once into a
  dynamic CDS archive (``-XX:ArchiveClassesAtExit``) and every later driver maps them instead of loading and
  verifying them again. A session start plus a small Delta write and read took 9.4 s instead of 14.0 s (two
  runs each, side by side); nearly every ``resolver`` child the e2e tests start is that short.
 The archive is only valid for the class path it was made with (a ``SPARK_CONF_DIR`` of the developer's own
changes it: such drivers silently load their classes as usual; a JVM cannot archive with a folder holding
files on its class path, which is why the settings are properties and not a ``spark-defaults.conf``). The
archive is kept between runs under ``~/.cache/resolver-tests``, keyed by the Java, the Spark install and the
options; the first run on a machine makes it (about 40 s). ``RESOLVER_TEST_CDS=off`` makes none, for a run
that starts few drivers and no ``resolver`` children (CI's Spark-tier tests of the oldest pair), where
making it would cost more than it saves; ``RESOLVER_TEST_JIT=c1`` keeps the session C1 only as well, for
the same kind of short run. ``RESOLVER_TEST_JIT=full`` keeps the JVM's defaults, compiled
expressions and no archive (for comparing);
the README's quickstart (tests/e2e/test_readme.py) compiles its expressions as a user's run does
(``compiled_options``); the product's own sessions never set any of these.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import warnings
from importlib import metadata
from pathlib import Path

from tests.harness.processes import ROOT

#: what the tests' drivers interpret instead of compiling
INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
_C1_ONLY = "-XX:TieredStopAtLevel=1"
_JIT = f"{_C1_ONLY} -XX:ReservedCodeCacheSize=256m -XX:+UseSerialGC"
BASE_OPTIONS = " ".join([_JIT, *(f"-D{key}={value}" for key, value in INTERPRETED.items())])
#: a driver that cannot map the archive says so on stdout, where the commands print their tables
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
#: archives of other Java or Spark installs (another virtual environment) are removed after this long unused
_STALE_DAYS = 7


#: the sample stream's ingest, then the driver JVM ended and waited for: it writes the archive as it exits
#: (a JVM left to end after its Python would write it after the child returned)
_DUMP = """
import sys
from pyspark import SparkContext
from resolver.cli.main import main
code = main(["ingest", sys.argv[1], "--lake", sys.argv[2]])
jvm = SparkContext._gateway.proc
SparkContext._active_spark_context.stop()
jvm.stdin.close()
jvm.wait(timeout=600)
sys.exit(code)
"""


def full_jit() -> bool:
    """``RESOLVER_TEST_JIT=full``: the JVM's own defaults, for comparing."""
    return os.environ.get("RESOLVER_TEST_JIT") == "full"


def _archive_off() -> bool:
    return os.environ.get("RESOLVER_TEST_CDS") == "off"


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "resolver-tests"


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
    archive = _folder() / "classes.jsa"
    if archive.is_file() and os.environ["SPARK_SUBMIT_OPTS"] == BASE_OPTIONS and not _archive_off():
        os.environ["SPARK_SUBMIT_OPTS"] = f"{BASE_OPTIONS} -XX:SharedArchiveFile={archive} {_QUIET}"


def share_classes(scratch: Path) -> None:
    """Make this install's class archive if there is none yet (a ``resolver ingest`` of the sample stream in
    a child that dumps its classes at exit; ``scratch``: a folder for its lake), then have every driver
    started from now on map it. The caller holds the lock the test workers share."""
    if full_jit() or os.environ.get("SPARK_SUBMIT_OPTS") != BASE_OPTIONS:
        return  # the JVM's defaults, options of the developer's own, or the archive is in use already
    if _archive_off():
        return
    folder = _folder()
    archive = folder / "classes.jsa"
    if not archive.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        _prune_stale(folder)
        staged = folder / f"classes.{os.getpid()}.jsa"
        env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{BASE_OPTIONS} -XX:ArchiveClassesAtExit={staged}"}
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        lake = scratch / "class-archive-lake"
        command = [sys.executable, "-c", _DUMP, str(ROOT / "samples/wal2json-v2"), str(lake)]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=False)
        shutil.rmtree(lake, ignore_errors=True)
        if done.returncode != 0:
            staged.unlink(missing_ok=True)
            tail = done.stderr[-3000:]
            raise RuntimeError(f"the sample stream's ingest failed ({done.returncode}):\n{tail}")
        if not staged.is_file():  # a JVM that cannot dump (no base archive): the drivers load as usual
            warnings.warn(f"no class archive made; the JVM said:\n{done.stdout[-2000:]}", stacklevel=1)
            return
        staged.replace(archive)
    os.utime(folder)  # in use: not stale
    os.environ["SPARK_SUBMIT_OPTS"] = f"{BASE_OPTIONS} -XX:SharedArchiveFile={archive} {_QUIET}"


def session_options() -> str:
    """``SPARK_SUBMIT_OPTS`` for the tests' own session (one driver per pytest process, running as long as
    the suite): the tests' options, C2 kept; with ``RESOLVER_TEST_JIT=c1`` C1 only here too, for a run of a
    few minutes (CI's Spark-tier tests of the oldest pair: 240 s with C2 against 144 s with C1 only)."""
    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if os.environ.get("RESOLVER_TEST_JIT") == "c1":
        return options
    return " ".join(o for o in options.split() if o != _C1_ONLY)


def compiled_options() -> str:
    """``SPARK_SUBMIT_OPTS`` for a driver that compiles its expressions as a user's run does (the README's
    quickstart): the tests' JVM options without the interpreted modes."""
    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    return " ".join(o for o in options.split() if not o.startswith(tuple(f"-D{k}=" for k in INTERPRETED)))


def _prune_stale(keep: Path) -> None:
    """Remove the folders of other installs nobody used for a week (each archive is about 190 MB)."""
    cutoff = time.time() - _STALE_DAYS * 86400
    for other in keep.parent.glob("*"):
        if other != keep and other.is_dir() and other.stat().st_mtime < cutoff:
            shutil.rmtree(other, ignore_errors=True)
