"""Source table names, the way PostgreSQL writes them: ``schema.table``, each part double-quoted where it
needs it (``public.orders``, ``public."Mixed Case"``, ``"a.b".c`` and ``a."b.c"`` are different tables).
 Names come from the source database and are data: any PostgreSQL identifier (slashes, ``..``, quotes,
backticks, dots, spaces, unicode) is a valid table or schema name. This module turns a (schema, table) pair
into its one qualified text form and back; ``resolver.lake.folders`` turns it into a folder of the lake. No
Spark.

Quoting follows PostgreSQL's ``quote_ident``: a part is written bare when it is a lower-case ASCII letter
or ``_`` followed by lower-case letters, digits and ``_``; otherwise it is double-quoted with ``"``
doubled. (Reserved words are not quoted: ``public.order`` names the table ``order``.) Parsing follows
PostgreSQL too: an unquoted part is folded to lower case, a quoted one is kept as written.
"""

from __future__ import annotations

import re
from functools import lru_cache

from resolver.errors import ConfigError

__all__ = [
    "SLOT_NAME",
    "SLOT_NAME_EXPECTED",
    "TableName",
    "qualified",
    "quote_part",
    "split_qualified",
    "split_schema_qualified",
]

_BARE = re.compile(r"[a-z_][a-z0-9_]*")

#: a replication slot's name as PostgreSQL allows it (``resolver capture --slot``, a pipeline's ``capture``)
SLOT_NAME = re.compile(r"[a-z0-9_]{1,63}")
SLOT_NAME_EXPECTED = "a replication slot name (1-63 lower-case letters, digits, _)"


def quote_part(name: str) -> str:
    """One identifier as PostgreSQL's ``quote_ident`` writes it (reserved words left bare)."""
    if _BARE.fullmatch(name):
        return name
    return '"' + name.replace('"', '""') + '"'


@lru_cache(maxsize=4096)  # the reader names every event's table
def qualified(schema: str, table: str) -> str:
    """The qualified name of a table: ``public.orders``, ``public."Mixed Case"``, ``"a.b".c``."""
    return f"{quote_part(schema)}.{quote_part(table)}"


def split_qualified(text: str) -> tuple[str, str]:
    """``schema.table`` (parts quoted where they need it) -> (schema, table). An unquoted part is folded to
    lower case, as PostgreSQL does; a name without a schema is in ``public``. Raises ``ConfigError`` (one
    line) for text that is not a table name."""
    parts = _parts(text)
    return ("public", parts[0]) if len(parts) == 1 else (parts[0], parts[1])


def split_schema_qualified(text: str) -> tuple[str, str]:
    """``split_qualified`` for text that must name the schema (a schema file's ``table``)."""
    parts = _parts(text)
    if len(parts) != 2:
        raise ConfigError(
            f"table name {text!r}: found no schema, expected schema.table such as public.orders"
        )
    return parts[0], parts[1]


def _parts(text: str) -> list[str]:
    """The one or two parts of a table name."""
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        if i < n and text[i] == '"':
            j, buf = i + 1, []
            while True:
                k = text.find('"', j)
                if k < 0:
                    raise ConfigError(f"table name {text!r}: a quote opened at {i + 1} is never closed")
                buf.append(text[j:k])
                if k + 1 < n and text[k + 1] == '"':  # a doubled quote inside the name
                    buf.append('"')
                    j = k + 2
                    continue
                i = k + 1
                break
            part = "".join(buf)
            if not part:
                raise ConfigError(f'table name {text!r}: an empty quoted name "" is not a name')
            parts.append(part)
        else:
            k = text.find(".", i)
            raw = text[i:] if k < 0 else text[i:k]
            if not raw or '"' in raw:
                raise ConfigError(
                    f"table name {text!r}: found {raw!r}, expected a name such as public.orders or "
                    'public."Mixed Case" (double-quote a part that has dots, quotes or capitals)'
                )
            parts.append(raw.lower())
            i = n if k < 0 else k
        if i >= n:
            break
        if text[i] != ".":
            raise ConfigError(f"table name {text!r}: found {text[i]!r} after a quoted name, expected '.'")
        i += 1
        if i >= n:
            raise ConfigError(f"table name {text!r}: ends with '.', expected a table name after it")
    if len(parts) > 2:
        raise ConfigError(
            f"table name {text!r}: found {len(parts)} dotted parts, expected schema.table (double-quote a "
            'part that holds a dot: "a.b".c)'
        )
    return parts


class TableName(str):
    """A source table's qualified name (a ``str``: ``public."Mixed Case"``) with its two parts."""

    schema: str
    table: str

    def __new__(cls, text: str) -> TableName:
        schema, table = split_qualified(text)
        self = super().__new__(cls, qualified(schema, table))
        self.schema, self.table = schema, table
        return self

    @classmethod
    def of(cls, schema: str, table: str) -> TableName:
        return cls(qualified(schema, table))
