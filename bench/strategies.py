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

import importlib
import importlib.util
import os

from bench.errors import BenchError

EXTRA_ENV = "LOADBENCH_EXTRA_STRATEGIES"


def _extra_modules() -> dict[str, str]:
    """Registered name -> module name of the extra strategies."""
    mods = [m.strip() for m in os.environ.get(EXTRA_ENV, "").split(",") if m.strip()]
    return {m.rsplit(".", 1)[-1].replace("_", "-"): m for m in mods}


def _entry_from_source(name: str, module: str):
    from loader.strategies import entry_from_source

    spec = importlib.util.find_spec(module)
    entry = entry_from_source(name, spec.origin) if spec is not None and spec.origin else None
    if entry is None:
        raise BenchError(
            f"{EXTRA_ENV} names module {module!r}, which cannot be found or defines no load(); "
            "put its folder on PYTHONPATH or fix the name"
        )
    return entry


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
