"""Small modules and short functions: every module of loader/, bench/, shapes/, dashboard/ is at
most 300 lines, and every function (methods and nested functions too) at most 40, read with `ast`.

A function's length runs from its `def` line (decorators excluded) to its last line, so its
docstring counts. A module over the limit wants splitting by role (what its parts are for), not
squeezing: see the house style (/work/helpers/STYLE.md, "Modules under ~300 lines").
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("loader", "bench", "shapes", "dashboard")
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 40


def _sources() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{_relative(path)}:{node.lineno} {node.name}() is {length} lines"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES
    ]


def test_the_walk_sees_the_tree():
    found = {_relative(p) for p in _sources()}
    assert {"loader/__init__.py", "bench/cli.py", "shapes/spec.py", "dashboard/app.py"} <= found


def test_modules_are_at_most_300_lines():
    long = [
        f"{_relative(p)} is {n} lines" for p in _sources() if (n := _lines(p)) > MAX_MODULE_LINES
    ]
    assert not long, f"over {MAX_MODULE_LINES} lines (split by role):\n" + "\n".join(long)


def test_functions_are_at_most_40_lines():
    long = [line for p in _sources() for line in _long_functions(p)]
    assert not long, f"over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)
