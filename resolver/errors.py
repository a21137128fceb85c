"""Every error the resolver raises on purpose. Messages say what was found and what was expected."""

from __future__ import annotations

__all__ = ["ConfigError", "InputError", "ResolverError"]


class ResolverError(ValueError):
    """Base class: a value the resolver was given is not what it needs."""


class ConfigError(ResolverError):
    """A misconfiguration (wrong option, missing file, unknown format): fails fast, before any work."""


class InputError(ResolverError):
    """Input that cannot be processed at all (as opposed to single bad records, which are quarantined)."""
