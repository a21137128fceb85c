"""Pipeline files: what ``resolver run PIPELINE.yaml`` ingests, where to, and how each table is kept.

```yaml
# pipeline.yaml (relative paths are relative to this file's folder)
source:
  path: landing/               # a folder (its files in name order) or a glob such as landing/*.json
  format: wal2json-v2          # optional: without it, detected from the files' first records
lake: lake/
schemas: schemas/              # optional: the per-table schema files (docs/schema-evolution.md)
max_files_per_batch: 50        # optional: new files are applied in batches of at most this many
stream:                        # optional: resolver run --stream (docs/streaming.md)
  trigger_seconds: 60          # a micro-batch every minute (default)
freshness:                     # optional: small tables' events wait in bronze (docs/silver.md)
  seconds: 600                 # ... until the oldest have waited 10 minutes
  below_events: 10000          # ... while fewer than this many wait (default)
policies:                      # optional: unknown tables, unknown columns, unsafe type changes
  unknown_table: evolve
capture:                       # optional: resolver capture pipeline.yaml fills source.path (docs/capture.md)
  dsn_env: SHOP_DSN            # the libpq DSN, from this environment variable (or dsn: "host=db ...")
  slot: shop                   # the replication slot
  partitions: root             # optional: a partitioned table as one table (default), or "leaves"
partitions:                    # optional: partitions -> their table, for files resolver capture did not write
  "public.events_*": public.events
include: ["public.*"]          # optional: tables to keep (shell patterns; default every table)
exclude: ["public.tmp_*"]      # optional: tables to leave out (their events stay in bronze)
defaults:                      # optional: settings of every table
  outputs: [snapshot, history]
tables:                        # optional: settings per table name or pattern; later entries win
  public.orders:
    key: [order_id]            # overrides the key the stream reports (and the schema file's)
    track_history: [status]    # a change in other columns only updates the current version in place
    cluster_by_key: true       # Delta liquid clustering on the key (large tables)
  "audit.*":
    outputs: [history]
```

Every problem is one ``ConfigError`` line naming the file, the path inside it, what was found and what was
expected, with a "did you mean" for misspelt keys. This module does not import Spark.
"""

from __future__ import annotations

import fnmatch
import os
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field, field_validator, model_validator

from resolver.catalog_target import Catalog
from resolver.config.kafka_config import KafkaSource
from resolver.config.policy import Policies
from resolver.config.yamlconfig import parse_yaml
from resolver.errors import ConfigError
from resolver.files.input_files import local_listing
from resolver.formats.names import SLOT_NAME, SLOT_NAME_EXPECTED, split_qualified
from resolver.models import Format, ResolverModel, SchemaChanges
from resolver.paths import is_uri, join_inside

__all__ = [
    "CaptureSettings",
    "Partitions",
    "Output",
    "Pipeline",
    "Source",
    "StreamSettings",
    "TableSettings",
    "load_pipeline",
    "parse_pipeline",
]


class Output(StrEnum):
    """A silver table the resolver keeps for a source table."""

    SNAPSHOT = "snapshot"
    """``silver/<schema>.<table>``: one row per live source row (SCD1)."""
    HISTORY = "history"
    """``silver/<schema>.<table>__history``: every version of every row (SCD2), read by ``resolver as-of``."""


class TableSettings(ResolverModel):
    """How one table is kept. Every field is optional; unset fields take the defaults'."""

    outputs: list[Output] | None = Field(
        default=None, min_length=1, description="Which silver tables to keep (default both)"
    )
    key: list[str] | None = Field(
        default=None, min_length=1, description="Key columns, overriding the stream's"
    )
    track_history: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Columns whose changes open a new history version (default all); a change only in "
        "other columns updates the current version in place",
    )
    cluster_by_key: bool | None = Field(
        default=None, description="Cluster the snapshot and history by the key (Delta liquid clustering)"
    )
    catalog_name: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]+(_[a-z0-9]+)*$",
        description="The snapshot's name in the catalog (the history's: this plus __history), instead of "
        "<schema>__<table>: lower-case letters and digits joined by single underscores",
    )
    schema_changes: SchemaChanges | None = Field(
        default=None,
        description="How a rename or type change reaches the snapshot and history: rewrite (default: the "
        "table rewritten, read right by every Delta reader) or metadata (Delta column mapping and type "
        "widening: no rewrite, read right by Spark and DuckDB only; docs/schema-evolution.md)",
    )

    @field_validator("outputs")
    @classmethod
    def _distinct(cls, value: list[Output] | None) -> list[Output] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError(f"found {[v.value for v in value]}: list each output once")
        return value

    def over(self, base: TableSettings) -> TableSettings:
        """These settings laid over ``base`` (fields set here win)."""
        return base.model_copy(update=self.model_dump(exclude_none=True))

    @property
    def snapshot(self) -> bool:
        return self.outputs is None or Output.SNAPSHOT in self.outputs

    @property
    def history(self) -> bool:
        return self.outputs is None or Output.HISTORY in self.outputs


class Source(ResolverModel):
    """Where the change records land: files in a folder, or Kafka topics that the resolver lands there
    itself (``kafka``, ``resolver.config.kafka_config``)."""

    path: str | None = Field(
        default=None,
        min_length=1,
        description="A folder (files in name order) or a glob; with kafka, where the records are landed "
        "(default <lake>/_resolver/kafka)",
    )
    format: Format | None = Field(
        default=None,
        description="wal2json-v1, wal2json-v2 or debezium-json (default: detected from the files; "
        "required with kafka)",
    )
    kafka: KafkaSource | None = Field(default=None, description="Kafka topics to read (docs/kafka.md)")

    @model_validator(mode="after")
    def _where(self) -> Source:
        if self.kafka is None and self.path is None:
            raise ValueError("found neither path nor kafka (expected a folder, a glob, or kafka topics)")
        if self.kafka is not None and self.format is None:
            raise ValueError(
                "found kafka without format (expected format: debezium-json, wal2json-v1 or wal2json-v2)"
            )
        return self


class StreamSettings(ResolverModel):
    """How ``resolver run --stream`` runs (docs/streaming.md)."""

    trigger_seconds: float = Field(
        60.0, gt=0, description="Seconds between the starts of two micro-batches (processing-time trigger)"
    )
    checkpoint: str | None = Field(
        default=None, description="The streaming query's checkpoint (default <lake>/_resolver/stream)"
    )


class FreshnessSettings(ResolverModel):
    """How stale a small table's silver tables may grow (docs/silver.md, "Tables that wait"): a table with
    fewer than ``below_events`` events waiting leaves them in bronze until the oldest have waited
    ``seconds``; the first batch after that, or one that brings it that many, applies them."""

    seconds: float = Field(ge=0, description="How long a small table's events may wait in bronze (seconds)")
    below_events: int = Field(
        10_000, ge=1, description="A table with this many events waiting or more is applied in every batch"
    )


class Partitions(StrEnum):
    """How a capture names a partitioned table's rows and changes (docs/capture.md, "Partitioned
    tables")."""

    ROOT = "root"
    """One table named for the partitioned table (``pg_partition_root``), its partitions' rows and changes
    under that name; patterns match the root's name."""
    LEAVES = "leaves"
    """Each leaf partition a table of its own, as wal2json names them."""


class CaptureSettings(ResolverModel):
    """``resolver capture PIPELINE.yaml``: the database and slot it captures into the pipeline's source
    folder, the tables chosen by the pipeline's ``include``/``exclude`` (docs/capture.md)."""

    dsn: str | None = Field(default=None, min_length=1, description="libpq connection string or URI")
    dsn_env: str | None = Field(
        default=None, min_length=1, description="The environment variable holding the DSN (keeps a password "
        "out of the file)"
    )  # fmt: skip
    slot: str = Field(description="The replication slot (1-63 lower-case letters, digits, _)")
    interval_seconds: float = Field(
        10.0,
        gt=0,
        description="A running capture closes a landing file this long after it opened (without --once)",
    )
    file_mb: float = Field(
        64.0, gt=0, description="Landing files are cut at a transaction end past this size"
    )
    copy_processes: int | None = Field(
        None, ge=1, description="Worker processes copying a large table's chunks at once (default 2)"
    )
    partitions: Partitions = Field(
        Partitions.ROOT,
        description="root: a partitioned table is one table named for its root (default); leaves: each "
        "partition a table of its own",
    )

    @field_validator("slot")
    @classmethod
    def _slot_name(cls, value: str) -> str:
        if not SLOT_NAME.fullmatch(value):
            raise ValueError(f"found {value!r} (expected {SLOT_NAME_EXPECTED})")
        return value

    @model_validator(mode="after")
    def _one_dsn(self) -> CaptureSettings:
        if (self.dsn is None) == (self.dsn_env is None):
            found = "both dsn and dsn_env" if self.dsn else "neither dsn nor dsn_env"
            raise ValueError(f"found {found} (expected one of them)")
        return self

    def connection(self) -> str:
        """The DSN, read from ``dsn_env`` when the file names a variable."""
        if self.dsn is not None:
            return self.dsn
        value = os.environ.get(str(self.dsn_env), "")
        if not value:
            raise ConfigError(
                f"capture.dsn_env names {self.dsn_env}, which is not set: expected the database's DSN in it"
            )
        return value


class Pipeline(ResolverModel):
    """A pipeline file (see the module docstring)."""

    source: Source
    lake: str = Field(min_length=1, description="Lake folder (created if missing)")
    catalog: str | None = Field(
        default=None,
        description="Register every table of the lake by name in <catalog>.<schema> (or <schema>: the "
        "session's current catalog) as external Delta tables (docs/cluster.md, Tables by name)",
    )
    schemas: str | None = Field(default=None, description="Folder of <schema>.<table>.yaml files")
    max_files_per_batch: int = Field(100, ge=1, description="New files per batch")
    stream: StreamSettings = Field(default_factory=StreamSettings, description="Streaming mode settings")
    freshness: FreshnessSettings | None = Field(
        default=None,
        description="Small tables' silver writes wait in bronze under this bound (docs/silver.md, Tables "
        "that wait); without it every table is applied in every batch",
    )
    policies: Policies = Field(default_factory=Policies, description="Run defaults of the three policies")
    capture: CaptureSettings | None = Field(default=None, description="What resolver capture reads")
    include: list[str] = Field(default_factory=lambda: ["*"], description="Tables to keep (shell patterns)")
    exclude: list[str] = Field(default_factory=list, description="Tables to leave out (shell patterns)")
    defaults: TableSettings = Field(default_factory=TableSettings, description="Settings of every table")
    tables: dict[str, TableSettings] = Field(
        default_factory=dict, description="Settings per table name or shell pattern; later entries win"
    )
    partitions: dict[str, str] = Field(
        default_factory=dict,
        description="Partitions' names (shell patterns on schema.table) -> the table their changes belong "
        "to, for landing files resolver capture did not write (it records its own)",
    )

    @field_validator("catalog")
    @classmethod
    def _catalog(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                Catalog.parse(value)
            except ConfigError as e:
                raise ValueError(str(e).removeprefix("catalog: ")) from None
        return value

    @property
    def catalog_target(self) -> Catalog | None:
        return Catalog.parse(self.catalog) if self.catalog else None

    @field_validator("partitions")
    @classmethod
    def _partition_tables(cls, value: dict[str, str]) -> dict[str, str]:
        for pattern, table in value.items():
            try:
                split_qualified(table)
            except ConfigError:
                raise ValueError(f"{pattern}: found {table!r} (expected a table name schema.table)") from None
        return value

    def included(self, table: str) -> bool:
        """Whether the pipeline keeps silver tables for ``table``."""
        return any(fnmatch.fnmatchcase(table, p) for p in self.include) and not any(
            fnmatch.fnmatchcase(table, p) for p in self.exclude
        )

    def settings(self, table: str) -> TableSettings:
        """The defaults, then every matching entry of ``tables`` in file order."""
        out = self.defaults
        for pattern, settings in self.tables.items():
            if fnmatch.fnmatchcase(table, pattern):
                out = settings.over(out)
        return out

    def source_files(self) -> list[str]:
        """The source's local files, in name order (hidden files and names starting with '_' left out;
        ``resolver.pipelines.run`` lists a source named by a URI through Spark's file systems)."""
        found = local_listing(self.source.path)
        if found is None:
            raise ConfigError(
                f"source path {self.source.path!r} not found (expected a folder of wal2json files or a glob)"
            )
        return list(found)


def parse_pipeline(text: str, source: str = "<pipeline>", base: str | Path = ".") -> Pipeline:
    """Parse and validate a pipeline file's text. Relative paths are taken from ``base``."""
    pipeline = parse_yaml(
        text,
        source,
        Pipeline,
        "a mapping with 'source' and 'lake'",
        lambda loc: _MODELS.get(
            ".".join(str(p) for p in loc[:2]), _MODELS.get(str(loc[0]) if loc else "", Pipeline)
        ),
    )

    def resolve(p: str) -> str:
        return p if os.path.isabs(p) or is_uri(p) else os.path.normpath(os.path.join(base, p))

    lake = resolve(pipeline.lake)
    source = pipeline.source.path or join_inside(lake, "_resolver", "kafka")  # without a path: kafka's
    return pipeline.model_copy(
        update={
            "source": pipeline.source.model_copy(update={"path": resolve(source)}),
            "lake": lake,
            "schemas": resolve(pipeline.schemas) if pipeline.schemas else None,
            "stream": pipeline.stream.model_copy(
                update={
                    "checkpoint": resolve(pipeline.stream.checkpoint) if pipeline.stream.checkpoint else None
                }
            ),
        }
    )


def load_pipeline(path: str | Path) -> Pipeline:
    """Read and validate a pipeline file (``ConfigError`` with the path inside the file on a mistake).

    Example::

        from resolver import load_pipeline
        pipeline = load_pipeline("pipeline.yaml")
        print(pipeline.lake, pipeline.source_files())
        print(pipeline.settings("public.orders").outputs)
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"pipeline file {str(path)!r} not found (expected a YAML file, see docs/pipelines.md)"
        )
    return parse_pipeline(p.read_text("utf-8"), str(path), p.parent)


_MODELS: dict[str, type[BaseModel]] = {
    "capture": CaptureSettings,
    "source": Source,
    "source.kafka": KafkaSource,
    "stream": StreamSettings,
    "defaults": TableSettings,
    "tables": TableSettings,
    "policies": Policies,
}
