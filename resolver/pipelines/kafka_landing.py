"""Kafka records landed as files: how ``resolver run`` reads a pipeline's Kafka topics.

Each micro-batch of Spark's Kafka source (``kafka_records``) is written by ``land`` into the pipeline's
landing folder (``source.path``, by default ``<lake>/_resolver/kafka``) as files named
``<micro-batch>-<part>.jsonl``, one record per line, each part holding whole topic partitions in offset
order. From there the micro-batch is applied exactly as landed files are (``resolver.pipelines.stream``): the
same reader, the same ledger, the same stitching of a wal2json transaction cut across micro-batches.
 A line is the record's value as it is (``wal2json-v1``/``-v2``), or, for ``debezium-json``, the whole record
``{"topic","partition","offset","key","value","headers"}`` with the key and value spliced in unchanged
(their line breaks, which valid JSON only has between tokens, written as spaces) and Debezium's key-change
headers as text: the key gives the primary key, a null value is a tombstone, the headers pair a key
change's halves wherever they land, and a quarantined record's raw text says where in Kafka it came from.
 Exactly once: Spark's checkpoint records a micro-batch's offsets before it runs and runs the same offsets
again under the same micro-batch id after a crash, so its files get the same names and the same lines.
``land`` writes them into a hidden folder first (``_landing-<micro-batch>``) and moves them into place
only once Spark's write has succeeded; a micro-batch whose files are in place already is not written again
(its files keep their size and time, so the ledger knows them as applied).
"""

from __future__ import annotations

import os
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from resolver.config.kafka_config import KafkaSource, kafka_package
from resolver.errors import ConfigError
from resolver.files.hadoop_files import source_listing
from resolver.formats.debezium_record import NEW_KEY, OLD_KEY
from resolver.models import Format
from resolver.paths import is_uri

__all__ = ["kafka_records", "land", "landed_name"]


def kafka_records(spark: SparkSession, source: KafkaSource) -> DataFrame:
    """The streaming DataFrame of the source's records (Spark's Kafka source: key, value, topic,
    partition, offset, …); ``ConfigError`` when the session does not have that source."""
    options = {"includeHeaders": "true", **source.reader_options()}  # Debezium's key-change headers
    reader = spark.readStream.format("kafka").options(**options)
    try:
        return reader.load()
    except AnalysisException as e:
        if "kafka" not in str(e).lower() or "data source" not in str(e).lower():
            raise
        raise ConfigError(
            "Spark's Kafka source is not on this session's class path (expected the package "
            f"{kafka_package(spark.version)}: resolver run adds it; for your own session, "
            "spark.jars.packages)"
        ) from None


def landed_name(batch_id: int, part: int) -> str:
    """A landed file's name: the micro-batch, then its part (name order is the order of micro-batches)."""
    return f"{batch_id:012d}-{part:05d}.jsonl"


def land(spark: SparkSession, records: DataFrame, batch_id: int, folder: str, fmt: Format) -> list[str]:
    """Write one micro-batch's records into ``folder`` (see the module docstring) unless they are there
    already, and return the names of its files (as ``resolver.files.hadoop_files.source_listing`` names
    them)."""
    fs = _Files(spark, folder)
    prefix = landed_name(batch_id, 0)[:13]
    staging = f"_landing-{batch_id:012d}"
    if not fs.names(prefix) or fs.exists(staging):  # not landed yet, or cut short while being moved
        if not fs.exists(f"{staging}/_SUCCESS"):
            fs.delete(staging)
            has_headers = "headers" in records.columns
            lines = records.select("topic", "partition", "offset", _line(fmt, has_headers).alias("value"))
            ordered = lines.repartition("topic", "partition").sortWithinPartitions(
                "topic", "partition", "offset"
            )
            ordered.select("value").write.text(fs.uri(staging))
        parts = sorted(n for n in fs.names("part-", staging) if not n.endswith(".crc"))
        for part, name in enumerate(parts):
            fs.move(f"{staging}/{name}", landed_name(batch_id, part))
        fs.delete(staging)
    _, listed = source_listing(spark, folder)
    return [path for path in listed if path.rstrip("/").rsplit("/", 1)[-1].startswith(prefix)]


def _line(fmt: Format, has_headers: bool) -> Column:
    """A record's line in the landed file (see the module docstring)."""
    if fmt is not Format.DEBEZIUM_JSON:
        return F.coalesce(F.col("value").cast("string"), F.lit(""))

    def json_or_null(column: str) -> Column:
        text = F.translate(F.col(column).cast("string"), "\r\n", "  ")
        return F.when(F.col(column).isNull() | (F.length(column) == 0), F.lit("null")).otherwise(text)

    # a topic's name is letters, digits, '.', '_' and '-' (Kafka refuses others): nothing to escape
    return F.concat(
        F.lit('{"topic":"'),
        F.col("topic"),
        F.lit('","partition":'),
        F.col("partition").cast("string"),
        F.lit(',"offset":'),
        F.col("offset").cast("string"),
        F.lit(',"key":'),
        json_or_null("key"),
        F.lit(',"value":'),
        json_or_null("value"),
        *([F.lit(',"headers":'), _key_change_headers()] if has_headers else []),
        F.lit("}"),
    )


def _key_change_headers() -> Column:
    """The record's key-change headers (``resolver.formats.debezium_record``) as ``[{"key", "value"}]``, the
    values as text; the others are left out."""
    wanted = F.filter("headers", lambda h: h["key"].isin(OLD_KEY, NEW_KEY))
    as_text = F.transform(
        wanted, lambda h: F.struct(h["key"].alias("key"), h["value"].cast("string").alias("value"))
    )
    return F.coalesce(F.to_json(as_text), F.lit("[]"))


class _Files:
    """The landing folder through Spark's Hadoop file systems (a plain path is a local one)."""

    def __init__(self, spark: SparkSession, folder: str) -> None:
        jvm: Any = spark._jvm  # noqa: SLF001
        self._jvm = jvm
        self._folder = folder if is_uri(folder) else os.path.abspath(folder)
        root = jvm.org.apache.hadoop.fs.Path(self._folder)
        self._fs = root.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())  # noqa: SLF001
        self._fs.mkdirs(root)

    def uri(self, name: str) -> str:
        return f"{self._folder.rstrip('/')}/{name}"

    def _path(self, name: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(self.uri(name))

    def exists(self, name: str) -> bool:
        return bool(self._fs.exists(self._path(name)))

    def delete(self, name: str) -> None:
        self._fs.delete(self._path(name), True)

    def names(self, prefix: str, sub: str = "") -> list[str]:
        """The names of the files in the folder (or its sub-folder ``sub``) that start with ``prefix``."""
        path = self._path(sub) if sub else self._jvm.org.apache.hadoop.fs.Path(self._folder)
        if not self._fs.exists(path):
            return []
        found = (str(s.getPath().getName()) for s in self._fs.listStatus(path) if s.isFile())
        return sorted(n for n in found if n.startswith(prefix))

    def move(self, source: str, target: str) -> None:
        if self.exists(target):  # moved before a crash: the same micro-batch's same lines
            self._fs.delete(self._path(source), False)
        elif not self._fs.rename(self._path(source), self._path(target)):
            raise OSError(f"could not move {self.uri(source)} to {self.uri(target)}")
