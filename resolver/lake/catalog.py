"""The lake's tables by name in a catalog (``--catalog``, a pipeline's ``catalog:``): every table the lake
holds — each source table's snapshot and history, bronze, the quarantine — registered as an external Delta
table at its path, in a catalog and schema (database) the user names. Spark's catalog of the session
decides which metastore that is: Spark's own (``spark.sql.catalogImplementation=hive``, an embedded Derby
database or ``hive.metastore.uris``), AWS Glue through its Hive client, Unity Catalog (docs/cluster.md).

**Names.** A source table ``<schema>.<table>`` is ``<schema>__<table>`` (its history
``<schema>__<table>__history``); bronze is ``resolver_bronze`` and the quarantine ``resolver_quarantine``.
A part that is not plain lower-case letters and digits joined by single underscores (``Mixed Case``,
``a__b``, ``_tmp``, ``zoë``) becomes its letters and digits, lower-cased, plus ``_`` and 8 hex digits of
its SHA-1: a metastore keeps lower-case names only, and the separator ``__`` then appears nowhere else, so
two source tables never share a name. ``catalog_name`` in a table's settings overrides it.

**In step with the table.** A metastore holds a Delta table as a reference to its folder; Spark, Trino and
Databricks read the columns from the table's own log, so a rename or a widening the resolver makes shows by
name at once (the Hive metastore itself stores Spark's placeholder ``struct<>`` for every Delta table).

**One lake per schema.** A name registered at another path (another lake's) is never re-pointed: the batch
fails in one line before it writes anything.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql import SparkSession

from resolver.catalog_target import Catalog
from resolver.errors import ConfigError
from resolver.formats.names import split_qualified
from resolver.lake.folders import TABLE_PROPERTY, Lake
from resolver.spark import sql

__all__ = [
    "BRONZE_NAME",
    "QUARANTINE_NAME",
    "Catalog",
    "lake_tables",
    "LakeTable",
    "catalog_name",
    "check_names",
    "locate",
    "register_names",
]

BRONZE_NAME, QUARANTINE_NAME = "resolver_bronze", "resolver_quarantine"
_PLAIN = re.compile(r"[a-z0-9]+(_[a-z0-9]+)*")


@dataclass(frozen=True)
class LakeTable:
    """One Delta table of the lake and its name in the catalog."""

    name: str
    path: str


def catalog_name(source: str, history: bool = False, override: str | None = None) -> str:
    """The catalog name of ``source``'s snapshot (``history``: its history); ``override``: the table's
    ``catalog_name`` setting."""
    if override is not None:
        base = override
    else:
        schema, table = split_qualified(source)
        base = f"{_part(schema)}__{_part(table)}"
    return f"{base}__history" if history else base


def _part(name: str) -> str:
    if _PLAIN.fullmatch(name):
        return name
    slug = "_".join(re.findall(r"[a-z0-9]+", name.lower())) or "t"
    return f"{slug}_{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def lake_tables(
    lake: Lake, tables: Iterable[str], overrides: Mapping[str, str | None] | None = None
) -> list[LakeTable]:
    """The names and paths of bronze, the quarantine and ``tables``' snapshot and history (whether or
    not they exist yet); ``ConfigError`` when two of them would share a name."""
    out = [LakeTable(BRONZE_NAME, lake.bronze), LakeTable(QUARANTINE_NAME, lake.quarantine)]
    for table in sorted(set(tables)):
        override = (overrides or {}).get(table)
        paths = lake.table(table)
        out.append(LakeTable(catalog_name(table, False, override), paths.snapshot))
        out.append(LakeTable(catalog_name(table, True, override), paths.history))
    seen: dict[str, str] = {}
    for t in out:
        if t.name in seen and seen[t.name] != t.path:
            raise ConfigError(
                f"catalog: {t.name} would name both {seen[t.name]} and {t.path}, expected one table per "
                "name (set catalog_name for one of them)"
            )
        seen[t.name] = t.path
    return out


_checked: set[tuple[str, str, str]] = set()  # (session, qualified name, path) found registered there
_lock = threading.Lock()


def check_names(spark: SparkSession, catalog: Catalog, tables: list[LakeTable]) -> None:
    """Refuse, in one line and before anything is written, a name ``catalog`` holds at another path (a
    second lake registered in the same schema)."""
    existing = _existing(spark, catalog)
    for t in tables:
        if t.name.lower() not in existing or _known(spark, catalog, t):
            continue
        where = _location(spark, catalog.qualified(t.name))
        if where is not None and not _same(where, t.path):
            raise ConfigError(
                f"catalog: {catalog}.{t.name} is the table at {where}, not this lake's {t.path}: another "
                "lake is registered in that schema; expected a schema of this lake's own (--catalog)"
            )
        _remember(spark, catalog, t)


def register_names(spark: SparkSession, catalog: Catalog, tables: list[LakeTable]) -> list[str]:
    """Register every table of ``tables`` that exists as a Delta table and has no name yet (the schema
    created if new); returns the names registered now."""
    from resolver.lake import delta

    todo = [t for t in tables if not _known(spark, catalog, t)]
    if not todo:
        return []
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {catalog.namespace}")
    existing = _existing(spark, catalog)
    made = []
    for t in todo:
        if t.name.lower() in existing:
            check_names(spark, catalog, [t])
            continue
        if not delta.is_table(spark, t.path):
            continue  # not written yet (a table whose outputs leave it out, an empty quarantine)
        where = sql.string(t.path)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {catalog.qualified(t.name)} USING delta LOCATION {where}")
        _remember(spark, catalog, t)
        made.append(f"{catalog}.{t.name}")
    return made


def locate(spark: SparkSession, name: str) -> tuple[str, str]:
    """The lake and source table (``<schema>.<table>``) of a snapshot or history table registered as
    ``name`` (``catalog.schema.table``); ``ConfigError`` for a name that is none of the lake's source
    tables."""
    rows = spark.sql(f"DESCRIBE DETAIL {name}").select("location", "properties").first()
    if rows is None:
        raise ConfigError(f"table {name}: not found in the catalog, expected a table resolver registered")
    source = (rows["properties"] or {}).get(TABLE_PROPERTY)
    if not source:
        raise ConfigError(
            f"table {name} at {rows['location']} is not a source table's snapshot or history (no "
            f"{TABLE_PROPERTY} property), expected one resolver registered"
        )
    silver = os.path.dirname(str(rows["location"]).rstrip("/"))
    return _local(os.path.dirname(silver)), str(source)


def _existing(spark: SparkSession, catalog: Catalog) -> set[str]:
    if not _has_schema(spark, catalog):
        return set()
    return {r["tableName"].lower() for r in spark.sql(f"SHOW TABLES IN {catalog.namespace}").collect()}


def _has_schema(spark: SparkSession, catalog: Catalog) -> bool:
    where = f" IN {sql.ident(catalog.catalog)}" if catalog.catalog else ""
    names = spark.sql(f"SHOW SCHEMAS{where}").collect()
    return catalog.schema.lower() in {str(r[0]).lower() for r in names}


def _location(spark: SparkSession, qualified: str) -> str | None:
    row = spark.sql(f"DESCRIBE DETAIL {qualified}").select("location").first()
    return None if row is None else str(row["location"])


def _same(location: str, path: str) -> bool:
    return _local(location).rstrip("/") == _local(path).rstrip("/")


def _local(location: str) -> str:
    """A ``file:`` location as a plain path (other URIs as they are)."""
    for prefix in ("file://", "file:"):
        if location.startswith(prefix):
            return os.path.normpath(location[len(prefix) :])
    return location


def _session(spark: SparkSession) -> str:
    return str(spark._jsparkSession.hashCode())  # noqa: SLF001


def _known(spark: SparkSession, catalog: Catalog, t: LakeTable) -> bool:
    with _lock:
        return (_session(spark), catalog.qualified(t.name), t.path) in _checked


def _remember(spark: SparkSession, catalog: Catalog, t: LakeTable) -> None:
    with _lock:
        _checked.add((_session(spark), catalog.qualified(t.name), t.path))
