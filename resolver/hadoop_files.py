"""Input files through Spark's Hadoop file systems (``s3a://``, ``abfss://``, ``gs://``, ``hdfs://``,
``dbfs:/``, ``file:/``), with the configuration and credentials the user gave the SparkSession: listing and
file heads on the driver (``HadoopFiles``, a ``resolver.input_files.FileSystem``), and ``files_for``, which
says which file system a batch's paths are read through.

A plain path is read by the executors as a local path when Spark's default file system is the local one
(a laptop, CI, a single machine) and through the default file system otherwise (``hdfs:///…`` on a YARN
cluster, ``dbfs:/`` on Databricks), as Spark itself would read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession

from resolver.input_files import LOCAL, FileSystem, head_of, list_files, resolve_format
from resolver.models import Format
from resolver.paths import is_uri
from resolver.wal2json_detect import HEAD_LIMIT, FileHead

__all__ = ["HadoopFiles", "files_for", "input_of"]


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

    def head(self, path: str) -> FileHead:
        fs, p = self._fs(path)
        stream = fs.open(p)
        try:
            data = bytes(stream.readNBytes(HEAD_LIMIT))
        finally:
            stream.close()
        return head_of(data)


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
    (``resolver.input_files.list_files`` and ``resolve_format`` on that file system)."""
    fs = files_for(spark, paths)
    files = list_files(paths, fs)
    return fs, files, resolve_format(files, fmt, fs)
