"""No import circles anywhere in cpi/: every import statement is an edge — at module level,
inside a function, or under `if TYPE_CHECKING:` (a type-only import still ties two modules
together for whoever reads or moves them) — and a cycle fails with its path. aws/props.py
once imported aws/cloud.py (to render docs/aws.md) while cloud.py imports props.py; the
local cloud's orphans.py imported cloud.py for a type; vSphere's inspect.py imported
cloud.py, and tasks.py session.py, for types, and logbridge.py cpi.logs: each now names
the little it needs as a Protocol. Imports through importlib (the cloud registry) are not
seen; a package's __init__ run on the way to its submodule is not counted as an import."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from tests.support.runner import ROOT

#: Packages whose modules must not import each other in a circle.
CHECKED = ["cpi"]
#: Packages where an import made only for the type checker is an edge too.
STRICT = ("cpi",)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in (ROOT / "cpi").rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    strict = name.startswith(STRICT)
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not strict:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:  # `from . import errors` imports the module errors
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {m for m in found if m in modules and m != name}


def _cycle_through(start: str, graph: dict[str, set[str]], scope: str) -> list[str] | None:
    stack = [(start, [start])]
    seen = set()
    while stack:
        node, trail = stack.pop()
        for nxt in graph.get(node, ()):
            if not nxt.startswith(scope):
                continue
            if nxt == start:
                return [*trail, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*trail, nxt]))
    return None


@functools.cache
def _graph() -> tuple[dict[str, Path], dict[str, set[str]]]:
    modules = _modules()
    return modules, {name: _imports(name, path, modules) for name, path in modules.items()}


@pytest.mark.parametrize("package", CHECKED)
def test_no_import_circle_inside(package):
    modules, graph = _graph()
    cycles = []
    for name in sorted(modules):
        if name.startswith(package + ".") and name != package:
            cycle = _cycle_through(name, graph, package + ".")
            if cycle:
                cycles.append(" -> ".join(cycle))
    assert not cycles, "import circles:\n" + "\n".join(cycles)


def test_the_graph_sees_function_level_imports():
    modules = _modules()
    aws_cloud = _imports("cpi.clouds.aws.cloud", modules["cpi.clouds.aws.cloud"], modules)
    assert "cpi.clouds.aws.props" in aws_cloud


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_imports_point_one_way():
    """The human CLI (cpi.cli) on top, the operator's logic (cpi.operator) under it, the core
    (the wire, api, config, the clouds, the kit) at the bottom: nothing imports upward, so
    a cloud never needs the operator's code, nor the wire the CLI's."""
    _, graph = _graph()
    upward = []
    for name, imported in sorted(graph.items()):
        for target in sorted(imported):
            if _in(target, "cpi.cli") and not _in(name, "cpi.cli"):
                upward.append(f"{name} -> {target}")
            if _in(target, "cpi.operator") and not (_in(name, "cpi.cli") or _in(name, "cpi.operator")):
                upward.append(f"{name} -> {target}")
    assert not upward, "imports pointing up:\n" + "\n".join(upward)


def test_no_command_module_imports_another():
    """`cpi list` imports cpi.cli.list and no other command's module (the command table
    imports the one that runs); what two commands share lives in a module of its own."""
    from cpi.cli.commands import COMMANDS

    _, graph = _graph()
    commands = {c.module for c in COMMANDS}
    crossing = [f"{name} -> {target}" for name in sorted(commands) for target in sorted(graph.get(name, ()))
                if target in commands]
    assert not crossing, "command modules importing each other:\n" + "\n".join(crossing)
