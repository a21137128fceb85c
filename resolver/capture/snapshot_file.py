"""A snapshot file: rows of one chunk of a table's copy, already change events, in Parquet.

``resolver capture`` copies a table (``resolver.capture.copy``) with PostgreSQL's own ``COPY ... TO STDOUT
(FORMAT csv)`` of each value's text (``resolver.capture.records.values_query``); ``SnapshotParts`` turns
that CSV into rows of ``bronze/change_events``'s shape (``resolver.models.ChangeEvent``) with pyarrow's CSV
reader and Parquet writer (C++, no Python per row), and cuts them into files of about ``--file-mb`` each.
The readers then take a snapshot file with Spark's Parquet reader (``resolver.batch.snapshot_read``): no
parse in Python and nothing to stitch, which was most of a large first batch's time.

Each row is an insert at the snapshot's consistent point, as the stream would have carried it:

- ``table``, ``operation`` (``insert``; a re-snapshot's first file begins with the table's ``truncate``),
  ``commit_lsn`` and ``change_lsn`` the consistent point, ``xid`` 0, ``commit_time`` the snapshot's time;
- ``position``: the chunk's base (its first heap block times the most rows a block can hold,
  ``resolver.capture.copy``) plus the row's place in the chunk, from 1 (a re-snapshot's truncate is 0):
  unique in the table's one transaction, below 2^31 as a stream's positions are, and the same for the
  same copy;
- ``column_names``, ``column_types`` (the catalog's, as wal2json prints them), ``column_values`` (the text
  wal2json prints: see ``resolver.capture.records``), ``primary_key`` (the catalog's, ``[]`` for none);
- ``source_line``: the row's 1-based place in its file. ``source_file`` is not stored: the reader names
  each row's file as the batch names it.

The file's columns and its mark are ``resolver.formats.snapshot_files``'s. An empty chunk still lands one
file, with no rows. No Spark, no PostgreSQL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO, cast

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from resolver.capture.landing import Landing
from resolver.formats.snapshot_files import SNAPSHOT_SCHEMA, SUFFIX

__all__ = ["SnapshotParts", "SnapshotRows"]

#: bytes of CSV read at a time (a row group each), and the most a row that does not fit may make it
_READ_BLOCK, _LARGEST_READ_BLOCK = 4 << 20, 1 << 30


@dataclass(frozen=True)
class SnapshotRows:
    """What every row of one table's copy shares: the table as the stream names it, its columns and types
    (attribute order), its key, and the consistent point and time of the snapshot."""

    table: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    primary_key: tuple[str, ...]
    lsn: int
    taken: datetime


class SnapshotParts:
    """One chunk's rows into snapshot files of about ``limit`` bytes of values each: ``<prefix>-<k>.parquet``
    for the k-th, from 0, each durable once it is published (``Landing.open_part``); the rows' positions
    follow ``base``."""

    def __init__(self, landing: Landing, prefix: str, limit: int, rows: SnapshotRows, base: int) -> None:
        self.landing, self.prefix, self.limit, self.rows = landing, prefix, limit, rows
        self.names: list[str] = []
        self.written = 0  # rows of the chunk so far
        self._base = base  # the chunk's rows are at base + 1, base + 2, ...
        self._batches: list[pa.RecordBatch] = []
        self._size = 0.0

    def truncate(self) -> None:
        """The table's truncate, first in the chunk's first file (a re-snapshot's, position 0)."""
        n = 1
        self._batches.append(
            self._batch(
                n,
                operation="truncate",
                position=pa.array([self._base], pa.int64()),
                column_names=pa.nulls(n, SNAPSHOT_SCHEMA.field("column_names").type),
                column_types=pa.nulls(n, SNAPSHOT_SCHEMA.field("column_types").type),
                column_values=pa.nulls(n, SNAPSHOT_SCHEMA.field("column_values").type),
                primary_key=pa.nulls(n, SNAPSHOT_SCHEMA.field("primary_key").type),
            )
        )

    def write_csv(self, csv: Path) -> int:
        """The rows of a file of ``COPY ... (FORMAT csv)`` output of ``values_query`` (a leading constant
        column, then each column's value text; NULL unquoted and empty, an empty text quoted); how many.
        pyarrow reads the CSV in blocks that must each hold whole rows: a row longer than a block (a large
        TOASTed value) makes the chunk read again, from its start, in blocks four times as large (up to
        1 GiB); files it had published are written again under the same names."""
        if csv.stat().st_size == 0:
            return 0
        start = (list(self.names), self.written, list(self._batches), self._size)
        block = _READ_BLOCK
        while True:
            try:
                return self._read_csv(csv, block)
            except pa.ArrowInvalid as exc:
                if "straddl" not in str(exc) or block >= _LARGEST_READ_BLOCK:
                    raise
                names, self.written, batches, self._size = start
                self.names, self._batches = list(names), list(batches)
                block = min(block * 4, _LARGEST_READ_BLOCK)

    def _read_csv(self, csv: Path, block_size: int) -> int:
        width = len(self.rows.columns)
        names = ["_", *(f"c{i}" for i in range(width))]
        reader = pacsv.open_csv(
            csv,
            read_options=pacsv.ReadOptions(column_names=names, block_size=block_size),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types={name: pa.string() for name in names},
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )
        count = 0
        for block in reader:
            n = block.num_rows
            if n == 0:
                continue
            values = [block.column(i + 1) for i in range(width)]
            first = self._base + 1 + self.written
            self._add(
                self._batch(
                    n,
                    operation="insert",
                    position=pa.array(np.arange(first, first + n, dtype=np.int64)),
                    column_names=_repeated(self.rows.columns, n),
                    column_types=_repeated(self.rows.types, n),
                    column_values=_rows_of(values, n),
                    primary_key=_repeated(self.rows.primary_key, n),
                ),
                sum(v.nbytes for v in values),
            )
            self.written += n
            count += n
        return count

    def close(self) -> list[str]:
        """Publish the last file (a chunk of no rows still lands one); the names in order."""
        self._publish()
        return self.names

    def _add(self, batch: pa.RecordBatch, size: int) -> None:
        """A batch of rows whose values hold ``size`` bytes, cut between rows where a file fills up."""
        per_row = max(1.0, size / max(1, batch.num_rows))
        while batch.num_rows:
            if self._size >= self.limit:
                self._publish()
            fits = max(1, math.ceil((self.limit - self._size) / per_row))
            self._batches.append(batch.slice(0, fits))
            self._size += min(fits, batch.num_rows) * per_row
            batch = batch.slice(fits)

    def _publish(self) -> None:
        name = f"{self.prefix}-{len(self.names):04d}{SUFFIX}"
        sink = pa.BufferOutputStream()
        with pq.ParquetWriter(sink, SNAPSHOT_SCHEMA) as writer:
            line = 1
            for batch in self._batches:  # a row group each
                lines = pa.array(np.arange(line, line + batch.num_rows, dtype=np.int64))
                writer.write_batch(batch.set_column(_LINE, SNAPSHOT_SCHEMA.field(_LINE), lines))
                line += batch.num_rows
        part = self.landing.open_part(name)
        cast(TextIO, part.out).buffer.write(sink.getvalue().to_pybytes())  # bytes, not lines
        part.publish(name)
        self.names.append(name)
        self._batches, self._size = [], 0.0

    def _batch(self, n: int, **columns: Any) -> pa.RecordBatch:
        rows, point = self.rows, pa.scalar(self.rows.lsn, pa.int64())
        shared = {
            "table": _constant(pa.scalar(rows.table, pa.string()), n),
            "commit_lsn": _constant(point, n),
            "change_lsn": _constant(point, n),
            "xid": _constant(pa.scalar(0, pa.int64()), n),
            "commit_time": _constant(pa.scalar(rows.taken, pa.timestamp("us", tz="UTC")), n),
            "operation": _constant(pa.scalar(columns.pop("operation"), pa.string()), n),
        }
        arrays = []
        for field in SNAPSHOT_SCHEMA:
            if field.name in shared:
                arrays.append(shared[field.name])
            elif field.name in columns:
                arrays.append(columns[field.name])
            elif field.name == "source_line":  # set when the file is written
                arrays.append(pa.array(np.zeros(n, dtype=np.int64)))
            else:  # the old key: none for an insert or a truncate
                arrays.append(pa.nulls(n, field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=SNAPSHOT_SCHEMA)


_LINE = SNAPSHOT_SCHEMA.get_field_index("source_line")


def _constant(value: pa.Scalar, n: int) -> pa.Array:
    return pa.array([value.as_py()], value.type).take(pa.array(np.zeros(n, dtype=np.int64)))


def _repeated(items: tuple[str, ...], n: int) -> pa.Array:
    """The same list of strings in each of ``n`` rows."""
    width = len(items)
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * width)
    values = pa.array(list(items), pa.string()).take(pa.array(np.tile(np.arange(width), n)))
    return pa.ListArray.from_arrays(offsets, values, type=SNAPSHOT_SCHEMA.field("column_names").type)


def _rows_of(columns: list[pa.Array], n: int) -> pa.Array:
    """Each row's values as a list: ``columns[0][r], columns[1][r], …`` for row r."""
    width = len(columns)
    list_type = SNAPSHOT_SCHEMA.field("column_values").type
    if not width:
        empty = pa.array([], pa.string())
        return pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), empty, type=list_type)
    flat = pa.concat_arrays([c.cast(pa.string()) for c in columns])
    order = (np.arange(n)[:, None] + np.arange(width)[None, :] * n).ravel()
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * width)
    return pa.ListArray.from_arrays(offsets, flat.take(pa.array(order)), type=list_type)
