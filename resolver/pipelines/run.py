"""``resolver run PIPELINE.yaml``: apply every new file of a landing folder exactly once.

A run takes the lake's lock and the pipeline's owner lock (``resolver.lake.lock.run_locks``: no other run,
and no stream of the pipeline, runs meanwhile), lists the source, and compares it with the ledger
``_resolver/ledger`` (one row per file applied: path, size, modification time, run id, batch). The files
not in the ledger — new ones, and ones whose size or modification time changed since — are applied in
name order, in batches of at most ``max_files_per_batch`` files, each one ``resolver.ingest`` call; a batch
is recorded in the ledger (one Delta commit) only after every one of its tables was applied.
 Why a crash loses and doubles nothing: every step of ``ingest`` is idempotent (bronze and the change
stores are insert-only on the event's identity, the silver tables are recomputed from the change store),
and a batch is recorded after it is complete. A run killed at any point leaves its batch unrecorded, and
the next run applies it again, which completes what was cut short and adds nothing twice.

A format-2 transaction may be cut by file rotations, and span several files. Each batch therefore also
reads the file before its first one and the file after its last one (when they exist): the transaction is
stitched across the cuts. A transaction whose commit has not landed yet is left for later instead of being
quarantined: the file it began in and the files after it are not recorded, so the next batch (or run)
starts from that file; when it began in the batch's first file, the batch is read again with twice as many
files until its commit is among them (or no more files have landed).
The format is the pipeline's ``source.format``, or the one the new files and those neighbours show
(``resolver.files.input_files.resolve_format``, checked before any batch is applied).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from pyspark.sql import SparkSession

from resolver.batch.ingest import apply_waiting, ingest_batch
from resolver.config.batch_options import BatchOptions, Freshness, ReadWindow
from resolver.config.pipeline import Pipeline, load_pipeline
from resolver.config.tableschema import TableSchema, load_schemas
from resolver.errors import ConfigError
from resolver.files.hadoop_files import source_listing
from resolver.files.input_files import resolve_format, routes_files
from resolver.formats.snapshot_files import is_snapshot_file
from resolver.lake.folders import Lake
from resolver.lake.ledger import read_ledger, record_files
from resolver.lake.lock import Taker, run_locks
from resolver.models import Format, IngestSummary, RunSummary, TableSummary

__all__ = [
    "LEDGER",
    "apply_new_files",
    "checkpoint_path",
    "ledger_path",
    "new_run_id",
    "pipeline_name",
    "run_pipeline",
]

log = logging.getLogger(__name__)

LEDGER = "_resolver/ledger"  # the ledger's place in a lake (resolver.lake.folders.Lake.ledger)


def ledger_path(lake: str | Lake) -> str:
    return Lake.at(lake).ledger


def checkpoint_path(pipeline: Pipeline, lake: Lake | None = None) -> str:
    """Where a pipeline's streaming query keeps its checkpoint (``lake``: the pipeline's, when resolved
    already); its owner lock is beside it (``resolver.lake.lock.owner_lock_path``), taken by streams and
    scheduled runs of the pipeline alike."""
    return pipeline.stream.checkpoint or (lake or Lake.at(pipeline.lake)).stream


def pipeline_name(pipeline: Pipeline | str) -> str:
    """How messages name a pipeline: its file, or the lake of one given as a ``Pipeline``."""
    return pipeline if isinstance(pipeline, str) else f"of lake {pipeline.lake}"


def run_pipeline(spark: SparkSession, pipeline: Pipeline | str, *, wait_seconds: float = 0.0) -> RunSummary:
    """Apply the pipeline's new source files to its lake (see the module docstring). ``pipeline`` is a
    ``Pipeline`` or the path of a pipeline file. Progress is logged (logger ``resolver.pipelines.run``);
    tables that fail are named in the summary's ``failed_tables`` and their batch is applied again by the
    next run.

    Example::

        from resolver import local_session, run_pipeline
        summary = run_pipeline(local_session(), "pipeline.yaml")
        print("\\n".join(summary.lines()))
    """
    started = time.monotonic()
    name = pipeline_name(pipeline)
    if isinstance(pipeline, str):
        pipeline = load_pipeline(pipeline)
    if pipeline.source.kafka is not None:
        raise ConfigError(
            "found a Kafka source (expected files here: a Kafka source is read by "
            "resolver.pipelines.stream's run_stream or stream_pipeline, which resolver run calls for it)"
        )
    schemas = load_schemas(pipeline.schemas) if pipeline.schemas else None
    lake, run_id = Lake.at(pipeline.lake), new_run_id()
    checkpoint, taker = pipeline.stream.checkpoint or lake.stream, Taker.of_session(run_id, spark)
    with run_locks(lake, checkpoint, name, taker, wait_seconds):
        summary = apply_new_files(spark, pipeline, lake, schemas, run_id)
    return summary.model_copy(update={"seconds": time.monotonic() - started})


def new_run_id() -> str:
    """A run's id: its start time and a random suffix (in the ledger and the lock)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]


def apply_new_files(
    spark: SparkSession,
    pipeline: Pipeline,
    lake: Lake,
    schemas: Mapping[str, TableSchema] | None,
    run_id: str,
    only: Collection[str] | None = None,
) -> RunSummary:
    """List the source, and apply its files not in the ledger or changed since (of the ones not in the
    ledger, with ``only``, a streaming micro-batch's files, only those and the ones before them in name
    order; a file that changed since it was applied, one a shipper was still writing, is read again by any
    micro-batch) in batches, each recorded in the ledger once all its tables were applied, up to the file
    where a transaction still open began. ``lake`` is the pipeline's lake, resolved; the caller holds its
    lock."""
    applied = read_ledger(spark, lake.ledger)
    fs, stats = source_listing(spark, pipeline.source.path)
    files = list(stats)
    offered = _offered(files, only)
    todo = [f for i, f in enumerate(files) if applied.get(f) != stats[f] and (f in applied or i < offered)]
    for f in todo:
        if f in applied:
            log.warning("%s changed since it was applied (size or time): reading it again", f)
    size = pipeline.max_files_per_batch
    chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
    neighbours = [f for chunk in chunks for f in _neighbours(files, chunk) if f is not None]
    fmt = resolve_format(todo + neighbours, pipeline.source.format, fs)  # no files: nothing read
    log.info(
        "run %s: %d file(s) in %s (%s), %d new, about %d batch(es)",
        run_id,
        len(files),
        pipeline.source.path,
        fmt.value if pipeline.source.format or not todo else f"{fmt.value}, detected",
        len(todo),
        len(chunks),
    )
    batches: list[IngestSummary] = []
    failed: dict[str, str] = {}
    recorded, start, width = 0, 0, size
    while start < len(todo):
        chunk = todo[start : start + width]
        before, after = _neighbours(files, chunk) if fmt is Format.WAL2JSON_V2 else (None, None)
        result = _batch(spark, pipeline, lake, fmt, schemas, _Chunk(len(batches) + 1, chunk, before, after))
        batches.append(result)
        broken = {t.table: t.error for t in result.tables if t.error is not None}
        failed.update(broken)
        if broken:
            log.error(
                "batch %d: %d table(s) failed (%s); its files will be read again by the next run",
                len(batches),
                len(broken),
                ", ".join(sorted(broken)),
            )
            start, width = start + len(chunk), size
            continue
        began = result.open_from
        if began is not None and began == _neighbours(files, chunk)[0]:
            began = chunk[0]  # begun in the file before the batch (a ledger of an older version): wait too
        done = chunk[: chunk.index(began)] if began in chunk else chunk
        if not done and start + len(chunk) < len(todo):  # one transaction spans the batch: read more files
            width *= 2
            log.info("a transaction begun in %s goes on past the batch: reading %d files", chunk[0], width)
            continue
        if done:  # files from the one an open transaction began in wait for its commit (read again then)
            record_files(spark, lake.ledger, done, stats, run_id, len(batches))
            recorded += len(done)
        if len(done) < len(chunk) and start + len(chunk) >= len(todo):
            break  # the rest is inside a transaction whose commit has not landed: nothing more to read now
        start, width = start + (len(done) or len(chunk)), size
    if pipeline.freshness is not None:  # small tables' events whose bound ran out, even with no new file
        waited = apply_waiting(spark, lake, schemas, _options(pipeline, "waited"), fmt)
        if waited:
            batches.append(IngestSummary(files=0, transactions=0, events_read=0, accepted=0, duplicates=0,
                                         quarantined=0, messages=0, tables=waited))  # fmt: skip
            failed.update({t.table: t.error for t in waited if t.error is not None})
    warnings = [hint.line() for routes in routes_files(files, fs) for hint in routes.copy_again]
    for line in warnings:
        log.warning("%s", line)
    return RunSummary(
        run_id=run_id,
        lake=pipeline.lake,
        files_seen=len(files),
        files_new=len(todo),
        files_applied=recorded,
        batches=batches,
        failed_tables=failed,
        warnings=warnings,
    )


def _offered(files: list[str], only: Collection[str] | None) -> int:
    """How many of the listed files (in name order) are this call's when not in the ledger: every one
    without ``only``; with it (a streaming micro-batch), its files and the ones before them (held back: a
    transaction begun in them had not committed by the end of an earlier micro-batch)."""
    if only is None:
        return len(files)
    wanted = set(only)
    return max((i + 1 for i, f in enumerate(files) if f in wanted), default=0)


def _neighbours(files: Sequence[str], chunk: list[str]) -> tuple[str | None, str | None]:
    """The stream's files just before and just after a batch's stream files in the source, when there are
    such files (snapshot files hold whole transactions: a stream's transaction never goes on in one)."""
    stream = [f for f in files if not is_snapshot_file(f)]
    mine = [f for f in chunk if not is_snapshot_file(f)]
    if not mine:
        return None, None
    first, last = stream.index(mine[0]), stream.index(mine[-1])
    return (stream[first - 1] if first > 0 else None, stream[last + 1] if last + 1 < len(stream) else None)


@dataclass(frozen=True)
class _Chunk:
    """A batch of a run: its number, its files, and the files just before and after them that it reads too
    (a format-2 stream's neighbours, see the module docstring; None: none)."""

    number: int
    files: list[str]
    before: str | None
    after: str | None


def _batch(
    spark: SparkSession,
    pipeline: Pipeline,
    lake: Lake,
    fmt: Format,
    schemas: Mapping[str, TableSchema] | None,
    batch: _Chunk,
) -> IngestSummary:
    """Ingest one batch, with its neighbouring files, into ``lake`` (the pipeline's)."""
    chunk, before, after, label = batch.files, batch.before, batch.after, f"batch {batch.number}"
    read = [f for f in (before, *chunk, after) if f is not None]
    names = f"{_name(chunk[0])}" + (f" .. {_name(chunk[-1])}" if len(chunk) > 1 else "")
    log.info(
        "%s: %d file(s) (%s)%s", label, len(chunk), names, " with their neighbours" if before or after else ""
    )
    done: list[str] = []
    started = time.monotonic()
    options = replace(
        _options(pipeline, label, done), window=ReadWindow(open_start=before is not None, open_end=True)
    )
    result = ingest_batch(spark, read, lake, fmt, schemas, options)
    log.info(
        "%s: %d event(s) read, %d new, %d quarantined, %d table(s), %.1f s",
        label,
        result.events_read,
        result.accepted,
        result.quarantined,
        len(result.tables),
        time.monotonic() - started,
    )
    return result


def _options(pipeline: Pipeline, label: str, done: list[str] | None = None) -> BatchOptions:
    """A batch's options from the pipeline; each table done is logged under ``label`` (and named in
    ``done``)."""
    finished = done if done is not None else []

    def on_table(table: TableSummary) -> None:
        finished.append(table.table)
        state = f"FAILED: {table.error}" if table.error else f"{table.events} event(s)"
        log.info("%s: table %s done (%d), %s", label, table.table, len(finished), state)

    return BatchOptions(
        policies=pipeline.policies,
        settings=pipeline.settings,
        include=pipeline.included,
        isolate=True,
        on_table=on_table,
        partitions=pipeline.partitions,
        catalog=pipeline.catalog_target,
        freshness=freshness_of(pipeline),
    )


def freshness_of(pipeline: Pipeline) -> Freshness | None:
    """The pipeline's freshness bound as a batch takes it (None: every table applied in every batch)."""
    found = pipeline.freshness
    return Freshness(found.seconds, found.below_events) if found is not None else None


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]
