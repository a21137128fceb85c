"""Input files and lake folders through Spark's Hadoop file systems (``s3a://``, ``abfss://``, ``gs://``,
``hdfs://``, ``dbfs:/``, ``file:/``), with the configuration and credentials the user gave the SparkSession:
listing and file heads on the driver (``HadoopFiles``, a ``resolver.files.input_files.FileSystem`` and a
``resolver.lake.folders.Folders``), and ``files_for`` and ``lake_folders``, which say which file system a
batch's paths and a lake are reached through.

A plain path is read by the executors as a local path when Spark's default file system is the local one
(a laptop, CI, a single machine) and through the default file system otherwise (``hdfs:///…`` on a YARN
cluster, ``dbfs:/`` on Databricks), as Spark itself would read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession

from resolver.errors import ConfigError
from resolver.files.input_files import LOCAL, FileSystem, head_of, list_files, local_listing, resolve_format
from resolver.formats.wal2json_detect import HEAD_LIMIT, FileHead
from resolver.lake.folders import LOCAL_FOLDERS, Folders
from resolver.models import Format
from resolver.paths import is_uri

__all__ = ["HadoopFiles", "files_for", "input_of", "lake_folders", "source_listing"]


class HadoopFiles:
    """Files on any file system Spark's Hadoop configuration reaches, named by their qualified URIs (the
    names Spark's file sources give them)."""

    def __init__(self, spark: SparkSession) -> None:
        self._jvm = spark._jvm  # noqa: SLF001
        # the session's Hadoop configuration: spark.hadoop.* settings and fs.* options set on the session
        self._conf = spark._jsparkSession.sessionState().newHadoopConf()  # noqa: SLF001

    def _fs(self, uri: str) -> tuple[Any, Any]:
        path = self._jvm.org.apache.hadoop.fs.Path(uri)
        return path.getFileSystem(self._conf), path

    def expand(self, path: str) -> list[str] | None:
        fs, p = self._fs(path)
        if not fs.exists(p):
            return None
        status = fs.getFileStatus(p)
        if not status.isDirectory():
            return [str(fs.makeQualified(p).toString())]
        found = []
        for child in fs.listStatus(p):
            name = str(child.getPath().getName())
            if child.isFile() and not name.startswith((".", "_")):
                found.append((name, str(child.getPath().toString())))
        return [uri for _, uri in sorted(found)]

    def listing(self, pattern: str) -> dict[str, tuple[int, int]] | None:
        """The visible files of a folder or a glob, in name order, with their size and modification time
        (nanoseconds); None when ``pattern`` is neither an existing folder nor a glob."""
        fs, p = self._fs(pattern)
        if fs.exists(p) and fs.getFileStatus(p).isDirectory():
            statuses = list(fs.listStatus(p))
        else:
            statuses = list(fs.globStatus(p) or [])
            if not statuses and not any(c in pattern for c in "*?[{"):
                return None
        found = sorted(
            (
                str(s.getPath().getName()),
                str(s.getPath().toString()),
                int(s.getLen()),
                int(s.getModificationTime()),
            )
            for s in statuses
            if s.isFile() and not str(s.getPath().getName()).startswith((".", "_"))
        )
        return {uri: (size, millis * 1_000_000) for _, uri, size, millis in found}

    def head(self, path: str) -> FileHead:
        fs, p = self._fs(path)
        stream = fs.open(p)
        try:
            data = bytes(stream.readNBytes(HEAD_LIMIT))
        finally:
            stream.close()
        return head_of(data)

    def children(self, path: str) -> tuple[list[str], list[str]] | None:
        """The names of the sub-folders and of the files of a folder (a ``resolver.lake.folders.Folders``)."""
        fs, p = self._fs(path)
        if not fs.exists(p) or not fs.getFileStatus(p).isDirectory():
            return None
        statuses = list(fs.listStatus(p))
        dirs = sorted(str(s.getPath().getName()) for s in statuses if s.isDirectory())
        return dirs, sorted(str(s.getPath().getName()) for s in statuses if not s.isDirectory())

    def texts(self, folder: str, suffix: str) -> list[str]:
        found = self.children(folder)
        if found is None:
            return []
        return [self.read_text(f"{folder}/{name}") for name in found[1] if name.endswith(suffix)]

    def read_text(self, path: str) -> str:
        fs, p = self._fs(path)
        stream = fs.open(p)
        try:
            return bytes(stream.readAllBytes()).decode("utf-8")
        finally:
            stream.close()


def lake_folders(spark: SparkSession, lake: str) -> Folders:
    """How a lake's folders are listed: this machine's for a plain path, Spark's file systems for a URI."""
    return HadoopFiles(spark) if is_uri(lake) else LOCAL_FOLDERS


def files_for(spark: SparkSession, paths: Sequence[str]) -> FileSystem:
    """The file system a batch's paths are read through: ``LOCAL`` when every one is a plain path and
    Spark's default file system is the local one, else the Hadoop file systems (``HadoopFiles``)."""
    default = str(spark._jsparkSession.sessionState().newHadoopConf().get("fs.defaultFS", "file:///"))  # noqa: SLF001
    if not any(is_uri(p) for p in paths) and default.startswith("file:"):
        return LOCAL
    return HadoopFiles(spark)


def input_of(
    spark: SparkSession, paths: Sequence[str], fmt: Format | str | None
) -> tuple[FileSystem, list[str], Format]:
    """The file system the paths are read through, the files they name and their format
    (``resolver.files.input_files.list_files`` and ``resolve_format`` on that file system)."""
    fs = files_for(spark, paths)
    files = list_files(paths, fs)
    return fs, files, resolve_format(files, fmt, fs)


def source_listing(spark: SparkSession, pattern: str) -> tuple[FileSystem, dict[str, tuple[int, int]]]:
    """A pipeline source's files (a folder or a glob), in name order, with (size, modification time in
    nanoseconds), and the file system they are read through; ``ConfigError`` when there is no such folder
    and ``pattern`` is not a glob."""
    fs = files_for(spark, [pattern])
    if isinstance(fs, HadoopFiles):
        found = fs.listing(pattern)
    else:
        found = local_listing(pattern)
    if found is None:
        raise ConfigError(
            f"source path {pattern!r} not found (expected a folder of wal2json files or a glob)"
        )
    return fs, found
