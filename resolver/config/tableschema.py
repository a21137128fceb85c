"""Per-table schema files (``--schemas DIR``): one optional ``<schema>.<table>.yaml`` per table.

```yaml
table: public.customers
primary_key: [id]          # optional; defaults to the key the stream reports
columns:                   # optional; only the columns you want to pin or annotate
  - name: mail
    type: string           # a Spark SQL type; optional
    renamed_from: [email]  # earlier names of this column
unknown_columns: quarantine  # optional: evolve | fail | quarantine (resolver.config.policy.Policy)
unsafe_type_change: fail     # optional: fail | quarantine
```

The two policies default to the run's (``resolver.config.policy.Policies``).

Every problem is a ``ConfigError`` naming the file, the path inside it, what was found and what was
expected, with a "did you mean" for misspelt keys. This module does not import Spark.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from resolver.config.policy import Policy, check_unsafe_type_policy
from resolver.config.yamlconfig import parse_yaml
from resolver.errors import ConfigError
from resolver.formats.names import qualified, split_schema_qualified
from resolver.lake.folders import folder as table_folder
from resolver.models import ResolverModel

__all__ = ["ColumnSpec", "TableSchema", "load_schemas", "parse_schema"]

_SIMPLE_TYPES = {
    "boolean", "tinyint", "byte", "smallint", "short", "int", "integer", "bigint", "long", "float", "real",
    "double", "string", "binary", "date", "timestamp", "timestamp_ntz", "timestamp_ltz",
}  # fmt: skip
_DECIMAL = re.compile(r"^(?:decimal|dec|numeric)(?:\((\d+)(?:,\s*(\d+))?\))?$")
_SIZED = re.compile(r"^(?:varchar|char)\(\d+\)$")


def check_spark_type(text: str) -> str:
    """``text`` if it is a Spark SQL type this project writes (see ``_SIMPLE_TYPES``, decimal(p,s) with
    p <= 38, varchar(n)/char(n), array<...>), else ValueError saying what is accepted."""
    t = text.strip().lower()
    if t in _SIMPLE_TYPES or _SIZED.match(t):
        return t
    decimal = _DECIMAL.match(t)
    if decimal:
        precision, scale = int(decimal.group(1) or 10), int(decimal.group(2) or 0)
        if not 1 <= precision <= 38 or scale > precision:
            raise ValueError(
                f"found {text!r}: decimal precision must be 1..38 and scale at most the precision"
            )
        return t
    if t.startswith("array<") and t.endswith(">"):
        check_spark_type(t[6:-1])
        return t
    hint = difflib.get_close_matches(t, sorted(_SIMPLE_TYPES), n=1)
    raise ValueError(
        f"found {text!r}, expected a Spark SQL type such as string, bigint, decimal(12,2), timestamp, "
        "array<int>" + (f" (did you mean {hint[0]!r}?)" if hint else "")
    )


class ColumnSpec(ResolverModel):
    """One column to pin or annotate."""

    name: str = Field(min_length=1, description="The column's current name in the source")
    type: str | None = Field(None, description="Spark SQL type to store it as (default: from the stream)")
    renamed_from: list[str] = Field(default_factory=list, description="Earlier names of this column")
    pg_type: str | None = Field(
        None, description="PostgreSQL type the stream sent (a note written by 'resolver schemas infer')"
    )

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str | None) -> str | None:
        return None if value is None else check_spark_type(value)


class TableSchema(ResolverModel):
    """A table's schema file."""

    table: str = Field(
        description='schema.table, parts double-quoted where PostgreSQL needs it: public."Mixed Case"'
    )
    primary_key: list[str] | None = Field(
        default=None, min_length=1, description="Key columns (default: the stream's)"
    )
    columns: list[ColumnSpec] = Field(default_factory=list, description="Columns to pin or annotate")
    unknown_columns: Policy | None = Field(
        default=None,
        description="What an event carrying a column not listed here does: evolve, fail or quarantine "
        "(default: the run's)",
    )
    unsafe_type_change: Policy | None = Field(
        default=None,
        description="What a column type the lake cannot widen to does: fail or quarantine "
        "(default: the run's)",
    )

    @field_validator("table")
    @classmethod
    def _table_name(cls, value: str) -> str:
        return qualified(
            *split_schema_qualified(value)
        )  # a ConfigError is a ValueError: reported on the field

    @field_validator("unsafe_type_change")
    @classmethod
    def _no_lossy_evolve(cls, value: Policy | None) -> Policy | None:
        return None if value is None else check_unsafe_type_policy(value)

    @model_validator(mode="after")
    def _consistent(self) -> TableSchema:
        names = [c.name for c in self.columns]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ValueError(f"column {name!r} is listed twice")
        current = set(names)
        seen: dict[str, str] = {}
        for column in self.columns:
            for old in column.renamed_from:
                if old in current:
                    raise ValueError(
                        f"column {column.name!r} is renamed_from {old!r}, which is also a current column name"
                    )
                if old in seen:
                    raise ValueError(f"{old!r} is in renamed_from of both {seen[old]!r} and {column.name!r}")
                seen[old] = column.name
        if self.unknown_columns in (Policy.FAIL, Policy.QUARANTINE) and not self.columns:
            raise ValueError(
                f"unknown_columns is {self.unknown_columns.value!r} but no columns are listed: list the "
                "known columns under 'columns' (resolver schemas infer writes them)"
            )
        return self

    def known_columns(self) -> set[str] | None:
        """The column names this file foresees (current and earlier names, and the key); None when it lists
        no columns (every column is then known)."""
        if not self.columns:
            return None
        return {c.name for c in self.columns} | set(self.rename_map()) | set(self.primary_key or [])

    def rename_map(self) -> dict[str, str]:
        """Earlier column name -> current name."""
        return {old: c.name for c in self.columns for old in c.renamed_from}


def parse_schema(text: str, source: str = "<schema>") -> TableSchema:
    """Parse and validate one schema file's text; ``source`` names it in errors."""
    return parse_yaml(
        text,
        source,
        TableSchema,
        "a mapping with 'table' and 'columns'",
        lambda loc: ColumnSpec if "columns" in loc else TableSchema,
    )


def load_schemas(folder: str | Path) -> dict[str, TableSchema]:
    """Every ``*.yaml`` / ``*.yml`` file of a folder, by table name. A file must be named for its table."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(
            f"schemas folder {str(folder)!r} is not a folder (expected a folder of <schema>.<table>.yaml)"
        )
    schemas: dict[str, TableSchema] = {}
    for path in sorted(_yaml_files(root.iterdir())):
        schema = parse_schema(path.read_text("utf-8"), str(path))
        if path.stem != table_folder(schema.table):
            raise ConfigError(
                f"{path}: table is {schema.table!r} but the file is named {path.name!r} "
                f"(expected {table_folder(schema.table)}.yaml)"
            )
        schemas[schema.table] = schema
    return schemas


def _yaml_files(paths: Iterable[Path]) -> Iterable[Path]:
    return (p for p in paths if p.is_file() and p.suffix in (".yaml", ".yml") and not p.name.startswith("."))
