"""The one load sequence every model strategy runs, and the collaborators a strategy passes it.

`run_load(recipe, target, path, probe, args)` (`args`: the `LoadArgs` every strategy takes):

1. open the checkpoint (`recipe.open_source`: its headers, manifest or tree metadata; no tensor),
2. `executor.start(source, probe)`: the executor may prepare (open files, start threads),
3. build the target (phase `build`): abstractly from a builder, or a real instance (`recipe.build`);
   `on_built(model)`, if given, is called with it now, before any leaf is assigned (a caller
   starts compiling its forward from the shapes here, while the executor reads),
4. plan from headers alone (`loader.planning.match.plan_load`), with the caller's declared ignores
   and cast policy (`loader.planning.policy.LoadPolicy`), then `recipe.adjust_plan` if any,
5. report: with `strict=True` any mismatch raises here, before any tensor is read; otherwise each
   is warned at the caller's line,
6. `executor.fill(plan, source, probe)`: read, cast, transfer and assign the planned steps;
   then each stacked leaf (`loader.Stack`) the executor assembled on the host is placed
   (`loader.planning.stacking.finish_stacked`; `pipelined` places its own), and the report
   says which leaves were made from quantized layouts (`loader.planning.quantized`; each made
   inside the probe's `dequantize` phase, as its last part is read),
7. `executor.close()`, always (it stops any thread it started),
8. give what was not loaded zeros (an abstract model only; already reported),
9. late check: a shape a `key_map` transform got wrong is known only after the read; report it.

So reports, strictness, declared ignores and casts, the late check and the zeros for skipped
leaves are written once, here, and so are the arguments every strategy takes (`LoadArgs`): a new
one is a field there, used here, with no code in any strategy.
What differs between strategies (how bytes are read, cast and placed; which phases are timed) is
the `Executor`; what a checkpoint is (a file, a sharded directory, an Orbax tree) is the source.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from loader.errors import CheckpointError
from loader.format.source import CheckpointSource
from loader.options import NO_OPTIONS, LoadOptions
from loader.phases import BUILD, NULL_PROBE, Probe
from loader.placement.materialize import fill_skipped
from loader.planning.keys import KeyMap
from loader.planning.match import plan_load
from loader.planning.plan import LoadPlan, Source
from loader.planning.policy import DEFAULT_POLICY, LoadPolicy
from loader.planning.quantized import finish_quantized, watch_quantized
from loader.planning.stacking import finish_stacked
from loader.remote import is_url
from loader.remote.urls import shown
from loader.report import LoadReport
from loader.target import build_instance, resolve_target

S = TypeVar("S", bound=Source)
#: Called with the built model (abstract for a builder) before any leaf is assigned; it must
#: return quickly (start a thread for long work) and must not change the model.
OnBuilt = Callable[[Any], None]
S_in = TypeVar("S_in", bound=Source, contravariant=True)


@dataclass(frozen=True)
class LoadArgs:
    """What every load takes, whatever its strategy: the `loader.load_model` keywords that
    `run_load` applies the same way for all (a strategy's own options are its `OPTIONS`).

    A keyword every strategy takes is a field here and is used in `run_load`; nothing else
    changes: `loader.strategies.StrategyInfo.load` routes each keyword named like a field here.

    Attributes:
        strict: raise `MismatchError` on any mismatch (before any tensor is read) instead of
            warning.
        key_map: model key -> file key (or (file key, transform)), or a callable doing the same.
        on_built: called with the built model (abstract for a builder) before any leaf is
            assigned (`OnBuilt`).
        policy: the declared ignores and the cast policy (`loader.planning.policy.LoadPolicy`, made
            by `loader.load_model` from `ignore_unexpected`, `ignore_missing` and `casts`).

    Example:
        >>> run_load(RECIPE, builder, "model.safetensors", NULL_PROBE, LoadArgs(strict=True))
    """

    strict: bool = False
    key_map: KeyMap | None = None
    on_built: OnBuilt | None = None
    policy: LoadPolicy = DEFAULT_POLICY


#: The names of the arguments every strategy takes (`LoadArgs`'s fields).
UNIVERSAL: tuple[str, ...] = tuple(f.name for f in fields(LoadArgs))


@dataclass(frozen=True)
class LoadRequest:
    """One load a strategy is asked to do: what `loader.strategies.Strategy` is called with.

    Attributes:
        target: an `nnx.Module` (filled in place) or a zero-argument builder.
        path: the checkpoint, in the strategy's `CHECKPOINT` form (a file, a folder, a URL).
        probe: the phase probe every part of the work is timed in.
        args: what every strategy takes (`LoadArgs`), applied by `run_load`.
        options: the options of the groups the strategy declares (`loader.options.LoadOptions`;
            the registry has refused any other before the call).

    Example:
        >>> RECIPE.load(LoadRequest(builder, "model.safetensors", args=LoadArgs(strict=True)))
    """

    target: Any
    path: str | os.PathLike[str]
    probe: Probe = NULL_PROBE
    args: LoadArgs = LoadArgs()
    options: LoadOptions = NO_OPTIONS


class Executor(Protocol[S_in]):
    """Fills the planned steps of one load. One instance per load.

    Contract:
        `start(source, probe)` runs before the build, with the source open (its headers known)
        and no plan yet. It may open files or start background work (e.g. begin reading while the
        model is built abstractly), but with `strict=True` no tensor may be read before the plan
        is checked, since a mismatch must be refused before any read: an executor that reads
        early is told `strict` by the strategy that makes it, and waits for `fill` when it is set.
        `fill(plan, source, probe)` runs after the plan is checked. It assigns every step's leaf
        (or appends the leaf to `plan.skipped` with a report entry, as `apply_transform` does),
        appends each loaded leaf's key to `plan.report.loaded`, and times its work in phases.
        `close()` runs always, after `fill` or after a failure anywhere from `start` on; it
        releases what `start` and `fill` opened and stops and joins any thread they started.
    """

    def start(self, source: S_in, probe: Probe) -> None: ...

    def fill(self, plan: LoadPlan, source: S_in, probe: Probe) -> None: ...

    def close(self) -> None: ...


class Build(enum.Enum):
    """How a builder target is built: abstractly (no random model) or as a real instance."""

    ABSTRACT = "abstract"
    INSTANCE = "instance"


@dataclass(frozen=True)
class Recipe(Generic[S]):
    """What one strategy passes the sequence.

    Attributes:
        executor: makes the executor of one load (called once per load).
        build: `Build.ABSTRACT` (a builder is built shape-only) or `Build.INSTANCE` (called).
        open_source: path -> context manager of the source to plan from and read.
        open_remote: URL -> the same, for a strategy that reads remote checkpoints
            (`loader.remote`); None: it reads local files only.
        adjust_plan: changes the plan after planning, before the check (e.g. the sharding rule).
    """

    executor: Callable[[], Executor[S]]
    build: Build = Build.ABSTRACT
    # A default cannot depend on S: `CheckpointSource` is right for a Recipe of plain files only;
    # a Recipe over another source (a layout, orbax) passes its own `open_source`.
    open_source: Callable[[Path], AbstractContextManager[S]] = CheckpointSource  # type: ignore[assignment]
    adjust_plan: Callable[[LoadPlan, S], None] | None = None
    open_remote: Callable[[str], AbstractContextManager[S]] | None = None

    def run(self, request: LoadRequest) -> tuple[Any, LoadReport]:
        """`run_load(self, ...)` for `request`, whose options the strategy has already used to
        make this recipe."""
        return run_load(self, request.target, request.path, request.probe, request.args)

    def load(self, request: LoadRequest) -> tuple[Any, LoadReport]:
        """This recipe as a `loader.strategies.Strategy`: `run_load(self, ...)` for `request`.

        A strategy module whose load is one fixed recipe says `load = RECIPE.load`. Such a
        strategy declares no `OPTIONS`, so the registry passes it none (a strategy that takes
        some, such as `pipelined`, makes its recipe from them per call and `run`s it).
        """
        given = request.options.given()
        assert not given, f"a fixed recipe takes no options, got {sorted(given)}"
        return self.run(request)


def _build(target: Any, mode: Build, probe: Probe) -> tuple[Any, bool]:
    """(model, is_abstract), timed as the `build` phase."""
    with probe.phase(BUILD):
        if mode is Build.INSTANCE:
            return build_instance(target), False
        return resolve_target(target)


def _late_check(plan: LoadPlan, checked: int, strict: bool) -> None:
    """Report the shape mismatches found after the plan check (a transform's output)."""
    report = plan.report
    late = report.shape_mismatches[checked:]
    if late:
        LoadReport(path=report.path, shape_mismatches=late, left_at=report.left_at).raise_or_warn(
            strict=strict
        )


def run_load(
    recipe: Recipe[S],
    target: Any,
    path: str | os.PathLike[str],
    probe: Probe = NULL_PROBE,
    args: LoadArgs = LoadArgs(),
) -> tuple[Any, LoadReport]:
    """Load the checkpoint at `path` into `target` the way `recipe` says (see the module doc),
    with what every strategy takes (`args`).

    Returns:
        (model, LoadReport): the model filled (in place for an instance target).

    Raises:
        MismatchError: `strict=True` and the file and the model disagree (before any read, or
            after it for a transform's output).
        CheckpointError: the checkpoint cannot be read or applied.
    """
    with _open(recipe, path) as source:
        executor = recipe.executor()
        try:
            executor.start(source, probe)
            model, abstract = _build(target, recipe.build, probe)
            if args.on_built is not None:
                args.on_built(model)
            plan = plan_load(
                model, source, key_map=args.key_map, policy=args.policy, abstract=abstract
            )
            if recipe.adjust_plan is not None:
                recipe.adjust_plan(plan, source)
            watch_quantized(plan, probe)
            plan.report.raise_or_warn(strict=args.strict)
            checked = len(plan.report.shape_mismatches)
            executor.fill(plan, source, probe)
            finish_stacked(plan)
            finish_quantized(plan)
            source.finish_reads()
        finally:
            executor.close()
        plan.report.remote = source.remote_stats()
    fill_skipped(plan, abstract=abstract)
    _late_check(plan, checked, args.strict)
    return model, plan.report


def _open(recipe: Recipe[S], path: str | os.PathLike[str]) -> AbstractContextManager[S]:
    """The recipe's source for `path`: a local one, or a remote URL's (`loader.remote`)."""
    if not is_url(path):
        return recipe.open_source(Path(path))
    if recipe.open_remote is None:
        raise CheckpointError(
            f"{shown(str(path))}: this strategy reads local files only; load a URL with a "
            "strategy that takes one (`loader.strategies.remote_names()`), or download the "
            "file first"
        )
    return recipe.open_remote(str(path))
