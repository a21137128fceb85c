"""The jars Maven packages resolved to, remembered per machine so that a local session resolves them once.

Given ``spark.jars.packages``, Spark's launcher asks Ivy to resolve every coordinate and its dependencies
before the driver starts, even when every jar is already in the Ivy cache: about 1.9 s of each local session's
start (7.3 s instead of 5.4 s, three starts each, side by side), paid by every scheduled ``resolver`` command.
Once a session has started, the jars the launcher resolved are its ``spark.jars``; they are written to
``~/.cache/resolver/jars/`` under a name made of the coordinates and the Spark version, and the next session
with the same packages is given those files as ``spark.jars`` instead, provided every one of them is still
there (otherwise Ivy resolves again, and its answer is remembered). A session with repositories, Ivy settings
or jars of its own always resolves through Ivy.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: settings that change what Ivy would resolve: with any of them, nothing is remembered or reused
_OWN_RESOLUTION = (
    "spark.jars",
    "spark.jars.repositories",
    "spark.jars.ivy",
    "spark.jars.ivySettings",
    "spark.jars.excludes",
)


def _record(packages: str, spark_version: str) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    name = hashlib.sha256(f"{spark_version}\n{packages}".encode()).hexdigest()[:20]
    return cache / "resolver" / "jars" / f"{name}.txt"


def reusable(settings: dict[str, str]) -> bool:
    """Whether a session with these settings may use remembered jars (no resolution settings of its own)."""
    return not any(settings.get(key) for key in _OWN_RESOLUTION)


def remembered_jars(packages: str, spark_version: str) -> str | None:
    """The jars ``packages`` resolved to last time, as ``spark.jars``, if every one is still on disk."""
    try:
        jars = _record(packages, spark_version).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not jars or not all(Path(unquote(urlparse(uri).path)).is_file() for uri in jars.split(",")):
        return None
    return jars


def remember_jars(packages: str, spark_version: str, session: SparkSession) -> None:
    """Write down the jars the launcher resolved ``packages`` to for this session (local files only); a
    cache that cannot be written is left alone."""
    jars = session.sparkContext.getConf().get("spark.jars", "") or ""
    uris = [uri for uri in jars.split(",") if uri]
    if not uris or not all(urlparse(uri).scheme == "file" for uri in uris):
        return
    record = _record(packages, spark_version)
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        staged = record.with_suffix(f".{os.getpid()}.tmp")
        staged.write_text(",".join(uris), encoding="utf-8")
        staged.replace(record)
    except OSError:
        return
