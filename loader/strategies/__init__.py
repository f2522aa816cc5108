"""The strategy registry: one module per load strategy, registered under its file's name.

A strategy module `loader/strategies/foo_bar.py` is registered as `foo-bar`. Its module docstring's
first line is its description (what `loadbench bench list` prints and the dashboard legend shows).
It defines::

    def load(target, path, probe, options: LoadOptions) -> tuple[model, LoadReport]

and may set module constants that the bench reads:

    KIND = "model"            # or "reference" (the `floor` line: reads bytes, loads no model)
    CHECKPOINT = "file"       # what `path` must be: "file" (one .safetensors file or a folder of
                              # shards), or "sharded-dir" / "orbax" (converted once by `prepare`)
    MULTIPROCESS = False      # True if it runs as several cooperating jax.distributed processes
    def prepare(src, dst, builder) -> path   # optional: convert the synthetic checkpoint once

Adding a strategy touches only its own file: the registry discovers modules in this package.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from loader.errors import CheckpointError


class UnknownStrategyError(CheckpointError, KeyError):
    """No strategy of that name is registered."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


@dataclass(frozen=True)
class StrategyInfo:
    """A registered strategy: its name, description and the module that implements it."""

    name: str
    description: str
    module: ModuleType

    @property
    def kind(self) -> str:
        return getattr(self.module, "KIND", "model")

    @property
    def checkpoint(self) -> str:
        return getattr(self.module, "CHECKPOINT", "file")

    @property
    def multiprocess(self) -> bool:
        return bool(getattr(self.module, "MULTIPROCESS", False))

    def load(self, *args, **kwargs):
        return self.module.load(*args, **kwargs)


def _discover() -> dict[str, StrategyInfo]:
    found: dict[str, StrategyInfo] = {}
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{mod.name}")
        if not callable(getattr(module, "load", None)):
            continue
        name = mod.name.replace("_", "-")
        if name in found:
            raise CheckpointError(f"strategy {name!r} is registered twice ({module.__file__})")
        doc = (module.__doc__ or "").strip().splitlines()
        if not doc:
            raise CheckpointError(
                f"strategy module {module.__file__} needs a docstring: its first line is the description"
            )
        found[name] = StrategyInfo(name, doc[0].strip(), module)
    return found


_REGISTRY: dict[str, StrategyInfo] | None = None


def registry() -> dict[str, StrategyInfo]:
    """All registered strategies, by name (imported once, on first use)."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = _discover()
    return _REGISTRY


def names() -> list[str]:
    """The registered strategy names, sorted."""
    return sorted(registry())


def get(name: str) -> StrategyInfo:
    """The strategy called `name`; `UnknownStrategyError` listing the known names otherwise."""
    try:
        return registry()[name]
    except KeyError:
        raise UnknownStrategyError(
            f"unknown strategy {name!r}; known strategies: {', '.join(names())}"
        ) from None


@dataclass(frozen=True)
class StrategyEntry:
    """What the bench runner needs to know of a strategy, read without importing it (or jax)."""

    name: str
    description: str
    kind: str = "model"
    checkpoint: str = "file"
    multiprocess: bool = False


def entry_from_source(name: str, source_file: str | Path) -> StrategyEntry | None:
    """A strategy's entry read from its source with `ast` (no import); None if it defines no `load`."""
    tree = ast.parse(Path(source_file).read_text(encoding="utf-8"))
    if not any(isinstance(n, ast.FunctionDef) and n.name == "load" for n in tree.body):
        return None
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


def catalog() -> dict[str, StrategyEntry]:
    """The registered strategies read from their source files with `ast`: no jax import.

    The runner (which never imports jax) uses this; it agrees with `registry()` by construction,
    since both list the same modules and read the same docstring and constants.
    """
    out: dict[str, StrategyEntry] = {}
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        name = mod.name.replace("_", "-")
        entry = entry_from_source(name, Path(__path__[0], f"{mod.name}.py"))
        if entry is not None:
            out[name] = entry
    return out
