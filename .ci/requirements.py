"""The project's requirements without the project: its dependencies and those of the extras named on the
command line (an extra that names the project's own extras brings theirs), one per line, for a
``pip install -r`` that readies a virtual environment while something else runs. Nothing of the project
is built or installed: ``pip install -e .`` writes into the source tree, so only one may run at a time."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

_SELF = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*\[([^\]]+)\]\s*$")


def requirements(project: dict, extras: list[str]) -> list[str]:
    name = project["name"]
    optional = project.get("optional-dependencies", {})
    wanted, seen, out = list(extras), set(), list(project.get("dependencies", []))
    while wanted:
        extra = wanted.pop()
        if extra in seen:
            continue
        if extra not in optional:
            raise SystemExit(f".ci/requirements.py: no extra {extra!r} in pyproject.toml: {sorted(optional)}")
        seen.add(extra)
        for requirement in optional[extra]:
            own = _SELF.match(requirement)
            if own and own.group(1) == name:
                wanted += [e.strip() for e in own.group(2).split(",")]
            else:
                out.append(requirement)
    return list(dict.fromkeys(out))


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    print("\n".join(requirements(project, sys.argv[1:])))
