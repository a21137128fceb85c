"""The code block after ``Example::`` in a library function's docstring, as tests/e2e/test_docstrings.py
and tests/e2e/test_capture.py run it."""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable
from typing import Any


def example(fn: Callable[..., Any]) -> str:
    """The code block after 'Example::' in the function's docstring."""
    doc = inspect.getdoc(fn) or ""
    assert "Example::" in doc, f"{fn.__module__}.{fn.__qualname__} has no example"
    block = doc.split("Example::", 1)[1].split("\n\n", 2)[1]
    return textwrap.dedent(block)
