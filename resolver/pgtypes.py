"""PostgreSQL type names (as wal2json prints them) -> Spark SQL types: the one documented mapping.

wal2json prints ``format_type`` spellings (``integer``, ``numeric(12,2)``, ``character varying(30)``,
``timestamp with time zone``, ``text[]``) in format 2 and in format 1 by default, and ``typname`` spellings
(``int4``, ``numeric``, ``varchar``, ``_int4``) in format 1 with ``include-typmod=0``. Both are accepted.

| PostgreSQL | Spark | note |
|---|---|---|
| smallint / int2 | smallint | |
| integer / int4 | int | |
| bigint / int8, oid | bigint | |
| numeric(p,s), p <= 38 | decimal(p,s) | exact; NaN and ±Infinity arrive as NULL (as for floats) |
| numeric(p,s), p > 38; numeric without precision | string | exact text (1) |
| real / float4 | float | NaN and ±Infinity arrive as NULL (wal2json prints null) (3) |
| double precision / float8 | double | same |
| boolean / bool | boolean | |
| date | date | |
| timestamp [without time zone] | timestamp_ntz | |
| timestamp with time zone / timestamptz | timestamp | an instant, shown in the session time zone (UTC) |
| bytea | binary | wal2json prints hex without ``\\x`` |
| everything else (2) | string | the exact PostgreSQL text |

(1) Spark decimals stop at 38 digits and an unconstrained numeric has a scale per value; pin a decimal
type in the table's schema file to type it.
(3) With wal2json 2.6's ``numeric-data-types-as-string`` they arrive as text: floats keep them, a
decimal cannot hold them (NULL, and the value goes to quarantine).
(2) text, varchar(n), char(n), uuid, json, jsonb, xml, interval, time, timetz, money, inet, enums, domains,
ranges, arrays (``x[]``).

Arrays stay PostgreSQL array literals (``{1,NULL,3}``) because their element quoting cannot be parsed
faithfully by a Spark expression; json/jsonb stay JSON text.
"""

from __future__ import annotations

import re

__all__ = ["spark_type"]

_EXACT = {
    "smallint": "smallint",
    "int2": "smallint",
    "integer": "int",
    "int": "int",
    "int4": "int",
    "bigint": "bigint",
    "int8": "bigint",
    "oid": "bigint",
    "real": "float",
    "float4": "float",
    "double precision": "double",
    "float8": "double",
    "boolean": "boolean",
    "bool": "boolean",
    "date": "date",
    "timestamp without time zone": "timestamp_ntz",
    "timestamp": "timestamp_ntz",
    "timestamp with time zone": "timestamp",
    "timestamptz": "timestamp",
    "bytea": "binary",
}
_NUMERIC = re.compile(r"^numeric\((\d+)(?:,\s*(\d+))?\)$")
_TIMESTAMP = re.compile(r"^timestamp\(\d\) (with|without) time zone$")


def spark_type(pg_type: str) -> str:
    """The Spark SQL type a column of this PostgreSQL type gets (see the module's table)."""
    name = pg_type.strip().lower()
    if name in _EXACT:
        return _EXACT[name]
    numeric = _NUMERIC.match(name)
    if numeric:
        precision, scale = int(numeric.group(1)), int(numeric.group(2) or 0)
        return f"decimal({precision},{scale})" if precision <= 38 else "string"
    timestamp = _TIMESTAMP.match(name)
    if timestamp:
        return "timestamp" if timestamp.group(1) == "with" else "timestamp_ntz"
    return "string"
