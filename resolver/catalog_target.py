"""Where ``--catalog`` (a pipeline's ``catalog:``) registers the lake's tables: a catalog and a schema
(``resolver.lake.catalog`` registers them). No Spark here."""

from __future__ import annotations

import re
from dataclasses import dataclass

from resolver.errors import ConfigError

__all__ = ["Catalog"]

_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Catalog:
    """Where the lake's tables are registered: a catalog (None: the session's current one) and a schema."""

    schema: str
    catalog: str | None = None

    @classmethod
    def parse(cls, text: str) -> Catalog:
        """``<catalog>.<schema>`` or ``<schema>``; each part letters, digits and underscores."""
        parts = text.split(".")
        if len(parts) > 2 or not all(_PART.fullmatch(p) for p in parts):
            raise ConfigError(
                f"catalog: found {text!r}, expected <catalog>.<schema> or <schema>, each of letters, digits "
                "and underscores (spark_catalog.cdc)"
            )
        return cls(parts[-1], parts[0] if len(parts) == 2 else None)

    @property
    def namespace(self) -> str:
        return ".".join(_quoted(p) for p in (self.catalog, self.schema) if p)

    def qualified(self, name: str) -> str:
        return f"{self.namespace}.{_quoted(name)}"

    def __str__(self) -> str:
        return ".".join(p for p in (self.catalog, self.schema) if p)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
