"""Where everything lives in a lake: the folder of each source table, the resolver's own tables. No Spark.
 A source table is named the way PostgreSQL writes it (``resolver.formats.names``: ``public.orders``,
``public."Mixed Case"``); any identifier is legal there, slashes, ``..``, quotes and all. Its folder name
is an encoding of that name, one-to-one and always a single path component inside the lake:

* each part (schema, table) keeps the characters ``a-z 0-9 _ -`` as they are and writes every other UTF-8
  byte as ``~`` and two upper-case hex digits: ``public.orders`` -> ``public.orders``,
  ``public."Mixed Case"`` -> ``public.~4Dixed~20~43ase``, ``public."x/../y"`` -> ``public.x~2F~2E~2E~2Fy``,
  ``"a.b".c`` -> ``a~2Eb.c`` (while ``a."b.c"`` -> ``a.b~2Ec``);
* the folder is ``<schema>.<table>``; the history table is that folder plus ``__history``, so a table
  whose own name ends in ``__history`` has the ``_`` before ``_history`` written ``~5F``
  (``public.orders__history`` -> ``public.orders_~5Fhistory``, never the history of ``public.orders``);
* a name whose folder would pass ``MAX_FOLDER`` bytes keeps a readable prefix, then ``~~`` and 16 hex digits
  of the SHA-256 of the qualified name; such a folder cannot be decoded from its name, and every table
  the resolver creates carries its name in the table property ``resolver.table`` (``TABLE_PROPERTY``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, replace
from typing import Protocol

from resolver.formats.names import qualified, split_qualified
from resolver.paths import is_uri, join_inside

__all__ = [
    "APPLIED_PROPERTY",
    "BRONZE",
    "DELETION_VECTORS_PROPERTY",
    "DROPS_PROPERTY",
    "HOLDS_PROPERTY",
    "KEY_PROPERTY",
    "KEY_SOURCE_PROPERTY",
    "Lake",
    "QUARANTINE",
    "SCHEMA_VERSION_PROPERTY",
    "HISTORY",
    "LOCAL_FOLDERS",
    "Folders",
    "MAX_FOLDER",
    "TABLE_PROPERTY",
    "TablePaths",
    "changes_path",
    "child",
    "folder",
    "history_path",
    "inside",
    "lake_root",
    "pending_truncates_path",
    "schema_log_path",
    "silver_tables",
    "snapshot_path",
    "table_of",
]

HISTORY = "__history"
#: the lake's own tables, relative to its root
BRONZE = "bronze/change_events"
QUARANTINE = "quarantine"
TABLE_PROPERTY = "resolver.table"
#: the resolver's own properties on a table's Delta tables (key, schema version, drop points, markers)
KEY_PROPERTY = "resolver.key"
KEY_SOURCE_PROPERTY = "resolver.keySource"
SCHEMA_VERSION_PROPERTY = "resolver.schemaVersion"
DROPS_PROPERTY = "resolver.droppedAt"
#: on the change store: its version the silver tables were last brought up to, set in the store's own
#: commit right after it (the last write of a batch), so a re-applied batch finds nothing to do cheaply
APPLIED_PROPERTY = "resolver.appliedVersion"
#: on the change store, in the same commit: whether the store held a key change, a truncate, at that version
HOLDS_PROPERTY = "resolver.holds"
#: on the change store, in the same commit: "true" once the table's silver tables write deletion vectors
DELETION_VECTORS_PROPERTY = "resolver.deletionVectors"
#: Longest folder name written as is (file systems allow 255 bytes; ``__history`` and Delta's own names
#: must still fit beside it).
MAX_FOLDER = 200
_KEEP = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_-")


def _encode(part: str) -> str:
    out = "".join(chr(b) if b in _KEEP else f"~{b:02X}" for b in part.encode("utf-8"))
    if out.endswith(HISTORY):  # keep the history suffix unambiguous
        out = out[: -len(HISTORY)] + "_~5F" + HISTORY[2:]
    return out


_ESCAPED = re.compile(r"(?:[a-z0-9_-]|~[0-9A-F]{2})*")


def _decode(part: str) -> str:
    """The inverse of ``_encode``; ValueError for text it never writes."""
    if not _ESCAPED.fullmatch(part):
        raise ValueError(part)
    raw = bytearray()
    i = 0
    while i < len(part):
        if part[i] == "~":
            raw.append(int(part[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.append(ord(part[i]))
            i += 1
    return raw.decode("utf-8")


def folder(table: str) -> str:
    """The folder name of a source table (``schema.table`` as ``resolver.formats.names`` writes it)."""
    schema, name = split_qualified(table)
    out = f"{_encode(schema)}.{_encode(name)}"
    if len(out) > MAX_FOLDER:
        digest = hashlib.sha256(qualified(schema, name).encode("utf-8")).hexdigest()[:16]
        cut = out[: MAX_FOLDER - 18]
        cut = cut[: cut.rfind("~")] if "~" in cut[-2:] else cut  # never half an escape
        out = f"{cut}~~{digest}"
    return out


def table_of(name: str) -> str | None:
    """The source table of a folder name (the inverse of ``folder``); None for a hashed (long) name or a
    folder that no source table has (``resolver.table`` then tells)."""
    if "~~" in name or name.count(".") != 1:
        return None
    schema, table = name.split(".")
    try:
        return qualified(_decode(schema), _decode(table))
    except (ValueError, UnicodeDecodeError, IndexError):
        return None


def inside(lake: str, *parts: str) -> str:
    """``lake/parts…`` as an absolute path or a URI (``resolver.paths``), refused unless it lies strictly
    inside the lake."""
    return join_inside(lake, *parts)


def snapshot_path(lake: str, table: str) -> str:
    """``silver/<folder>``: the table as it is (SCD1)."""
    return Lake.at(lake).table(table).snapshot


def history_path(lake: str, table: str) -> str:
    """``silver/<folder>__history``: every version of every row (SCD2)."""
    return Lake.at(lake).table(table).history


def changes_path(lake: str, table: str) -> str:
    """``_resolver/changes/<folder>``: the table's events, typed (the resolver's own state)."""
    return Lake.at(lake).table(table).changes


@dataclass(frozen=True)
class TablePaths:
    """Where one table's batch reads and writes, resolved once (``Lake.table``): its three Delta tables,
    the lake's tables its steps add to (the schema log, the truncates held for tables not known yet), and
    bronze, which a change store that fell behind catches up from."""

    table: str  # the source table, schema.table
    changes: str  # the change store, _resolver/changes/<folder>
    history: str  # silver/<folder>__history
    snapshot: str  # silver/<folder>
    schema_log: str  # the lake's _resolver/schema_log
    pending_truncates: str  # the lake's _resolver/pending_truncates
    bronze: str = ""  # the lake's bronze/change_events: the events a store catches up on


@dataclass(frozen=True)
class Lake:
    """A lake's folders, resolved once from its root (``Lake.at``: a plain path made absolute, or a URI) and
    handed down, so that no step turns the root into a path again: the resolver's tables of the whole lake,
    its lock, and each source table's tables (``table``)."""

    name: str  # the lake as it was named (for messages)
    root: str  # absolute path, or the URI without a trailing slash
    uri: bool  # whether the lake is named by a URI (read and written through Spark's Hadoop file systems)
    bronze: str  # bronze/change_events
    quarantine: str  # quarantine
    schema_log: str  # _resolver/schema_log
    pending_truncates: str  # _resolver/pending_truncates
    ledger: str  # _resolver/ledger: the files resolver run applied
    stream: str  # _resolver/stream: a pipeline's streaming checkpoint unless it names its own
    lock: str  # _resolver/run.lock, a file; for a lake named by a URI _resolver/lock, a Delta table
    markers: str  # _resolver/markers: every table's marker, one commit per batch (resolver.lake.markers)

    @classmethod
    def at(cls, root: str | Lake) -> Lake:
        """The lake at ``root`` (a ``Lake`` is returned as it is)."""
        if isinstance(root, Lake):
            return root
        uri = is_uri(root)
        base = root.rstrip("/") if uri else os.path.abspath(root)
        lake = cls(root, base, uri, *[""] * 8)
        return replace(
            lake,
            bronze=lake.under(*BRONZE.split("/")),
            quarantine=lake.under(QUARANTINE),
            schema_log=lake.under("_resolver", "schema_log"),
            pending_truncates=lake.under("_resolver", "pending_truncates"),
            ledger=lake.under("_resolver", "ledger"),
            stream=lake.under("_resolver", "stream"),
            lock=lake.under("_resolver", "lock" if uri else "run.lock"),
            markers=lake.under("_resolver", "markers"),
        )

    def under(self, *parts: str) -> str:
        """``root/parts…``; each part must be one fixed path component (a name this module makes), so the
        path stays inside the lake."""
        return "/".join((self.root, *parts)) if self.uri else os.path.join(self.root, *parts)

    def table(self, table: str) -> TablePaths:
        """Where the source table ``table`` (schema.table) lives, and the lake's tables its batch adds to
        (its folder, ``folder``, is one path component: always inside the lake)."""
        name = folder(table)
        return TablePaths(
            table,
            self.under("_resolver", "changes", name),
            self.under("silver", name + HISTORY),
            self.under("silver", name),
            self.schema_log,
            self.pending_truncates,
            self.bronze,
        )


def schema_log_path(lake: str) -> str:
    """Every schema change the lake made: per table, version, change, column, types and commit LSN."""
    return Lake.at(lake).schema_log


def pending_truncates_path(lake: str) -> str:
    """Truncates of tables the lake does not know the columns of yet (kept until their first rows come)."""
    return Lake.at(lake).pending_truncates


class Folders(Protocol):
    """Where a lake's folders are, as the driver sees them: this machine's (``LOCAL_FOLDERS``), or Spark's
    Hadoop file systems for a lake named by a URI (``resolver.files.hadoop_files.HadoopFiles``)."""

    def children(self, path: str) -> tuple[list[str], list[str]] | None:
        """The names of the sub-folders and of the files in ``path``, each sorted; None when there is no
        folder there."""
        ...

    def read_text(self, path: str) -> str:
        """A file's text (UTF-8)."""
        ...


class LocalFolders:
    """This machine's folders (plain paths)."""

    def children(self, path: str) -> tuple[list[str], list[str]] | None:
        if not os.path.isdir(path):
            return None
        names = sorted(os.listdir(path))
        dirs = [n for n in names if os.path.isdir(os.path.join(path, n))]
        return dirs, [n for n in names if n not in dirs]

    def read_text(self, path: str) -> str:
        with open(path, encoding="utf-8") as f:
            return f.read()


LOCAL_FOLDERS = LocalFolders()


def child(path: str, name: str) -> str:
    """``path/name`` for a plain path or a URI."""
    return path.rstrip("/") + "/" + name if is_uri(path) else os.path.join(path, name)


def lake_root(lake: str) -> str:
    """The lake as the folders are listed: a URI as it is, a plain path made absolute."""
    return lake.rstrip("/") if is_uri(lake) else os.path.abspath(lake)


def silver_tables(lake: str, folders: Folders = LOCAL_FOLDERS) -> dict[str, str]:
    """Every Delta table of ``lake/silver`` by folder name -> the source table it belongs to (snapshots and
    histories alike: a folder ending in ``__history`` is a history). Decoded from the folder name, or read
    from the table's ``resolver.table`` property for a hashed one. No Spark."""
    root = child(lake_root(lake), "silver")
    found = folders.children(root)
    out = {}
    for name in found[0] if found else []:
        log = child(child(root, name), "_delta_log")
        commits = folders.children(log)
        if commits is None:
            continue
        table = table_of(name.removesuffix(HISTORY)) or _named_in_log(log, commits[1], folders)
        if table is not None:
            out[name] = table
    return out


def _named_in_log(log: str, files: list[str], folders: Folders) -> str | None:
    """The ``resolver.table`` property of a table, from the metadata its commit files carry."""
    for name in sorted(n for n in files if n.endswith(".json")):
        for line in folders.read_text(child(log, name)).splitlines():
            if '"metaData"' in line:
                conf = json.loads(line)["metaData"].get("configuration", {})
                if TABLE_PROPERTY in conf:
                    return str(conf[TABLE_PROPERTY])
    return None
