"""The package's shape, checked: the modules that parse and decide import no Spark (their tests run without a
JVM): every module of ``formats/``, ``config/`` and ``capture/`` and the others listed; each package imports
only itself, the shared modules at the top and the packages below it (``LAYERS``); no chain of imports is
more than ten modules long; no two modules of ``resolver`` import each other, directly or through others;
and no function takes more than six parameters (options objects instead of lists of flags), and no step of a
batch or a table takes a boolean flag. No Spark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "resolver"

#: the packages, lowest first: a module imports (at its top level) only modules of its own package, of the
#: shared modules at the top of ``resolver`` ("") and of the packages before its own
LAYERS = ("", "formats", "spark", "lake", "files", "config", "capture", "plan", "table", "batch", "pipelines",
          "ops", "cli")  # fmt: skip
#: packages none of whose modules imports Spark
PURE_PACKAGES = ("formats", "config", "capture")


def _name(path: Path) -> str:
    """A module's dotted name (a package's ``__init__`` is the package)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}

PURE = sorted(
    {m for m in MODULES if m.split(".")[1:2] and m.split(".")[1] in PURE_PACKAGES}
    | {
        "resolver.formats.wal2json",
        "resolver.formats.wal2json_v1",
        "resolver.formats.wal2json_v2",
        "resolver.formats.wal2json_record",
        "resolver.formats.wal2json_detect",
        "resolver.formats.debezium",
        "resolver.formats.debezium_values",
        "resolver.plan.keys",
        "resolver.plan.drops",
        "resolver.plan.tablemeta",
        "resolver.files.input_files",
        "resolver.paths",
        "resolver.cli.spark_options",
        "resolver.lake.lake_tables",
        "resolver.cli.printing",
        "resolver.cli.commands",
        "resolver.cli.main",
        "resolver.spark.sql",
        "resolver.config.policy",
        "resolver.plan.evolution",
        "resolver.config.tableschema",
        "resolver.config.pipeline",
        "resolver.lake.folders",
        "resolver.formats.names",
        "resolver.spark.package_jars",
        "resolver.errors",
        "resolver.models",
        "resolver.capture.records",
        "resolver.capture.snapshot",
        "resolver.cli.capture_command",
        "resolver.capture.source",
        "resolver.capture.status",
        "resolver.capture.drain",
        "resolver.capture.parts",
        "resolver.capture.landing",
        "resolver.capture.stream",
        "resolver.capture.copy",
        "resolver.formats.stitch_plan",
        "resolver.config.batch_options",
    }
)


@pytest.mark.parametrize("module", PURE)
def test_a_module_that_parses_or_decides_imports_no_spark(module: str) -> None:
    spark = "('pyspark', 'delta', 'py4j')"
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] in {spark}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"{module} imports {out.stdout.strip()}"


def _imports(path: Path) -> set[str]:
    """The ``resolver`` modules a module imports at its top level (imports inside functions are lazy); a
    module imported from its package (``from resolver.lake import delta``) counts as that module."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("resolver"):
            inside = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
            out |= inside or {node.module}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("resolver.")}
    return out


def _layer(module: str) -> int:
    """Where a module's package stands in ``LAYERS`` (a shared module at the top: 0)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 2 else 0


def test_every_package_imports_only_itself_and_the_packages_below_it() -> None:
    upward = [
        f"{module} -> {target}"
        for module, path in MODULES.items()
        # the public surface re-exports from everywhere (lazily where it needs Spark); python -m runs the CLI
        if module not in ("resolver", "resolver.__main__")
        for target in sorted(_imports(path))
        if target in MODULES and _layer(target) > _layer(module)
    ]
    assert upward == []


def test_every_package_is_in_a_layer() -> None:
    packages = {m.split(".")[1] for m in MODULES if len(m.split(".")) > 2}
    assert packages == set(LAYERS) - {""}


def test_no_module_of_the_package_imports_itself_through_others() -> None:
    graph = {m: _imports(p) for m, p in MODULES.items() if m != "resolver"}
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
#: object (``resolver.config.batch_options.BatchOptions``, ``resolver.lake.lock.Taker``,
#: ``resolver.capture.options``)
MOST_PARAMETERS = 6


def test_no_function_takes_more_than_six_parameters() -> None:
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                a = node.args
                names = [
                    x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs] if x.arg not in ("self", "cls")
                ]
                if len(names) > MOST_PARAMETERS:
                    long.append(f"{path.name}:{node.lineno} {node.name}({', '.join(names)})")
    assert long == []


#: the packages of a batch's and a table's steps: what a step does is chosen by the facts it is handed
#: (``BatchEvents``, ``Stored``, ``Holds``, ``BatchTables``), never by a boolean parameter
NO_FLAGS = ("batch", "table")


def test_no_step_of_a_batch_or_a_table_takes_a_boolean_flag() -> None:
    flags = []
    for package in NO_FLAGS:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    a = node.args
                    for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                        if x.annotation is not None and ast.unparse(x.annotation) in ("bool", "bool | None"):
                            flags.append(f"{package}/{path.name}:{node.lineno} {node.name}({x.arg})")
    assert flags == []


def _longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest chain of top-level imports among the package's modules (the graph has no circle)."""
    longest: dict[str, list[str]] = {}

    def chain(module: str) -> list[str]:
        if module not in longest:
            below = [chain(m) for m in sorted(graph.get(module, ())) if m in graph]
            longest[module] = [module, *max(below, key=len, default=[])]
        return longest[module]

    return max((chain(m) for m in sorted(graph)), key=len)


def test_the_import_graph_is_at_most_ten_modules_deep() -> None:
    """A module's imports reach down at most ten modules (the public surface and ``python -m`` aside), so a
    step is a few calls from the orchestrator that lists it."""
    graph = {m: _imports(p) for m, p in MODULES.items() if m not in ("resolver", "resolver.__main__")}
    deepest = _longest_chain(graph)
    assert len(deepest) <= 10, " -> ".join(deepest)
