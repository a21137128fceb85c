"""The package's shape, checked: the modules that parse and decide import no Spark (their tests run without a
JVM), no two modules of ``resolver`` import each other, directly or through others, and no function takes
more than six parameters (options objects instead of lists of flags). No Spark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "resolver"

PURE = [
    "resolver.wal2json",
    "resolver.wal2json_v1",
    "resolver.wal2json_v2",
    "resolver.wal2json_record",
    "resolver.wal2json_detect",
    "resolver.debezium",
    "resolver.debezium_values",
    "resolver.keys",
    "resolver.drops",
    "resolver.tablemeta",
    "resolver.input_files",
    "resolver.paths",
    "resolver.spark_options",
    "resolver.lake_tables",
    "resolver.printing",
    "resolver.commands",
    "resolver.cli",
    "resolver.sql",
    "resolver.policy",
    "resolver.evolution",
    "resolver.tableschema",
    "resolver.pipeline",
    "resolver.lake",
    "resolver.names",
    "resolver.package_jars",
    "resolver.errors",
    "resolver.models",
    "resolver.snapshot_records",
    "resolver.capture",
    "resolver.capture_command",
    "resolver.capture_source",
    "resolver.capture_status",
    "resolver.capture_drain",
    "resolver.landing_files",
    "resolver.landing_store",
    "resolver.capture_stream",
    "resolver.capture_copy",
    "resolver.stitch_plan",
    "resolver.batch_options",
]


@pytest.mark.parametrize("module", PURE)
def test_a_module_that_parses_or_decides_imports_no_spark(module: str) -> None:
    spark = "('pyspark', 'delta', 'py4j')"
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] in {spark}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"{module} imports {out.stdout.strip()}"


def _imports(path: Path) -> set[str]:
    """The ``resolver`` modules a module imports at its top level (imports inside functions are lazy)."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("resolver"):
            if node.module == "resolver":
                out |= {f"resolver.{a.name}" for a in node.names if (PACKAGE / f"{a.name}.py").exists()}
            else:
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("resolver.")}
    return out


def test_no_module_of_the_package_imports_itself_through_others() -> None:
    graph = {f"resolver.{p.stem}": _imports(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    circles = []

    def visit(module: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(module, ())):
            if nxt == path[0]:
                circles.append(" -> ".join([*path, nxt]))
            elif nxt not in path and nxt in graph:
                visit(nxt, [*path, nxt])

    for module in sorted(graph):
        visit(module, [module])
    assert circles == []


#: the most parameters a function of ``resolver`` takes (``self`` not counted); more travel in an options
#: object (``resolver.batch_options.BatchOptions``, ``resolver.lock.Taker``, ``resolver.capture_options``)
MOST_PARAMETERS = 6


def test_no_function_takes_more_than_six_parameters() -> None:
    long = []
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                a = node.args
                names = [
                    x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs] if x.arg not in ("self", "cls")
                ]
                if len(names) > MOST_PARAMETERS:
                    long.append(f"{path.name}:{node.lineno} {node.name}({', '.join(names)})")
    assert long == []
