"""Usage: durations.py JUNIT_XML — where the test minutes went, by module: each module's seconds (its tests'
setup, call and teardown, module fixtures included) and share, then the sum over all modules against the
run's wall time (the average number of workers busy: 2 on CI's two workers means none waited). CI prints
it after the tests, so every run's log says which modules spend the budget."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import Counter

SHOWN = 25


def main(argv: list[str]) -> int:
    root = ET.parse(argv[0]).getroot()
    by_module: Counter[str] = Counter()
    tests: Counter[str] = Counter()
    for case in root.iter("testcase"):
        module = _module(case.get("classname") or "?")
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
    return 0


def _module(classname: str) -> str:
    """``tests.e2e.test_run`` of ``tests.e2e.test_run`` or ``tests.e2e.test_run.TestClass``."""
    parts = classname.split(".")
    while parts and not parts[-1].startswith("test_"):
        parts.pop()
    return ".".join(parts) or classname


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
