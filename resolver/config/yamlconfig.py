"""Reading a YAML configuration file into a pydantic model, with errors users can act on.

Every problem is one ``ConfigError`` line: the file, the path inside it (``columns[0].type``), what was
found and what was expected, with a "did you mean" for misspelt keys. No Spark here.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from resolver.errors import ConfigError

__all__ = ["parse_yaml"]

M = TypeVar("M", bound=BaseModel)


def parse_yaml(
    text: str, source: str, model: type[M], expected: str, model_at: Callable[[list[Any]], type[BaseModel]]
) -> M:
    """Parse ``text`` as YAML and validate it as ``model``. ``expected`` describes the top-level mapping
    for the error when the text is not one; ``model_at(path)`` names the model found at a path (for the
    keys an unknown key could have meant)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{source}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: found {type(data).__name__}, expected {expected}")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{source}: {_describe(e.errors()[0], model_at)}") from None


def _describe(error: Any, model_at: Callable[[list[Any]], type[BaseModel]]) -> str:
    """One pydantic error as 'path: what was found, what was expected (did you mean ...)'."""
    loc = list(error["loc"])
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".") or "(top level)"
    if error["type"] == "extra_forbidden":
        fields = list(model_at(loc[:-1]).model_fields)
        hint = difflib.get_close_matches(str(loc[-1]), fields, n=1)
        return f"{path}: unknown key {loc[-1]!r}" + (
            f" (did you mean {hint[0]!r}?)" if hint else f" (expected one of {', '.join(fields)})"
        )
    if error["type"] == "missing":
        return f"{path}: missing, expected a value"
    message = str(error["msg"]).removeprefix("Value error, ")
    if "input" in error and error["type"] != "value_error":
        return f"{path}: found {error['input']!r}: {message}"
    return f"{path}: {message}"
