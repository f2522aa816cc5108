"""The strategy registry: one module per load strategy, registered under its file's name.

A strategy module `loader/strategies/foo_bar.py` is registered as `foo-bar`. Its module docstring's
first paragraph, its lines joined, is its description (what `loadbench bench list` prints and the
dashboard legend shows). It defines a `load` following the `Strategy` protocol below (a function, or
`load = RECIPE.load` where one `loader.sequence.Recipe` is the whole strategy), and may set module
constants, read from its source with `ast` (so listing strategies imports neither them nor jax)::

    KIND = STRATEGY           # loader.vocabulary: STRATEGY (loads a model, the default), REFERENCE
                              # (the `floor` line: reads bytes, loads no model) or PEER
    CHECKPOINT = FILE         # what `path` must be: FILE (one .safetensors file or a folder of
                              # shards), SHARDED_DIR or ORBAX (converted once by `prepare`)
    MULTIPROCESS = False      # True if it runs as several cooperating jax.distributed processes
    REMOTE = False            # True if it also loads a URL (loader.remote.registry's stores)
    REQUIRES = ("torch",)     # import names it needs beyond loadbench's own dependencies
    INSTALL_HINT = "make peers"   # how to install them
    PLATFORMS = ("cuda",)     # the jax platforms it can load onto (default: any); elsewhere it
                              # is listed as unavailable with the reason, like a missing REQUIRES
    OPTIONS = ("remote", "reading.budget")  # the option groups it takes beyond what every
                              # strategy does (`loader.options`): a group whole, or one field of
                              # it (default: none); any other option is refused by name
    MODELS = ("zoo",)         # the bench models (`bench run --model`) it can load (default: any);
                              # the bench lists it as skipped, with the reason, for any other
    WHY_NOT_REMOTE = "..."    # with REMOTE = False: why it loads no URL, in one line (the reason
                              # on its skipped row of a remote bench run; default: local files only)
    WHY_NOT_MULTIPROCESS = "..."  # with MULTIPROCESS = False: why it cannot run as the several
                              # processes its library offers; the bench gives each `--processes`
                              # count above 1 a skipped row saying so (default: no such row)
    def prepare(src, dst, builder) -> path   # optional: convert the synthetic checkpoint once

A constant is a literal or a name from `loader.vocabulary`. Adding a strategy touches only its own
file. Modules outside this package (e.g. named by the bench's `LOADBENCH_EXTRA_STRATEGIES`) are
registered with `catalog(extra_modules)` under their last dotted part, `_` read as `-`.

Options are never ignored: what every strategy takes (`strict`, `key_map`, `on_built`, ...: the
fields of `loader.sequence.LoadArgs`) reaches each through `run_load`, and a strategy's own options
are the fields of the option groups its `OPTIONS` declares (`loader.options`;
`StrategyInfo.options` lists their names). `StrategyInfo.strategy` refuses any other, in one line
naming it, the strategy, and the strategies that take it (`StrategyError`), before anything is
imported or read; the bench reads `StrategyInfo.options` to pass each strategy only what it takes.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib
import importlib.util
import itertools
import os
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from loader import vocabulary
from loader.errors import CheckpointError
from loader.options import GROUPS, NO_OPTIONS, LoadOptions, option_names
from loader.phases import NULL_PROBE, Probe

if TYPE_CHECKING:
    from loader.report import LoadReport
    from loader.sequence import LoadRequest

__all__ = [
    "Strategy",
    "StrategyError",
    "StrategyInfo",
    "UnknownStrategyError",
    "catalog",
    "get",
    "names",
    "remote_names",
]


class Strategy(Protocol):
    """What a strategy module's `load` is.

    `load(request)` (a `loader.sequence.LoadRequest`) returns `(model, report)`:

    - `request.target` is an `nnx.Module` (filled in place) or a zero-argument builder. A
      strategy builds a builder abstractly (no random model) or calls it (random init, then
      overwritten), as its description says; either way every leaf ends up holding the
      checkpoint's value.
    - `request.path` is a checkpoint of the strategy's `CHECKPOINT` form (what its `prepare`
      returned).
    - Every part of the work runs inside `request.probe.phase(NAME)` (`loader.vocabulary` phases).
    - Mismatches between file and model are planned from headers and reported through
      `LoadReport` exactly as `loader.load_model` reports them; with `strict=True` they raise
      `MismatchError` before any tensor is read (no tensor may be read before the plan check), and
      a mismatch found only after a read (a `key_map` transform's output) raises after it.
    - `request.args` (`loader.sequence.LoadArgs`: `strict`, `key_map`, `on_built`, the declared
      ignores and cast `policy`) is what every strategy takes; `run_load` applies it.
    - `request.options` (`loader.options.LoadOptions`) gives values only in the groups the
      module's `OPTIONS` declares (none given: None): the registry refuses any other before the
      call. Each value was checked when its group was made (`loader.options.TABLE`); a strategy
      passes its engines the groups as they are.
    - A `REFERENCE` strategy loads no model and returns `(None, None)`.

    Every model strategy runs `loader.sequence.run_load`, so these hold by construction.
    """

    def __call__(self, request: LoadRequest) -> tuple[Any, LoadReport | None]: ...


class StrategyError(CheckpointError):
    """A strategy module is missing, malformed, registered twice, or lacks what it requires."""


class UnknownStrategyError(StrategyError, KeyError):
    """No strategy of that name is registered."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


@dataclass(frozen=True)
class StrategyInfo:
    """A registered strategy, as read from its source (its module is imported only to run it)."""

    name: str
    description: str
    kind: str
    checkpoint: str
    multiprocess: bool
    module: str  # dotted module name
    requires: tuple[str, ...] = ()
    install_hint: str = ""
    platforms: tuple[str, ...] = ()
    remote: bool = False
    options: tuple[str, ...] = ()  # its own `load_model` options (its `OPTIONS`' groups' fields)
    models: tuple[str, ...] = ()  # the bench models it loads (`MODELS`; empty: any)
    why_not_remote: str = ""  # why it loads no URL (`WHY_NOT_REMOTE`; empty: not said)
    why_not_multiprocess: str = ""  # why not as several processes (`WHY_NOT_MULTIPROCESS`)

    def missing(self) -> list[str]:
        """The names in `requires` that cannot be imported here."""
        return [r for r in self.requires if importlib.util.find_spec(r) is None]

    def unavailable_reason(self) -> str | None:
        """Why the strategy cannot run here (a module missing, no device of its platform), or None.

        Example:
            >>> strategies.get("instanttensor").unavailable_reason()  # on a CPU-only host
            'needs a cuda device (jax platform cuda); this host has none'
        """
        missing = self.missing()
        if missing:
            hint = f"; install with `{self.install_hint}`" if self.install_hint else ""
            return f"needs {', '.join(missing)}, not installed here{hint}"
        if self.platforms and not any(platform_present(p) for p in self.platforms):
            wanted = " or ".join(self.platforms)
            return f"needs a {wanted} device (jax platform {wanted}); this host has none"
        return None

    def available(self) -> bool:
        """True when every module the strategy requires imports and its platform is here."""
        return self.unavailable_reason() is None

    def _import(self) -> Any:
        reason = self.unavailable_reason()
        if reason is not None:
            raise StrategyError(
                f"strategy {self.name!r} {reason}; pick another strategy "
                f"(`loader.strategies.names()`)"
            )
        return importlib.import_module(self.module)

    def load(
        self,
        target: Any,
        path: str | os.PathLike[str],
        probe: Probe = NULL_PROBE,
        **keywords: Any,
    ) -> tuple[Any, LoadReport | None]:
        """Run the strategy's `load` (see `Strategy`) with `loader.load_model`'s keywords,
        through the one entry every load takes (`run`).

        Args:
            keywords: those every strategy takes (the fields of `loader.sequence.LoadArgs`) and
                the strategy's own options (`self.options`); an option given as None is not
                given.

        Raises:
            StrategyError: an option the strategy does not take (`check_options`), or a module
                it requires is missing.

        Example:
            >>> strategies.get("pipelined").load(builder, "model.safetensors", threads=2)
        """
        from loader.sequence import UNIVERSAL, LoadArgs, LoadRequest

        given = {k: v for k, v in keywords.items() if k not in UNIVERSAL and v is not None}
        self.check_options(given)
        args = LoadArgs(**{k: v for k, v in keywords.items() if k in UNIVERSAL})
        options = LoadOptions.of(**given)
        return self.run(LoadRequest(target, path, probe, args, options))

    def run(self, request: LoadRequest) -> tuple[Any, LoadReport | None]:
        """Run the strategy on `request`, after the checks every load passes (`checked`): the
        one way in, that `loader.load_model`, `load` and the bench's child all take. A
        `REFERENCE` strategy returns `(None, None)`.

        Example:
            >>> model, report = strategies.get("pipelined").run(LoadRequest(build, path))
        """
        return self.checked(request)(request)

    def checked(self, request: LoadRequest) -> Strategy:
        """The module's `load`, once `request` passed the checks every load passes, once: a URL
        only to a strategy that loads one, a URL's options only with a URL, and only the options
        the strategy takes (`strategy`).

        Raises:
            StrategyError: a URL given to a strategy that reads local files only, or an option
                it does not take.
            CheckpointError: a URL's option given with a local path (it would do nothing).

        Example:
            >>> load = strategies.get("pipelined").checked(request)
        """
        from loader.remote import is_url, refuse_local
        from loader.remote.urls import shown

        url = is_url(request.path)
        why = self.why_not_url(shown(str(request.path))) if url else None
        if why is not None:
            raise StrategyError(
                f"strategy {self.name!r} {why}; use one of {', '.join(remote_names())}"
            )
        strategy = self.strategy(request.options)
        if not url:
            refuse_local(request.options, request.path)
        return strategy

    def why_not_url(self, where: str) -> str | None:
        """Why this strategy loads no URL (`where`: the URL, or how it was asked for), or None
        where it loads one (`REMOTE = True`): the one rule `checked` refuses by and the bench
        skips a remote run's strategy by.

        Example:
            >>> strategies.get("eager").why_not_url("--source http")
            'reads local files only (--source http)'
        """
        if self.remote:
            return None
        return f"reads local files only ({where})" + (
            f": {self.why_not_remote}" if self.why_not_remote else ""
        )

    def strategy(self, options: LoadOptions = NO_OPTIONS) -> Strategy:
        """The module's `load` (see `Strategy`), to be called with a `LoadRequest` carrying
        `options`: each checked first to be one it takes (`check_options`), then its module
        imported on first use.

        Raises:
            StrategyError: an option the strategy does not take, a module it requires is
                missing, or its platform is not here.

        Example:
            >>> request = LoadRequest(builder, "model.safetensors", options=options)
            >>> model, report = strategies.get("sharded").strategy(options)(request)
        """
        self.check_options(options.given())
        strategy: Strategy = self._import().load
        return strategy

    def check_options(self, names: Iterable[str]) -> None:
        """Refuse, in one line, the first of `names` that this strategy does not take (naming
        the option, the strategy, and the registered strategies that take it).

        Example:
            >>> strategies.get("hostcast").check_options(["budget"])
            Traceback (most recent call last):
            StrategyError: strategy 'hostcast' takes no option 'budget' (download, pipelined, ...
        """
        for name in names:
            if name not in self.options:
                raise StrategyError(
                    f"strategy {self.name!r} takes no option {name!r} " + _takers(name)
                )

    def prepare(self) -> Callable[..., Path] | None:
        """The module's `prepare(src, dst, builder)`; None if it loads plain files as they are."""
        return getattr(self._import(), "prepare", None)


def _takers(option: str) -> str:
    """Which registered strategies take `option`, and what to do: the tail of a refusal."""
    takers = [info.name for info in catalog().values() if option in info.options]
    if not takers:
        return "(no strategy takes it); drop it or check its spelling"
    who = f"{takers[0]} takes it" if len(takers) == 1 else f"{', '.join(takers)} take it"
    return f"({who}); drop it or pick {'that strategy' if len(takers) == 1 else 'one of those'}"


# -- reading a module's source ------------------------------------------------------------------
_CONSTANTS = (
    "KIND",
    "CHECKPOINT",
    "MULTIPROCESS",
    "REQUIRES",
    "INSTALL_HINT",
    "PLATFORMS",
    "REMOTE",
    "OPTIONS",
    "MODELS",
    "WHY_NOT_REMOTE",
    "WHY_NOT_MULTIPROCESS",
)
#: the jax platforms a strategy may name in PLATFORMS: the jax plugin modules that bring each one,
#: and its driver's device node (only CUDA so far: the one platform a peer needs)
PLATFORM_PLUGINS = {"cuda": ("jax_cuda13_plugin", "jax_cuda12_plugin")}
_DEVICE_NODES = {"cuda": "/dev/nvidiactl"}


def platform_present(platform: str) -> bool:
    """Whether jax can load onto `platform` here, judged without importing jax (or torch).

    A platform is present when `JAX_PLATFORMS` (if set) names it, its driver's device node exists
    and a jax plugin for it is installed: enough for the bench to list a CUDA-only peer as skipped
    on a CPU host before it starts a child.
    """
    chosen = os.environ.get("JAX_PLATFORMS", "").strip()
    if chosen and platform not in {p.strip() for p in chosen.split(",")}:
        return False
    plugins = PLATFORM_PLUGINS.get(platform, ())
    node = _DEVICE_NODES.get(platform)
    return bool(node and os.path.exists(node)) and any(
        importlib.util.find_spec(m) is not None for m in plugins
    )


def _value(node: ast.expr, where: str, name: str) -> object:
    """A literal, or a name of `loader.vocabulary`."""
    if isinstance(node, ast.Name) and hasattr(vocabulary, node.id):
        return getattr(vocabulary, node.id)
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise StrategyError(
            f"{where}: {name} must be a literal or a loader.vocabulary name, "
            f"got {ast.unparse(node)!r}"
        ) from None


def _constants(tree: ast.Module, where: str) -> dict[str, object]:
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id in _CONSTANTS:
                    found[t.id] = _value(node.value, where, t.id)
    return found


def _checked(
    name: str, where: str, doc: list[str], c: dict[str, object], module: str
) -> StrategyInfo:
    """The `StrategyInfo`, its constants checked first (`StrategyError`): the casts then hold."""
    description = " ".join(line.strip() for line in itertools.takewhile(str.strip, doc))
    kind = c.get("KIND", vocabulary.STRATEGY)
    checkpoint = c.get("CHECKPOINT", vocabulary.FILE)
    multiprocess = c.get("MULTIPROCESS", False)
    requires = c.get("REQUIRES", ())
    required = tuple(requires) if isinstance(requires, tuple | list) else (requires,)
    install_hint = c.get("INSTALL_HINT", "")
    platforms = c.get("PLATFORMS", ())
    remote = c.get("REMOTE", False)
    options = c.get("OPTIONS", ())
    models = c.get("MODELS", ())
    why_not_remote = c.get("WHY_NOT_REMOTE", "")
    why_not_multiprocess = c.get("WHY_NOT_MULTIPROCESS", "")
    problems = [
        "a module docstring (its first paragraph is the description)" if not description else "",
        f"KIND one of {vocabulary.KINDS}" if kind not in vocabulary.KINDS else "",
        f"CHECKPOINT one of {vocabulary.CHECKPOINTS}"
        if checkpoint not in vocabulary.CHECKPOINTS
        else "",
        "MULTIPROCESS a bool" if not isinstance(multiprocess, bool) else "",
        "REQUIRES a tuple of module names"
        if isinstance(requires, str) or not all(isinstance(r, str) for r in required)
        else "",
        "INSTALL_HINT a string" if not isinstance(install_hint, str) else "",
        f"PLATFORMS a tuple of {', '.join(PLATFORM_PLUGINS)}"
        if not isinstance(platforms, tuple) or not set(platforms) <= set(PLATFORM_PLUGINS)
        else "",
        "REMOTE a bool" if not isinstance(remote, bool) else "",
        _options_problem(options),
        "MODELS a tuple of model names"
        if not isinstance(models, tuple) or not all(isinstance(m, str) for m in models)
        else "",
        _reason_problem("WHY_NOT_REMOTE", why_not_remote, "REMOTE", remote),
        _reason_problem("WHY_NOT_MULTIPROCESS", why_not_multiprocess, "MULTIPROCESS", multiprocess),
    ]
    if any(problems):
        raise StrategyError(
            f"{where}: strategy {name!r} needs " + "; ".join(p for p in problems if p)
        )
    return StrategyInfo(
        name,
        description,
        cast(str, kind),
        cast(str, checkpoint),
        cast(bool, multiprocess),
        module,
        cast(tuple[str, ...], required),
        cast(str, install_hint),
        cast(tuple[str, ...], platforms),
        cast(bool, remote),
        option_names(cast(tuple[str, ...], options)),
        cast(tuple[str, ...], models),
        cast(str, why_not_remote),
        cast(str, why_not_multiprocess),
    )


def _options_problem(options: object) -> str:
    """What an `OPTIONS` constant lacks: a tuple of option groups or `group.field` names."""
    if isinstance(options, tuple) and all(isinstance(o, str) for o in options):
        try:
            option_names(options)
            return ""
        except ValueError:
            pass
    return (
        f"OPTIONS a tuple of option groups ({', '.join(GROUPS)}) or 'group.field' names "
        "(loader.options)"
    )


def _reason_problem(name: str, reason: object, flag: str, value: object) -> str:
    """What a `WHY_NOT_*` constant lacks: one line of text, beside its flag set False."""
    if not isinstance(reason, str) or "\n" in reason:
        return f"{name} one line of text"
    if reason and value is True:
        return f"no {name} while {flag} = True"
    return ""


def _defines_load(node: ast.stmt) -> bool:
    """`def load(...)`, or `load = RECIPE.load` (a `loader.sequence.Recipe` as the strategy)."""
    if isinstance(node, ast.FunctionDef):
        return node.name == "load"
    return isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "load" for t in node.targets
    )


def read_strategy(name: str, source_file: str | Path, module: str) -> StrategyInfo:
    """The `StrategyInfo` of the strategy module `module`, read from its source with `ast`."""
    where = str(source_file)
    tree = ast.parse(Path(source_file).read_text(encoding="utf-8"), filename=where)
    if not any(_defines_load(n) for n in tree.body):
        raise StrategyError(
            f"{where}: strategy module {module!r} defines no load(); see loader.strategies.Strategy"
        )
    doc = (ast.get_docstring(tree) or "").strip().splitlines()
    return _checked(name, where, doc, _constants(tree, where), module)


# -- the registry -------------------------------------------------------------------------------
def _register(found: dict[str, StrategyInfo], info: StrategyInfo) -> None:
    if info.name in found:
        raise StrategyError(
            f"strategy {info.name!r} is registered twice ({found[info.name].module} and "
            f"{info.module}); rename one module"
        )
    found[info.name] = info


@functools.cache
def _builtin() -> dict[str, StrategyInfo]:
    found: dict[str, StrategyInfo] = {}
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            source = Path(__path__[0], f"{mod.name}.py")
            name = mod.name.replace("_", "-")
            _register(found, read_strategy(name, source, f"{__name__}.{mod.name}"))
    return found


def _extra(module: str) -> StrategyInfo:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise StrategyError(
            f"strategy module {module!r} cannot be found (or is not a .py file); "
            "put its folder on PYTHONPATH or fix the name"
        )
    name = module.rsplit(".", 1)[-1].replace("_", "-")
    return read_strategy(name, spec.origin, module)


def catalog(extra_modules: Iterable[str] = ()) -> dict[str, StrategyInfo]:
    """Every strategy by name: this package's, then `extra_modules` (dotted names), in order.

    Read from the sources with `ast`: nothing is imported, so neither is jax.

    Raises:
        StrategyError: a module is missing or malformed, or two strategies share a name.
    """
    found = dict(_builtin())
    for module in extra_modules:
        _register(found, _extra(module))
    return found


def names(extra_modules: Iterable[str] = ()) -> list[str]:
    """The registered strategy names, sorted."""
    return sorted(catalog(extra_modules))


def remote_names(extra_modules: Iterable[str] = ()) -> list[str]:
    """The strategies that load a remote URL (`REMOTE = True`), sorted."""
    return sorted(n for n, info in catalog(extra_modules).items() if info.remote)


def get(name: str, extra_modules: Iterable[str] = ()) -> StrategyInfo:
    """The strategy called `name`; `UnknownStrategyError` listing the known names otherwise."""
    found = catalog(extra_modules)
    if name not in found:
        close = difflib.get_close_matches(name, list(found), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownStrategyError(
            f"unknown strategy {name!r}{hint}; known strategies: {', '.join(sorted(found))}"
        )
    return found[name]
