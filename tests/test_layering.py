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
