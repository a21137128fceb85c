"""Usage: durations.py JUNIT_XML [--write FILE] — where the test minutes went, by module: each module's
seconds (its tests' setup, call and teardown, module fixtures included) and share, then the sum over all
modules against the run's wall time (the average number of workers busy: 2 on CI's two workers means none
waited). CI prints it after the tests, so every run's log says which modules spend the budget. With
``--write tests/module_seconds.txt`` it also writes the seconds tests/conftest.py orders the modules by
(longest first), so a new or grown module does not start last."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

SHOWN = 25


def main(argv: list[str]) -> int:
    root = ET.parse(argv[0]).getroot()
    by_module: Counter[str] = Counter()  # "tests/e2e/test_run.py": seconds
    tests: Counter[str] = Counter()
    for case in root.iter("testcase"):
        module = _path(case.get("classname") or "?")
        by_module[module] += float(case.get("time") or 0)
        tests[module] += 1
    total = sum(by_module.values())
    print(f"test seconds by module (the {min(SHOWN, len(by_module))} longest of {len(by_module)}):")
    for module, seconds in by_module.most_common(SHOWN):
        print(f"{seconds:9.1f} s {100 * seconds / total:5.1f}%  {tests[module]:4d} tests  {module}")
    print(f"{total:9.1f} s in all, {sum(tests.values())} tests")
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    wall = float(suite.get("time") or 0) if suite is not None else 0.0
    if wall:
        print(f"{wall:9.1f} s of wall time: {total / wall:.2f} workers busy on average")
    if len(argv) == 3 and argv[1] == "--write":
        _write(Path(argv[2]), by_module)
    return 0


def _path(classname: str) -> str:
    """``tests/e2e/test_run.py`` of ``tests.e2e.test_run`` or ``tests.e2e.test_run.TestClass``."""
    parts = classname.split(".")
    while parts and not parts[-1].startswith("test_"):
        parts.pop()
    return "/".join(parts) + ".py" if parts else classname


def _write(path: Path, by_module: Counter[str]) -> None:
    header = path.read_text("utf-8").splitlines() if path.exists() else []
    lines = [line for line in header if line.startswith("#")]
    lines += [f"{seconds:.0f} {module}" for module, seconds in sorted(by_module.items(), key=lambda m: -m[1])]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
