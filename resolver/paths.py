"""Paths and URIs: where the lake and the input live. A plain path (``lake``, ``/data/lake``) is a path of
this machine's file system; a URI (``s3a://bucket/lake``, ``abfss://…``, ``gs://…``, ``hdfs://…``,
``dbfs:/…``, ``file:/…``) names the file system Spark reaches it through. No Spark."""

from __future__ import annotations

import os
import re

__all__ = ["is_uri", "join_inside"]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")  # C:\data: a Windows path, not a URI


def is_uri(path: str) -> bool:
    """Whether ``path`` names its file system (``s3a://…``, ``file:/…``): a URI, read and written through
    Spark's Hadoop file systems. A plain path (``landing/0001.json``, ``/data/x``) is not."""
    return bool(_SCHEME.match(path)) and not _DRIVE.match(path)


def join_inside(root: str, *parts: str) -> str:
    """``root/parts…``, refused (``ValueError``) unless it lies strictly inside ``root``. A plain ``root``
    gives an absolute path; a URI gives a URI under it (each part one path segment, never ``.`` or ``..``)."""
    if is_uri(root):
        bad = [p for p in parts if not p or "/" in p or p in (".", "..")]
        if bad or not parts:
            raise ValueError(f"{parts!r} is not inside the lake {root!r}")
        return root.rstrip("/") + "/" + "/".join(parts)
    base = os.path.abspath(root)
    path = os.path.abspath(os.path.join(base, *parts))
    if os.path.commonpath([base, path]) != base or path == base:
        raise ValueError(f"{path!r} is not inside the lake {base!r}")
    return path
