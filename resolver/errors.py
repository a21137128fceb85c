"""Every error the resolver raises on purpose. Messages say what was found and what was expected."""

from __future__ import annotations

__all__ = ["ConfigError", "InputError", "ResolverError", "whole_number_setting"]


class ResolverError(ValueError):
    """Base class: a value the resolver was given is not what it needs."""


class ConfigError(ResolverError):
    """A misconfiguration (wrong option, missing file, unknown format): fails fast, before any work."""


class InputError(ResolverError):
    """Input that cannot be processed at all (as opposed to single bad records, which are quarantined)."""


def whole_number_setting(key: str, text: str | None, least: int, expected: str) -> int | None:
    """A setting's value (``text``, None when it is not set) read as a whole number of at least ``least``;
    otherwise a ``ConfigError`` of one line ending with ``expected`` (``"a whole number of tables, 1 or
    more"``). The resolver's own Spark settings (``spark.resolver.*``) are read this way, first in
    ``plan_batch``, so a bad value fails the batch before anything is written."""
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise ConfigError(f"{key} is {text!r}; expected {expected}")
    return value
