"""The strategies the bench can run: loader's registry plus any from `LOADBENCH_EXTRA_STRATEGIES`.

`LOADBENCH_EXTRA_STRATEGIES` is a comma-separated list of importable module names, each a strategy
module with the same contract as a file in `loader/strategies/` (a docstring whose first line is the
description, `load(builder, path, probe, strict=False)`, optional `KIND`, `CHECKPOINT`,
`MULTIPROCESS`, `prepare`). A module `my_pkg.fast_load` is registered as `fast-load`. Use it to
bench your own strategy without editing loadbench, and in the tests to inject failing strategies.

`catalog()` reads module sources with `ast` (no jax import) for the runner; `get()` imports the
module in the worker.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
from pathlib import Path

from bench.errors import BenchError

EXTRA_ENV = "LOADBENCH_EXTRA_STRATEGIES"


def _extra_modules() -> dict[str, str]:
    """Registered name -> module name of the extra strategies."""
    mods = [m.strip() for m in os.environ.get(EXTRA_ENV, "").split(",") if m.strip()]
    return {m.rsplit(".", 1)[-1].replace("_", "-"): m for m in mods}


def _entry_from_source(name: str, module: str):
    from loader.strategies import StrategyEntry

    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise BenchError(
            f"{EXTRA_ENV} names module {module!r}, which cannot be found; "
            "put its folder on PYTHONPATH or fix the name"
        )
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    consts = {
        t.id: n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    doc = (ast.get_docstring(tree) or "").strip().splitlines()
    return StrategyEntry(
        name,
        doc[0].strip() if doc else "",
        consts.get("KIND", "model"),
        consts.get("CHECKPOINT", "file"),
        bool(consts.get("MULTIPROCESS", False)),
    )


def catalog() -> dict:
    """name -> `loader.strategies.StrategyEntry`, registered strategies then the extras."""
    from loader.strategies import catalog as loader_catalog

    out = dict(loader_catalog())
    for name, module in _extra_modules().items():
        out[name] = _entry_from_source(name, module)
    return out


def get(name: str):
    """The `loader.strategies.StrategyInfo` of `name` (imports its module; worker side)."""
    from loader import strategies

    extra = _extra_modules()
    if name not in extra:
        return strategies.get(name)
    module = importlib.import_module(extra[name])
    doc = (module.__doc__ or "").strip().splitlines()
    return strategies.StrategyInfo(name, doc[0].strip() if doc else "", module)
