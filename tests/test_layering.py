"""Imports point one way (DESIGN.md): daemon -> assistant -> (memory, models); daemon -> streams."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "streams": {"daemon", "assistant", "memory", "models"},
    "memory": {"daemon", "assistant", "streams", "models"},
    "models": {"daemon", "assistant", "streams", "memory"},
    "assistant": {"daemon", "streams"},
    "daemon": set(),
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_point_one_way(package):
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        crossing = imported_packages(path) & FORBIDDEN[package]
        bad += [f"{path.relative_to(ROOT)} imports {p}" for p in sorted(crossing)]
    assert bad == []


def test_checker_sees_a_crossing(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("def f():\n    from daemon import cli\n")
    assert "daemon" in imported_packages(f)


# -- inside a package: modules import each other without a cycle ------------------------------
def module_imports(root: Path) -> dict[str, set[str]]:
    """Module name -> the modules of the tree it imports, at the top or inside a function."""
    mods = {}
    for package in FORBIDDEN:
        for path in (root / package).rglob("*.py"):
            name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
            mods[name] = path
    edges = {}
    for name, path in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {c for c in [node.module, *(f"{node.module}.{a.name}" for a in node.names)] if c in mods}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in mods}
        edges[name] = deps - {name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: each strongly connected group of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_modules():
    assert cycles(module_imports(ROOT)) == []


def test_cycle_checker_sees_a_cycle_through_a_function_level_import(tmp_path):
    (tmp_path / "daemon").mkdir()
    (tmp_path / "daemon" / "a.py").write_text("from daemon import b\n")
    (tmp_path / "daemon" / "b.py").write_text("def f():\n    from daemon.a import x\n")
    for package in set(FORBIDDEN) - {"daemon"}:
        (tmp_path / package).mkdir()
    assert cycles(module_imports(tmp_path)) == [["daemon.a", "daemon.b"]]
