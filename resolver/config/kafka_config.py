"""A pipeline's Kafka source: which cluster and topics ``resolver run`` reads (``source.kafka`` in a pipeline
file, docs/kafka.md). This module does not import Spark; ``resolver.pipelines.kafka_landing`` reads the
topics.

```yaml
source:
  kafka:
    bootstrap_servers: broker1:9092,broker2:9092
    topics: [pg.public.orders, pg.public.customers]    # or topic_pattern: "pg\\.public\\..*" (whole names)
    starting_offsets: earliest     # where a new query starts (default); a checkpoint's offsets win after
    max_offsets_per_trigger: 100000   # optional: at most this many records per micro-batch
    options:                       # optional: any other option of Spark's Kafka source
      kafka.security.protocol: SASL_SSL
  format: debezium-json            # required with kafka: debezium-json, wal2json-v1 or wal2json-v2
```
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from resolver.errors import ConfigError
from resolver.models import ResolverModel

__all__ = ["KafkaSource", "kafka_package", "local_kafka_package"]


def kafka_package(spark_version: str) -> str:
    """The Maven coordinates of Spark's Kafka source for a Spark version: its line's first release
    (``4.0.0`` for Spark 4.0.x). Every Spark release line publishes its ``.0`` with all its dependencies;
    later patch releases of the connector are not always on every mirror, and the connector's API is
    stable within a line."""
    major, minor = spark_version.split(".")[:2]
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{major}.{minor}.0"


def local_kafka_package() -> str:
    """Spark's Kafka source for the pyspark installed here (what ``local_session`` runs): its line's
    ``kafka_package``. Read from the installed package's metadata, without importing Spark."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return kafka_package(version("pyspark"))
    except PackageNotFoundError:
        raise ConfigError(
            "pyspark is not installed: expected it for a local session with Spark's Kafka source "
            "(pip install 'pg-change-resolver[spark]')"
        ) from None


#: options of Spark's Kafka source that are fields of ``KafkaSource`` (set there, not in ``options``)
_OWN_OPTIONS = {
    "kafka.bootstrap.servers": "bootstrap_servers",
    "subscribe": "topics",
    "subscribepattern": "topic_pattern",
    "assign": "topics",
    "startingoffsets": "starting_offsets",
    "maxoffsetspertrigger": "max_offsets_per_trigger",
}


class KafkaSource(ResolverModel):
    """Kafka topics that a pipeline lands and applies (see the module docstring and docs/kafka.md)."""

    bootstrap_servers: str = Field(min_length=1, description="host:port[,host:port…] of the Kafka cluster")
    topics: list[str] | None = Field(
        default=None, min_length=1, description="The topics to read (one per table, or one for all)"
    )
    topic_pattern: str | None = Field(
        default=None,
        min_length=1,
        description="A Java regular expression that the whole name of each topic to read matches",
    )
    starting_offsets: Literal["earliest", "latest"] = Field(
        "earliest", description="Where a query without a checkpoint starts (default earliest)"
    )
    max_offsets_per_trigger: int | None = Field(
        default=None, ge=1, description="At most this many records per micro-batch (default all there are)"
    )
    options: dict[str, str] = Field(
        default_factory=dict,
        description="Any other option of Spark's Kafka source (kafka.security.protocol, kafka.sasl.*, …)",
    )

    @model_validator(mode="after")
    def _one_subscription(self) -> KafkaSource:
        if (self.topics is None) == (self.topic_pattern is None):
            both = "both" if self.topics else "neither"
            raise ValueError(f"found {both} of topics and topic_pattern (expected exactly one)")
        own = sorted(k for k in self.options if k.lower() in _OWN_OPTIONS)
        if own:
            fields = ", ".join(f"{k} (use {_OWN_OPTIONS[k.lower()]})" for k in own)
            raise ValueError(f"found {fields} in options (expected them as fields of source.kafka)")
        return self

    def reader_options(self) -> dict[str, str]:
        """The options of Spark's Kafka source this source stands for."""
        options = {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            "startingOffsets": self.starting_offsets,
        }
        if self.topics is not None:
            options["subscribe"] = ",".join(self.topics)
        else:
            # Spark's Kafka source takes a topic when the pattern matches any part of its name (pg\.public
            # reads xpg.public.t too); a pattern here matches whole names, as Kafka Connect's topics.regex
            options["subscribePattern"] = f"^(?:{self.topic_pattern})$"
        if self.max_offsets_per_trigger is not None:
            options["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        return {**options, **self.options}
