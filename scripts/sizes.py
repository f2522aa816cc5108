"""Print the sizes of the tree's modules, folders and functions: a report to read, never a check.

A count says where to look, not what to do: a long module or function is worth splitting where it
does two things, and worth leaving whole where it does one (the house style). What `make lint`
enforces is structure (ruff's complexity rules, configured in pyproject.toml); this report only
shows where the lines are, so a module that grows past its role is seen early.

    python3 scripts/sizes.py            # the largest modules, every folder, the longest functions
    python3 scripts/sizes.py --top 50   # more of each list

Standard library only: it runs without the project's environment.
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("loader", "bench", "shapes", "dashboard")
BANDS = (100, 200, 300, 400)  # upper bounds of the line bands in the histogram


@dataclass(frozen=True)
class Module:
    path: str  # relative to the repository root
    lines: int
    functions: tuple[tuple[str, int], ...]  # (qualified name, lines from `def` to its end)


def _functions(tree: ast.AST) -> list[tuple[str, int]]:
    """Every function and method, nested ones too, with its length (decorators excluded)."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                found.append((name, (child.end_lineno or child.lineno) - child.lineno + 1))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def read_tree(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[Module]:
    """Every `.py` module under `packages`, with its line count and its functions' lengths."""
    modules = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text, filename=str(path))
            modules.append(
                Module(
                    path.relative_to(root).as_posix(),
                    len(text.splitlines()),
                    tuple(_functions(tree)),
                )
            )
    return modules


def _band(lines: int) -> str:
    low = 0
    for high in BANDS:
        if lines <= high:
            return f"{low + 1 if low else 0:>4}-{high}"
        low = high
    return f"{BANDS[-1] + 1:>4}+"


def report(modules: list[Module], top: int = 15) -> str:
    """The report as text: totals, a histogram of module lines, the largest modules, every
    folder's module count, and the longest functions."""
    packages = sorted({m.path.partition("/")[0] for m in modules})
    total = sum(m.lines for m in modules)
    out = [f"{len(modules)} modules, {total} lines in {', '.join(packages)}"]
    out.append("\nmodules by lines:")
    bands = Counter(_band(m.lines) for m in modules)
    out += [f"  {band}  {bands[band]:>4}" for band in sorted(bands)]
    out.append(f"\nthe {top} largest modules:")
    for m in sorted(modules, key=lambda m: (-m.lines, m.path))[:top]:
        out.append(f"  {m.lines:>5}  {m.path}")
    out.append("\nmodules per folder:")
    folders = Counter(m.path.rpartition("/")[0] for m in modules)
    for folder, count in sorted(folders.items(), key=lambda kv: (-kv[1], kv[0])):
        out.append(f"  {count:>5}  {folder}/")
    out.append(f"\nthe {top} longest functions:")
    functions = [(n, f"{m.path}:{name}") for m in modules for name, n in m.functions]
    for n, where in sorted(functions, key=lambda f: (-f[0], f[1]))[:top]:
        out.append(f"  {n:>5}  {where}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15, help="entries per list (default 15)")
    args = parser.parse_args(argv)
    print(report(read_tree(), top=args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
