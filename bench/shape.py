"""The shape of the house, in figures: what #35's closing note compares before and after a
restructuring, measured from the code's own imports and annotations (nothing is run).

    .venv/bin/python bench/shape.py [--root DIR]   # DIR: another checkout, for a before/after

It prints, for cpi/:
- modules (.py files) and units: a unit is a top-level module of cpi/, a package of cpi/,
  or one cloud's package (cpi/clouds/aws ...), as a reader meets them;
- the import graph: every import the code can run, at module level, inside a function or
  under `if TYPE_CHECKING:`, each counted as an edge (a type-only import still ties two
  modules together for whoever reads them); circles (strongly connected sets of more than
  one module, listed), and floors: the longest chain of imports, among units and, inside
  each cloud, among its modules;
- the largest modules, and how many are over 500 lines;
- `Any` in annotations, and cid parameters typed plain `str`: parameters named `cid`,
  `*_cid` or `*_cids` (and `agent_id`) annotated `str`, `str | None`, `list[str]`...,
  per cloud and elsewhere.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

CID_NAME = re.compile(r"^(cid|.*_cid|.*_cids|agent_id)$")
STR_ANNOTATION = re.compile(
    r"^(str|str \| None|Optional\[str\]|list\[str\]|Sequence\[str\]|Iterable\[str\]|set\[str\])$")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(name: str) -> str:
    parts = name.split(".")
    if parts[:2] == ["cpi", "clouds"] and len(parts) > 2 and parts[2] in CLOUDS:
        return ".".join(parts[:3])
    return ".".join(parts[:2])


CLOUDS: set[str] = set()


def imports(name: str, path: Path, modules: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in modules else base)
    return {m for m in found if m in modules and m != name}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        item = stack.pop()
                        on_stack.discard(item)
                        component.append(item)
                        if item == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def floors(graph: dict[str, set[str]]) -> int:
    """The longest chain of imports (in nodes), each circle counted as one node."""
    members = {n: i for i, c in enumerate(circles(graph)) for n in c}

    def key(n: str) -> str:
        return f"circle{members[n]}" if n in members else n

    condensed: dict[str, set[str]] = defaultdict(set)
    for node, targets in graph.items():
        condensed[key(node)]
        for target in targets:
            if key(target) != key(node):
                condensed[key(node)].add(key(target))
    depth: dict[str, int] = {}

    def height(node: str) -> int:
        todo = [node]
        while todo:
            current = todo[-1]
            pending = [t for t in condensed.get(current, ()) if t not in depth]
            if pending:
                todo.extend(pending)
                continue
            todo.pop()
            depth[current] = 1 + max((depth[t] for t in condensed.get(current, ())), default=0)
        return depth[node]

    return max((height(n) for n in list(condensed)), default=0)


def parameters(tree: ast.AST) -> Iterable[tuple[str, ast.expr | None]]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                yield arg.arg, arg.annotation


def count_any(tree: ast.AST) -> int:
    return sum(1 for node in ast.walk(tree)
               if (isinstance(node, ast.Name) and node.id == "Any")
               or (isinstance(node, ast.Attribute) and node.attr == "Any"))


def area(name: str) -> str:
    parts = name.split(".")
    if parts[:2] == ["cpi", "clouds"] and len(parts) > 2 and parts[2] in CLOUDS:
        return parts[2]
    return "elsewhere"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    root = args.root.resolve()
    CLOUDS.update(p.name for p in (root / "cpi" / "clouds").iterdir() if (p / "__init__.py").exists())
    paths = {module_name(root, p): p for p in sorted((root / "cpi").rglob("*.py"))}
    names = set(paths)
    graph = {n: imports(n, p, names) for n, p in paths.items()}
    units: dict[str, set[str]] = defaultdict(set)
    for node, targets in graph.items():
        units[unit_of(node)]
        for target in targets:
            if unit_of(target) != unit_of(node):
                units[unit_of(node)].add(unit_of(target))

    lines = {n: len(p.read_text().splitlines()) for n, p in paths.items()}
    trees = {n: ast.parse(p.read_text()) for n, p in paths.items()}
    found = circles(graph)
    print(f"checkout: {root}")
    print(f"modules: {len(paths)} ({sum(lines.values())} lines); units: {len(units)}; "
          f"floors among units: {floors(units)}; among modules: {floors(graph)}")
    print(f"circles among modules: {len(found)}")
    for circle in found:
        print(f"  {' <-> '.join(circle)}")
    unit_circles = circles(units)
    print(f"circles among units: {len(unit_circles)}")
    for circle in unit_circles:
        print(f"  {' <-> '.join(circle)}")
    for cloud in sorted(CLOUDS):
        prefix = f"cpi.clouds.{cloud}"
        inside = {n: {t for t in ts if t.startswith(prefix)} for n, ts in graph.items() if n.startswith(prefix)}
        widest = max(inside, key=lambda n: len(graph[n]))
        print(f"  {cloud}: {len(inside)} modules, {sum(lines[n] for n in inside)} lines, "
              f"floors {floors(inside)}, most imports: {widest} ({len(inside[widest])} siblings)")
    largest = sorted(lines.items(), key=lambda item: -item[1])
    print(f"over 500 lines: {sum(1 for _, n in largest if n > 500)}; largest: "
          + ", ".join(f"{n} {c}" for n, c in largest[:6]))
    anys: Counter[str] = Counter()
    str_cids: Counter[str] = Counter()
    for name, tree in trees.items():
        anys[area(name)] += count_any(tree)
        for arg, annotation in parameters(tree):
            if annotation is not None and CID_NAME.match(arg) and STR_ANNOTATION.match(ast.unparse(annotation)):
                str_cids[area(name)] += 1
    keys = sorted(set(anys) | set(str_cids))
    print(f"Any: {sum(anys.values())} (" + ", ".join(f"{k} {anys[k]}" for k in keys) + ")")
    print(f"cid parameters typed str: {sum(str_cids.values())} ("
          + ", ".join(f"{k} {str_cids[k]}" for k in keys) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
