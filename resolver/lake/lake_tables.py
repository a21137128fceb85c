"""Which Delta tables a lake holds (``lake_tables``), and which of them a command's table names mean
(``select_tables``: a source table's snapshot, history and change store, or one table by its path), for
``resolver optimize`` and ``resolver vacuum``. No Spark."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from resolver.errors import ConfigError
from resolver.formats.names import TableName
from resolver.lake.folders import HISTORY, LOCAL_FOLDERS, Folders, child, lake_root, silver_tables

__all__ = ["lake_tables", "select_tables"]

_PER_SOURCE_TABLE = ("silver/{}", "silver/{}" + HISTORY, "_resolver/changes/{}")


def lake_tables(lake: str, folders: Folders = LOCAL_FOLDERS) -> list[str]:
    """Every Delta table of the lake, as paths relative to it (``bronze/change_events``,
    ``silver/public.customers``, ``_resolver/changes/public.customers``, ...), sorted. No Spark (a lake
    named by a URI is listed through ``folders``, ``resolver.files.hadoop_files.HadoopFiles``)."""
    root = lake_root(lake)
    if folders.children(root) is None:
        raise ConfigError(
            f"lake {lake} not found, expected a folder written by resolver ingest or resolver run"
        )
    found = []

    def walk(relative: str) -> None:
        listed = folders.children(child(root, relative) if relative else root)
        dirs = listed[0] if listed else []
        if "_delta_log" in dirs:
            found.append(relative)  # a table's own folders hold no tables
            return
        for d in dirs:
            if not d.startswith("."):
                walk(f"{relative}/{d}" if relative else d)

    walk("")
    if not found:
        raise ConfigError(
            f"lake {lake} holds no Delta table, expected a lake written by resolver ingest or run"
        )
    return sorted(found)


def select_tables(
    lake: str, tables: Sequence[str] | None = None, folders: Folders = LOCAL_FOLDERS
) -> list[str]:
    """The lake's Delta tables to work on (relative paths, sorted): all of them when ``tables`` is None;
    else, for each name, a source table's snapshot, history and change store (``public.customers``) or one
    table by its path in the lake (``bronze/change_events``). ``ConfigError`` (one line, "did you mean")
    for a name that is neither. No Spark."""
    every = lake_tables(lake, folders)
    if tables is None:
        return every
    folders = {table: name.removesuffix(HISTORY) for name, table in silver_tables(lake, folders).items()}
    sources = sorted(folders)
    chosen: set[str] = set()
    for name in tables:
        source = _source_name(name)
        if name in every:
            chosen.add(name)
        elif source in folders:
            chosen.update(p for p in (f.format(folders[source]) for f in _PER_SOURCE_TABLE) if p in every)
        else:
            hint = difflib.get_close_matches(name, sources + every, n=1)
            mean = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ConfigError(
                f"table {name!r} not found in lake {lake}, expected a source table ({', '.join(sources)}) or "
                f"a Delta table of the lake ({', '.join(every)}){mean}"
            )
    return sorted(chosen)


def _source_name(text: str) -> str | None:
    """A source table named as PostgreSQL does, in its one written form; None for text that is not one."""
    try:
        return str(TableName(text))
    except ConfigError:
        return None
