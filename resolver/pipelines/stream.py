"""``resolver run PIPELINE.yaml --stream``: a pipeline as a Structured Streaming query.

Spark's file source watches the landing folder (format ``binaryFile``, reading only the files' paths: their
content is read by the batch, as ``resolver run`` reads it) and hands each micro-batch's files to a
``foreachBatch`` function, which applies them as ``resolver run`` would: under the lake's lock, the files
not in the ledger, in name order, with the neighbouring files of a format-2 stream, recorded in the ledger
once every table was applied (``resolver.pipelines.run.apply_new_files``). A micro-batch applies its own
files only.

Exactly once, as the ledger: the query's checkpoint (``stream.checkpoint``, by default
``<lake>/_resolver/stream``) records the files of each micro-batch before it runs and commits the
micro-batch after ``foreachBatch`` returns. A micro-batch cut short by a crash is run again with the same
files when the query starts again; what it had applied is applied again without effect (every step is
idempotent) and files already in the ledger are skipped. A micro-batch in which a table failed raises, so
the query stops before committing it, and its files are applied again on the next start (or by
``resolver run``, which shares the ledger).

One query per checkpoint: ``run_stream`` owns the pipeline for the query's whole life (its owner lock,
``resolver.lake.lock.pipeline_lock``, beside the checkpoint), taken before the query starts, so a second
stream or a scheduled run of the pipeline is refused (``PipelineBusy``) before it touches the checkpoint. The
lake's lock is still taken per micro-batch: ``resolver ingest``, ``optimize`` and ``vacuum`` take turns with
a running stream between its micro-batches.

Triggers: a processing-time trigger every ``stream.trigger_seconds`` until the query is stopped, or
``availableNow`` (``once=True``): everything that has landed, in micro-batches of at most
``max_files_per_batch`` files, then the query ends by itself.

A Kafka source (``source.kafka``) is read by Spark's Kafka source instead: each micro-batch's records are
first landed as files in ``source.path`` (``resolver.pipelines.kafka_landing``), and those files are applied
as above. Its offsets are in the same checkpoint, and a micro-batch run again after a crash lands the same
files under the same names.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from resolver.config.pipeline import Pipeline, load_pipeline
from resolver.config.tableschema import load_schemas
from resolver.lake.folders import Lake
from resolver.lake.lock import Taker, lake_lock, pipeline_lock
from resolver.models import RunSummary
from resolver.paths import is_uri
from resolver.pipelines.kafka_landing import kafka_records, land
from resolver.pipelines.run import apply_new_files, checkpoint_path, new_run_id, pipeline_name

__all__ = ["StreamProgress", "checkpoint_path", "run_stream", "stream_pipeline"]

log = logging.getLogger("resolver.pipelines.run")

#: the schema of Spark's binaryFile source (a streaming file source needs it given)
_BINARY_FILE = "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"


@dataclass
class StreamProgress:
    """What a streaming pipeline's micro-batches did: one ``RunSummary`` per micro-batch, and the error that
    stopped the query when one did (the micro-batch function's own exception, not Spark's wrapper)."""

    summaries: list[RunSummary] = field(default_factory=list)
    error: BaseException | None = None

    def summary(self, run_id: str, lake: str, seconds: float) -> RunSummary:
        """The micro-batches' summaries added up, as one run's."""
        s = self.summaries
        return RunSummary(
            run_id=run_id,
            lake=lake,
            files_seen=s[-1].files_seen if s else 0,
            files_new=sum(x.files_new for x in s),
            files_applied=sum(x.files_applied for x in s),
            batches=[b for x in s for b in x.batches],
            failed_tables={k: v for x in s for k, v in x.failed_tables.items()},
            seconds=seconds,
        )


class TablesFailed(RuntimeError):
    """A micro-batch in which some tables failed: the query stops before committing it."""


def stream_pipeline(
    spark: SparkSession,
    pipeline: Pipeline | str,
    *,
    once: bool = False,
    wait_seconds: float = 600.0,
    progress: StreamProgress | None = None,
) -> StreamingQuery:
    """Start the pipeline as a streaming query (see the module docstring) and return it. Each micro-batch
    waits up to ``wait_seconds`` for another run's lock; ``progress`` collects what the micro-batches did.
    The query is the caller's: this does not take the pipeline's owner lock (``run_stream`` does; a job of
    its own can hold ``resolver.lake.lock.pipeline_lock`` around the query's life).

    Example::

        from resolver import local_session, stream_pipeline
        from resolver.pipelines.stream import StreamProgress
        progress = StreamProgress()
        # once=True: what has landed (availableNow), then the query ends; without it, it runs until stopped
        query = stream_pipeline(local_session(), "pipeline.yaml", once=True, progress=progress)
        query.awaitTermination()
        print([s.files_applied for s in progress.summaries])
    """
    if isinstance(pipeline, str):
        pipeline = load_pipeline(pipeline)
    schemas = load_schemas(pipeline.schemas) if pipeline.schemas else None
    progress = progress if progress is not None else StreamProgress()
    lake = Lake.at(pipeline.lake)

    source, offered = (
        _kafka_source(spark, pipeline) if pipeline.source.kafka else _files_source(spark, pipeline)
    )

    def apply(batch: DataFrame, batch_id: int) -> None:
        run_id = f"{new_run_id()}-{batch_id}"
        try:
            with lake_lock(lake, Taker.of_session(run_id, spark), wait_seconds):
                names = offered(batch, batch_id)
                log.info("micro-batch %d: %d file(s)", batch_id, len(names))
                summary = apply_new_files(spark, pipeline, lake, schemas, run_id, only=names)
        except BaseException as e:
            progress.error = e
            raise
        progress.summaries.append(summary)
        if summary.failed_tables:
            progress.error = TablesFailed(", ".join(sorted(summary.failed_tables)))
            raise progress.error
        log.info("micro-batch %d: %d file(s) applied", batch_id, summary.files_applied)

    writer = source.writeStream.foreachBatch(apply).option(
        "checkpointLocation", checkpoint_path(pipeline, lake)
    )
    if once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{pipeline.stream.trigger_seconds} seconds")
    return writer.queryName(f"resolver {lake.name}").start()


def run_stream(
    spark: SparkSession,
    pipeline: Pipeline | str,
    *,
    once: bool,
    wait_seconds: float = 600.0,
    owner_wait_seconds: float = 0.0,
) -> RunSummary:
    """Own the pipeline (waiting up to ``owner_wait_seconds`` for another stream or run of it, else
    ``PipelineBusy``, before any query starts), run the streaming query until it ends (``once``) or is
    stopped by SIGINT or SIGTERM (after the micro-batch under way), and return what it did as one run's
    summary. Each micro-batch waits up to ``wait_seconds`` for the lake's lock. A micro-batch whose tables
    failed ends it with those tables in ``failed_tables``; any other error of a micro-batch is raised as it
    was."""
    started = time.monotonic()
    name = pipeline_name(pipeline)
    if isinstance(pipeline, str):
        pipeline = load_pipeline(pipeline)
    run_id = new_run_id()
    taker = Taker.of_session(run_id, spark)
    with pipeline_lock(checkpoint_path(pipeline), name, taker, owner_wait_seconds):
        progress = _until_stopped(spark, pipeline, once, wait_seconds, run_id)
    if progress.error is not None and not isinstance(progress.error, TablesFailed):
        raise progress.error
    return progress.summary(run_id, pipeline.lake, time.monotonic() - started)


def _until_stopped(
    spark: SparkSession, pipeline: Pipeline, once: bool, wait_seconds: float, run_id: str
) -> StreamProgress:
    """Start the query and wait for it to end (``run_stream``); what its micro-batches did."""
    progress = StreamProgress()
    query = stream_pipeline(spark, pipeline, once=once, wait_seconds=wait_seconds, progress=progress)
    log.info("run %s: streaming query started (checkpoint %s)", run_id, checkpoint_path(pipeline))
    stop = threading.Event()
    restore = _on_stop_signals(stop)
    try:
        while query.isActive:
            if stop.is_set() and not query.status["isTriggerActive"]:
                log.info("stopping the stream (signal)")
                query.stop()
            try:
                query.awaitTermination(1)
            except Exception:  # the query failed: progress.error says why, when it came from a micro-batch
                if progress.error is None:
                    raise
                break
    finally:
        restore()
        # a query left running by an error of this loop is stopped before the owner lock is let go
        if query.isActive:
            query.stop()
    return progress


#: what a micro-batch offers: the source files it names (``apply_new_files``'s ``only``)
Offered = Callable[[DataFrame, int], set[str]]


def _files_source(spark: SparkSession, pipeline: Pipeline) -> tuple[DataFrame, Offered]:
    """Spark's file source over the landing folder, and a micro-batch's files."""
    source = (
        spark.readStream.format("binaryFile")
        .schema(_BINARY_FILE)
        .option("maxFilesPerTrigger", pipeline.max_files_per_batch)
        .load(_absolute(str(pipeline.source.path)))
        .select("path")
    )

    def offered(files: DataFrame, batch_id: int) -> set[str]:
        # the micro-batch's file names (a few short strings on the driver; no event goes through it)
        return {_listed(r["path"]) for r in files.select("path").collect()}

    return source, offered


def _kafka_source(spark: SparkSession, pipeline: Pipeline) -> tuple[DataFrame, Offered]:
    """Spark's Kafka source over the topics, and a micro-batch's records landed as files."""
    assert pipeline.source.kafka is not None and pipeline.source.format is not None  # see Source
    folder, fmt = str(pipeline.source.path), pipeline.source.format

    def offered(records: DataFrame, batch_id: int) -> set[str]:
        return set(land(spark, records, batch_id, folder, fmt))  # Spark writes them; nothing is collected

    return kafka_records(spark, pipeline.source.kafka), offered


def _absolute(path: str) -> str:
    """A plain path made absolute here (the JVM resolves relative paths against its own working folder)."""
    return path if is_uri(path) else os.path.abspath(path)


def _listed(path: str) -> str:
    """A path as the source listing names it (local files by their absolute path, others as URIs)."""
    if path.startswith("file://"):  # Hadoop names a local file file:/abs/path, not percent-encoded
        return path[len("file://") :]
    return path[len("file:") :] if path.startswith("file:") else path


def _on_stop_signals(stop: threading.Event) -> Callable[[], None]:
    """Set ``stop`` on SIGINT and SIGTERM (main thread only); returns what puts the old handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, _frame: Any) -> None:
        log.info("signal %d: the stream stops after the micro-batch under way", signum)
        stop.set()

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    return lambda: [signal.signal(s, h) for s, h in old.items()] and None
