"""The schema registry: ``resolver schemas infer`` and ``resolver schemas check`` (docs/schema-evolution.md).
 ``infer`` reads wal2json files (of the format given, or the one their heads show) with the pure-Python
reader (no Spark) and writes one ``<folder>.yaml`` per table (its folder name in the lake,
``resolver.lake.folders``: ``public.orders.yaml``): every column in the order it first appeared, its
PostgreSQL type and the Spark type the lake gives it, and the primary key the stream reports (or its replica
identity). The files are meant to be read, edited and kept in version control; ``--schemas DIR`` then makes
them the contract. ``check`` validates a folder of them and, given a lake, that every column, key and
``renamed_from`` name they mention is one the lake knows, with a "did you mean" when it is not.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from resolver.config.tableschema import ColumnSpec, TableSchema, load_schemas
from resolver.errors import ConfigError
from resolver.files.input_files import list_files, resolve_format
from resolver.formats.snapshot_files import first_events, is_snapshot_file
from resolver.formats.wal2json import Event, read_lines
from resolver.lake.folders import folder as table_folder
from resolver.models import Format
from resolver.pgtypes import spark_type

__all__ = ["check_schemas", "infer_schemas", "write_schemas"]


def _rows(path: str, fmt: Format) -> Iterator[dict[str, Any]]:
    """A file's events as rows (a snapshot file's first ones: all of its rows share their columns)."""
    if is_snapshot_file(path):
        yield from first_events(path)
        return
    with open(path, "rb") as f:
        yield from (item.row for item in read_lines(f, path, fmt) if isinstance(item, Event))


def infer_schemas(paths: Sequence[str], fmt: Format | str | None = None) -> dict[str, TableSchema]:
    """One schema per table seen in the files (read as ``fmt``, or without it as the format their heads
    show: ``resolver.files.input_files.resolve_format``). A column's type is the last one the stream sent (the
    current one); its primary key is the stream's, else the replica identity of its updates and deletes."""
    files = list_files(paths)
    fmt = resolve_format(files, fmt)
    columns: dict[str, dict[str, str | None]] = {}
    keys: dict[str, list[str]] = {}
    identities: dict[str, list[str]] = {}
    for e in (row for path in files for row in _rows(path, fmt)):
        seen = columns.setdefault(e["table"], {})
        for name, typ in _pairs(e.get("column_names"), e.get("column_types")):
            seen[name] = typ or seen.get(name)
        for name, typ in _pairs(e.get("old_key_names"), e.get("old_key_types")):
            seen.setdefault(name, typ)
        if e.get("primary_key"):
            keys[e["table"]] = list(e["primary_key"])
        elif e["operation"] in ("update", "delete") and e.get("old_key_names"):
            identities.setdefault(e["table"], list(e["old_key_names"]))
    out = {}
    for table, cols in sorted(columns.items()):
        key = keys.get(table) or identities.get(table)
        if key and set(key) == set(cols) and len(key) > 1:
            key = None  # REPLICA IDENTITY FULL: no key to pin
        specs = [
            ColumnSpec(name=name, type=spark_type(typ) if typ else None, pg_type=typ)
            for name, typ in cols.items()
        ]
        out[table] = TableSchema.model_validate(
            {"table": table, "primary_key": key or None, "columns": specs}
        )
    return out


def _pairs(names: list[str] | None, types: list[str | None] | None) -> list[tuple[str, str | None]]:
    names = names or []
    types = list(types or [])
    return list(zip(names, types + [None] * (len(names) - len(types)), strict=True))


def write_schemas(schemas: dict[str, TableSchema], out: str | Path, overwrite: bool = False) -> list[Path]:
    """Write each schema as ``<out>/<schema>.<table>.yaml``; an existing file is kept unless ``overwrite``.
    Returns the files written."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for table, schema in sorted(schemas.items()):
        path = root / f"{table_folder(table)}.yaml"
        if path.exists() and not overwrite:
            raise ConfigError(f"{path} exists (expected a new file; pass --overwrite to replace it)")
        path.write_text(render(schema), "utf-8")
        written.append(path)
    return written


def render(schema: TableSchema) -> str:
    """A schema file's text: the fields that are set, in the documented order."""
    data: dict[str, Any] = {"table": schema.table}
    if schema.primary_key:
        data["primary_key"] = list(schema.primary_key)
    data["columns"] = [c.model_dump(exclude_defaults=True) for c in schema.columns]
    head = "# written by 'resolver schemas infer'; edit freely (docs/schema-evolution.md)\n"
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=None)


def check_schemas(
    folder: str | Path, lake_columns: dict[str, list[str]] | None = None
) -> dict[str, TableSchema]:
    """Validate every file of ``folder`` (``load_schemas`` raises on the first bad one, with its path).
    With ``lake_columns`` (table -> the lake's column names), each name a file mentions must be one of
    the lake's or the stream's: a file may name a column the lake does not have yet only under
    ``renamed_from`` or as a new column, so names are checked where a typo does harm: ``primary_key`` and
    ``renamed_from`` entries."""
    schemas = load_schemas(folder)
    for table, schema in schemas.items():
        have = (lake_columns or {}).get(table)
        if not have:
            continue
        listed = {c.name for c in schema.columns}
        known = set(have) | listed
        for i, key in enumerate(schema.primary_key or []):
            if key not in known:
                raise ConfigError(_unknown(folder, table, f"primary_key[{i}]", key, sorted(known)))
        for n, c in enumerate(schema.columns):
            for i, old in enumerate(c.renamed_from):
                if old not in have and c.name not in have:
                    where = f"columns[{n}].renamed_from[{i}]"
                    raise ConfigError(_unknown(folder, table, where, old, sorted(have)))
    return schemas


def _unknown(folder: str | Path, table: str, where: str, name: str, names: list[str]) -> str:
    hint = difflib.get_close_matches(name, names, n=1)
    return (
        f"{Path(folder) / (table_folder(table) + '.yaml')}: {where}: found {name!r}, which is not a "
        f"column of the lake's {table}"
        + (f" (did you mean {hint[0]!r}?)" if hint else f" (columns: {', '.join(names)})")
    )
