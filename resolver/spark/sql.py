"""The one way a name or a value reaches Spark SQL text: quoted here, never pasted.

Names come from the source database and are data (``resolver.formats.names``): a column may be called ``a.b``,
``Some Value`` or ``we`ird``, a lake may live under a path with a backtick. Spark SQL quotes identifiers
with backticks (a backtick inside is doubled) and string literals with single quotes (a backslash and a
quote inside are escaped). The Column API parses a column name too (``a.b`` is field ``b`` of ``a``), so a
source column is referenced through ``col`` below. No Spark at import time.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["col", "delta_path", "ident", "literal", "string"]


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
