"""Hadoop's checksum sidecars in a lake on this machine's disk.

Hadoop's default local file system (a checksum file system) writes a ``.<name>.crc`` file beside every file
it creates and checks it on every read. The resolver's own sessions write a local table's Delta log through
the raw local ``FileContext`` instead (``resolver.spark.session``: no sidecar per log file, far fewer
processes Hadoop starts to set a file's mode and read links); data files keep their sidecars. Delta
overwrites two files of a table's log in place, ``_last_checkpoint`` and ``_last_vacuum_info``: a sidecar
of one of them that an earlier writer left (a lake an earlier release wrote, or a SparkSession of the
user's own) would no longer match it, and a reader through the checksum file system would fail to read it,
try three times a second apart and then list the log instead (14 s for one table, measured).
``drop_stale_sidecars`` removes those two sidecars from every Delta table of a local lake; the files they
check stay readable without them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import unquote, urlparse

from resolver.paths import is_uri

__all__ = ["drop_stale_sidecars"]

#: the log files Delta overwrites in place, as their sidecars are named
OVERWRITTEN = ("._last_checkpoint.crc", "._last_vacuum_info.crc")
#: the lake's folders that hold Delta tables, one per child (the quarantine is one itself)
_GROUPS = ("bronze", "silver", "_resolver", os.path.join("_resolver", "changes"))


def drop_stale_sidecars(lake_root: str) -> int:
    """Remove the sidecars of the log files Delta overwrites from every Delta table of the lake at
    ``lake_root`` (a plain path or a ``file:`` URI; a lake on another file system has none to remove).
    No listing of any log: one attempt per table and file. Returns how many it removed."""
    root = _local(lake_root)
    if root is None:
        return 0
    removed = 0
    for table in _tables(root):
        for name in OVERWRITTEN:
            try:
                os.remove(os.path.join(table, "_delta_log", name))
            except (FileNotFoundError, NotADirectoryError):
                continue
            removed += 1
    return removed


def _local(lake_root: str) -> str | None:
    if not is_uri(lake_root):
        return lake_root
    parsed = urlparse(lake_root)
    return unquote(parsed.path) if parsed.scheme == "file" else None


def _tables(root: str) -> Iterator[str]:
    yield os.path.join(root, "quarantine")
    for group in _GROUPS:
        folder = os.path.join(root, group)
        try:
            with os.scandir(folder) as entries:
                yield from (e.path for e in entries if e.is_dir() and not e.name.startswith("."))
        except (FileNotFoundError, NotADirectoryError):
            continue
