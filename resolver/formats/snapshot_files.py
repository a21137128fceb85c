"""The snapshot file's format: what ``resolver capture`` writes for the rows a table held at a snapshot's
consistent point (``resolver.capture.snapshot_file``) and the readers take as they are
(``resolver.batch.snapshot_read``). A Parquet file named ``*.parquet`` whose rows are change events:
``resolver.models.ChangeEvent``'s columns less ``source_file`` (a reader names each row's file as its batch
names it), and whose key-value metadata holds ``resolver.snapshot`` = ``1``, the format's version.
pyarrow, no Spark.
"""

from __future__ import annotations

import types
import typing
from datetime import datetime
from enum import Enum
from typing import Any

import pyarrow as pa

from resolver.models import ChangeEvent

__all__ = ["FORMAT_KEY", "FORMAT_VERSION", "SNAPSHOT_SCHEMA", "SUFFIX", "first_events", "is_snapshot_file"]

#: the name every snapshot file ends with
SUFFIX = ".parquet"
#: the key-value metadata that marks a snapshot file, and its version
FORMAT_KEY, FORMAT_VERSION = b"resolver.snapshot", b"1"


def _arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """(Arrow type, nullable) of a ``ChangeEvent`` field, as Spark's Parquet reader takes it."""
    nullable = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable, annotation = len(args) < len(typing.get_args(annotation)), args[0]
    if typing.get_origin(annotation) is list:
        element, element_nullable = _arrow_type(typing.get_args(annotation)[0])
        return pa.list_(pa.field("element", element, element_nullable)), nullable
    if issubclass(annotation, Enum | str):
        return pa.string(), nullable
    if issubclass(annotation, int):
        return pa.int64(), nullable
    if issubclass(annotation, datetime):
        return pa.timestamp("us", tz="UTC"), nullable
    raise TypeError(f"no Arrow type for {annotation!r}")


def _schema() -> pa.Schema:
    fields = []
    for name, info in ChangeEvent.model_fields.items():
        if name != "source_file":
            dtype, nullable = _arrow_type(info.annotation)
            fields.append(pa.field(name, dtype, nullable))
    return pa.schema(fields, metadata={FORMAT_KEY: FORMAT_VERSION})


#: a snapshot file's columns: ``ChangeEvent``'s, less ``source_file``
SNAPSHOT_SCHEMA = _schema()


def is_snapshot_file(path: str) -> bool:
    """Whether a landing file is a snapshot file (by its name)."""
    return path.endswith(SUFFIX)


def first_events(path: str) -> list[dict[str, Any]]:
    """The first events of a local snapshot file (a re-snapshot's truncate and its first insert, or the first
    insert): every insert of one file names the same table, columns, types and key."""
    import pyarrow.parquet as pq

    names = [f.name for f in SNAPSHOT_SCHEMA if f.name != "column_values"]
    for batch in pq.ParquetFile(path).iter_batches(batch_size=2, columns=names):
        return list(batch.to_pylist())
    return []
