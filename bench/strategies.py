"""The strategies the bench can run: loader's registry plus any named by
`LOADBENCH_EXTRA_STRATEGIES`.

`LOADBENCH_EXTRA_STRATEGIES` is a comma-separated list of importable module names, each a strategy
module with the contract of a file in `loader/strategies/` (see `loader.strategies`). A module
`my_pkg.fast_load` is registered as `fast-load`. Use it to bench your own strategy without editing
loadbench, and in the tests to inject failing ones. The registry is `loader.strategies`'s one
catalog: read with `ast` (no jax) for the runner, imported only when a child runs the strategy.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from loader import strategies as registry
from loader.strategies import StrategyInfo

EXTRA_ENV = "LOADBENCH_EXTRA_STRATEGIES"


def extra_modules(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The module names in `LOADBENCH_EXTRA_STRATEGIES` (of `env`, default the environment)."""
    text = (os.environ if env is None else env).get(EXTRA_ENV, "")
    return tuple(m.strip() for m in text.split(",") if m.strip())


def catalog() -> dict[str, StrategyInfo]:
    """name -> `StrategyInfo`: the registered strategies, then the extras."""
    return registry.catalog(extra_modules())


def get(name: str) -> StrategyInfo:
    """The strategy called `name`, among the registered ones and the extras."""
    return registry.get(name, extra_modules())
