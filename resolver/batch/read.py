"""Read wal2json files into Spark: change events and quarantined records, parsed inside Spark tasks.
 The files of one batch are one stream, in the order given. Each file is parsed line by line by one Spark
task through ``resolver.formats.wal2json`` (validation needs the JSON Schemas, which is Python work, so this
is a ``mapInArrow``, not a per-row UDF); nothing is collected to the driver. Local files (plain paths, on a
machine whose Spark default file system is the local one) are opened and streamed by the task itself, so a
file of any size is fine; a large format-2 file is read in line-aligned pieces, a task each
(``resolver.batch.pieces``). Files named by URIs (``s3a://``, ``abfss://``, ``gs://``, ``hdfs://``,
``dbfs:/``, ``file:/``) are read through Spark's Hadoop file systems with the session's configuration and
credentials (``resolver.files.hadoop_files``): Spark's ``binaryFile`` source hands each file to a task as one
value, which bounds one file at 2 GiB and needs about three times its size in the executor's memory.
 A format-2 transaction cut by file boundaries (its B in one file, its C in a later one, any files between
wholly inside it) is stitched back together in Spark (``resolver.batch.stitch``); one that stays incomplete
(no C before the end of the last file) is quarantined whole, never applied half-way.

The files and their format come from ``resolver.files.input_files`` (``list_files``, ``resolve_format``).
"""

from __future__ import annotations

import gc
import io
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from resolver.batch.pieces import Piece, piece_bytes, pieces_of
from resolver.batch.snapshot_read import read_snapshots, snapshot_transactions
from resolver.batch.stitch import stitch, summarize
from resolver.files.hadoop_files import input_of
from resolver.files.input_files import LOCAL, routes_files
from resolver.formats.partition_routes import NO_ROUTES, PartitionRoutes
from resolver.formats.routed_items import route_items
from resolver.formats.snapshot_files import is_snapshot_file
from resolver.formats.stitch_plan import CLOSED, ReadWindow, Stitching, plan_stitching
from resolver.formats.wal2json import Count, Event, Fragment, Quarantined, read_lines
from resolver.models import Format
from resolver.spark.sparkschema import EVENT_SCHEMA, arrow_schema

__all__ = ["ParsedBatch", "read_wal2json"]

_EXTRA = [
    T.StructField("kind", T.StringType(), False),  # event | quarantine | fragment | count
    T.StructField("file_index", T.IntegerType(), False),
    T.StructField("role", T.StringType(), True),
    T.StructField("reason", T.StringType(), True),
    T.StructField("raw", T.StringType(), True),
    T.StructField("raw_bytes", T.BinaryType(), True),
    T.StructField("count_name", T.StringType(), True),
    T.StructField("count_value", T.LongType(), True),
]
_PARSED_SCHEMA = T.StructType(
    _EXTRA + [T.StructField(f.name, f.dataType, True) for f in EVENT_SCHEMA.fields]  # all nullable here
)
_BATCH_ROWS = 4096
#: the counters the readers yield (``Count``) that a batch's summary reports
_COUNTERS = ("transactions", "messages", "tombstones", "fragment")


def _rows_of(
    lines: Iterable[bytes],
    path: str,
    index: int,
    fmt: Format,
    routes: PartitionRoutes,
    first_line: int = 1,
) -> Iterator[dict[str, Any]]:
    """One file's (or piece's: ``index``) parsed rows, read line by line, each partition's changes under its
    root's name (``routes``); its first line is ``first_line``."""
    counts: dict[str, int] = {}
    for item in route_items(read_lines(lines, path, fmt, first_line), routes):
        if isinstance(item, Event):
            row = item.row  # ours to extend: no copy per event
            row["kind"], row["file_index"] = "event", index
            yield row
        elif isinstance(item, Quarantined):
            yield {
                "kind": "quarantine",
                "file_index": index,
                "source_file": path,
                "source_line": item.line,
                "reason": item.reason,
                "raw": item.raw,
                "raw_bytes": item.raw_bytes,
            }
        elif isinstance(item, Fragment):
            row = item.row or {"source_file": path, "source_line": item.line}
            yield {
                **row,
                "kind": "fragment",
                "file_index": index,
                "role": item.role,
                "raw": item.raw,
                "commit_lsn": item.commit_lsn,
                "count_value": item.slots,
            }
        elif isinstance(item, Count):
            counts[item.name] = counts.get(item.name, 0) + item.value
    for name, value in counts.items():
        yield {"kind": "count", "file_index": index, "count_name": name, "count_value": value}


def _as_batches(rows: Iterator[dict[str, Any]]) -> Iterator[pa.RecordBatch]:
    """Parsed rows as Arrow batches of ``_BATCH_ROWS``."""
    schema = arrow_schema(_PARSED_SCHEMA)
    # The rows are acyclic: the cyclic garbage collector only rescans the batch buffer over and over
    # (measured: ~20% of the task). Reference counting frees everything; collect once at the end.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        buf: list[dict[str, Any]] = []
        for row in rows:
            buf.append(row)
            if len(buf) >= _BATCH_ROWS:
                yield pa.RecordBatch.from_pylist(buf, schema=schema)
                buf = []
        if buf:
            yield pa.RecordBatch.from_pylist(buf, schema=schema)
    finally:
        if gc_was_enabled:
            gc.enable()


def _parse_files(
    files: list[str], pieces: list[Piece], fmt: Format, routes: PartitionRoutes = NO_ROUTES
) -> Any:
    """What each Spark task runs for local files: piece indexes in (``resolver.batch.pieces``), parsed rows
    (Arrow batches) out, under the piece's index; each piece is read from its file by the task (no size
    bound)."""

    def rows(batches: Iterator[pa.RecordBatch]) -> Iterator[dict[str, Any]]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                piece = pieces[index]
                with open(files[piece.file], "rb") as fh:
                    lines = piece.lines(fh)
                    yield from _rows_of(lines, files[piece.file], index, fmt, routes, piece.first_line)

    return lambda batches: _as_batches(rows(batches))


def _parse_contents(files: list[str], fmt: Format, routes: PartitionRoutes = NO_ROUTES) -> Any:
    """What each Spark task runs for files of Spark's file systems: ``(path, content)`` rows of the
    ``binaryFile`` source in, parsed rows out; a file's content is one value (at most 2 GiB)."""
    index_of = {f: i for i, f in enumerate(files)}

    def rows(batches: Iterator[pa.RecordBatch]) -> Iterator[dict[str, Any]]:
        for batch in batches:
            paths, contents = batch.column(0), batch.column(1)
            for i in range(batch.num_rows):
                path = paths[i].as_py()
                if path not in index_of:  # a name Spark spells differently from the listing: never skip it
                    raise RuntimeError(f"read {path!r}, which is not among the batch's files {files[:3]}…")
                content = contents[i].as_py()
                yield from _rows_of(io.BytesIO(content), path, index_of[path], fmt, routes)

    return lambda batches: _as_batches(rows(batches))


class ParsedBatch:
    """The result of reading one batch. ``parsed`` is kept for its several uses (persisted; a batch of
    snapshot files only, local-checkpointed, which Spark's cleaner lets go of); call ``unpersist()`` when
    done.

    ``counts()`` runs one small aggregate over the parse. Only when some transaction was cut by a file
    boundary (or a file has no B/C framing) do ``events`` and ``quarantine`` include the stitching join,
    and counting costs one more small aggregate, over the fragments alone (``resolver.batch.stitch``)."""

    def __init__(
        self,
        files: list[str],
        fmt: Format,
        parsed: DataFrame,
        window: ReadWindow = CLOSED,
        pieces: list[Piece] | None = None,
    ) -> None:
        self.files, self.format, self.parsed, self.window = files, fmt, parsed, window
        #: of ``files``, how many are snapshot files (the last ones: their events are read as they are)
        self.snapshots = sum(1 for f in files if is_snapshot_file(f))
        # what the parse read under each index (``file_index``): a piece of a stream's file, or each whole
        self.pieces = pieces if pieces is not None else [Piece(i) for i in range(len(files) - self.snapshots)]
        self._counts: dict[str, int] | None = None
        self._stitching: Stitching | None = None
        self._stitched_pair: tuple[DataFrame, DataFrame] | None = None

    @property
    def distinct(self) -> bool:
        """Whether no two of the batch's events can share an identity (bronze's key), known without a look at
        them: a batch of snapshot files only, no two of one name. A capture names each part of a table's copy
        once, and a copy's positions are unique in it (``resolver.capture.snapshot_file``)."""
        names = [os.path.basename(f) for f in self.files]
        return self.snapshots == len(self.files) > 0 and len(set(names)) == len(names)

    def unpersist(self) -> None:
        self.parsed.unpersist()
        for part in self._stitched_pair or ():
            part.unpersist()

    def counts(self) -> dict[str, int]:
        """Events, quarantined records, transactions, messages and fragment lines, plus the batch's
        commit-LSN range (``min_commit_lsn``, ``max_commit_lsn`` when it has LSNs)."""
        if self._counts is None:
            name = F.when(F.col("kind") == "count", F.col("count_name")).otherwise(F.col("kind"))
            value = F.when(F.col("kind") == "count", F.col("count_value")).otherwise(F.lit(1))
            aggregates = [
                F.sum(value).alias("v"),
                F.min("commit_lsn").alias("lo"),
                F.max("commit_lsn").alias("hi"),
            ]
            if self.snapshots:  # a table's copy is one transaction across its files
                aggregates.append(snapshot_transactions().alias("copies"))
            rows = self.parsed.groupBy(name.alias("name")).agg(*aggregates).collect()
            got = {r["name"]: r for r in rows}  # a handful of rows: one per kind and counter
            out = {k: int(got[k]["v"]) if k in got else 0 for k in _COUNTERS}
            if self.snapshots and "event" in got:
                out["transactions"] += int(got["event"]["copies"])
            out["events"] = int(got["event"]["v"]) if "event" in got else 0
            out["quarantined"] = int(got["quarantine"]["v"]) if "quarantine" in got else 0
            bounds = [
                (r["lo"], r["hi"])
                for k, r in got.items()
                if k in ("event", "fragment") and r["lo"] is not None
            ]
            if bounds:
                out["min_commit_lsn"] = int(min(lo for lo, _ in bounds))
                out["max_commit_lsn"] = int(max(hi for _, hi in bounds))
            if out["fragment"]:  # one small aggregate over the fragments: one row per file and role
                self._stitching = plan_stitching(summarize(self.parsed), len(self.pieces), self.window)
                for counter in ("events", "quarantined", "transactions", "messages"):
                    out[counter] += getattr(self._stitching, counter)
            self._counts = out
        return self._counts

    @property
    def events(self) -> DataFrame:
        """The batch's change events (``resolver.models.ChangeEvent`` columns)."""
        events = self.parsed.filter(F.col("kind") == "event").select(*_event_cols())
        return events.unionByName(self._stitched()[0]) if self.counts()["fragment"] else events

    @property
    def quarantine(self) -> DataFrame:
        """The batch's quarantined records (``resolver.models.QuarantineRecord`` columns)."""
        bad = self.parsed.filter(F.col("kind") == "quarantine")
        if self.counts()["fragment"]:
            bad = bad.unionByName(self._stitched()[1])
        return bad.select(
            "source_file",
            F.col("source_line").cast("long").alias("source_line"),
            F.lit(self.format.value).alias("format"),
            "reason",
            F.coalesce("raw", F.lit("")).alias("raw"),
            "raw_bytes",
        )

    @property
    def open_from(self) -> str | None:
        """The file where a transaction left open at the end of the batch began (``open_end``: its commit
        is in a file that has not landed yet), or None. A stream read in pieces reads again from there."""
        self.counts()
        at = self._stitching.open_from if self._stitching is not None else None
        return self.files[self.pieces[at].file] if at is not None else None

    def _stitched(self) -> tuple[DataFrame, DataFrame]:
        """The events of the transactions cut by file boundaries (and of files without framing), and the
        fragments left incomplete; persisted at their first use, as the parse is: the batch reads its events
        several times (plan, bronze, each table's explode), and without it each read joined the fragments
        again (a snapshot of 200,000 rows cut into two files: 14 s of a 41 s apply)."""
        if self._stitched_pair is None:
            self.counts()
            assert self._stitching is not None  # counts() plans it when there are fragments
            fragments = self.parsed.filter(F.col("kind") == "fragment")
            events, cut_off = stitch(self.parsed.sparkSession, fragments, self._stitching)
            self._stitched_pair = (
                events.select(*_event_cols()).persist(StorageLevel.MEMORY_AND_DISK),
                cut_off.persist(StorageLevel.MEMORY_AND_DISK),
            )
        return self._stitched_pair


def read_wal2json(
    spark: SparkSession,
    paths: Sequence[str],
    fmt: Format | str | None = None,
    *,
    window: ReadWindow = CLOSED,
    partitions: Mapping[str, str] | None = None,
) -> ParsedBatch:
    """Parse wal2json files (one batch, read as one stream in the given order) into events and quarantine.
    The format is ``fmt``, or without it detected from the files' heads; ``resolve_format`` checks either.
    A partition's changes are named for its root table: by the routes ``resolver capture`` recorded beside
    the files, and by ``partitions`` (shell patterns on ``schema.table`` -> table) for any other
    (``resolver.formats.partition_routes``).

    The parse runs once, at the first use of the result, and is persisted for its several uses. A stream
    read in pieces (``resolver run``) passes a ``window`` (``resolver.formats.stitch_plan.ReadWindow``): with
    ``open_end`` a transaction begun in the last file and not committed there is left for the next batch
    (which reads that file again) instead of being quarantined; with ``open_start`` (the first file was the
    last file of the previous batch) the head of a transaction it already completed is not quarantined
    either.

    Example::

        from resolver import read_wal2json
        batch = read_wal2json(spark, ["landing/0001.json"])  # format detected; or fmt="wal2json-v2"
        batch.events.groupBy("table", "operation").count().show()
        print(batch.counts()["events"], "events,", batch.counts()["quarantined"], "quarantined")
        batch.unpersist()
    """
    fs, listed, fmt = input_of(spark, paths, fmt)
    routes = PartitionRoutes.of(routes_files(listed, fs), partitions)
    # the stream's files in their order (parsed, stitched), then the snapshot files (events as they are)
    files = [f for f in listed if not is_snapshot_file(f)]
    snapshots = list(dict.fromkeys(f for f in listed if is_snapshot_file(f)))
    pieces = None
    if fs is LOCAL:
        pieces = pieces_of(files, fmt, piece_bytes(spark))
        n = len(pieces)
        slices = max(1, min(n, spark.sparkContext.defaultParallelism * 4))
        index = spark.range(0, n, 1, slices).select(F.col("id").cast("int").alias("file_index"))
        parsed = index.mapInArrow(_parse_files(files, pieces, fmt, routes), _PARSED_SCHEMA)
    elif files:
        # paths are globs to Spark's file sources: their glob characters are escaped
        literal = [re.sub(r"([\\{}\[\]*?])", r"\\\1", f) for f in files]
        contents = spark.read.format("binaryFile").load(literal).select("path", "content")
        parsed = contents.mapInArrow(_parse_contents(files, fmt, routes), _PARSED_SCHEMA)
    else:
        parsed = spark.createDataFrame([], _PARSED_SCHEMA)
    if snapshots:
        parsed = parsed.unionByName(read_snapshots(spark, snapshots, _PARSED_SCHEMA.fields))
    # kept for its several uses; a batch of snapshot files only (Spark's Parquet rows, no parse) as Spark's
    # rows themselves: the cache's columnar form of their lists cost more than reading them
    kept = parsed.localCheckpoint(eager=False) if not files else parsed.persist(StorageLevel.MEMORY_AND_DISK)
    return ParsedBatch(files + snapshots, fmt, kept, window, pieces)


def _event_cols() -> list[Column]:
    return [F.col(f.name).cast(f.dataType).alias(f.name) for f in EVENT_SCHEMA.fields]
