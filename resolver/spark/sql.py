"""The one way a name or a value reaches Spark SQL text: quoted here, never pasted.

Names come from the source database and are data (``resolver.formats.names``): a column may be called ``a.b``,
``Some Value`` or ``we`ird``, a lake may live under a path with a backtick. Spark SQL quotes identifiers
with backticks (a backtick inside is doubled) and string literals with single quotes (a backslash and a
quote inside are escaped). The Column API parses a column name too (``a.b`` is field ``b`` of ``a``), so a
source column is referenced through ``col`` below. No Spark at import time.
"""

from __future__ import annotations

import copy
import functools
from datetime import date
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql import types as T

__all__ = ["col", "delta_path", "ident", "literal", "parse_type", "string", "type_sql"]


def ident(name: str) -> str:
    """An identifier (column, field) as Spark SQL text: ``a.b`` -> ```a.b```, ``we`ird`` -> ```we``ird```."""
    return "`" + name.replace("`", "``") + "`"


def delta_path(path: str) -> str:
    """A Delta table by path, for ``ALTER TABLE`` and friends: ``delta.`/lake/silver/public.orders```."""
    return "delta." + ident(path)


def string(value: str) -> str:
    """A string literal: backslashes and single quotes escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def literal(value: Any) -> str:
    """A value as a literal: str, int (not bool) or date."""
    if isinstance(value, str):
        return string(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, date):
        return f"DATE{string(value.isoformat())}"
    raise TypeError(f"no SQL literal for {type(value).__name__} {value!r}")


def col(name: str, *fields: str) -> Column:
    """A column (or a field of a struct column) by its exact name, dots and backticks included."""
    from pyspark.sql import functions as F

    return F.col(".".join(ident(n) for n in (name, *fields)))


def type_sql(data_type: T.DataType) -> str:
    """A Spark type as Spark SQL text, for ``CAST(... AS <type>)``: a struct's field names quoted."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        fields = ", ".join(f"{ident(f.name)}: {type_sql(f.dataType)}" for f in data_type.fields)
        return f"STRUCT<{fields}>"
    if isinstance(data_type, T.ArrayType):
        return f"ARRAY<{type_sql(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"MAP<{type_sql(data_type.keyType)}, {type_sql(data_type.valueType)}>"
    return data_type.simpleString()


def parse_type(ddl: str) -> T.DataType:
    """A Spark SQL type's text (``decimal(12,2)``, ``timestamp_ntz``) as a ``DataType``, parsed by Spark
    once per text for the process (a parse is several calls into the JVM; a batch asks for the same few
    types once per table and step)."""
    return copy.deepcopy(_parsed(ddl))


@functools.lru_cache(maxsize=1024)
def _parsed(ddl: str) -> T.DataType:
    from pyspark.sql import types as T

    return T._parse_datatype_string(ddl)  # noqa: SLF001
